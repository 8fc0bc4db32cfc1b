// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "topo/snapshot.h"

namespace roce::netmon {

/// What changed. Each kind documents which Event fields it fills; fields a
/// kind does not mention keep their defaults.
enum class EventKind : uint8_t {
    kNetdevAdded,        ///< ifindex, netdev
    kNetdevRemoved,      ///< ifindex, netdev
    kNetdevRenamed,      ///< ifindex, netdev (new name), old_name, new_name
    kLinkUp,             ///< ifindex, netdev: became usable (IFF_UP, carrier, operstate up/unknown)
    kLinkDown,           ///< ifindex, netdev: no longer usable
    kMtuChanged,         ///< ifindex, netdev, old_value, new_value (bytes)
    kAddressAdded,       ///< ifindex, netdev, address
    kAddressRemoved,     ///< ifindex, netdev, address
    kBondMemberAdded,    ///< ifindex/netdev = member, bond
    kBondMemberRemoved,  ///< ifindex/netdev = member, bond
    kBondMemberUp,       ///< ifindex/netdev = member, bond: member link up and MII up
    kBondMemberDown,     ///< ifindex/netdev = member, bond
    kActiveSlaveChanged, ///< ifindex/netdev = bond, bond, old_name, new_name ("" = none)
    kLagMemberCountChanged, ///< ifindex/netdev = bond, bond, old_value, new_value (see
                            ///< lag_member_count)
    kRdmaDeviceAppeared,    ///< rdma_device, rdma_port, netdev/ifindex (first netdev of the port)
    kRdmaDeviceDisappeared, ///< rdma_device, rdma_port, netdev/ifindex (last known)
    kRdmaNetdevsChanged,    ///< rdma_device, rdma_port: the set of netdevs in its GID table changed
    kVerbsAsync, ///< rdma_device, rdma_port (0 for device events), verbs_event, verbs_event_name
    kResync,     ///< the model was rebuilt from a fresh dump; old_value = resync count
    kCount_      ///< number of kinds (not an event)
};

/// Stable lower-case name ("address-added", "bond-member-down", ...), used in
/// logs and in the JSON lines of contrib/netmon-watch.
const char *to_string(EventKind k) noexcept;

/// One RDMA port that has GID entries on a netdev.
struct RdmaPortRef {
    std::string device; ///< "mlx5_bond_0", "rxe_bond0"
    int port = 0;       ///< 1-based
    bool operator==(const RdmaPortRef &o) const { return device == o.device && port == o.port; }
    bool operator<(const RdmaPortRef &o) const {
        return device != o.device ? device < o.device : port < o.port;
    }
};

/// A typed change notification. Plain value, safe to copy and keep.
struct Event {
    EventKind kind = EventKind::kResync;
    uint64_t seq = 0; ///< per-monitor, strictly increasing from 1
    /// When the monitor read the kernel message (or async event) that caused it.
    std::chrono::steady_clock::time_point observed{};
    int ifindex = 0;
    std::string netdev;
    std::string bond;          ///< bond master for member / bond events
    topo::AddressInfo address; ///< address events
    int old_value = -1;
    int new_value = -1;
    std::string old_name;
    std::string new_name;
    std::string rdma_device;
    int rdma_port = 0;
    int verbs_event = -1;         ///< enum ibv_event_type for kVerbsAsync
    std::string verbs_event_name; ///< "GID_CHANGE", "PORT_ERR", ...
    /// RDMA ports whose GID table references this netdev, or, for a bond
    /// member, its bond; empty when no RDMA port is known to sit on it.
    std::vector<RdmaPortRef> rdma;
};

/// "#12 address-added bond0 198.18.0.1/24 [rxe_bond0:1]" (for logs).
std::string to_string(const Event &e);
/// One JSON object on one line, keys in a fixed order (contrib/netmon-watch).
std::string to_json(const Event &e);

/// Which events a subscriber wants. Default: everything.
struct EventFilter {
    uint32_t kinds = ~0u; ///< bit (1u << EventKind) per wanted kind
    /// Netdev-level events only when an RDMA port sits on the netdev (or on
    /// the bond it belongs to). RDMA, verbs and resync events always pass.
    bool rdma_only = false;

    static EventFilter all() { return {}; }
    static EventFilter only(std::initializer_list<EventKind> ks) {
        EventFilter f;
        f.kinds = 0;
        for (EventKind k : ks) {
            f.kinds |= 1u << static_cast<unsigned>(k);
        }
        return f;
    }
    bool matches(const Event &e) const noexcept;
};
static_assert(static_cast<unsigned>(EventKind::kCount_) <= 32, "EventFilter::kinds is 32 bits");

} // namespace roce::netmon
