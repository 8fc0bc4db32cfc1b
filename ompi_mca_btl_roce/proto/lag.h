// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/net.h"
#include "util/status.h"

namespace roce::btl {

/// How the paths (RC QPs) to one peer are spread over the members of a LAG.
///  kAuto:     queue affinity where the device offers it (mlx5 LAG), else
///             source ports (sport);
///  kOff:      one path, no spreading;
///  kAffinity: mlx5dv_modify_qp_lag_port, path i on LAG port i % n + 1;
///  kSport:    a UDP source port per path: QP pairs are chosen so that the
///             port the device derives from their numbers makes a Linux bond
///             with layer3+4 hashing send path i on member i % n (on other
///             hash-based LAGs the ports are simply distinct).
enum class LagPolicy { kAuto = 0, kOff = 1, kAffinity = 2, kSport = 3 };
const char *to_string(LagPolicy p) noexcept;

/// RoCE v2's UDP destination port.
inline constexpr uint16_t kRoceV2Port = 4791;

/// The UDP source port a device derives from a GRH flow label (the kernel's
/// rdma_flow_label_to_udp_sport: 0xC000 | low 14 bits folded with the high 6).
uint16_t flow_label_to_sport(uint32_t flow_label) noexcept;

/// Which member (0..members-1) a Linux bond in balance-xor or 802.3ad mode
/// with xmit_hash_policy layer3+4 sends an IPv4 UDP packet on: the kernel's
/// __bond_xmit_hash (ports and addresses folded, lowest bit dropped) modulo
/// the number of usable members. Addresses and ports in host order.
unsigned bond_l34_member(const util::IpAddress &saddr, const util::IpAddress &daddr,
                         uint16_t sport, uint16_t dport, unsigned members) noexcept;

/// The flow label the kernel derives for an RC connection between QP
/// numbers `lqpn` and `rqpn` when none is given (rdma_calc_flow_label; the
/// same on both ends). Linux 6.1's rxe takes its UDP source port from it.
uint32_t calc_flow_label(uint32_t lqpn, uint32_t rqpn) noexcept;

/// How a bond spreads the flows of one peer, when it can be predicted: a
/// Linux bond in balance-xor or 802.3ad mode with layer3+4 hashing and more
/// than one usable member, between two IPv4 addresses.
struct SpreadModel {
    unsigned members = 1;
    bool predictable = false;
    util::IpAddress saddr, daddr;

    /// Which member the connection between `lqpn` and `rqpn` is sent on
    /// (-1 when not predictable). The same from both ends: the hash is
    /// symmetric in the addresses and the port comes from both QP numbers.
    int member_of(uint32_t lqpn, uint32_t rqpn) const noexcept;
};

SpreadModel spread_model(unsigned members, const std::string &hash_policy,
                         const util::IpAddress &saddr, const util::IpAddress &daddr);

/// One path's spreading decision (what its QP pair makes of it).
struct PathSpread {
    uint32_t flow_label = 0; ///< given at RTR; the port devices derive from it
    uint16_t sport = 0;
    int member = -1;         ///< predicted bond member, -1 unknown
};

/// The spread of a connected QP pair.
PathSpread spread_of(const SpreadModel &m, uint32_t lqpn, uint32_t rqpn) noexcept;

} // namespace roce::btl
