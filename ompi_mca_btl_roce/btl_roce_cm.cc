// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Connection management. An endpoint's paths (one RC QP each; one per LAG
// member by default) are connected lazily, on first use, by a REQ/REP/RTU
// handshake over the UD QP:
//
//   A (active)                          B (passive)
//   create QPs, RESET->INIT
//   REQ {paths[first..]: qpn, psn} -->  create QPs, INIT->RTR->RTS
//                                  <--  REP {paths[first..]: qpn, psn}
//   INIT->RTR->RTS, RTU            -->  up (or on the first RC message)
//
// The first handshake covers every path; when one path later fails, only
// that path is handshaken again (first = its index, one path). REQ is
// retransmitted with exponential backoff; a duplicate REQ gets the stored
// REP again. When both sides connect at once, the request of the process
// with the smaller name wins and the other side answers it with the QPs it
// had already created. Late copies of the losing REQ are ignored (the
// winner remembers its id); should the winner answer one anyway (it never
// saw a copy during the race), the loser rejects that REP as stale instead
// of confirming it, and the winner drops the QPs it made for it.
#include "btl_roce_module.h"

#include <algorithm>

#include "btl_roce.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Status;

namespace {

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

opal_process_name_t name_from(uint64_t v) {
    opal_process_name_t pn;
    pn.jobid = static_cast<opal_jobid_t>(v >> 32);
    pn.vpid = static_cast<opal_vpid_t>(v & 0xffffffffu);
    return pn;
}

constexpr double kMaxRetryInterval = 2.0;
constexpr double kMaxReconnectDelay = 5.0;

} // namespace

Status Module::ensure_ah(Endpoint &ep) {
    if (ep.ah_) {
        return Status::ok();
    }
    qp::QpParams params;
    ibv_ah_attr a = qp::build_ah_attr(ep.path().selection, ep.path().dgid, params);
    // Address handles go through the same checks as QP transitions.
    auto snap = live_snapshot_source()();
    if (snap) {
        qp::PreflightResult pf = qp::preflight_ah(*snap, ep.path().selection, a);
        for (const auto &c : pf.corrections) {
            log_.write(LogLevel::kInfo, "address handle to " + ep.label() + ": " + c);
        }
        if (!pf.ok()) {
            std::vector<std::string> why;
            for (const auto &p : pf.problems) {
                why.push_back(p.message + "; " + p.fix);
            }
            return Status(Code::kUnavailable, "ibv_create_ah to " + ep.label() +
                                                  " refused before the call: " +
                                                  util::join(why, "; "));
        }
    }
    ibv_ah *ah = dev_->api().create_ah(dev_->pd(), &a);
    if (ah == nullptr) {
        return Status::from_errno(errno, util::format("ibv_create_ah on %s:%d gid[%d] %s -> %s",
                                                      plan_.device.c_str(), plan_.port,
                                                      a.grh.sgid_index,
                                                      gid_text(ep.path().sgid).c_str(),
                                                      gid_text(ep.path().dgid).c_str()));
    }
    ep.ah_ = verbs::Ah(ah, verbs::AhDeleter{&dev_->api()});
    if (a.grh.sgid_index != ep.path_.sgid_index) {
        // Preflight followed our GID to its new slot (the bond's addresses
        // were rewritten, e.g. at an active-backup failover): RC QPs made
        // from now on start from the new index.
        ep.path_.sgid_index = a.grh.sgid_index;
        ep.path_.selection.gid_index = a.grh.sgid_index;
    }
    return Status::ok();
}

// The peer's REQ or REP comes from an address other than the one we know
// (its bond's address was replaced): if the packet really comes from there,
// address the peer there from now on - our replies, and the paths connected
// from now on. A message claiming a source it was not sent from changes
// nothing.
void Module::learn_peer_gid(Endpoint &ep, const wire::CmMessage &m) {
    if (m.src_gid == ep.path_.dgid || !cm_src_known_) {
        return;
    }
    if (cm_src_ != m.src_gid) {
        log_.write(LogLevel::kDebug,
                   util::format("%s says it is at %s but sent from %s: ignored",
                                ep.label().c_str(), gid_text(m.src_gid).c_str(),
                                gid_text(cm_src_).c_str()));
        return;
    }
    log_.write(LogLevel::kInfo, util::format("%s moved from %s to %s: addressing it there",
                                             ep.label().c_str(), gid_text(ep.path_.dgid).c_str(),
                                             gid_text(m.src_gid).c_str()));
    PathChoice c = ep.path_;
    c.dgid = m.src_gid;
    if (!on_link(plan_, c, c.dgid)) {
        // The peer now speaks from another subnet (its address moved to the
        // VLAN, say): answer from our GID on that subnet, as the policy
        // would have chosen for that address.
        wire::PortAdvert only = ep.peer_port_;
        only.gids.clear();
        for (const auto &g : ep.peer_port_.gids) {
            if (g.gid == m.src_gid) {
                only.gids.push_back(g);
            }
        }
        if (only.gids.empty()) {
            wire::GidAdvert g;
            g.gid = m.src_gid;
            g.type = ep.path_.gid_type;
            g.prefix_len = util::IpAddress::from_gid(m.src_gid).is_v4() ? 24 : 64;
            only.gids.push_back(g);
        }
        auto choice = choose_path(plan_, only);
        if (!choice) {
            log_.write(LogLevel::kWarn, util::format("%s moved to %s, which no local GID reaches: %s",
                                                     ep.label().c_str(),
                                                     gid_text(m.src_gid).c_str(),
                                                     choice.status().message().c_str()));
            return;
        }
        c = choice.value();
        c.dgid = m.src_gid;
    }
    set_path_choice(ep, c);
    ep.dgid_learned_ = true;
}

// Before a path is connected again: is our GID still in the table? When
// the bond's address was replaced it is not (preflight would refuse every
// transition): choose again, by the same policy, from a fresh snapshot. The
// peer learns our new address from the REQ (learn_peer_gid on its side).
bool Module::revalidate_path(Endpoint &ep, const std::shared_ptr<const topo::Snapshot> &given) {
    std::shared_ptr<const topo::Snapshot> snap = given;
    if (!snap) {
        auto read = live_snapshot_source()();
        if (!read) {
            return false;
        }
        snap = std::make_shared<const topo::Snapshot>(std::move(read.value()));
    }
    const topo::DeviceInfo *dev = snap->find_device(plan_.device);
    const topo::PortInfo *port = dev ? dev->find_port(plan_.port) : nullptr;
    if (port != nullptr) {
        for (const auto &g : port->gids) {
            if (std::equal(g.gid.begin(), g.gid.end(), ep.path_.sgid.begin())) {
                return false; // still there (preflight follows it if it moved slots)
            }
        }
    }
    PortPlan fresh = plan_;
    fresh.snapshot = snap;
    auto choice = choose_path(fresh, ep.peer_port_);
    if (!choice) {
        log_.write(LogLevel::kWarn,
                   util::format("%s: our address %s is gone and no other reaches the peer: %s",
                                ep.label().c_str(), gid_text(ep.path_.sgid).c_str(),
                                choice.status().message().c_str()));
        return false;
    }
    // New endpoints choose from the fresh view as well.
    plan_.snapshot = fresh.snapshot;
    PathChoice c = choice.value();
    // A peer address learned from the peer itself is newer than its modex
    // record: keep it while it is on the new GID's link.
    if (ep.dgid_learned_ && on_link(plan_, c, ep.path_.dgid)) {
        c.dgid = ep.path_.dgid;
    } else {
        ep.dgid_learned_ = false;
    }
    log_.write(LogLevel::kInfo, util::format("%s: our address %s is gone; now gid[%d] %s -> %s",
                                             ep.label().c_str(), gid_text(ep.path_.sgid).c_str(),
                                             c.sgid_index, gid_text(c.sgid).c_str(),
                                             gid_text(c.dgid).c_str()));
    set_path_choice(ep, c);
    // Paths that are up still send from the vanished address: the peer
    // drops that (and its own packets to it go nowhere), and a side that
    // only answers RDMA reads would never see an error. Reconnect them now
    // from the new address; the peer learns it from our REQ.
    for (size_t i = 0; i < ep.paths_.size(); ++i) {
        PathState st = ep.paths_[i].state;
        if (st == PathState::kUp || st == PathState::kAwaitRtu) {
            path_failed(ep, i, "our address changed");
            ep.paths_[i].reconnect_at = now_seconds();
        }
    }
    return true;
}

void Module::set_path_choice(Endpoint &ep, const PathChoice &c) {
    ep.path_ = c;
    ep.ah_.reset();
    BondView bond = bond_view(*plan_.snapshot, c.selection.netdev);
    ep.spread_model_ = spread_model(bond.members, bond.hash_policy,
                                    util::IpAddress::from_gid(c.sgid),
                                    util::IpAddress::from_gid(c.dgid));
}

wire::CmMessage Module::cm_template(const Endpoint &ep, wire::CmType type) const {
    wire::CmMessage m;
    m.type = type;
    m.src_name = my_name_;
    m.dst_name = ep.peer_name();
    m.src_ud_qpn = dev_->ud_qp()->qp_num;
    m.src_port = port_index_;
    m.dst_port = ep.peer_port_index();
    return m;
}

wire::CmMessage Module::handshake(const Endpoint &ep, wire::CmType type, uint32_t conn_id,
                                  size_t first, size_t count) const {
    wire::CmMessage m = cm_template(ep, type);
    m.conn_id = conn_id;
    m.first_path = static_cast<uint8_t>(first);
    m.path_mtu = static_cast<uint8_t>(ep.path().path_mtu);
    m.credits = cfg_.credits_per_peer;
    m.src_gid = ep.path().sgid;
    m.dst_gid = ep.path().dgid;
    for (size_t i = first; i < first + count; ++i) {
        m.paths.push_back({ep.paths_[i].qpn(), ep.paths_[i].local_psn});
    }
    return m;
}

Status Module::send_cm(Endpoint &ep, const wire::CmMessage &m) {
    Status s = ensure_ah(ep);
    if (!s) {
        return s;
    }
    std::vector<uint8_t> bytes = wire::encode(m);
    if (m.type == wire::CmType::kReply) {
        for (size_t i = 0; i < m.paths.size(); ++i) {
            ep.paths_[m.first_path + i].last_reply = bytes;
        }
    }
    return dev_->ud_send(ep.ah_.get(), ep.peer_port().ud_qpn, ep.peer_port().qkey, bytes.data(),
                         bytes.size());
}

void Module::watch(Endpoint &ep) {
    if (std::find(watch_.begin(), watch_.end(), &ep) == watch_.end()) {
        watch_.push_back(&ep);
    }
}

// REQ for paths [first, first+count), whose QPs exist and are in INIT.
void Module::request_paths(Endpoint &ep, size_t first, size_t count) {
    uint32_t id = next_conn_id_++;
    double now = now_seconds();
    for (size_t i = first; i < first + count; ++i) {
        Path &p = ep.paths_[i];
        p.state = PathState::kConnecting;
        p.conn_id = id;
        p.batch_first = static_cast<uint8_t>(first);
        p.batch_count = static_cast<uint8_t>(count);
        p.tries = 1;
        p.retry_interval = cfg_.connect_retry_s;
        p.next_retry = now + p.retry_interval;
    }
    watch(ep);
    Status s = send_cm(ep, handshake(ep, wire::CmType::kRequest, id, first, count));
    if (!s && s.code() != Code::kResourceExhausted) {
        // An address handle that cannot be created will not heal by retrying.
        fail_endpoint(ep, s.message());
        return;
    }
    log_.write(LogLevel::kDebug, util::format("REQ %u to %s (paths %zu..%zu)", id,
                                              ep.label().c_str(), first, first + count - 1));
}

void Module::start_connect(Endpoint &ep) {
    if (ep.state_ != EpState::kClosed) {
        return;
    }
    ep.state_ = EpState::kConnecting;
    ep.deadline_ = now_seconds() + cfg_.connect_timeout_s;
    if (ep.is_self()) {
        connect_self(ep);
        return;
    }
    if (ensure_ah(ep).code() == Code::kUnavailable) {
        // Preflight refused the address handle: our GID may have gone since
        // the policy chose it (the bond was readdressed). Choose again.
        revalidate_path(ep);
    }
    ep.paths_.resize(paths_for(ep));
    for (size_t i = 0; i < ep.paths_.size(); ++i) {
        Status s = create_path_qp(ep, i);
        if (!s) {
            fail_endpoint(ep, s.message());
            return;
        }
    }
    request_paths(ep, 0, ep.paths_.size());
}

void Module::connect_self(Endpoint &ep) {
    // Loopback through the NIC: two QPs wired to each other, no handshake.
    ep.paths_.resize(1);
    Status s = create_path_qp(ep, 0);
    Path &p = ep.paths_[0];
    if (s) {
        p.loop_peer = std::move(p.qp);
        s = create_path_qp(ep, 0);
        if (s) {
            by_qpn_[p.loop_peer->get()->qp_num] = QpRef{&ep, 0};
            s = connect_qp(ep, p, *p.qp, p.loop_peer->get()->qp_num, p.local_psn);
            if (s) {
                s = connect_qp(ep, p, *p.loop_peer, p.qpn(), p.local_psn);
            }
        }
    }
    if (!s) {
        fail_endpoint(ep, s.message());
        return;
    }
    p.remote_qpn = p.loop_peer->get()->qp_num;
    p.credits.set_initial(cfg_.credits_per_peer);
    path_up(ep, 0);
}

void Module::handle_cm(const uint8_t *grh, const uint8_t *data, size_t len) {
    cm_src_known_ = wire::grh_source_gid(grh, &cm_src_);
    auto msg = wire::parse_cm(data, len);
    if (!msg) {
        log_.write(LogLevel::kWarn, "dropped a malformed connection message: " +
                                        msg.status().message());
        return;
    }
    if (msg->dst_name != my_name_) {
        log_.write(LogLevel::kDebug,
                   util::format("dropped %s for %s (not this process)", to_string(msg->type),
                                OPAL_NAME_PRINT(name_from(msg->dst_name))));
        return;
    }
    switch (msg->type) {
    case wire::CmType::kRequest: on_request(*msg); break;
    case wire::CmType::kReply: on_reply(*msg); break;
    case wire::CmType::kReadyToUse: on_rtu(*msg); break;
    case wire::CmType::kReject: on_reject(*msg); break;
    }
}

void Module::on_request(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, true, m.src_port);
    if (ep == nullptr || ep->is_self() || ep->state_ == EpState::kFailed) {
        return;
    }
    learn_peer_gid(*ep, m);
    if (ensure_ah(*ep).code() == Code::kUnavailable) {
        revalidate_path(*ep); // our GID went away since the policy chose it
    }
    size_t first = m.first_path, count = m.paths.size();
    if (ep->paths_.size() < first + count) {
        ep->paths_.resize(first + count);
    }
    Path &head = ep->paths_[first];
    if ((head.state == PathState::kAwaitRtu || head.state == PathState::kUp) &&
        m.conn_id == head.peer_conn_id) {
        // Our REP was lost: send the same one again.
        if (!head.last_reply.empty() && ensure_ah(*ep)) {
            (void)dev_->ud_send(ep->ah_.get(), ep->peer_port().ud_qpn, ep->peer_port().qkey,
                                head.last_reply.data(), head.last_reply.size());
        }
        return;
    }
    if (head.state == PathState::kConnecting && my_name_ < m.src_name) {
        // Both sides asked at once: our REQ wins, the peer will answer it.
        ep->peer_lost_conn_ = std::max(ep->peer_lost_conn_, m.conn_id);
        return;
    }
    if (m.conn_id <= ep->peer_lost_conn_) {
        // A late copy of the REQ that lost the race: answering it would tear
        // down the connection our REQ made for QPs the peer no longer has.
        log_.write(LogLevel::kDebug, util::format("stale REQ %u from %s (lost a race) ignored",
                                                  m.conn_id, ep->label().c_str()));
        return;
    }
    std::vector<std::unique_ptr<qp::QueuePair>> spares;
    for (size_t i = first; i < first + count; ++i) {
        Path &p = ep->paths_[i];
        // A path that was up restarts from the peer's side (its QP failed):
        // ours is retired, its unfinished work moves to the other paths.
        if (p.state == PathState::kUp || p.state == PathState::kAwaitRtu) {
            path_failed(*ep, i, "the peer reconnects this path");
        }
        // A QP of ours still in INIT (from a request that lost the race)
        // has never carried anything: drop it and pick a well-spread one.
        if (p.qp && p.state == PathState::kConnecting) {
            by_qpn_.erase(p.qpn());
            p.qp.reset();
            p.abandoned_conn_id = p.conn_id;
        }
        Status s = create_paired_qp(*ep, i, m.paths[i - first].qpn, spares);
        if (s) {
            s = connect_qp(*ep, p, *p.qp, m.paths[i - first].qpn, m.paths[i - first].psn);
        }
        if (!s) {
            wire::CmMessage rej = cm_template(*ep, wire::CmType::kReject);
            rej.conn_id = m.conn_id;
            rej.reason = wire::RejectReason::kNoResources;
            rej.text = s.message();
            (void)send_cm(*ep, rej);
            path_failed(*ep, i, s.message());
            return;
        }
        p.peer_conn_id = m.conn_id;
        p.conn_id = 0;
        p.remote_qpn = m.paths[i - first].qpn;
        p.credits.set_initial(m.credits);
        p.state = PathState::kAwaitRtu;
    }
    if (ep->state_ == EpState::kClosed) {
        ep->state_ = EpState::kConnecting;
        ep->deadline_ = now_seconds() + cfg_.connect_timeout_s;
    }
    watch(*ep);
    Status s = send_cm(*ep, handshake(*ep, wire::CmType::kReply, m.conn_id, first, count));
    if (!s) {
        log_.write(LogLevel::kDebug, "REP to " + ep->label() + " not sent: " + s.message() +
                                         " (the peer retransmits its REQ)");
    }
}

void Module::on_reply(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    size_t first = m.first_path, count = m.paths.size();
    if (ep == nullptr || ep->paths_.size() < first + count) {
        return;
    }
    learn_peer_gid(*ep, m);
    bool matched = false, abandoned = false;
    for (size_t i = first; i < first + count; ++i) {
        Path &p = ep->paths_[i];
        if (p.state != PathState::kConnecting || p.conn_id != m.conn_id) {
            abandoned = abandoned || (m.conn_id != 0 && p.abandoned_conn_id == m.conn_id);
            continue; // stale or duplicate
        }
        matched = true;
        Status s = connect_qp(*ep, p, *p.qp, m.paths[i - first].qpn, m.paths[i - first].psn);
        if (!s) {
            path_failed(*ep, i, s.message());
            continue;
        }
        p.remote_qpn = m.paths[i - first].qpn;
        p.credits.set_initial(m.credits);
        path_up(*ep, i);
    }
    if (!matched) {
        if (abandoned) {
            // The peer answered a REQ we gave up when its own won the race
            // (it saw a late copy): tell it, so that it drops the QPs it made
            // for ours instead of waiting for an RTU that will not come.
            wire::CmMessage rej = cm_template(*ep, wire::CmType::kReject);
            rej.conn_id = m.conn_id;
            rej.first_path = m.first_path;
            rej.reason = wire::RejectReason::kStale;
            rej.text = "that request was abandoned (both sides connected at once)";
            (void)send_cm(*ep, rej);
        }
        return; // an RTU here would bring up the peer's QPs for nothing
    }
    wire::CmMessage rtu = cm_template(*ep, wire::CmType::kReadyToUse);
    rtu.conn_id = m.conn_id;
    rtu.first_path = m.first_path;
    (void)send_cm(*ep, rtu); // if lost, our first RC message tells the peer instead
}

void Module::on_rtu(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    if (ep == nullptr) {
        return;
    }
    for (size_t i = 0; i < ep->paths_.size(); ++i) {
        Path &p = ep->paths_[i];
        if (p.state == PathState::kAwaitRtu && p.peer_conn_id == m.conn_id) {
            path_up(*ep, i);
        }
    }
}

void Module::on_reject(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    if (ep == nullptr) {
        return;
    }
    for (size_t i = 0; i < ep->paths_.size(); ++i) {
        Path &p = ep->paths_[i];
        if (m.reason == wire::RejectReason::kStale) {
            // We answered a stale REQ: the QPs we made for it lead nowhere.
            if (p.state == PathState::kAwaitRtu && p.peer_conn_id == m.conn_id) {
                path_failed(*ep, i, "the peer had abandoned that request");
            }
        } else if (p.state == PathState::kConnecting && p.conn_id == m.conn_id) {
            path_failed(*ep, i, "the peer refused the connection: " + m.text);
        }
    }
}

void Module::path_up(Endpoint &ep, size_t i) {
    Path &p = ep.paths_[i];
    p.state = PathState::kUp;
    p.conn_id = 0;
    p.tries = 0;
    if (p.ever_up) {
        ++p.stats.reconnects;
    }
    p.ever_up = true;
    Status s = apply_lag_port(ep, i);
    if (!s) {
        log_.write(LogLevel::kWarn, util::format("path %zu to %s: %s", i, ep.label().c_str(),
                                                 s.message().c_str()));
    }
    log_.write(LogLevel::kDebug,
               util::format("path %zu to %s up: qpn 0x%x -> 0x%x, source port 0x%04x%s (%s)", i,
                            ep.label().c_str(), p.qpn(), p.remote_qpn, p.spread.sport,
                            p.spread.member >= 0
                                ? util::format(" on member %d", p.spread.member).c_str()
                                : "",
                            ep.path().why.c_str()));
    update_state(ep);
    drain_pending(ep);
    retry_rdma(ep);
}

// The path's QP is in error (or about to be replaced): retire it, so that
// the work requests still on it flush back and are resent on the other
// paths, and try to connect the path again after a short delay.
void Module::path_failed(Endpoint &ep, size_t i, const std::string &why) {
    Path &p = ep.paths_[i];
    if (p.state == PathState::kIdle && !p.qp) {
        return;
    }
    bool was_up = p.state == PathState::kUp;
    if (was_up) {
        ++p.stats.failovers;
    }
    size_t up = 0;
    for (const auto &q : ep.paths_) {
        up += (&q != &p && q.state == PathState::kUp) ? 1 : 0;
    }
    log_.write(was_up ? LogLevel::kWarn : LogLevel::kDebug,
               util::format("path %zu to %s failed: %s; %zu other path(s) up, reconnecting", i,
                            ep.label().c_str(), why.c_str(), up));
    retire_qp(ep, i);
    p.state = PathState::kIdle;
    p.conn_id = 0;
    double delay = cfg_.reconnect_delay_s * (1 << std::min(p.tries, 6));
    p.reconnect_at = now_seconds() + std::min(delay, kMaxReconnectDelay);
    ++p.tries;
    watch(ep);
    update_state(ep);
}

void Module::update_state(Endpoint &ep) {
    if (ep.state_ == EpState::kFailed || ep.state_ == EpState::kClosed) {
        return;
    }
    bool any_up = false;
    for (const auto &p : ep.paths_) {
        any_up = any_up || p.state == PathState::kUp;
    }
    if (any_up) {
        ep.state_ = EpState::kConnected;
    } else if (ep.state_ == EpState::kConnected) {
        // Every path is down: the peer has connect_timeout to come back.
        ep.state_ = EpState::kConnecting;
        ep.deadline_ = now_seconds() + cfg_.connect_timeout_s;
    }
}

void Module::run_timers(double now) {
    for (size_t w = 0; w < watch_.size();) {
        Endpoint &ep = *watch_[w];
        bool busy = false;
        if (ep.state_ == EpState::kConnecting && now >= ep.deadline_) {
            fail_endpoint(ep, util::format(
                                  "connection to %s timed out after %.0f s (REQs from %s:%d "
                                  "gid[%d] %s to %s, UD qpn 0x%x, no reply); check that the "
                                  "peer's RoCE port is up and the two addresses reach each "
                                  "other (roce-doctor --peer %s)",
                                  ep.label().c_str(), cfg_.connect_timeout_s,
                                  plan_.device.c_str(), plan_.port, ep.path().sgid_index,
                                  gid_text(ep.path().sgid).c_str(),
                                  gid_text(ep.path().dgid).c_str(), ep.peer_port().ud_qpn,
                                  gid_text(ep.path().dgid).c_str()));
        }
        for (size_t i = 0; ep.state_ != EpState::kFailed && i < ep.paths_.size(); ++i) {
            Path &p = ep.paths_[i];
            if (p.state == PathState::kConnecting) {
                busy = true;
                if (i == p.batch_first && now >= p.next_retry) {
                    (void)send_cm(ep, handshake(ep, wire::CmType::kRequest, p.conn_id, i,
                                                p.batch_count));
                    for (size_t k = i; k < i + p.batch_count; ++k) {
                        Path &b = ep.paths_[k];
                        ++b.tries;
                        b.retry_interval = std::min(b.retry_interval * 2, kMaxRetryInterval);
                        b.next_retry = now + b.retry_interval;
                    }
                }
            } else if (p.state == PathState::kAwaitRtu) {
                busy = true;
            } else if (p.state == PathState::kIdle && p.reconnect_at > 0) {
                busy = true;
                if (now >= p.reconnect_at) {
                    p.reconnect_at = 0;
                    revalidate_path(ep);
                    Status s = create_path_qp(ep, i);
                    if (s) {
                        request_paths(ep, i, 1);
                    } else {
                        path_failed(ep, i, s.message());
                    }
                }
            }
        }
        if (!busy || ep.state_ == EpState::kFailed) {
            watch_.erase(watch_.begin() + static_cast<long>(w));
        } else {
            ++w;
        }
    }
}

} // namespace roce::btl
