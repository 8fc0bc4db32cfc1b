// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module as the connection manager's host (connection/manager.h): the
// verbs side of each handshake step - address handles, RC QPs created,
// paired over the LAG, connected and retired - and what the data path does
// when a path comes up, goes down or a peer fails. The handshake itself
// (REQ/REP/RTU/REJECT, races, retries) is the manager's.
#include "btl_roce_module.h"

#include <algorithm>
#include <atomic>

#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

namespace {

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

} // namespace

Status Module::ensure_ah(Endpoint &ep) {
    if (ep.ah_) {
        return Status::ok();
    }
    qp::QpParams params;
    ibv_ah_attr a = qp::build_ah_attr(ep.path().selection, ep.path().dgid, params);
    // Address handles go through the same checks as QP transitions, against
    // the same shared view (no machine read here).
    auto snap = env_.snapshots();
    if (snap) {
        qp::PreflightResult pf = qp::preflight_ah(**snap, ep.path().selection, a);
        for (const auto &c : pf.corrections) {
            log_.write(LogLevel::kInfo, "address handle to " + ep.label + ": " + c);
        }
        if (!pf.ok()) {
            std::vector<std::string> why;
            for (const auto &p : pf.problems) {
                why.push_back(p.message + "; " + p.fix);
            }
            return Status(Code::kUnavailable, "ibv_create_ah to " + ep.label +
                                                  " refused before the call: " +
                                                  util::join(why, "; "));
        }
    }
    ibv_ah *ah = dev_->api().create_ah(dev_->pd(), &a);
    if (ah == nullptr) {
        return Status::from_errno(errno, util::format("ibv_create_ah on %s:%d gid[%d] %s -> %s",
                                                      plan_.device.c_str(), plan_.port,
                                                      a.grh.sgid_index,
                                                      gid_text(ep.path().sgid()).c_str(),
                                                      gid_text(ep.path().dgid).c_str()));
    }
    ep.ah_ = verbs::Ah(ah, verbs::AhDeleter{&dev_->api(), &log_});
    // Preflight followed our GID to its new slot (the bond's addresses were
    // rewritten, e.g. at an active-backup failover): the endpoint's one
    // Selection follows, so RC QPs made from now on start from the new index.
    ep.path_.selection.gid_index = a.grh.sgid_index;
    return Status::ok();
}

std::shared_ptr<const topo::Snapshot> Module::current_view() {
    auto view = env_.snapshots();
    if (!view) {
        log_.write(LogLevel::kDebug, "no current view of the machine, using the last one: " +
                                         view.status().message());
        return plan_.snapshot;
    }
    plan_.snapshot = std::move(view.value());
    return plan_.snapshot;
}

// Is our address still in the table? select::revalidate judges the
// endpoint's Selection against the current view: a GID (or pkey) that only
// moved to another slot is followed; one that is gone makes the policy
// choose again. The peer learns our new address from the next REQ
// (peer_moved on its side).
bool Module::revalidate_path(Endpoint &ep, const std::shared_ptr<const topo::Snapshot> &given) {
    std::shared_ptr<const topo::Snapshot> snap = given ? given : current_view();
    if (!snap) {
        return false;
    }
    select::Revalidation r = select::revalidate(ep.path_.selection, *snap);
    if (r.validity == select::Validity::kUnchanged) {
        return false;
    }
    if (r.validity == select::Validity::kMoved) {
        log_.write(LogLevel::kInfo,
                   util::format("%s: %s", ep.label.c_str(), r.why.c_str()));
        ep.path_.selection = r.selection;
        ep.ah_.reset();
        return false;
    }
    auto choice = choose_path(plan_, *snap, ep.peer_port_);
    if (!choice) {
        report("address changed",
               util::format("%s: our address %s is gone (%s) and no other reaches the peer: %s",
                            ep.label.c_str(), gid_text(ep.path_.sgid()).c_str(), r.why.c_str(),
                            choice.status().message().c_str()));
        return false;
    }
    PathChoice c = choice.value();
    // A peer address learned from the peer itself is newer than its modex
    // record: keep it while it is on the new GID's link.
    if (ep.dgid_learned_ && on_link(*snap, c, ep.path_.dgid, ep.path_.remote_prefix_len)) {
        c.dgid = ep.path_.dgid;
        c.remote_prefix_len = ep.path_.remote_prefix_len;
    } else {
        ep.dgid_learned_ = false;
    }
    log_.write(LogLevel::kInfo, util::format("%s: our address %s is gone (%s); now gid[%d] %s -> %s",
                                             ep.label.c_str(), gid_text(ep.path_.sgid()).c_str(),
                                             r.why.c_str(), c.sgid_index(),
                                             gid_text(c.sgid()).c_str(), gid_text(c.dgid).c_str()));
    set_path_choice(ep, c);
    return true;
}

void Module::set_path_choice(Endpoint &ep, const PathChoice &c) {
    ep.path_ = c;
    ep.ah_.reset();
    BondView bond = bond_view(*plan_.snapshot, c.selection.netdev);
    ep.spread_model_ = spread_model(bond.members, bond.hash_policy,
                                    util::IpAddress::from_gid(c.sgid()),
                                    util::IpAddress::from_gid(c.dgid));
}

void Module::start_connect(Endpoint &ep) {
    if (ep.state == EpState::kClosed) {
        cm_->connect(ep); // a handshake, or for ourselves wire_loopback
    }
}

Status Module::wire_loopback(Peer &peer, size_t i) {
    // Loopback through the NIC (osc/rdma needs it): two QPs wired to each
    // other, no handshake. Used at first use and after the pair failed.
    Endpoint &ep = ep_of(peer);
    Path &p = ep.paths_[i];
    Status s = create_path_qp(ep, i);
    if (s) {
        p.loop_peer = std::move(p.qp);
        s = create_path_qp(ep, i);
        if (s) {
            dp_->map_qp(p.loop_peer->get()->qp_num, ep, i);
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

void Module::handle_cm(const uint8_t *grh, const uint8_t *data, size_t len) {
    wire::Gid from{};
    bool known = wire::grh_source_gid(grh, &from);
    cm_->on_datagram(known ? &from : nullptr, data, len);
}

// ------------------------------------------------------------- CmHost ---

double Module::now() const { return clock(); }

Status Module::send_cm(Peer &peer, const std::vector<uint8_t> &bytes) {
    Endpoint &ep = ep_of(peer);
    Status s = ensure_ah(ep);
    if (!s) {
        return s;
    }
    return dev_->ud_send(ep.ah_.get(), ep.peer_port().ud_qpn, ep.peer_port().qkey, bytes.data(),
                         bytes.size());
}

void Module::address(const Peer &peer, wire::CmMessage &m) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    m.path_mtu = static_cast<uint8_t>(ep.path().path_mtu());
    m.src_gid = ep.path().sgid();
    m.dst_gid = ep.path().dgid;
}

size_t Module::paths_wanted(const Peer &peer) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    if (ep.is_self() || cfg_.lag_policy == LagPolicy::kOff) {
        return 1;
    }
    unsigned n = cfg_.num_paths != 0 ? cfg_.num_paths
                                     : static_cast<unsigned>(std::max(1, plan_.lag_members));
    return std::min<size_t>(n, wire::kMaxPaths);
}

Result<LocalQp> Module::open_qp(Peer &peer, size_t i) {
    Endpoint &ep = ep_of(peer);
    Status s = create_path_qp(ep, i);
    if (!s) {
        return s;
    }
    return LocalQp{ep.paths_[i].qpn(), ep.paths_[i].local_psn};
}

Status Module::accept_qps(Peer &peer, size_t first, const std::vector<wire::PathInfo> &remote,
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

Status Module::connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) {
    Endpoint &ep = ep_of(peer);
    Path &p = ep.paths_[i];
    if (!p.qp) {
        return Status(Code::kInternal, util::format("path %zu to %s has no QP", i,
                                                    ep.label.c_str()));
    }
    return connect_path_qp(ep, p, *p.qp, remote.qpn, remote.psn);
}

void Module::path_up(Peer &peer, size_t i, uint32_t credits, bool reconnected) {
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
    dp_->path_up(ep);
}

void Module::path_lost(Peer &peer, size_t i) {
    ++ep_of(peer).paths_[i].tx.stats.failovers;
    // Explained once per process. Only the explanation: every failure has
    // its own warning line already (the manager's), so no error line.
    static std::atomic<bool> shown{false};
    if (!shown.exchange(true) && env_.report) {
        env_.report("path failed", util::format("%s:%d: path %zu to %s", plan_.device.c_str(),
                                                plan_.port, i, ep_of(peer).label.c_str()));
    }
}

void Module::peer_moved(Peer &peer, const wire::Gid &from) {
    Endpoint &ep = ep_of(peer);
    if (from == ep.path_.dgid) {
        return;
    }
    log_.write(LogLevel::kInfo, util::format("%s moved from %s to %s: addressing it there",
                                             ep.label.c_str(), gid_text(ep.path_.dgid).c_str(),
                                             gid_text(from).c_str()));
    // The prefix of the new address: the peer's own, when its modex
    // advertised that address; else none (our prefix alone judges).
    wire::PortAdvert only = ep.peer_port_;
    only.gids.clear();
    for (const auto &g : ep.peer_port_.gids) {
        if (g.gid == from) {
            only.gids.push_back(g);
        }
    }
    if (only.gids.empty()) {
        wire::GidAdvert g;
        g.gid = from;
        g.type = ep.path_.gid_type();
        g.prefix_len = 0; // not known
        only.gids.push_back(g);
    }
    int prefix = only.gids.front().prefix_len > 0 ? only.gids.front().prefix_len : -1;
    PathChoice c = ep.path_;
    c.dgid = from;
    c.remote_prefix_len = prefix;
    std::shared_ptr<const topo::Snapshot> snap = current_view();
    if (!on_link(*snap, c, from, prefix)) {
        // The peer now speaks from another subnet (its address moved to the
        // VLAN, say): answer from our GID on that subnet, as the policy
        // would have chosen for that address.
        auto choice = choose_path(plan_, *snap, only);
        if (!choice) {
            report("no reachable gid",
                   util::format("%s moved to %s, which no local GID reaches: %s",
                                ep.label.c_str(), gid_text(from).c_str(),
                                choice.status().message().c_str()));
            return;
        }
        c = choice.value();
    }
    set_path_choice(ep, c);
    ep.dgid_learned_ = true;
}

bool Module::revalidate(Peer &peer, bool thorough) {
    Endpoint &ep = ep_of(peer);
    if (!thorough && ensure_ah(ep).code() != Code::kUnavailable) {
        return false;
    }
    return revalidate_path(ep);
}

std::string Module::route(const Peer &peer) const {
    const Endpoint &ep = static_cast<const Endpoint &>(peer);
    return util::format("REQs from %s:%d gid[%d] %s to %s, UD qpn 0x%x, no reply; check that the "
                        "peer's RoCE port is up and the two addresses reach each other "
                        "(roce-doctor --peer %s)",
                        plan_.device.c_str(), plan_.port, ep.path().sgid_index(),
                        gid_text(ep.path().sgid()).c_str(), gid_text(ep.path().dgid).c_str(),
                        ep.peer_port().ud_qpn, gid_text(ep.path().dgid).c_str());
}

Peer *Module::find_peer(uint64_t name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end() || it->second->is_self()) {
        return nullptr;
    }
    return it->second;
}

} // namespace roce::btl
