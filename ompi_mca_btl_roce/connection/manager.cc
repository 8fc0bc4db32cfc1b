// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The connection handshake (manager.h has the picture). Every handler
// decides from the peer's recorded state alone; the host does the verbs
// work and tells the data path. Retransmissions are driven by run_timers.
#include "connection/manager.h"

#include <algorithm>

#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Status;

const char *to_string(EpState s) noexcept {
    switch (s) {
    case EpState::kClosed: return "closed";
    case EpState::kConnecting: return "connecting";
    case EpState::kConnected: return "connected";
    case EpState::kFailed: return "failed";
    }
    return "?";
}

const char *to_string(PathState s) noexcept {
    switch (s) {
    case PathState::kIdle: return "idle";
    case PathState::kConnecting: return "connecting";
    case PathState::kAwaitRtu: return "awaiting RTU";
    case PathState::kUp: return "up";
    }
    return "?";
}

namespace {

constexpr double kMaxRetryInterval = 2.0;
constexpr double kMaxReconnectDelay = 5.0;

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

std::string name_text(uint64_t name) {
    return util::format("[%u,%u]", static_cast<unsigned>(name >> 32),
                        static_cast<unsigned>(name & 0xffffffffu));
}

} // namespace

ConnectionManager::ConnectionManager(CmHost &host, const CmIdentity &me, const CmConfig &cfg,
                                     util::LogSink &log)
    : host_(host), me_(me), cfg_(cfg), log_(log), warn_(cfg.warn_interval_s, 16) {}

// ------------------------------------------------------------ sending ---

wire::CmMessage ConnectionManager::message(const Peer &peer, wire::CmType type) const {
    wire::CmMessage m;
    m.type = type;
    m.src_name = me_.name;
    m.dst_name = peer.name;
    m.src_ud_qpn = me_.ud_qpn;
    m.src_port = me_.port_index;
    m.dst_port = peer.port_index;
    return m;
}

wire::CmMessage ConnectionManager::handshake(Peer &peer, wire::CmType type, uint32_t conn_id,
                                             size_t first, size_t count) const {
    wire::CmMessage m = message(peer, type);
    m.conn_id = conn_id;
    m.first_path = static_cast<uint8_t>(first);
    m.credits = cfg_.credits;
    host_.address(peer, m);
    for (size_t i = first; i < first + count; ++i) {
        const PathConn &p = peer.path_conn(i);
        m.paths.push_back({p.local_qpn, p.local_psn});
    }
    return m;
}

Status ConnectionManager::send(Peer &peer, const wire::CmMessage &m) {
    std::vector<uint8_t> bytes = wire::encode(m);
    if (m.type == wire::CmType::kReply) {
        for (size_t i = 0; i < m.paths.size(); ++i) {
            peer.path_conn(m.first_path + i).last_reply = bytes;
        }
    }
    return host_.send_cm(peer, bytes);
}

void ConnectionManager::reject(Peer &peer, uint32_t conn_id, uint8_t first_path,
                               wire::RejectReason reason, const std::string &text) {
    wire::CmMessage rej = message(peer, wire::CmType::kReject);
    rej.conn_id = conn_id;
    rej.first_path = first_path;
    rej.reason = reason;
    rej.text = text;
    (void)send(peer, rej);
}

// --------------------------------------------------------- connecting ---

void ConnectionManager::watch(Peer &peer) {
    if (std::find(watch_.begin(), watch_.end(), &peer) == watch_.end()) {
        watch_.push_back(&peer);
    }
}

void ConnectionManager::forget(Peer &peer) {
    watch_.erase(std::remove(watch_.begin(), watch_.end(), &peer), watch_.end());
}

void ConnectionManager::connect(Peer &peer) {
    if (peer.state != EpState::kClosed) {
        return;
    }
    peer.state = EpState::kConnecting;
    peer.deadline = host_.now() + cfg_.connect_timeout_s;
    // Our GID may have gone since the policy chose it (the bond was
    // readdressed): the host chooses again if so.
    (void)host_.revalidate(peer, false);
    size_t n = host_.paths_wanted(peer);
    peer.resize_paths(n);
    for (size_t i = 0; i < n; ++i) {
        auto qp = host_.open_qp(peer, i);
        if (!qp) {
            fail(peer, qp.status().message());
            return;
        }
        peer.path_conn(i).local_qpn = qp->qpn;
        peer.path_conn(i).local_psn = qp->psn;
    }
    request_paths(peer, 0, n);
}

// REQ for paths [first, first+count), whose QPs exist and are in INIT.
void ConnectionManager::request_paths(Peer &peer, size_t first, size_t count) {
    uint32_t id = next_conn_id_++;
    double now = host_.now();
    for (size_t i = first; i < first + count; ++i) {
        PathConn &p = peer.path_conn(i);
        p.state = PathState::kConnecting;
        p.conn_id = id;
        p.batch_first = static_cast<uint8_t>(first);
        p.batch_count = static_cast<uint8_t>(count);
        p.tries = 1;
        p.retry_interval = cfg_.connect_retry_s;
        p.next_retry = now + p.retry_interval;
    }
    watch(peer);
    Status s = send(peer, handshake(peer, wire::CmType::kRequest, id, first, count));
    if (!s && s.code() != Code::kResourceExhausted) {
        // An address handle that cannot be created will not heal by retrying.
        fail(peer, s.message());
        return;
    }
    log_.write(LogLevel::kDebug, util::format("REQ %u to %s (paths %zu..%zu)", id,
                                              peer.label.c_str(), first, first + count - 1));
}

void ConnectionManager::reconnect_path(Peer &peer, size_t i) {
    auto qp = host_.open_qp(peer, i);
    if (!qp) {
        path_failed(peer, i, qp.status().message());
        return;
    }
    PathConn &p = peer.path_conn(i);
    p.local_qpn = qp->qpn;
    p.local_psn = qp->psn;
    request_paths(peer, i, 1);
}

void ConnectionManager::retire(Peer &peer, size_t i) {
    host_.retire_qp(peer, i);
    PathConn &p = peer.path_conn(i);
    p.local_qpn = 0;
    p.last_reply.clear();
}

// ------------------------------------------------------------ receiving ---

void ConnectionManager::on_datagram(const wire::Gid *from, const uint8_t *data, size_t len) {
    auto msg = wire::parse_cm(data, len);
    if (!msg) {
        drop_unattributed(&CmDrops::malformed, "malformed",
                          "a malformed connection message" +
                              (from ? " from " + gid_text(*from) : std::string()) + ": " +
                              msg.status().message());
        return;
    }
    const wire::CmMessage &m = *msg;
    if (m.dst_name != me_.name) {
        drop_unattributed(&CmDrops::misdirected, "misdirected",
                          util::format("%s for %s (not this process)", wire::to_string(m.type),
                                       name_text(m.dst_name).c_str()));
        return;
    }
    Peer *peer = host_.find_peer(m.src_name);
    if (peer == nullptr && m.type == wire::CmType::kRequest &&
        host_.unknown_requester(m.src_name)) {
        peer = host_.find_peer(m.src_name);
        if (peer == nullptr) {
            return; // being looked up; the requester's retransmission finds the peer
        }
    }
    if (peer == nullptr) {
        drop_unattributed(&CmDrops::unknown_sender, "unknown",
                          util::format("%s from unknown process %s", wire::to_string(m.type),
                                       name_text(m.src_name).c_str()));
        return;
    }
    switch (m.type) {
    case wire::CmType::kRequest: on_request(*peer, from, m); break;
    case wire::CmType::kReply: on_reply(*peer, from, m); break;
    case wire::CmType::kReadyToUse: on_rtu(*peer, m); break;
    case wire::CmType::kReject: on_reject(*peer, m); break;
    }
}

// The peer's REQ or REP comes from an address other than the one we know
// (its bond's address was replaced): if the packet really comes from there,
// address the peer there from now on. A message claiming a source it was
// not sent from changes nothing.
void ConnectionManager::learn_address(Peer &peer, const wire::Gid *from,
                                      const wire::CmMessage &m) {
    if (from == nullptr) {
        return;
    }
    if (*from != m.src_gid) {
        log_.write(LogLevel::kDebug,
                   util::format("%s says it is at %s but sent from %s: not followed",
                                peer.label.c_str(), gid_text(m.src_gid).c_str(),
                                gid_text(*from).c_str()));
        return;
    }
    host_.peer_moved(peer, m.src_gid);
}

void ConnectionManager::on_request(Peer &peer, const wire::Gid *from, const wire::CmMessage &m) {
    if (peer.state == EpState::kFailed) {
        return;
    }
    learn_address(peer, from, m);
    if (host_.revalidate(peer, false)) {
        readdressed(peer); // our GID went away since the policy chose it
    }
    size_t first = m.first_path, count = m.paths.size();
    if (peer.path_count() < first + count) {
        peer.resize_paths(first + count);
    }
    {
        PathConn &head = peer.path_conn(first);
        if ((head.state == PathState::kAwaitRtu || head.state == PathState::kUp) &&
            m.conn_id == head.peer_conn_id) {
            // Our REP was lost: send the same one again.
            if (!head.last_reply.empty()) {
                std::vector<uint8_t> again = head.last_reply;
                (void)host_.send_cm(peer, again);
            }
            return;
        }
        if (head.state == PathState::kConnecting && me_.name < m.src_name) {
            // Both sides asked at once: our REQ wins, the peer will answer it.
            peer.peer_lost_conn = std::max(peer.peer_lost_conn, m.conn_id);
            return;
        }
    }
    if (m.conn_id <= peer.peer_lost_conn) {
        // A late copy of the REQ that lost the race: answering it would tear
        // down the connection our REQ made for QPs the peer no longer has.
        log_.write(LogLevel::kDebug, util::format("stale REQ %u from %s (lost a race) ignored",
                                                  m.conn_id, peer.label.c_str()));
        return;
    }
    for (size_t i = first; i < first + count; ++i) {
        PathConn &p = peer.path_conn(i);
        // A path that was up restarts from the peer's side (its QP failed):
        // ours is retired, its unfinished work moves to the other paths.
        if (p.state == PathState::kUp || p.state == PathState::kAwaitRtu) {
            path_failed(peer, i, "the peer reconnects this path");
        }
        // A QP of ours still in INIT (from a request that lost the race)
        // has never carried anything: drop it, the responder picks anew.
        if (p.local_qpn != 0 && p.state == PathState::kConnecting) {
            p.abandoned_conn_id = p.conn_id;
            retire(peer, i);
        }
    }
    std::vector<LocalQp> local;
    Status s = host_.accept_qps(peer, first, m.paths, &local);
    if (!s) {
        reject(peer, m.conn_id, m.first_path, wire::RejectReason::kNoResources, s.message());
        for (size_t i = first; i < first + count; ++i) {
            path_failed(peer, i, s.message());
        }
        return;
    }
    double now = host_.now();
    for (size_t i = first; i < first + count; ++i) {
        PathConn &p = peer.path_conn(i);
        p.local_qpn = local[i - first].qpn;
        p.local_psn = local[i - first].psn;
        p.peer_conn_id = m.conn_id;
        p.conn_id = 0;
        p.remote_qpn = m.paths[i - first].qpn;
        p.peer_credits = m.credits;
        p.reconnect_at = 0;
        p.await_until = now + cfg_.connect_timeout_s;
        p.state = PathState::kAwaitRtu;
    }
    if (peer.state == EpState::kClosed) {
        peer.state = EpState::kConnecting;
        peer.deadline = now + cfg_.connect_timeout_s;
    }
    watch(peer);
    s = send(peer, handshake(peer, wire::CmType::kReply, m.conn_id, first, count));
    if (!s) {
        log_.write(LogLevel::kDebug, "REP to " + peer.label + " not sent: " + s.message() +
                                         " (the peer retransmits its REQ)");
    }
}

void ConnectionManager::on_reply(Peer &peer, const wire::Gid *from, const wire::CmMessage &m) {
    size_t first = m.first_path, count = m.paths.size();
    if (peer.path_count() < first + count) {
        return;
    }
    learn_address(peer, from, m);
    bool matched = false, abandoned = false;
    for (size_t i = first; i < first + count; ++i) {
        const PathConn &p = peer.path_conn(i);
        if (p.state == PathState::kConnecting && p.conn_id == m.conn_id) {
            matched = true;
        } else {
            abandoned = abandoned || (m.conn_id != 0 && p.abandoned_conn_id == m.conn_id);
        }
    }
    if (!matched) {
        if (abandoned) {
            // The peer answered a REQ we gave up when its own won the race
            // (it saw a late copy): tell it, so that it drops the QPs it made
            // for ours instead of waiting for an RTU that will not come.
            reject(peer, m.conn_id, m.first_path, wire::RejectReason::kStale,
                   "that request was abandoned (both sides connected at once)");
        }
        return; // an RTU here would bring up the peer's QPs for nothing
    }
    for (size_t i = first; i < first + count; ++i) {
        PathConn &p = peer.path_conn(i);
        if (p.state != PathState::kConnecting || p.conn_id != m.conn_id) {
            continue; // stale or duplicate
        }
        Status s = host_.connect_qp(peer, i, m.paths[i - first]);
        if (!s) {
            path_failed(peer, i, s.message());
            continue;
        }
        p.remote_qpn = m.paths[i - first].qpn;
        p.peer_credits = m.credits;
        path_up(peer, i);
    }
    wire::CmMessage rtu = message(peer, wire::CmType::kReadyToUse);
    rtu.conn_id = m.conn_id;
    rtu.first_path = m.first_path;
    (void)send(peer, rtu); // if lost, our first RC message tells the peer instead
}

void ConnectionManager::on_rtu(Peer &peer, const wire::CmMessage &m) {
    for (size_t i = 0; i < peer.path_count(); ++i) {
        const PathConn &p = peer.path_conn(i);
        if (p.state == PathState::kAwaitRtu && p.peer_conn_id == m.conn_id) {
            path_up(peer, i);
        }
    }
}

void ConnectionManager::on_reject(Peer &peer, const wire::CmMessage &m) {
    for (size_t i = 0; i < peer.path_count(); ++i) {
        const PathConn &p = peer.path_conn(i);
        if (m.reason == wire::RejectReason::kStale) {
            // We answered a stale REQ: the QPs we made for it lead nowhere.
            if (p.state == PathState::kAwaitRtu && p.peer_conn_id == m.conn_id) {
                path_failed(peer, i, "the peer had abandoned that request");
            }
        } else if (p.state == PathState::kConnecting && p.conn_id == m.conn_id) {
            path_failed(peer, i, "the peer refused the connection: " + m.text);
        }
    }
}

void ConnectionManager::on_rc_message(Peer &peer, size_t i) {
    if (i < peer.path_count() && peer.path_conn(i).state == PathState::kAwaitRtu) {
        path_up(peer, i); // the first message doubles as the RTU
    }
}

// ------------------------------------------------------ path lifecycle ---

void ConnectionManager::path_up(Peer &peer, size_t i) {
    PathConn &p = peer.path_conn(i);
    bool reconnected = p.ever_up;
    p.state = PathState::kUp;
    p.conn_id = 0;
    p.tries = 0;
    p.ever_up = true;
    uint32_t credits = p.peer_credits;
    update_state(peer);
    host_.path_up(peer, i, credits, reconnected);
}

// The path's QP is in error (or about to be replaced): retire it, so that
// the work requests still on it flush back and are resent on the other
// paths, and try to connect the path again after a short delay.
void ConnectionManager::path_failed(Peer &peer, size_t i, const std::string &why) {
    if (i >= peer.path_count()) {
        return;
    }
    PathConn &p = peer.path_conn(i);
    if (p.state == PathState::kIdle && p.local_qpn == 0) {
        return;
    }
    bool was_up = p.state == PathState::kUp;
    size_t up = 0;
    for (size_t k = 0; k < peer.path_count(); ++k) {
        up += (k != i && peer.path_conn(k).state == PathState::kUp) ? 1 : 0;
    }
    log_.write(was_up ? LogLevel::kWarn : LogLevel::kDebug,
               util::format("path %zu to %s failed: %s; %zu other path(s) up, reconnecting", i,
                            peer.label.c_str(), why.c_str(), up));
    retire(peer, i);
    PathConn &q = peer.path_conn(i);
    q.state = PathState::kIdle;
    q.conn_id = 0;
    double delay = cfg_.reconnect_delay_s * (1 << std::min(q.tries, 6));
    q.reconnect_at = host_.now() + std::min(delay, kMaxReconnectDelay);
    ++q.tries;
    watch(peer);
    update_state(peer);
    if (was_up) {
        host_.path_lost(peer, i);
    }
}

void ConnectionManager::readdressed(Peer &peer) {
    // Paths that are up still send from the vanished address: the peer
    // drops that (and its own packets to it go nowhere), and a side that
    // only answers RDMA reads would never see an error. Reconnect them now
    // from the new address; the peer learns it from our REQ.
    for (size_t i = 0; i < peer.path_count(); ++i) {
        PathState st = peer.path_conn(i).state;
        if (st == PathState::kUp || st == PathState::kAwaitRtu) {
            path_failed(peer, i, "our address changed");
            peer.path_conn(i).reconnect_at = host_.now();
        }
    }
}

void ConnectionManager::update_state(Peer &peer) {
    if (peer.state == EpState::kFailed || peer.state == EpState::kClosed) {
        return;
    }
    bool any_up = false;
    for (size_t i = 0; i < peer.path_count(); ++i) {
        any_up = any_up || peer.path_conn(i).state == PathState::kUp;
    }
    if (any_up) {
        peer.state = EpState::kConnected;
    } else if (peer.state == EpState::kConnected) {
        // Every path is down: the peer has connect_timeout to come back.
        peer.state = EpState::kConnecting;
        peer.deadline = host_.now() + cfg_.connect_timeout_s;
    }
}

void ConnectionManager::fail(Peer &peer, const std::string &why) {
    if (peer.state == EpState::kFailed) {
        return;
    }
    for (size_t i = 0; i < peer.path_count(); ++i) {
        retire(peer, i);
        PathConn &p = peer.path_conn(i);
        p.state = PathState::kIdle;
        p.reconnect_at = 0;
        p.conn_id = 0;
    }
    peer.state = EpState::kFailed;
    peer.failure = why;
    forget(peer);
    host_.peer_failed(peer, why);
}

// -------------------------------------------------------------- timers ---

void ConnectionManager::run_peer_timers(Peer &peer, double now) {
    if (peer.state == EpState::kConnecting && now >= peer.deadline) {
        fail(peer, util::format("connection to %s timed out after %.0f s (%s)",
                                peer.label.c_str(), cfg_.connect_timeout_s,
                                host_.route(peer).c_str()));
        return;
    }
    for (size_t i = 0; peer.state != EpState::kFailed && i < peer.path_count(); ++i) {
        PathConn &p = peer.path_conn(i);
        if (p.state == PathState::kConnecting) {
            if (i == p.batch_first && now >= p.next_retry) {
                (void)send(peer, handshake(peer, wire::CmType::kRequest, p.conn_id, i,
                                           p.batch_count));
                for (size_t k = i; k < i + p.batch_count && k < peer.path_count(); ++k) {
                    PathConn &b = peer.path_conn(k);
                    ++b.tries;
                    b.retry_interval = std::min(b.retry_interval * 2, kMaxRetryInterval);
                    b.next_retry = now + b.retry_interval;
                }
            }
        } else if (p.state == PathState::kIdle && p.reconnect_at > 0 && now >= p.reconnect_at) {
            p.reconnect_at = 0;
            if (host_.revalidate(peer, true)) {
                readdressed(peer);
            }
            if (peer.path_conn(i).state == PathState::kIdle &&
                peer.path_conn(i).reconnect_at == 0) {
                reconnect_path(peer, i);
            }
        }
    }
}

void ConnectionManager::run_timers(double now) {
    // Handlers may add peers to watch_ (never remove others than the one
    // they run for): walk a copy.
    std::vector<Peer *> peers = watch_;
    for (Peer *peer : peers) {
        if (std::find(watch_.begin(), watch_.end(), peer) == watch_.end()) {
            continue;
        }
        run_peer_timers(*peer, now);
        bool busy = peer->state == EpState::kConnecting;
        for (size_t i = 0; !busy && i < peer->path_count(); ++i) {
            const PathConn &p = peer->path_conn(i);
            busy = p.state == PathState::kConnecting || p.state == PathState::kAwaitRtu ||
                   (p.state == PathState::kIdle && p.reconnect_at > 0);
        }
        if (!busy || peer->state == EpState::kFailed) {
            forget(*peer);
        }
    }
}

// --------------------------------------------------------------- drops ---

void ConnectionManager::drop_unattributed(uint64_t CmDrops::*counter, const std::string &key,
                                          const std::string &what) {
    ++(drops_.*counter);
    uint64_t n = warn_.hit(key, host_.now());
    if (n > 0) {
        log_.write(LogLevel::kWarn,
                   util::format("dropped %s%s", what.c_str(),
                                n > 1 ? util::format(" (%llu such messages since the last "
                                                     "report)",
                                                     static_cast<unsigned long long>(n))
                                            .c_str()
                                      : ""));
    }
}

void ConnectionManager::drop_for_peer(Peer &peer, uint64_t CmDrops::*counter,
                                      const std::string &what) {
    ++(peer.drops.*counter);
    uint64_t n = peer.warn.hit(what, host_.now());
    if (n > 0) {
        log_.write(LogLevel::kWarn,
                   util::format("dropped %s naming %s%s", what.c_str(),
                                peer.label.c_str(),
                                n > 1 ? util::format(" (%llu such messages since the last "
                                                     "report)",
                                                     static_cast<unsigned long long>(n))
                                            .c_str()
                                      : ""));
    }
}

} // namespace roce::btl
