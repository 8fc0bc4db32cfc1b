// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Replays rtnetlink traffic recorded from real kernels (contrib/netmon-watch
// --record) through the parser and the model: tests/fixtures/netlink/.
#include <string>
#include <vector>

#include "catch.h"
#include "netmon/model.h"
#include "netmon/recording.h"

using namespace roce::netmon;
using Strings = std::vector<std::string>;

#ifndef NETMON_FIXTURES
#error "NETMON_FIXTURES (the tests/fixtures/netlink directory) must be defined"
#endif

namespace {

Strings brief(const std::vector<Event> &ev) {
    Strings out;
    for (const auto &e : ev) {
        std::string s = std::string(to_string(e.kind)) + " " + e.netdev;
        if (!e.bond.empty() && e.bond != e.netdev) {
            s += " bond=" + e.bond;
        }
        if (e.kind == EventKind::kAddressAdded || e.kind == EventKind::kAddressRemoved) {
            s += " " + e.address.address.to_string() + "/" + std::to_string(e.address.prefix_len);
        } else if (e.kind == EventKind::kMtuChanged ||
                   e.kind == EventKind::kLagMemberCountChanged) {
            s += " " + std::to_string(e.old_value) + "->" + std::to_string(e.new_value);
        } else if (e.kind == EventKind::kActiveSlaveChanged) {
            s += " " + e.old_name + "->" + e.new_name;
        }
        out.push_back(s);
    }
    return out;
}

} // namespace

TEST_CASE("recorded: veth, macvlan and bridge traffic of a real kernel", "[netmon][recorded]") {
    auto rec = read_recording(NETMON_FIXTURES "/veth-macvlan-bridge.rec");
    REQUIRE(rec.is_ok());
    CHECK(rec->size() == 41);
    Model m;
    auto ev = replay(m, *rec);
    REQUIRE(ev.is_ok());
    // What the live monitor printed while recording, plus lo from the dump.
    CHECK(brief(*ev) == Strings{
                            "netdev-added lo",
                            "netdev-added v1",
                            "netdev-added v0",
                            "link-up v1",
                            "link-up v0",
                            "address-added v0 198.18.0.1/24",
                            "address-added v0 2001:db8::1/64",
                            "mtu-changed v0 1500->9000",
                            "netdev-added m0",
                            "link-up m0",
                            "address-added m0 198.19.0.1/24",
                            "netdev-added br0",
                            "link-down v1",
                            "link-down v0",
                            "link-down m0",
                            "netdev-renamed peer1",
                            "address-removed v0 2001:db8::1/64",
                            "address-removed v0 198.18.0.1/24",
                            "address-removed m0 198.19.0.1/24",
                            "netdev-removed m0",
                            "netdev-removed v0",
                            "netdev-removed peer1",
                        });
    CHECK(m.size() == 2); // lo and br0
    auto br = m.netdev("br0");
    REQUIRE(br);
    CHECK(br->kind == "bridge");
    auto lo = m.netdev("lo");
    REQUIRE(lo);
    CHECK(lo->mtu == 65536);
    CHECK(lo->kind.empty());
}

// Recorded on Linux 6.1 (Debian 12's kernel) with the real bonding driver,
// in a guest of the VM tier (tests/vm/netmon_record.sh): the sequences are
// what the live monitor printed there.
TEST_CASE("recorded: active-backup bond with a VLAN, failover and member removal (Linux 6.1)",
          "[netmon][recorded][bond]") {
    auto rec = read_recording(NETMON_FIXTURES "/bond-active-backup.rec");
    REQUIRE(rec.is_ok());
    Model m;
    auto ev = replay(m, *rec);
    REQUIRE(ev.is_ok());
    CHECK(brief(*ev) == Strings{"netdev-added lo",
                                "netdev-added bond0",
                                "netdev-added b0",
                                "netdev-added a0",
                                "netdev-added b1",
                                "netdev-added a1",
                                "bond-member-added a0 bond=bond0",
                                "bond-member-added a1 bond=bond0",
                                "link-up b0",
                                "link-up a0",
                                "link-up b1",
                                "link-up a1",
                                "bond-member-up a0 bond=bond0",
                                "lag-member-count-changed bond0 0->1",
                                "bond-member-up a1 bond=bond0",
                                "lag-member-count-changed bond0 1->2",
                                "active-slave-changed bond0 ->a0",
                                "link-up bond0",
                                "netdev-added bond0.3027",
                                "link-up bond0.3027",
                                "address-added bond0 198.18.0.1/24",
                                "address-added bond0.3027 198.19.0.1/24",
                                "link-down b0",
                                "link-down a0",
                                "bond-member-down a0 bond=bond0",
                                "lag-member-count-changed bond0 2->1",
                                "active-slave-changed bond0 a0->a1",
                                "link-up b0",
                                "link-up a0",
                                "bond-member-up a0 bond=bond0",
                                "lag-member-count-changed bond0 1->2",
                                "bond-member-removed a1 bond=bond0",
                                "lag-member-count-changed bond0 2->1",
                                "active-slave-changed bond0 a1->a0",
                                "link-down a1",
                                "link-down b1"});
    auto bond = m.netdev("bond0");
    REQUIRE(bond);
    REQUIRE(bond->bond);
    CHECK(bond->bond->mode == roce::topo::BondMode::kActiveBackup);
    CHECK(bond->bond->miimon_ms == 50);
    CHECK(bond->bond->slaves == Strings{"a0"});
    CHECK(bond->bond->active_slave == "a0");
    CHECK(m.lag_member_count(bond->ifindex) == 1);
    auto a0 = m.netdev("a0");
    REQUIRE(a0->bond_slave);
    CHECK(a0->bond_slave->active);
    CHECK(a0->bond_slave->mii_status == roce::topo::BondMiiStatus::kUp);
    CHECK(a0->bond_slave->link_failure_count == 1);
    CHECK_FALSE(m.netdev("a1")->bond_slave);
    auto vlan = m.netdev("bond0.3027");
    REQUIRE(vlan);
    CHECK(vlan->vlan_id == 3027);
    CHECK(vlan->parent == "bond0");
    REQUIRE(vlan->addresses.size() == 1);
    CHECK(vlan->addresses[0].address.to_string() == "198.19.0.1");
}

TEST_CASE("recorded: two 802.3ad bonds back to back, member loss and removal (Linux 6.1)",
          "[netmon][recorded][bond]") {
    auto rec = read_recording(NETMON_FIXTURES "/bond-8023ad.rec");
    REQUIRE(rec.is_ok());
    Model m;
    auto ev = replay(m, *rec);
    REQUIRE(ev.is_ok());
    CHECK(brief(*ev) == Strings{"netdev-added lo",
                                "netdev-added bond0",
                                "netdev-added bond1",
                                "netdev-added b0",
                                "netdev-added a0",
                                "netdev-added b1",
                                "netdev-added a1",
                                "bond-member-added a0 bond=bond0",
                                "bond-member-added a1 bond=bond0",
                                "bond-member-added b0 bond=bond1",
                                "link-up b0",
                                "bond-member-up b0 bond=bond1",
                                "link-up a0",
                                "bond-member-added b1 bond=bond1",
                                "link-up b1",
                                "bond-member-up b1 bond=bond1",
                                "link-up a1",
                                "lag-member-count-changed bond0 0->1",
                                "link-up bond0",
                                "bond-member-up a0 bond=bond0",
                                "bond-member-up a1 bond=bond0",
                                "link-up bond1",
                                "lag-member-count-changed bond1 0->1",
                                "lag-member-count-changed bond0 1->2",
                                "lag-member-count-changed bond1 1->2",
                                "link-down b1",
                                "bond-member-down b1 bond=bond1",
                                "link-down a1",
                                "bond-member-down a1 bond=bond0",
                                "lag-member-count-changed bond0 2->1",
                                "lag-member-count-changed bond1 2->1",
                                "link-up b1",
                                "link-up a1",
                                "bond-member-up b1 bond=bond1",
                                "bond-member-up a1 bond=bond0",
                                "lag-member-count-changed bond0 1->2",
                                "lag-member-count-changed bond1 1->2",
                                "bond-member-removed a1 bond=bond0",
                                "lag-member-count-changed bond0 2->1",
                                "link-down a1",
                                "link-down b1",
                                "bond-member-down b1 bond=bond1",
                                "lag-member-count-changed bond1 2->1"});
    auto b0 = m.netdev("bond0");
    REQUIRE(b0);
    REQUIRE(b0->bond);
    CHECK(b0->bond->mode == roce::topo::BondMode::k8023ad);
    CHECK(b0->bond->xmit_hash_policy == "layer3+4");
    CHECK(b0->bond->slaves == Strings{"a0"});
    CHECK(b0->bond->ad_num_ports == 1);
    CHECK(b0->bond->ad_aggregator_id > 0);
    CHECK(b0->bond->ad_partner_mac != "00:00:00:00:00:00");
    CHECK(m.netdev("a0")->bond_slave->ad_aggregator_id == b0->bond->ad_aggregator_id);
    auto b1 = m.netdev("bond1");
    REQUIRE(b1->bond);
    CHECK(b1->bond->xmit_hash_policy == "layer2");
    CHECK(b1->bond->ad_num_ports == 1);
    CHECK(b1->bond->slaves == Strings{"b0", "b1"});
    // The bond's own MAC is the partner the other one learned over LACP.
    CHECK(b1->bond->ad_partner_mac == b0->mac);
}
