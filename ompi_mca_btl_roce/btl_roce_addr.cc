// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_addr.h"

#include <algorithm>

#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::IpAddress;
using util::Status;
using util::Subnet;

namespace {

int prefix_of(const topo::Snapshot &snap, const topo::GidEntry &g) {
    IpAddress a = g.address();
    if (const topo::NetdevInfo *nd = snap.find_netdev(g.netdev)) {
        for (const auto &ad : nd->addresses) {
            if (ad.address == a) {
                return ad.prefix_len;
            }
        }
    }
    return a.is_v4() ? 32 : 64; // no address record: the GID alone
}

const topo::GidEntry *find_gid(const topo::PortInfo &port, int index) {
    for (const auto &g : port.gids) {
        if (g.index == index) {
            return &g;
        }
    }
    return nullptr;
}

LocalGid local_gid(const topo::Snapshot &snap, const topo::GidEntry &g) {
    LocalGid l;
    l.index = g.index;
    l.gid = g.gid;
    l.type = static_cast<uint8_t>(g.type);
    l.prefix_len = static_cast<uint8_t>(prefix_of(snap, g));
    l.netdev = g.netdev;
    return l;
}

// Two addresses of one family are on the same link when either side's
// prefix puts the other inside it.
bool same_subnet(const IpAddress &a, int a_len, const IpAddress &b, int b_len) {
    if (a.family() != b.family()) {
        return false;
    }
    return Subnet::of(a, a_len).contains(b) || Subnet::of(b, b_len).contains(a);
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
                if (const topo::GidEntry *g = find_gid(port, v->index)) {
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

bool on_link(const PortPlan &plan, const PathChoice &choice, const wire::Gid &peer) {
    IpAddress la = IpAddress::from_gid(choice.sgid);
    int len = la.bits();
    if (const topo::DeviceInfo *dev = plan.snapshot->find_device(plan.device)) {
        if (const topo::PortInfo *port = dev->find_port(plan.port)) {
            if (const topo::GidEntry *g = find_gid(*port, choice.sgid_index)) {
                len = prefix_of(*plan.snapshot, *g);
            }
        }
    }
    return same_subnet(la, len, IpAddress::from_gid(peer), len);
}

util::Result<PathChoice> choose_path(const PortPlan &plan, const wire::PortAdvert &peer) {
    const topo::DeviceInfo *dev = plan.snapshot->find_device(plan.device);
    const topo::PortInfo *port = nullptr;
    if (dev != nullptr) {
        for (const auto &p : dev->ports) {
            if (p.port == plan.port) {
                port = &p;
            }
        }
    }
    if (port == nullptr) {
        return Status(Code::kNotFound, plan.device + " is no longer in the snapshot");
    }
    select::Peer sp;
    sp.name = util::format("%s:%u", peer.device.c_str(), peer.port);
    for (const auto &g : peer.gids) {
        select::PeerAddress pa;
        pa.address = IpAddress::from_gid(g.gid);
        pa.prefix_len = g.prefix_len;
        pa.type = static_cast<topo::GidType>(g.type);
        sp.addresses.push_back(pa);
    }
    select::PortChoice pc = select::select_port(*plan.snapshot, *dev, *port, plan.options, &sp,
                                                plan.privileged);
    if (!pc.ok()) {
        return Status(Code::kUnavailable, pc.error);
    }
    const select::Selection &sel = *pc.selection;
    IpAddress la = IpAddress::from_gid(sel.gid);
    const topo::GidEntry *lg = find_gid(*port, sel.gid_index);
    int l_len = lg ? prefix_of(*plan.snapshot, *lg) : la.bits();
    // The peer GID: same type and family, on our link; with a forced index
    // (routed RoCE v2) the first of the right type and family.
    const wire::GidAdvert *best = nullptr;
    for (const auto &g : peer.gids) {
        IpAddress ra = IpAddress::from_gid(g.gid);
        if (g.type != static_cast<uint8_t>(sel.gid_type) || ra.family() != la.family()) {
            continue;
        }
        if (same_subnet(la, l_len, ra, g.prefix_len)) {
            best = &g;
            break;
        }
        if (best == nullptr && plan.options.gid_index >= 0) {
            best = &g;
        }
    }
    if (best == nullptr) {
        return Status(Code::kUnavailable,
                      util::format("selected gid[%d] %s but the peer advertises no %s GID of that "
                                   "family on its link",
                                   sel.gid_index, la.to_string().c_str(),
                                   topo::to_string(sel.gid_type)));
    }
    PathChoice c;
    c.sgid_index = sel.gid_index;
    c.sgid = sel.gid;
    c.dgid = best->gid;
    c.gid_type = static_cast<uint8_t>(sel.gid_type);
    c.path_mtu = std::min<int>(sel.path_mtu, peer.path_mtu);
    c.selection = sel;
    c.selection.path_mtu = static_cast<ibv_mtu>(c.path_mtu);
    // One line per peer: the port's full reasoning was logged once already.
    c.why = util::format("gid[%d] %s (%s, %s) -> %s:%u %s, mtu %d", sel.gid_index,
                         la.to_string().c_str(), topo::to_string(sel.gid_type),
                         sel.netdev.c_str(), peer.device.c_str(), peer.port,
                         IpAddress::from_gid(best->gid).to_string().c_str(),
                         128 << c.path_mtu);
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
