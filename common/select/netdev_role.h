// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>

#include "topo/snapshot.h"

namespace roce::select {

/// How the netdev of a GID stands to the RDMA port whose table lists it.
/// The kernel lists RoCE GIDs for every netdev that carries an address and
/// sits on (or is mistaken for) the port's netdev - a VXLAN, Geneve,
/// macvlan, ipvlan or bridge with the bond's own address among them - but
/// the NIC sends RoCE itself, on the port's netdev: it does not encapsulate
/// RoCE in VXLAN or Geneve nor pass it through a software device. Only the
/// port's own netdev and a VLAN directly on it (the NIC tags those frames)
/// carry a GID's traffic as its address says. Pure.
struct NetdevRole {
    /// True for the port's own netdev, a VLAN directly on it, and a netdev
    /// the policy cannot judge (no netdev, or not in the snapshot): never
    /// demoted on a guess.
    bool own = true;
    /// own: "the port's own netdev", "a VLAN on bond0, the port's own
    /// netdev" ("" when not judged). Otherwise why it does not carry RoCE:
    /// "a VXLAN overlay: the NIC does not encapsulate RoCE".
    std::string why;
};

/// The port's own netdev: the netdev of GID slot 0 when that slot holds a
/// link-local GID. The kernel puts a RoCE port's default GIDs (the
/// MAC-derived fe80 ones) in the reserved slots 0 and 1, on the port's
/// netdev - or on its bond master when the port's netdev is a bond member
/// (roce_gid_mgmt.c, is_ndev_for_default_gid_filter). "" when slot 0 is
/// empty, not link-local, or has no netdev (a hand-made table).
std::string port_netdev(const topo::PortInfo &port);

/// NetdevRole::own of netdev_role(), without building its words (no
/// allocation): what the ranking keys on, once per GID slot.
bool carries_port_roce(const topo::Snapshot &snapshot, const std::string &own,
                       const std::string &netdev);

/// The role of `netdev` (a GID's netdev name) for a port whose own netdev
/// is `own` ("" unknown). With `own` unknown only the kinds that never
/// carry RoCE themselves are demoted: vxlan, geneve, macvlan, macvtap,
/// ipvlan, ipvtap, bridge, team, and a device sysfs shows stacked on
/// another (a lower_* link) without saying its kind.
NetdevRole netdev_role(const topo::Snapshot &snapshot, const std::string &own,
                       const std::string &netdev);

} // namespace roce::select
