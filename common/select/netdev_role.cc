// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/netdev_role.h"

namespace roce::select {

namespace {

/// Why a netdev of this kind does not carry the port's RoCE traffic; ""
/// for the kinds that may (a physical netdev, a bond, a VLAN).
std::string overlay_why(const topo::NetdevInfo &nd) {
    const std::string &k = nd.kind;
    const std::string on = nd.parent.empty() ? std::string() : " on " + nd.parent;
    if (k == "vxlan") {
        return "a VXLAN overlay: the NIC does not encapsulate RoCE";
    }
    if (k == "geneve") {
        return "a Geneve overlay: the NIC does not encapsulate RoCE";
    }
    if (k == "macvlan" || k == "macvtap") {
        return "a " + k + on + ": RoCE does not pass through the software device";
    }
    if (k == "ipvlan" || k == "ipvtap") {
        return "an " + k + on + ": RoCE does not pass through the software device";
    }
    if (k == "bridge") {
        return "a bridge: RoCE does not pass through the software bridge";
    }
    if (k == "team") {
        return "a team device: the NIC offloads RoCE for bonds only";
    }
    if (k.empty() && !nd.parent.empty()) {
        // sysfs shows a lower_* link but no DEVTYPE for macvlan and ipvlan.
        return "a software device on " + nd.parent +
               " (sysfs does not say which kind): RoCE does not pass through it";
    }
    return {};
}

/// The kinds overlay_why() explains: never the port's RoCE netdev.
bool overlay_kind(const topo::NetdevInfo &nd) {
    const std::string &k = nd.kind;
    return k == "vxlan" || k == "geneve" || k == "macvlan" || k == "macvtap" || k == "ipvlan" ||
           k == "ipvtap" || k == "bridge" || k == "team" || (k.empty() && !nd.parent.empty());
}

} // namespace

bool carries_port_roce(const topo::Snapshot &snapshot, const std::string &own,
                       const std::string &netdev) {
    if (netdev.empty() || (!own.empty() && netdev == own)) {
        return true;
    }
    const topo::NetdevInfo *nd = snapshot.find_netdev(netdev);
    if (nd == nullptr) {
        return true; // not in the view: not judged
    }
    if (own.empty()) {
        return !overlay_kind(*nd);
    }
    return nd->kind == "vlan" && nd->parent == own;
}

std::string port_netdev(const topo::PortInfo &port) {
    const topo::GidEntry *g = port.find_gid(0);
    if (g == nullptr || g->netdev.empty() || !g->address().is_link_local()) {
        return {};
    }
    return g->netdev;
}

NetdevRole netdev_role(const topo::Snapshot &snapshot, const std::string &own,
                       const std::string &netdev) {
    NetdevRole r;
    if (netdev.empty()) {
        return r;
    }
    const std::string owned = "the port's own netdev";
    if (!own.empty() && netdev == own) {
        r.why = owned;
        return r;
    }
    const topo::NetdevInfo *nd = snapshot.find_netdev(netdev);
    if (nd == nullptr) {
        return r; // not in the view: not judged
    }
    if (own.empty()) {
        r.why = overlay_why(*nd);
        r.own = r.why.empty();
        return r;
    }
    if (nd->kind == "vlan" && nd->parent == own) {
        r.why = "a VLAN on " + own + ", " + owned;
        return r;
    }
    r.own = false;
    r.why = overlay_why(*nd);
    if (!r.why.empty()) {
        return r;
    }
    if (nd->kind == "vlan") {
        r.why = "a VLAN on " + (nd->parent.empty() ? std::string("another netdev") : nd->parent) +
                ", not directly on " + own + ", the port's own netdev";
    } else if (nd->kind == "bond") {
        r.why = "a bond that does not back this port (its netdev is " + own + ")";
    } else {
        r.why = (nd->kind.empty() ? std::string("a netdev") : "a " + nd->kind + " netdev") +
                " that is not this port's (its netdev is " + own + ")";
    }
    return r;
}

} // namespace roce::select
