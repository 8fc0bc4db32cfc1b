// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The connection handshake (manager.h has the picture). Every handler
// decides from the peer's recorded state alone; the host does the verbs
// work and tells the data path. Retransmissions are driven by run_timers.
#include "connection/manager.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

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
/// A requester repeats its REQ at least every kMaxRetryInterval while it
/// waits for our REP: four intervals without one, or an RTU, or traffic,
/// mean it gave up.
constexpr double kAwaitRtuTimeout = 4 * kMaxRetryInterval;

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

std::string name_text(uint64_t name) {
    return util::format("[%u,%u]", static_cast<unsigned>(name >> 32),
                        static_cast<unsigned>(name & 0xffffffffu));
}

} // namespace

ConnectionManager::ConnectionManager(CmHost &host, const CmIdentity &me, const CmConfig &cfg,
                                     util::LogSink &log)
    : host_(host), me_(me), cfg_(cfg), log_(log), warn_(cfg.warn_interval_s, 16) {}

double ConnectionManager::await_rtu_timeout() const {
    return std::min(kAwaitRtuTimeout, cfg_.connect_timeout_s / 2);
}

// ------------------------------------------------------------ sending ---

wire::CmMessage ConnectionManager::message(const Peer &peer, wire::CmType type) const {
    wire::CmMessage m;
    m.type = type;
    m.src_name = me_.name;
    m.dst_name = peer.name;
    m.src_token = me_.token;
    m.dst_token = peer.token;
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
    if (peer.loopback) {
        peer.resize_paths(1);
        wire_loopback(peer, 0);
        return;
    }
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

void ConnectionManager::schedule_reconnect(Peer &peer, size_t i) {
    PathConn &p = peer.path_conn(i);
    double delay = cfg_.reconnect_delay_s * (1 << std::min(p.tries, 6));
    p.reconnect_at = host_.now() + std::min(delay, kMaxReconnectDelay);
    ++p.tries;
    watch(peer);
}

void ConnectionManager::wire_loopback(Peer &peer, size_t i) {
    Status s = host_.wire_loopback(peer, i);
    if (!s) {
        log_.write(LogLevel::kWarn, util::format("loopback path %zu of %s: %s; trying again", i,
                                                 peer.label.c_str(), s.message().c_str()));
        schedule_reconnect(peer, i);
        return;
    }
    peer.path_conn(i).peer_credits = cfg_.credits;
    path_up(peer, i);
}

void ConnectionManager::reconnect_path(Peer &peer, size_t i) {
    if (peer.loopback) {
        // Our own path: wired again locally (a REQ to ourselves would go
        // unanswered - no CM message is taken from oneself).
        wire_loopback(peer, i);
        return;
    }
    auto qp = host_.open_qp(peer, i);
    if (!qp) {
        // The path has no QP to retire: try again later (a QP may be
        // creatable once others are destroyed).
        log_.write(LogLevel::kWarn, util::format("path %zu to %s: %s; trying again", i,
                                                 peer.label.c_str(),
                                                 qp.status().message().c_str()));
        schedule_reconnect(peer, i);
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
    if (m.dst_name != me_.name || m.dst_port != me_.port_index) {
        drop_unattributed(&CmDrops::misdirected, "misdirected",
                          util::format("%s for %s port %u (not this process and port)",
                                       wire::to_string(m.type), name_text(m.dst_name).c_str(),
                                       m.dst_port));
        return;
    }
    // Authenticate before anything else looks at the message: it must carry
    // our token and the named sender's.
    bool to_us = same_token(m.dst_token, me_.token);
    Peer *peer = host_.find_peer(m.src_name);
    if (peer == nullptr) {
        if (!to_us) {
            drop_unattributed(&CmDrops::unauthenticated, "token",
                              util::format("%s claiming to be from %s with a wrong connection "
                                           "token (forged, or from another job)",
                                           wire::to_string(m.type),
                                           name_text(m.src_name).c_str()));
            return;
        }
        if (m.type == wire::CmType::kRequest && host_.unknown_requester(m.src_name)) {
            peer = host_.find_peer(m.src_name);
            if (peer == nullptr) {
                return; // being looked up; the requester's retransmission finds the peer
            }
        } else {
            drop_unattributed(&CmDrops::unknown_sender, "unknown",
                              util::format("%s from %s, a process outside the jobs known here",
                                           wire::to_string(m.type),
                                           name_text(m.src_name).c_str()));
            return;
        }
    }
    if (!to_us || !same_token(m.src_token, peer->token)) {
        drop_for_peer(*peer, &CmDrops::unauthenticated,
                      "a connection message with a wrong token (forged, or from another job)");
        return;
    }
    if (m.src_port != peer->port_index) {
        drop_for_peer(*peer, &CmDrops::misdirected,
                      util::format("a connection message from its port %u (we talk to its "
                                   "port %u)",
                                   m.src_port, peer->port_index));
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
            // Our REP was lost: send the same one again. The requester is
            // alive and still waiting: give the RTU time again.
            if (!head.last_reply.empty()) {
                std::vector<uint8_t> again = head.last_reply;
                (void)host_.send_cm(peer, again);
            }
            double until = host_.now() + await_rtu_timeout();
            for (size_t i = first; i < first + count; ++i) {
                PathConn &p = peer.path_conn(i);
                if (p.state == PathState::kAwaitRtu && p.peer_conn_id == m.conn_id) {
                    p.await_until = until;
                }
            }
            return;
        }
        if (head.state == PathState::kConnecting && me_.name < m.src_name) {
            // Both sides asked at once: our REQ wins, the peer will answer it.
            peer.peer_lost_conn = std::max(peer.peer_lost_conn, m.conn_id);
            return;
        }
    }
    bool answered = false;
    for (size_t i = first; i < first + count; ++i) {
        answered = answered || peer.path_conn(i).peer_conn_id >= m.conn_id;
    }
    if (m.conn_id <= peer.peer_lost_conn || answered) {
        // A late copy of a REQ that lost the race, or of one we answered
        // before and whose path has failed since: answering it would tear
        // down the connection our REQ made, or pair a new QP of ours with a
        // QP the peer no longer has. (A peer's connection ids only grow.)
        log_.write(LogLevel::kDebug, util::format("stale REQ %u from %s refused", m.conn_id,
                                                  peer.label.c_str()));
        ++peer.drops.unexpected;
        // Should the peer still be waiting for an answer to it (our REP was
        // lost and our path failed since), it starts over with a new REQ.
        reject(peer, m.conn_id, m.first_path, wire::RejectReason::kStaleRequest,
               "that request was answered or superseded before");
        return;
    }
    // A genuine, current request: only now may it tell us where the peer is.
    learn_address(peer, from, m);
    uint32_t superseded = 0;
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
            superseded = std::max(superseded, p.conn_id);
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
        p.await_until = now + await_rtu_timeout();
        p.state = PathState::kAwaitRtu;
    }
    if (peer.state == EpState::kClosed) {
        peer.state = EpState::kConnecting;
        peer.deadline = now + cfg_.connect_timeout_s;
    }
    watch(peer);
    wire::CmMessage rep = handshake(peer, wire::CmType::kReply, m.conn_id, first, count);
    rep.superseded = superseded;
    s = send(peer, rep);
    if (!s) {
        log_.write(LogLevel::kDebug, "REP to " + peer.label + " not sent: " + s.message() +
                                         " (the peer retransmits its REQ)");
    }
}

void ConnectionManager::on_reply(Peer &peer, const wire::Gid *from, const wire::CmMessage &m) {
    size_t first = m.first_path, count = m.paths.size();
    if (peer.path_count() < first + count) {
        ++peer.drops.unexpected;
        return;
    }
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
        ++peer.drops.unexpected;
        return; // an RTU here would bring up the peer's QPs for nothing
    }
    learn_address(peer, from, m);
    // The peer gave up its own REQ for these paths to answer ours: copies of
    // it still in flight are stale (without this, a copy that arrives now
    // looks like the peer reconnecting, and tears down what we just made).
    peer.peer_lost_conn = std::max(peer.peer_lost_conn, m.superseded);
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
        } else if (m.reason == wire::RejectReason::kStaleRequest) {
            if (p.state == PathState::kConnecting && p.conn_id == m.conn_id) {
                path_failed(peer, i, "the peer had answered that request before");
            }
        } else if (p.state == PathState::kConnecting && p.conn_id == m.conn_id) {
            path_failed(peer, i, "the peer refused the connection: " + util::printable(m.text));
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
void ConnectionManager::path_failed(Peer &peer, size_t i, const std::string &why, bool quiet) {
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
    log_.write(was_up && !quiet ? LogLevel::kWarn : LogLevel::kDebug,
               util::format("path %zu to %s failed: %s; %zu other path(s) up, reconnecting", i,
                            peer.label.c_str(), why.c_str(), up));
    retire(peer, i);
    PathConn &q = peer.path_conn(i);
    q.state = PathState::kIdle;
    q.conn_id = 0;
    schedule_reconnect(peer, i);
    update_state(peer);
    if (was_up) {
        host_.path_lost(peer, i);
    }
}

size_t ConnectionManager::port_down(Peer &peer, const std::string &why) {
    if (peer.loopback || peer.state == EpState::kFailed || peer.state == EpState::kClosed) {
        return 0; // a loopback path stays inside the device
    }
    size_t n = 0;
    for (size_t i = 0; i < peer.path_count(); ++i) {
        const PathConn &p = peer.path_conn(i);
        if (p.state != PathState::kIdle || p.local_qpn != 0) {
            path_failed(peer, i, why, true);
            ++n;
        }
    }
    return n;
}

void ConnectionManager::port_up(Peer &peer) {
    if (peer.loopback || peer.state == EpState::kFailed || peer.state == EpState::kClosed) {
        return;
    }
    double now = host_.now();
    bool waiting = false;
    for (size_t i = 0; i < peer.path_count(); ++i) {
        PathConn &p = peer.path_conn(i);
        if (p.state == PathState::kIdle && p.reconnect_at > 0) {
            p.reconnect_at = now;
            p.tries = 0;
            waiting = true;
        } else if (p.state == PathState::kConnecting) {
            p.next_retry = now;
            p.retry_interval = cfg_.connect_retry_s;
            waiting = true;
        }
    }
    if (waiting) {
        watch(peer);
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
        bool was_up = false;
        for (size_t i = 0; i < peer.path_count(); ++i) {
            was_up = was_up || peer.path_conn(i).ever_up;
        }
        if (was_up && host_.reached_elsewhere(peer)) {
            // A rail down, not the peer: another rail of ours carries its
            // traffic. Keep reconnecting (REQs every 2 s at most, paths
            // reopened after at most kMaxReconnectDelay) and look again
            // after another connect_timeout.
            peer.deadline = now + cfg_.connect_timeout_s;
            log_.write(LogLevel::kDebug,
                       util::format("no path to %s for %.0f s, but another rail reaches it: "
                                    "still reconnecting",
                                    peer.label.c_str(), cfg_.connect_timeout_s));
        } else {
            fail(peer, util::format("connection to %s timed out after %.0f s (%s)",
                                    peer.label.c_str(), cfg_.connect_timeout_s,
                                    host_.route(peer).c_str()));
            return;
        }
    }
    for (size_t i = 0; peer.state != EpState::kFailed && i < peer.path_count(); ++i) {
        PathConn &p = peer.path_conn(i);
        if (p.state == PathState::kConnecting) {
            // Retransmit the REQ for the run of paths from here that still
            // wait for it. A REQ for several paths shrinks (or splits) when
            // one of them fails meanwhile: that one reconnects on its own,
            // and its retired QP must not be offered again.
            bool run_start = i == 0 || peer.path_conn(i - 1).state != PathState::kConnecting ||
                             peer.path_conn(i - 1).conn_id != p.conn_id;
            if (run_start && now >= p.next_retry) {
                size_t n = 1;
                while (i + n < peer.path_count() &&
                       peer.path_conn(i + n).state == PathState::kConnecting &&
                       peer.path_conn(i + n).conn_id == p.conn_id) {
                    ++n;
                }
                (void)send(peer, handshake(peer, wire::CmType::kRequest, p.conn_id, i, n));
                for (size_t k = i; k < i + n; ++k) {
                    PathConn &b = peer.path_conn(k);
                    ++b.tries;
                    b.retry_interval = std::min(b.retry_interval * 2, kMaxRetryInterval);
                    b.next_retry = now + b.retry_interval;
                }
            }
        } else if (p.state == PathState::kAwaitRtu && now >= p.await_until) {
            // The requester stopped asking (it abandoned that REQ, or is
            // gone) and no RC message came: start over from our side.
            path_failed(peer, i, "no RTU and no traffic after our REP");
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
    warn_.warn(log_, key, host_.now(), "dropped " + util::printable(what));
}

void ConnectionManager::drop_for_peer(Peer &peer, uint64_t CmDrops::*counter,
                                      const std::string &what) {
    ++(peer.drops.*counter);
    peer.warn.warn(log_, what, host_.now(),
                   "dropped " + util::printable(what) + " naming " + peer.label);
}

} // namespace roce::btl

namespace roce::btl {

util::Result<uint64_t> new_token() {
    for (int attempt = 0; attempt < 8; ++attempt) {
        uint64_t t = 0;
        ssize_t n = getrandom(&t, sizeof(t), 0);
        if (n != static_cast<ssize_t>(sizeof(t))) {
            if (n < 0 && errno == EINTR) {
                continue;
            }
            return Status::from_errno(n < 0 ? errno : EIO,
                                      "getrandom(8 bytes) for the connection token");
        }
        if (t != 0) {
            return t;
        }
    }
    return Status(Code::kUnavailable, "getrandom returned only zeros");
}

bool same_token(uint64_t a, uint64_t b) noexcept {
    // One 64-bit comparison: no early exit on the first differing byte.
    return (a ^ b) == 0;
}

} // namespace roce::btl
