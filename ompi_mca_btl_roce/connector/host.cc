// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The Connector as the connection manager's host (connection/manager.h):
// the verbs side of each handshake step - messages over the UD QP, RC QPs
// opened, accepted, connected, wired for loopback - and what the data path
// does when a path comes up, goes down or a peer fails. The handshake itself
// (REQ/REP/RTU/REJECT, races, retries) is the manager's.
#include "connector/connector.h"

#include <algorithm>
#include <atomic>

#include "btl_roce_module.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

Connector::Connector(ConnectorEnv env, const CmIdentity &me, util::LogSink &log)
    : env_(std::move(env)), plan_(*env_.plan), cfg_(*env_.cfg), dev_(*env_.dev),
      retirement_(*env_.retirement), dp_(*env_.dp), eps_(*env_.endpoints), log_(log) {
    CmConfig cc;
    cc.connect_timeout_s = cfg_.connect_timeout_s;
    cc.connect_retry_s = cfg_.connect_retry_s;
    cc.reconnect_delay_s = cfg_.reconnect_delay_s;
    cc.credits = cfg_.credits_per_peer;
    CmHost &host = *this;
    cm_ = std::make_unique<ConnectionManager>(host, me, cc, log);
    // Queue affinity needs an mlx5 device in LAG mode (num_lag_ports > 1);
    // everywhere else paths are spread by UDP source port.
    if (const topo::DeviceInfo *di = plan_.snapshot ? plan_.snapshot->find_device(plan_.device)
                                                    : nullptr) {
        lag_affinity_ = di->num_lag_ports > 1 && cfg_.lag_policy != LagPolicy::kOff &&
                        cfg_.lag_policy != LagPolicy::kSport;
    }
    if (cfg_.lag_policy == LagPolicy::kAffinity && !lag_affinity_) {
        log_.write(LogLevel::kWarn,
                   util::format("%s:%d: btl_roce_lag_policy = affinity, but the device has no "
                                "queue-affinity LAG (mlx5dv num_lag_ports <= 1, e.g. not mlx5): "
                                "paths are spread by UDP source port instead",
                                plan_.device.c_str(), plan_.port));
    }
}

// The manager goes first: nothing it does may reach a QP any more.
Connector::~Connector() { cm_.reset(); }

void Connector::start_connect(Endpoint &ep) {
    if (ep.state == EpState::kClosed) {
        cm_->connect(ep); // a handshake, or for ourselves wire_loopback
    }
}

Status Connector::wire_loopback(Peer &peer, size_t i) {
    // Loopback through the NIC (osc/rdma needs it): two QPs wired to each
    // other, no handshake. Used at first use and after the pair failed.
    Endpoint &ep = ep_of(peer);
    Path &p = ep.paths_[i];
    Status s = create_path_qp(ep, i);
    if (s) {
        p.loop_peer = std::move(p.qp);
        s = create_path_qp(ep, i);
        if (s) {
            dp_.map_qp(p.loop_peer->get()->qp_num, ep, i);
            s = connect_path_qp(ep, p, *p.qp, p.loop_peer->get()->qp_num, p.local_psn);
            if (s) {
                s = connect_path_qp(ep, p, *p.loop_peer, p.qpn(), p.local_psn);
            }
        }
    }
    if (!s) {
        retire_qp(ep, i);
        return s;
    }
    p.local_qpn = p.qpn();
    p.remote_qpn = p.loop_peer->get()->qp_num;
    return Status::ok();
}

double Connector::now() const { return env_.clock(); }

Status Connector::send_cm(Peer &peer, const std::vector<uint8_t> &bytes) {
    Endpoint &ep = ep_of(peer);
    Status s = ensure_ah(ep);
    if (!s) {
        return s;
    }
    return dev_.ud_send(ep.ah_.get(), ep.peer_port().ud_qpn, ep.peer_port().qkey, bytes.data(),
                         bytes.size());
}

void Connector::address(const Peer &peer, wire::CmMessage &m) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    m.path_mtu = static_cast<uint8_t>(ep.path().path_mtu());
    m.src_gid = ep.path().sgid();
    m.dst_gid = ep.path().dgid;
}

size_t Connector::paths_wanted(const Peer &peer) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    if (ep.is_self() || cfg_.lag_policy == LagPolicy::kOff) {
        return 1;
    }
    unsigned n = cfg_.num_paths != 0 ? cfg_.num_paths
                                     : static_cast<unsigned>(std::max(1, plan_.lag_members));
    return std::min<size_t>(n, wire::kMaxPaths);
}

Result<LocalQp> Connector::open_qp(Peer &peer, size_t i) {
    Endpoint &ep = ep_of(peer);
    Status s = create_path_qp(ep, i);
    if (!s) {
        return s;
    }
    return LocalQp{ep.paths_[i].qpn(), ep.paths_[i].local_psn};
}

Status Connector::accept_qps(Peer &peer, size_t first, const std::vector<wire::PathInfo> &remote,
                          std::vector<LocalQp> *local) {
    Endpoint &ep = ep_of(peer);
    std::vector<std::unique_ptr<qp::QueuePair>> spares;
    local->clear();
    for (size_t k = 0; k < remote.size(); ++k) {
        size_t i = first + k;
        Path &p = ep.paths_[i];
        Status s = create_paired_qp(ep, i, remote[k].qpn, spares);
        if (s) {
            s = connect_path_qp(ep, p, *p.qp, remote[k].qpn, remote[k].psn);
        }
        if (!s) {
            for (size_t j = first; j <= i; ++j) {
                retire_qp(ep, j);
            }
            return s;
        }
        local->push_back({p.qpn(), p.local_psn});
    }
    return Status::ok();
}

Status Connector::connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) {
    Endpoint &ep = ep_of(peer);
    Path &p = ep.paths_[i];
    if (!p.qp) {
        return Status(Code::kInternal, util::format("path %zu to %s has no QP", i,
                                                    ep.label.c_str()));
    }
    return connect_path_qp(ep, p, *p.qp, remote.qpn, remote.psn);
}

void Connector::path_up(Peer &peer, size_t i, uint32_t credits, bool reconnected) {
    Endpoint &ep = ep_of(peer);
    Path &p = ep.paths_[i];
    p.tx.credits.set_initial(credits);
    if (reconnected) {
        ++p.tx.stats.reconnects;
    }
    Status s = apply_lag_port(ep, i);
    if (!s) {
        log_.write(LogLevel::kWarn, util::format("path %zu to %s: %s", i, ep.label.c_str(),
                                                 s.message().c_str()));
    }
    log_.write(LogLevel::kDebug,
               util::format("path %zu to %s up: qpn 0x%x -> 0x%x, source port 0x%04x%s (%s)", i,
                            ep.label.c_str(), p.qpn(), p.remote_qpn, p.tx.spread.sport,
                            p.tx.spread.member >= 0
                                ? util::format(" on member %d", p.tx.spread.member).c_str()
                                : "",
                            ep.path().why.c_str()));
    if (env_.reach_changed) {
        env_.reach_changed(ep, true);
    }
    dp_.path_up(ep);
}

void Connector::path_lost(Peer &peer, size_t i) {
    ++ep_of(peer).paths_[i].tx.stats.failovers;
    bool any_up = false;
    for (size_t k = 0; k < peer.path_count(); ++k) {
        any_up = any_up || peer.path_conn(k).state == PathState::kUp;
    }
    if (!any_up && env_.reach_changed) {
        env_.reach_changed(ep_of(peer), false);
    }
    // Explained once per process. Only the explanation: every failure has
    // its own warning line already (the manager's), so no error line.
    static std::atomic<bool> shown{false};
    if (!shown.exchange(true) && env_.explain) {
        env_.explain("path failed", util::format("%s:%d: path %zu to %s", plan_.device.c_str(),
                                                plan_.port, i, ep_of(peer).label.c_str()));
    }
}

void Connector::peer_failed(Peer &peer, const std::string &why) {
    Endpoint &ep = ep_of(peer);
    if (env_.reach_changed) {
        env_.reach_changed(ep, false);
    }
    env_.report("connection failed",
           util::format("%s:%d: connection to %s failed: %s", plan_.device.c_str(), plan_.port,
                        ep.label.c_str(), why.c_str()));
    dp_.fail_endpoint(
        ep, util::format("roce %s:%d: %s", plan_.device.c_str(), plan_.port, why.c_str()));
}

bool Connector::reached_elsewhere(const Peer &peer) const {
    return env_.reached_elsewhere &&
           env_.reached_elsewhere(static_cast<const Endpoint &>(peer));
}

std::string Connector::route(const Peer &peer) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    return util::format("REQs from %s:%d gid[%d] %s to %s, UD qpn 0x%x, no reply; check that the "
                        "peer's RoCE port is up and the two addresses reach each other "
                        "(roce-doctor --peer %s)",
                        plan_.device.c_str(), plan_.port, ep.path().sgid_index(),
                        gid_text(ep.path().sgid()).c_str(), gid_text(ep.path().dgid).c_str(),
                        ep.peer_port().ud_qpn, gid_text(ep.path().dgid).c_str());
}

Peer *Connector::find_peer(uint64_t name) {
    auto it = eps_.by_name.find(name);
    if (it == eps_.by_name.end() || it->second->is_self()) {
        return nullptr;
    }
    return it->second;
}

} // namespace roce::btl
