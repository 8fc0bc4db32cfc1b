// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The addressing of a Connector's endpoints: each has one Selection, chosen
// by common/select from the shared view of the machine (never a machine
// read of its own), revalidated against the current view before a path is
// connected and when the monitor says addresses changed, and followed when
// the peer speaks from a new address. Address handles to the peers' UD QPs
// are preflighted against the same view.
#include "connector/connector.h"

#include <algorithm>

#include "btl_roce_module.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Status;

namespace {

uint64_t name_of(const opal_process_name_t &pn) {
    return (static_cast<uint64_t>(pn.jobid) << 32) | pn.vpid;
}

} // namespace

Status Connector::ensure_ah(Endpoint &ep) {
    if (ep.ah_) {
        return Status::ok();
    }
    auto ah = make_ah(ep.path_, ep.label);
    if (!ah) {
        return ah.status();
    }
    ep.ah_ = std::move(ah.value());
    return Status::ok();
}

util::Result<uint32_t> Connector::dc_dest(const PathChoice &path) {
    auto it = dc_dest_by_gid_.find(path.dgid);
    if (it != dc_dest_by_gid_.end()) {
        return it->second;
    }
    PathChoice p = path;
    auto ah = make_ah(p, "the DC peers at " + gid_text(path.dgid));
    if (!ah) {
        return ah.status();
    }
    auto index = static_cast<uint32_t>(dc_dests_.size());
    dc_dests_.push_back(std::move(ah.value()));
    dc_dest_by_gid_.emplace(path.dgid, index);
    return index;
}

util::Result<verbs::Ah> Connector::make_ah(PathChoice &path, const std::string &who) {
    qp::QpParams params;
    ibv_ah_attr a = qp::build_ah_attr(path.selection, path.dgid, params);
    // Address handles go through the same checks as QP transitions, against
    // the same shared view (no machine read here).
    auto snap = env_.snapshots();
    if (snap) {
        qp::PreflightResult pf = qp::preflight_ah(**snap, path.selection, a);
        for (const auto &c : pf.corrections) {
            log_.write(LogLevel::kInfo, "address handle to " + who + ": " + c);
        }
        if (!pf.ok()) {
            std::vector<std::string> why;
            for (const auto &p : pf.problems) {
                why.push_back(p.message + "; " + p.fix);
            }
            return Status(Code::kUnavailable,
                          "ibv_create_ah to " + who +
                              " refused before the call: " + util::join(why, "; "));
        }
    }
    ibv_ah *ah = dev_.api().create_ah(dev_.pd(), &a);
    if (ah == nullptr) {
        return Status::from_errno(
            errno, util::format("ibv_create_ah on %s:%d gid[%d] %s -> %s", plan_.device.c_str(),
                                plan_.port, a.grh.sgid_index, gid_text(path.sgid()).c_str(),
                                gid_text(path.dgid).c_str()));
    }
    // Preflight followed our GID to its new slot (the bond's addresses were
    // rewritten, e.g. at an active-backup failover): the endpoint's one
    // Selection follows, so RC QPs made from now on start from the new index.
    path.selection.gid_index = a.grh.sgid_index;
    return verbs::Ah(ah, verbs::AhDeleter{&dev_.api(), &log_});
}

std::shared_ptr<const topo::Snapshot> Connector::current_view() {
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
bool Connector::revalidate_path(Endpoint &ep, const std::shared_ptr<const topo::Snapshot> &given) {
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
        env_.report("address changed",
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

void Connector::set_path_choice(Endpoint &ep, const PathChoice &c) {
    ep.path_ = c;
    ep.ah_.reset();
    BondView bond = bond_view(*plan_.snapshot, c.selection.netdev);
    ep.spread_model_ = spread_model(bond.members, bond.hash_policy,
                                    util::IpAddress::from_gid(c.sgid()),
                                    util::IpAddress::from_gid(c.dgid));
}

void Connector::peer_moved(Peer &peer, const wire::Gid &from) {
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
            env_.report("no reachable gid",
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

bool Connector::revalidate(Peer &peer, bool thorough) {
    Endpoint &ep = ep_of(peer);
    if (!thorough && ensure_ah(ep).code() != Code::kUnavailable) {
        return false;
    }
    return revalidate_path(ep);
}

std::optional<Connector::PortPick> Connector::choose_port(const wire::ModexAddress &addr,
                                                          std::string *why) {
    std::vector<std::string> reasons;
    // New endpoints choose from the machine as it is now.
    std::shared_ptr<const topo::Snapshot> view = current_view();
    for (size_t i = 0; i < addr.ports.size(); ++i) {
        const wire::PortAdvert &pp = addr.ports[i];
        if (pp.qkey != plan_.qkey) {
            reasons.push_back(util::format("peer port %s:%u uses qkey %s, we use %s (set "
                                           "btl_roce_qkey the same everywhere)",
                                           util::printable(pp.device).c_str(), pp.port,
                                           util::hex32(pp.qkey).c_str(),
                                           util::hex32(plan_.qkey).c_str()));
            continue;
        }
        auto path = choose_path(plan_, *view, pp);
        if (!path) {
            reasons.push_back(path.status().message());
            continue;
        }
        return PortPick{i, path.value()};
    }
    *why = util::join(reasons, "; ");
    return std::nullopt;
}

Endpoint *Connector::add_endpoint(opal_proc_t *proc, const wire::ModexAddress &addr,
                                  std::string *why) {
    auto pick = choose_port(addr, why);
    return pick ? add_endpoint_at(proc, addr, *pick) : nullptr;
}

Endpoint *Connector::add_endpoint_at(opal_proc_t *proc, const wire::ModexAddress &addr,
                                     const PortPick &pick) {
    const wire::PortAdvert &pp = addr.ports.at(pick.port);
    uint64_t name = name_of(proc->proc_name);
    auto ep = std::make_unique<Endpoint>(cfg_.seq_span, proc, name,
                                         static_cast<uint16_t>(pick.port), pp, pick.path);
    ep->loopback = (name == env_.self_name);
    ep->token = addr.token;
    BondView bond = bond_view(*plan_.snapshot, ep->path().selection.netdev);
    ep->spread_model_ =
        spread_model(bond.members, bond.hash_policy, util::IpAddress::from_gid(ep->path().sgid()),
                     util::IpAddress::from_gid(ep->path().dgid));
    log_.write(LogLevel::kDebug, util::format("%s:%d -> %s: %s", plan_.device.c_str(), plan_.port,
                                              ep->label.c_str(), ep->path().why.c_str()));
    Endpoint *raw = ep.get();
    eps_.all.push_back(std::move(ep));
    eps_.by_name[name] = raw;
    return raw;
}

// A REQ with our token came from a name we have no endpoint for: a process
// of our job that Open MPI has not added yet (remote procs are added
// lazily). Only names of our own job, within its size, are looked up, and
// not here: the lookup reads the modex (which may block on the PMIx server)
// and may allocate an opal_proc_t, so it runs in progress() without the
// module lock (resolve_lookups). The requester's next REQ finds the endpoint.
bool Connector::unknown_requester(uint64_t name) {
    if (eps_.by_name.count(name) != 0) {
        return true; // ourselves (no handshake with the loopback endpoint)
    }
    uint32_t jobid = static_cast<uint32_t>(name >> 32);
    uint32_t vpid = static_cast<uint32_t>(name & 0xffffffffu);
    const bool ours = jobid == static_cast<uint32_t>(env_.self_name >> 32) &&
                      (env_.self_job_size == 0 || vpid < env_.self_job_size);
    if ((!ours && lookup_allowed_.count(name) == 0) || lookup_failed_.count(name) != 0) {
        return false;
    }
    if (std::find(lookups_.begin(), lookups_.end(), name) == lookups_.end() &&
        lookups_.size() < kMaxLookups) {
        lookups_.push_back(name);
    }
    return true;
}

std::vector<uint64_t> Connector::take_lookups() {
    std::vector<uint64_t> names;
    names.swap(lookups_);
    return names;
}

void Connector::readdress() {
    // The cache has been told what changed (netmon::feed_cache): this view
    // re-reads just that (a device, or the netdevs), not the machine.
    std::shared_ptr<const topo::Snapshot> view = current_view();
    if (!view) {
        return;
    }
    // Endpoints whose GID is gone choose again now, and their paths that
    // are up reconnect from the new address at once: a side that only
    // answers RDMA reads would never see an error on the old one.
    for (auto &ep : eps_.all) {
        // A DC peer has no path, and its address handle is its GID's,
        // shared (dc_dest): nothing to reconnect.
        if (!ep->is_self() && !ep->dc() && revalidate_path(*ep, view)) {
            cm_->readdressed(*ep);
        }
    }
}

} // namespace roce::btl
