// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The monitor against the real bonding driver, bonds over veth pairs in a
// private namespace: active-backup failover on member carrier loss, 802.3ad
// member loss and removal (two 802.3ad bonds wired back to back so LACP
// really forms), a VLAN on a bond. The build host has no bonding driver:
// these run where it exists (tests/vm/netmon_bond.sh in the VM tier) and
// SKIP elsewhere (test_netns --require=bond).
#include <chrono>
#include <thread>

#include "catch.h"
#include "netmon/monitor.h"
#include "netmon_test_util.h"
#include "netns_util.h"

using namespace roce;
using namespace roce::netmon;
using namespace roce::netmon::netns;
using roce::netmon::test::Collector;
using roce::netmon::test::eventually;
using roce::netmon::test::LockedCapture;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

MonitorOptions options(util::LogSink *log) {
    MonitorOptions o;
    o.log = log;
    o.rdma_dev_dir = "";
    return o;
}

topo::NetdevInfo get(const Monitor &mon, const std::string &name) {
    auto s = mon.snapshot();
    const topo::NetdevInfo *n = s.find_netdev(name);
    REQUIRE(n != nullptr);
    return *n;
}

bool member_is_up(const Monitor &mon, const std::string &name) {
    auto s = mon.snapshot();
    const topo::NetdevInfo *n = s.find_netdev(name);
    return n != nullptr && is_usable(*n) && n->bond_slave &&
           n->bond_slave->mii_status == topo::BondMiiStatus::kUp;
}

size_t index_of(const Strings &v, const std::string &s) {
    for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == s) {
            return i;
        }
    }
    return v.size();
}

// bond0 over a0/a1; the veth peers b0/b1 stand for the switch ports.
void make_bond(const std::string &mode) {
    sh("ip link add bond0 type bond mode " + mode + " miimon 50");
    sh("ip link add a0 type veth peer name b0");
    sh("ip link add a1 type veth peer name b1");
    // Members must be down when enslaved; the bond brings them up.
    sh("ip link set a0 master bond0 && ip link set a1 master bond0");
    sh("ip link set b0 up && ip link set b1 up && ip link set bond0 up");
}

} // namespace

TEST_CASE("bond: active-backup failover on member carrier loss", "[bond]") {
    fresh_netns();
    make_bond("active-backup");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());
    REQUIRE(eventually([&] { return member_is_up(mon, "a0") && member_is_up(mon, "a1"); }, 10s));
    REQUIRE(eventually([&] { return !get(mon, "bond0").bond->active_slave.empty(); }, 10s));
    auto bond = get(mon, "bond0");
    CHECK(bond.kind == "bond");
    CHECK(bond.bond->mode == topo::BondMode::kActiveBackup);
    CHECK(bond.bond->miimon_ms == 50);
    CHECK(bond.bond->slaves == Strings{"a0", "a1"});
    std::string active = bond.bond->active_slave;
    std::string other = active == "a0" ? "a1" : "a0";
    std::string peer = active == "a0" ? "b0" : "b1";
    CHECK(get(mon, active).bond_slave->active);
    CHECK_FALSE(get(mon, other).bond_slave->active);

    // Pull the active member's cable: its peer goes down.
    size_t mark = col.size();
    sh("ip link set " + peer + " down");
    REQUIRE(col.wait_for(EventKind::kActiveSlaveChanged, "bond0", mark, 10s));
    REQUIRE(col.wait_for(EventKind::kLagMemberCountChanged, "bond0", mark, 10s));
    auto ev = col.events();
    ev.erase(ev.begin(), ev.begin() + static_cast<long>(mark));
    Strings got =
        brief(only(ev, {EventKind::kLinkDown, EventKind::kBondMemberDown,
                        EventKind::kActiveSlaveChanged, EventKind::kLagMemberCountChanged}));
    INFO("events: " << [&] {
        std::string s;
        for (const auto &x : brief(ev)) {
            s += x + "; ";
        }
        return s;
    }());
    size_t down = index_of(got, "bond-member-down " + active + " bond=bond0");
    size_t failover = index_of(got, "active-slave-changed bond0 " + active + "->" + other);
    CHECK(index_of(got, "link-down " + active) < got.size());
    CHECK(down < got.size());
    CHECK(failover < got.size());
    CHECK(down < failover);
    CHECK(index_of(got, "lag-member-count-changed bond0 2->1") < got.size());
    CHECK(index_of(got, "link-down bond0") == got.size()); // the bond itself stays up
    bond = get(mon, "bond0");
    CHECK(bond.bond->active_slave == other);
    auto failed = get(mon, active);
    CHECK(failed.bond_slave->mii_status == topo::BondMiiStatus::kDown);
    CHECK(failed.bond_slave->link_failure_count >= 1);
    CHECK_FALSE(failed.bond_slave->active);

    // Cable back: member up again, two usable members.
    mark = col.size();
    sh("ip link set " + peer + " up");
    REQUIRE(col.wait_for(EventKind::kBondMemberUp, active, mark, 10s));
    REQUIRE(col.wait_for(EventKind::kLagMemberCountChanged, "bond0", mark, 10s));
    CHECK(get(mon, "bond0").bond->slaves.size() == 2);
    mon.stop();
}

TEST_CASE("bond: 802.3ad member loss and removal change the LAG member count", "[bond]") {
    fresh_netns();
    // Two 802.3ad bonds back to back over veth pairs: LACP really forms.
    sh("ip link add bond0 type bond mode 802.3ad miimon 50 lacp_rate fast xmit_hash_policy "
       "layer3+4");
    sh("ip link add bond1 type bond mode 802.3ad miimon 50 lacp_rate fast");
    sh("ip link add a0 type veth peer name b0");
    sh("ip link add a1 type veth peer name b1");
    sh("ip link set a0 master bond0 && ip link set a1 master bond0");
    sh("ip link set b0 master bond1 && ip link set b1 master bond1");
    sh("ip link set bond0 up && ip link set bond1 up");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());
    INFO(log.all());
    REQUIRE(eventually([&] { return get(mon, "bond0").bond->ad_num_ports == 2; }, 30s));
    auto bond = get(mon, "bond0");
    CHECK(bond.bond->mode == topo::BondMode::k8023ad);
    CHECK(bond.bond->xmit_hash_policy == "layer3+4");
    CHECK(bond.bond->ad_aggregator_id > 0);
    CHECK(bond.bond->ad_partner_mac != "00:00:00:00:00:00");
    CHECK(get(mon, "a0").bond_slave->ad_aggregator_id == bond.bond->ad_aggregator_id);

    // Member loss: a1's cable.
    size_t mark = col.size();
    sh("ip link set b1 down");
    REQUIRE(col.wait_for(EventKind::kBondMemberDown, "a1", mark, 10s));
    REQUIRE(eventually([&] { return get(mon, "bond0").bond->ad_num_ports == 1; }, 10s));
    auto ev = col.events();
    ev.erase(ev.begin(), ev.begin() + static_cast<long>(mark));
    Strings got = brief(only(ev, {EventKind::kLagMemberCountChanged}));
    CHECK(index_of(got, "lag-member-count-changed bond0 2->1") < got.size());
    CHECK(mon.stats().lacp_refreshes >= 1);

    sh("ip link set b1 up");
    REQUIRE(eventually([&] { return get(mon, "bond0").bond->ad_num_ports == 2; }, 30s));

    // Member removal.
    mark = col.size();
    sh("ip link set a1 nomaster");
    REQUIRE(col.wait_for(EventKind::kBondMemberRemoved, "a1", mark, 10s));
    REQUIRE(eventually([&] { return get(mon, "bond0").bond->ad_num_ports == 1; }, 10s));
    ev = col.events();
    ev.erase(ev.begin(), ev.begin() + static_cast<long>(mark));
    got = brief(only(ev, {EventKind::kBondMemberRemoved, EventKind::kLagMemberCountChanged}));
    CHECK(index_of(got, "bond-member-removed a1 bond=bond0") < got.size());
    CHECK(index_of(got, "lag-member-count-changed bond0 2->1") < got.size());
    CHECK(get(mon, "bond0").bond->slaves == Strings{"a0"});
    CHECK_FALSE(get(mon, "a1").bond_slave);
    mon.stop();
}

TEST_CASE("bond: a VLAN on a bond keeps its addresses across a failover", "[bondvlan]") {
    fresh_netns();
    make_bond("active-backup");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());
    REQUIRE(eventually([&] { return !get(mon, "bond0").bond->active_slave.empty(); }, 10s));

    sh("ip link add link bond0 name bond0.3027 type vlan id 3027");
    sh("ip link set bond0.3027 up");
    sh("ip addr add 198.18.0.1/24 dev bond0");
    sh("ip addr add 198.19.0.1/24 dev bond0.3027");
    REQUIRE(col.wait_for(EventKind::kAddressAdded, "bond0.3027"));
    auto v = get(mon, "bond0.3027");
    CHECK(v.kind == "vlan");
    CHECK(v.vlan_id == 3027);
    CHECK(v.parent == "bond0");
    REQUIRE(v.addresses.size() == 1);
    CHECK(v.addresses[0].address.to_string() == "198.19.0.1");
    CHECK(is_usable(v));

    // Jumbo frames on the bond reach its members.
    size_t mark = col.size();
    sh("ip link set bond0 mtu 9000");
    REQUIRE(col.wait_for(EventKind::kMtuChanged, "bond0", mark));
    REQUIRE(col.wait_for(EventKind::kMtuChanged, "a0", mark));
    REQUIRE(col.wait_for(EventKind::kMtuChanged, "a1", mark));

    // Failover underneath: the VLAN neither goes down nor loses its address.
    std::string active = get(mon, "bond0").bond->active_slave;
    mark = col.size();
    sh(std::string("ip link set ") + (active == "a0" ? "b0" : "b1") + " down");
    REQUIRE(col.wait_for(EventKind::kActiveSlaveChanged, "bond0", mark, 10s));
    std::this_thread::sleep_for(200ms);
    auto ev = col.events();
    for (size_t i = mark; i < ev.size(); ++i) {
        const Event &e = ev[i];
        if (e.netdev == "bond0.3027") {
            CHECK(e.kind != EventKind::kLinkDown);
            CHECK(e.kind != EventKind::kAddressRemoved);
        }
    }
    CHECK(get(mon, "bond0.3027").addresses.size() == 1);
    mon.stop();
}
