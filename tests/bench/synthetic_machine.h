// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The synthetic server the connection benchmarks run on (over FakeVerbs):
// 8 RDMA devices mlx5_bond_0..7 with one RoCE port each (a 2-port LAG),
// each port on an 802.3ad bond of two members carrying 63 VLANs (MTU 9000
// and 1500 alternating), 256 GIDs per port (per netdev: link-local and
// IPv4 10.D.V.11/24, RoCE v1 and v2), 528 netdevs.
#pragma once

#include <array>
#include <cstdint>

#include "topo/snapshot.h"

namespace roce::bench {

constexpr int kDevices = 8;
constexpr int kVlans = 63; ///< per bond: 64 netdevs x 4 GIDs = 256 GIDs per port
constexpr int kGidsPerNetdev = 4;

/// The IPv4-mapped GID of a.b.c.d.
std::array<uint8_t, 16> v4_gid(int a, int b, int c, int d);
/// The link-local GID fe80::21a:2bff:fe00:<dev>.
std::array<uint8_t, 16> link_local(int dev);
/// The machine described above.
topo::Snapshot synthetic_machine();

} // namespace roce::bench
