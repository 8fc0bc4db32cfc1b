// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "netmon/event.h"
#include "netmon/nl_message.h"
#include "netmon/rdma_binding.h"
#include "topo/snapshot.h"

namespace roce::netmon {

/// The live picture of one network namespace's netdevs, addresses and RDMA
/// bindings, and the pure logic that turns a change into typed events:
/// apply(message) -> model changes -> events. No I/O, no threads, no libnl:
/// recorded or hand-built messages replay through it in unit tests exactly
/// as the kernel's arrive in the Monitor.
///
/// Events come from comparing the affected netdevs before and after a
/// change (the netdev itself and the bonds it leaves or joins), so a message
/// that changes nothing produces nothing, and a resync is the same
/// comparison over the whole model (diff()).
///
/// Returned events have seq 0 and observed unset; the Monitor stamps them.
/// Not thread-safe: the Monitor serialises access.
class Model {
public:
    /// Applies one link message. RTM_DELLINK drops the netdev and its addresses.
    std::vector<Event> apply(const LinkMessage &m);
    /// Applies one address message. Re-adding a known address (a replace
    /// with new lifetimes, DAD completion) changes nothing and emits nothing.
    std::vector<Event> apply(const AddrMessage &m);
    /// Replaces the RDMA bindings; emits RDMA device appeared / disappeared /
    /// netdevs-changed per (device, port).
    std::vector<Event> set_rdma_bindings(std::vector<RdmaBinding> bindings);

    /// Events that turn `before` into `after` (netdevs in ifindex order, then
    /// RDMA bindings). Used after a resync and by the polling fallback.
    static std::vector<Event> diff(const Model &before, const Model &after);

    /// A model holding these netdevs (a Snapshot from a sysfs reader, say):
    /// master/parent/bond.slaves/active_slave names are resolved to ifindexes.
    static Model from_netdevs(const std::vector<topo::NetdevInfo> &netdevs);

    /// Every netdev, ifindex order, with names resolved, bond slave lists
    /// (ifindex order: netlink does not report the kernel's list order) and
    /// addresses (arrival order) filled in.
    std::vector<topo::NetdevInfo> netdevs() const;
    std::optional<topo::NetdevInfo> netdev(int ifindex) const;
    std::optional<topo::NetdevInfo> netdev(const std::string &name) const;
    const std::vector<RdmaBinding> &rdma_bindings() const { return bindings_; }
    size_t size() const { return links_.size(); }

    /// RDMA ports on this netdev, or on the bond it is a member of.
    std::vector<RdmaPortRef> rdma_ports(int ifindex) const;

    /// Members a bond can carry traffic on: for 802.3ad the ports in the
    /// active aggregator (IFLA_BOND_AD_INFO_NUM_PORTS) when reported, else
    /// members whose link is usable and whose MII status is up. -1 when
    /// `ifindex` is not a bond.
    int lag_member_count(int ifindex) const;

    /// Bonds whose kernel state should be re-read (RTM_GETLINK) because a
    /// member changed and the kernel does not re-announce the master when an
    /// 802.3ad aggregator gains or loses a port. Clears the set.
    std::vector<int> take_refresh_requests();

private:
    struct Link {
        topo::NetdevInfo info; // names of master/parent/slaves unresolved
        int master_ifindex = 0;
        int link_ifindex = 0;
        bool link_in_other_netns = false;
        int active_slave_ifindex = 0;
    };
    /// What events are computed from: one netdev as seen at one moment.
    struct View {
        std::optional<topo::NetdevInfo> n;
        int master_ifindex = 0;
        bool master_is_bond = false;
        int active_slave_ifindex = 0;
        int lag = -1;
        std::vector<RdmaPortRef> rdma;
    };

    std::string name_of(int ifindex) const;
    std::optional<topo::NetdevInfo> materialize(int ifindex) const;
    View view(int ifindex) const;
    static void diff_view(int ifindex, const View &b, const View &a, std::vector<Event> *out);
    static std::vector<Event> diff_rdma(const std::vector<RdmaBinding> &before,
                                        const std::vector<RdmaBinding> &after);
    void note_lacp_refresh(int ifindex, const View &b, const View &a);

    std::map<int, Link> links_;
    std::map<int, std::vector<topo::AddressInfo>> addresses_;
    std::vector<RdmaBinding> bindings_;
    std::set<int> refresh_;
};

/// True when the netdev can carry traffic: administratively up, carrier on,
/// operstate up or unknown (loopback, some virtual devices never report up).
bool is_usable(const topo::NetdevInfo &n) noexcept;

/// A stable one-line text of everything the model keeps about a netdev
/// (for comparing two models in tests and for the watch tool's dump).
std::string describe(const topo::NetdevInfo &n);

} // namespace roce::netmon
