// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_addr.h"

#include <algorithm>

#include "select/gid_rank.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::IpAddress;
using util::Status;

namespace {

LocalGid local_gid(const topo::Snapshot &snap, const topo::GidEntry &g) {
    LocalGid l;
    l.index = g.index;
    l.gid = g.gid;
    l.type = static_cast<uint8_t>(g.type);
    // The prefix of the netdev address the GID carries; 0 ("not known" on
    // the wire) when no address record holds it: a peer then judges by its
    // own prefix, never by an assumed one.
    int prefix = select::local_prefix(snap, g);
    l.prefix_len = static_cast<uint8_t>(prefix > 0 ? prefix : 0);
    l.netdev = g.netdev;
    return l;
}

} // namespace

BondView bond_view(const topo::Snapshot &snap, const std::string &netdev) {
    BondView v;
    const topo::NetdevInfo *nd = snap.find_netdev(netdev);
    if (nd != nullptr && !nd->bond && !nd->parent.empty()) {
        nd = snap.find_netdev(nd->parent);
    }
    if (nd == nullptr || !nd->bond) {
        return v;
    }
    v.bond = nd->name;
    v.mode = nd->bond->mode;
    v.hash_policy = nd->bond->xmit_hash_policy;
    // Plan for the bond as built, not for a member that happens to be down
    // (or an 802.3ad aggregator still forming) at this moment: when it comes
    // back the flows spread again. The kernel hashes over the usable members,
    // which is all of them in the normal state.
    unsigned up = static_cast<unsigned>(nd->bond->slaves.size());
    // Active-backup sends on one member at a time: one path is all it takes.
    if (nd->bond->mode == topo::BondMode::kActiveBackup) {
        up = std::min<unsigned>(up, 1);
    }
    v.members = std::max(1u, up);
    return v;
}

std::vector<PortPlan> plan_ports(std::shared_ptr<const topo::Snapshot> snapshot,
                                 const select::Options &options, bool privileged,
                                 std::vector<std::string> *skipped) {
    std::vector<PortPlan> plans;
    for (const auto &dev : snapshot->devices) {
        for (const auto &port : dev.ports) {
            select::PortChoice pc =
                select::select_port(*snapshot, dev, port, options, nullptr, privileged);
            if (!pc.ok()) {
                if (skipped != nullptr) {
                    skipped->push_back(util::format("%s:%d: %s", dev.name.c_str(), port.port,
                                                    pc.error.c_str()));
                }
                continue;
            }
            const select::Selection &sel = *pc.selection;
            PortPlan p;
            p.device = dev.name;
            p.port = port.port;
            p.pkey_index = sel.pkey_index;
            p.pkey = sel.pkey;
            p.qkey = sel.qkey;
            p.path_mtu = sel.path_mtu;
            // The LAG width: mlx5 reports it; over a Linux bond (rxe, or an
            // mlx5 in hash mode) it is the bond's usable members.
            unsigned members = bond_view(*snapshot, sel.netdev).members;
            p.lag_members = std::max<int>(dev.num_lag_ports, static_cast<int>(members));
            // Advertise every GID the policy ranks, best first: a peer may
            // only share a subnet with the second best.
            std::vector<const select::GidVerdict *> ranked;
            for (const auto &v : pc.gids) {
                if (v.rank >= 0) {
                    ranked.push_back(&v);
                }
            }
            std::stable_sort(ranked.begin(), ranked.end(),
                             [](const auto *a, const auto *b) { return a->rank < b->rank; });
            for (const auto *v : ranked) {
                if (const topo::GidEntry *g = port.find_gid(v->index)) {
                    p.gids.push_back(local_gid(*snapshot, *g));
                }
            }
            p.explanation = pc.explanation();
            p.selection = sel;
            p.snapshot = snapshot;
            p.options = options;
            p.privileged = privileged;
            plans.push_back(std::move(p));
        }
    }
    return plans;
}

select::PeerPort peer_port_of(const wire::PortAdvert &peer) {
    select::PeerPort pp;
    pp.peer.name = util::format("%s:%u", peer.device.c_str(), peer.port);
    for (const auto &g : peer.gids) {
        select::PeerAddress pa;
        pa.address = IpAddress::from_gid(g.gid);
        pa.prefix_len = g.prefix_len > 0 ? g.prefix_len : -1;
        pa.type = static_cast<topo::GidType>(g.type);
        pp.peer.addresses.push_back(pa);
    }
    pp.path_mtu = static_cast<ibv_mtu>(peer.path_mtu);
    return pp;
}

bool on_link(const topo::Snapshot &snapshot, const PathChoice &choice, const wire::Gid &peer,
             int peer_prefix_len) {
    select::PeerAddress pa;
    pa.address = IpAddress::from_gid(peer);
    pa.prefix_len = peer_prefix_len;
    pa.type = choice.selection.gid_type;
    return select::on_link(snapshot, choice.selection, pa);
}

util::Result<PathChoice> choose_path(const PortPlan &plan, const topo::Snapshot &snapshot,
                                     const wire::PortAdvert &peer) {
    select::PathDecision d = select::select_path(snapshot, {plan.device, plan.port}, plan.options,
                                                 peer_port_of(peer), plan.privileged);
    if (!d.ok()) {
        return Status(Code::kUnavailable, d.error);
    }
    PathChoice c;
    c.selection = std::move(*d.selection);
    c.dgid = d.remote_gid;
    c.remote_prefix_len = d.remote_prefix_len;
    // One line per peer: the port's full reasoning was logged once already.
    c.why = util::format("gid[%d] %s (%s, %s) -> %s:%u %s, mtu %d", c.sgid_index(),
                         IpAddress::from_gid(c.sgid()).to_string().c_str(),
                         topo::to_string(c.selection.gid_type), c.selection.netdev.c_str(),
                         peer.device.c_str(), peer.port,
                         IpAddress::from_gid(c.dgid).to_string().c_str(), 128 << c.path_mtu());
    return c;
}

wire::PortAdvert advertise(const PortPlan &plan, uint32_t ud_qpn) {
    wire::PortAdvert a;
    a.device = plan.device;
    a.port = static_cast<uint8_t>(plan.port);
    a.lag_members = static_cast<uint8_t>(plan.lag_members);
    a.path_mtu = static_cast<uint8_t>(plan.path_mtu);
    a.ud_qpn = ud_qpn;
    a.qkey = plan.qkey;
    for (const LocalGid &l : plan.gids) {
        if (a.gids.size() >= wire::kMaxGidsPerPort) {
            break;
        }
        a.gids.push_back({l.gid, l.type, l.prefix_len, static_cast<uint16_t>(l.index)});
    }
    return a;
}

} // namespace roce::btl
