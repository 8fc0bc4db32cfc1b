// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>

#include "topo/snapshot.h"

namespace roce::select {

/// The bandwidth Open MPI's bml should weigh one rail (one RoCE port) by,
/// in Mb/s, and how it was found.
struct RailBandwidth {
    uint32_t mbps = 0; ///< 0 when nothing could be derived: keep the default
    std::string why;   ///< "2 members x 25 Gb/s, LAG spreads", "4X HDR", or why not
    bool derived() const { return mbps > 0; }
};

/// One lane's data rate, in Mb/s after line coding (as Open MPI's
/// opal_common_verbs_port_bw counts it), of an ibv_port_attr active_speed
/// code: 1 SDR 2000, 2 DDR 4000, 4 QDR 8000, 8 FDR10 10000, 16 FDR 13636,
/// 32 EDR 25000, 64 HDR 50000, 128 NDR 100000, 256 XDR (active_speed_ex)
/// 200000; 0 for any other code. `name` (optional) gets "EDR" etc.
uint32_t ib_lane_mbps(uint32_t speed_code, const char **name = nullptr) noexcept;

/// The lanes of an active_width code: 1 1X, 16 2X, 2 4X, 4 8X, 8 12X;
/// 0 for any other code.
unsigned ib_width_lanes(uint32_t width_code) noexcept;

/// What the port says of itself (ibv_query_port), for rail_bandwidth().
struct PortSpeed {
    uint32_t active_speed = 0; ///< code; 0 unknown
    uint32_t active_width = 0; ///< code; 0 unknown
};

/// The bandwidth of the rail whose GIDs live on `netdev` (the port's chosen
/// netdev, or a VLAN on it) in `snapshot`. Pure. The rules, first that
/// applies:
///  1. Ethernet speed (the netdev's `speed`, ethtool's) when known: on a
///     RoCE port it is the truth, which the kernel only re-encodes into the
///     IB grid of active_speed/width (ib_get_eth_speed's buckets; soft-RoCE
///     ports report 1X SDR in tests/fixtures/rxe_bond). A VLAN counts as its
///     parent. Over a bond: the sum of the members that are up and report a
///     speed when the bond spreads traffic (every mode but active-backup:
///     the paths cover the members), one member's speed (the active one's,
///     else the first up) for active-backup.
///  2. Else active_speed x active_width, times the bond's spreading members
///     (the port's codes describe one member of a LAG).
///  3. Else nothing (mbps 0): keep the default, and `why` says so.
RailBandwidth rail_bandwidth(const topo::Snapshot &snapshot, const std::string &netdev,
                             const PortSpeed &port);

} // namespace roce::select
