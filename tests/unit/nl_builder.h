// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Builds rtnetlink messages byte for byte as Linux 6.1 emits them, with
// libnl's message builders (nlmsg_alloc, nla_put, nla_nest_start), so that
// bond attributes this host cannot produce (no bonding driver) replay
// through the real parser. Attribute order and widths follow 6.1's
// rtnl_fill_ifinfo(), bond_fill_info() and bond_fill_slave_info().
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace roce::netmon::test {

using Mac = std::array<uint8_t, 6>;
using Bytes = std::vector<uint8_t>;

struct AdInfoSpec {
    uint16_t aggregator = 1;
    uint16_t num_ports = 2;
    uint16_t actor_key = 9;
    uint16_t partner_key = 9;
    Mac partner_mac{};
};

struct BondSpec {
    uint8_t mode = 1;          // BOND_MODE_ACTIVEBACKUP
    uint32_t active_slave = 0; // ifindex; 0: attribute omitted (as the kernel does)
    uint32_t miimon = 100;
    uint8_t xmit_hash_policy = 1; // layer3+4
    uint32_t min_links = 0;
    std::optional<AdInfoSpec> ad_info; // only emitted in mode 4
};

struct BondSlaveSpec {
    uint8_t state = 0;      // BOND_STATE_ACTIVE 0, BACKUP 1
    uint8_t mii_status = 0; // BOND_LINK_UP 0, FAIL 1, DOWN 2, BACK 3
    uint32_t link_failure_count = 0;
    Mac perm_hwaddr{0x52, 0x54, 0, 0, 0, 1};
    uint16_t queue_id = 0;
    bool mode_8023ad = false; // emit the AD_* attributes (the port has an aggregator)
    uint16_t ad_aggregator_id = 1;
    uint8_t ad_actor_oper_port_state = 0x3d;
    uint16_t ad_partner_oper_port_state = 0x3d;
};

struct LinkSpec {
    uint16_t type = 16; // RTM_NEWLINK (17 RTM_DELLINK)
    uint8_t family = 0; // AF_UNSPEC; 7 = AF_BRIDGE
    int ifindex = 0;
    std::string name;
    uint32_t flags = 0; // IFF_*
    uint32_t mtu = 1500;
    uint8_t operstate = 6; // IF_OPER_UP
    bool carrier = true;
    Mac mac{0x52, 0x54, 0, 0, 0, 0};
    uint32_t master = 0;
    uint32_t link = 0;
    uint32_t ifla_event = 0; // IFLA_EVENT_BONDING_FAILOVER = 3
    std::string kind;        // "bond", "vlan", "macvlan", ...
    std::optional<BondSpec> bond;
    uint16_t vlan_id = 0;
    std::string slave_kind;
    std::optional<BondSlaveSpec> slave;
    bool truncate_mtu = false; // emit IFLA_MTU with 2 bytes (malformed)
};

struct AddrSpec {
    uint16_t type = 20; // RTM_NEWADDR (21 RTM_DELADDR)
    int ifindex = 0;
    std::string address; // "198.18.0.1" or "fe80::1"
    int prefix_len = 24;
    std::string peer;      // point-to-point peer (IFA_ADDRESS != IFA_LOCAL)
    uint32_t flags = 0x80; // IFA_F_PERMANENT
};

/// One netlink message (header included), as it sits in a datagram.
Bytes build_link(const LinkSpec &s);
Bytes build_addr(const AddrSpec &s);
Bytes build_done(uint32_t seq, uint32_t portid);
Bytes build_error(int err, uint32_t seq, uint32_t portid);

/// Concatenates messages into one datagram.
Bytes datagram(std::initializer_list<Bytes> msgs);

constexpr uint32_t kUp =
    0x1 | 0x2 | 0x40 | 0x1000 | 0x10000;              // UP|BROADCAST|RUNNING|MULTICAST|LOWER_UP
constexpr uint32_t kUpNoCarrier = 0x1 | 0x2 | 0x1000; // UP|BROADCAST|MULTICAST
constexpr uint32_t kSlaveFlags = 0x800;               // IFF_SLAVE
constexpr uint32_t kMasterFlags = 0x400;              // IFF_MASTER

} // namespace roce::netmon::test
