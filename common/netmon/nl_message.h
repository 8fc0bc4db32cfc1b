// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "topo/snapshot.h"

namespace roce::netmon {

/// The parts of an RTM_NEWLINK / RTM_DELLINK message (family AF_UNSPEC) the
/// model keeps, as plain values. Produced by parse_message() (nl_parse.h)
/// from kernel bytes, and by tests directly. No libnl types here.
struct LinkMessage {
    bool deleted = false; ///< RTM_DELLINK
    int ifindex = 0;
    uint32_t ifi_flags = 0; ///< IFF_UP, IFF_RUNNING, ...
    std::string name;       ///< IFLA_IFNAME ("" when absent)
    int mtu = 0;            ///< IFLA_MTU (0 when absent)
    topo::OperState operstate = topo::OperState::kUnknown;
    bool carrier = false;             ///< IFLA_CARRIER; when absent: IFF_LOWER_UP
    std::string mac;                  ///< IFLA_ADDRESS as "aa:bb:.."
    int master_ifindex = 0;           ///< IFLA_MASTER
    int link_ifindex = 0;             ///< IFLA_LINK (lower device of vlan/macvlan, veth peer)
    bool link_in_other_netns = false; ///< IFLA_LINK_NETNSID present: link_ifindex is foreign
    std::string kind;                 ///< IFLA_INFO_KIND ("" for physical / loopback)
    std::string slave_kind;           ///< IFLA_INFO_SLAVE_KIND ("bond", "bridge", "")
    int vlan_id = -1;                 ///< IFLA_VLAN_ID when kind == "vlan"
    /// kind == "bond": IFLA_BOND_* (slaves/active_slave names left empty:
    /// the model resolves them); active slave as an ifindex here.
    std::optional<topo::BondInfo> bond;
    int bond_active_slave_ifindex = 0; ///< IFLA_BOND_ACTIVE_SLAVE, 0 none
    /// slave_kind == "bond": IFLA_BOND_SLAVE_*.
    std::optional<topo::BondSlaveInfo> bond_slave;
    int ifla_event = 0; ///< IFLA_EVENT (e.g. 3 = bonding failover), 0 none
};

/// An RTM_NEWADDR / RTM_DELADDR message.
struct AddrMessage {
    bool deleted = false; ///< RTM_DELADDR
    int ifindex = 0;
    topo::AddressInfo address; ///< IFA_LOCAL, else IFA_ADDRESS; ifa_prefixlen
    uint32_t flags = 0;        ///< IFA_FLAGS (or ifa_flags): IFA_F_TENTATIVE, ...
    int scope = 0;             ///< ifa_scope (RT_SCOPE_*)
};

} // namespace roce::netmon
