// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/net.h"

namespace roce::topo {

/// A plain, copyable picture of what the machine looked like at one moment:
/// RDMA devices with their ports, GID and pkey tables, and the netdevs (bonds,
/// VLANs, addresses) the GIDs hang off. Produced by the readers (live rdma-core
/// + netlink, sysfs with a configurable root, a captured directory) and
/// consumed by the pure selection policy. No pointers into the kernel, no
/// handles: safe to copy, compare and keep.

enum class GidType { kIB, kRoceV1, kRoceV2 };
/// "IB", "RoCE v1", "RoCE v2" (the spelling of roce-doctor --json).
const char *to_string(GidType t) noexcept;

enum class PortState { kDown, kInit, kArmed, kActive, kActiveDefer, kUnknown };
const char *to_string(PortState s) noexcept;

enum class LinkLayer { kInfiniBand, kEthernet, kUnknown };
const char *to_string(LinkLayer l) noexcept;

/// One populated GID table slot. Empty slots are not listed.
struct GidEntry {
    int index = 0;
    std::array<uint8_t, 16> gid{};
    GidType type = GidType::kIB;
    std::string netdev;      ///< "" when no netdev is attached (IB)
    int netdev_ifindex = 0;  ///< 0 when unknown or none

    /// The GID's address (IPv4 for ::ffff:a.b.c.d GIDs).
    util::IpAddress address() const { return util::IpAddress::from_gid(gid); }
};

/// The GID in the textual form rdma-core and the kernel print for RoCE:
/// "::ffff:198.18.0.11", "fe80::ba59:9fff:fe10:2a", "2001:db8::11".
std::string gid_to_string(const std::array<uint8_t, 16> &gid);

struct PortInfo {
    int port = 0;                       ///< 1-based
    PortState state = PortState::kUnknown;
    LinkLayer link_layer = LinkLayer::kUnknown;
    int active_mtu = 0;                 ///< bytes: 256, 512, 1024, 2048 or 4096; 0 unknown
    int gid_tbl_len = 0;
    int pkey_tbl_len = 0;
    std::vector<GidEntry> gids;         ///< populated slots, ascending index
    std::vector<uint16_t> pkeys;        ///< host byte order, index = position

    /// The populated slot `index`, or nullptr when empty or beyond the table.
    const GidEntry *find_gid(int index) const;
};

struct DeviceInfo {
    std::string name;                   ///< "mlx5_bond_0", "rxe_bond0"
    int phys_port_cnt = 0;
    int num_lag_ports = 0;              ///< from mlx5dv; 0 unknown / not a LAG device
    std::vector<PortInfo> ports;

    /// Port `port` (1-based), or nullptr when the device has no such port.
    const PortInfo *find_port(int port) const;
};

enum class OperState { kUnknown, kNotPresent, kDown, kLowerLayerDown, kTesting, kDormant, kUp };
const char *to_string(OperState s) noexcept;

enum class BondMode {
    kBalanceRr = 0,
    kActiveBackup = 1,
    kBalanceXor = 2,
    kBroadcast = 3,
    k8023ad = 4,
    kBalanceTlb = 5,
    kBalanceAlb = 6,
    kUnknown = 255,
};
/// Kernel spelling: "balance-rr", "active-backup", "802.3ad", ...
const char *to_string(BondMode m) noexcept;

struct AddressInfo {
    util::IpAddress address;
    int prefix_len = 0;
    util::Subnet subnet() const { return util::Subnet::of(address, prefix_len); }
};

struct BondInfo {
    BondMode mode = BondMode::kUnknown;
    std::vector<std::string> slaves;    ///< member netdevs, kernel order
    std::string active_slave;           ///< active-backup: current member; "" otherwise
    int ad_num_ports = -1;              ///< 802.3ad: members in the active aggregator; -1 unknown
    std::string xmit_hash_policy;       ///< "layer3+4", ... ("" unknown)
    int miimon_ms = -1;
    // 802.3ad active aggregator (IFLA_BOND_AD_INFO; -1 / "" when not reported).
    int ad_aggregator_id = -1;
    int ad_actor_key = -1;
    int ad_partner_key = -1;
    std::string ad_partner_mac;         ///< "00:00:00:00:00:00" until LACP found a partner
    int min_links = -1;
};

/// MII state the bonding driver keeps per member (IFLA_BOND_SLAVE_MII_STATUS).
enum class BondMiiStatus { kUp = 0, kFail = 1, kDown = 2, kBack = 3, kUnknown = 255 };
/// "up", "going-down", "down", "going-back", "unknown".
const char *to_string(BondMiiStatus s) noexcept;

/// A bond member as the bonding driver reports it (IFLA_INFO_SLAVE_DATA,
/// IFLA_BOND_SLAVE_*). Set on the member's NetdevInfo while it is enslaved.
struct BondSlaveInfo {
    bool active = false;                ///< IFLA_BOND_SLAVE_STATE: active (true) or backup
    BondMiiStatus mii_status = BondMiiStatus::kUnknown;
    int link_failure_count = 0;
    std::string perm_hwaddr;            ///< "aa:bb:..." permanent MAC ("" unknown)
    int queue_id = 0;
    int ad_aggregator_id = -1;          ///< 802.3ad: aggregator this port is attached to
    int ad_actor_oper_port_state = -1;  ///< 802.3ad LACP port state bits, -1 unknown
    int ad_partner_oper_port_state = -1;
};

struct NetdevInfo {
    std::string name;
    int ifindex = 0;
    std::string kind;                   ///< "bond", "vlan", "macvlan", "veth", "dummy", "" (physical)
    int mtu = 0;
    OperState operstate = OperState::kUnknown;
    bool carrier = false;
    std::string mac;                    ///< "aa:bb:cc:dd:ee:ff"
    std::string master;                 ///< bond (or bridge) this netdev is enslaved to, or ""
    std::string parent;                 ///< VLAN/macvlan lower device, or ""
    int vlan_id = -1;                   ///< VLAN id, -1 when not a VLAN
    std::optional<BondInfo> bond;       ///< set for bond masters
    std::vector<AddressInfo> addresses;
    bool admin_up = false;              ///< IFF_UP (administratively up)
    std::optional<BondSlaveInfo> bond_slave; ///< set while enslaved to a bond
    /// Ethernet speed in Mb/s (sysfs `speed`, as ethtool reports it); -1
    /// unknown (a down netdev, a virtual one, or a reader that has none).
    int speed_mbps = -1;
};

struct Snapshot {
    std::vector<DeviceInfo> devices;
    std::vector<NetdevInfo> netdevs;
    std::string source;                 ///< "live", "sysfs:/", "capture:DIR"
    /// What the reader skipped or could not read but worked around, one
    /// sentence each (e.g. a GID whose type was unreadable). Empty normally.
    std::vector<std::string> warnings;

    /// nullptr when absent. Pointers are valid while the snapshot is unchanged.
    const NetdevInfo *find_netdev(const std::string &name) const;
    const DeviceInfo *find_device(const std::string &name) const;
    const NetdevInfo *find_netdev_by_index(int ifindex) const;
};

} // namespace roce::topo
