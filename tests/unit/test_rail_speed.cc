// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The bandwidth a rail is weighed by (select/rail_speed.h): the IB speed and
// width encodings, the Ethernet speed of rxe and of bond members, and the
// unknown case that keeps the default.
#include "catch.h"
#include "fixtures.h"
#include "select/rail_speed.h"

using namespace roce;
using select::PortSpeed;
using select::rail_bandwidth;

namespace {

topo::NetdevInfo nd(const char *name, int speed, const char *master = "") {
    topo::NetdevInfo n;
    n.name = name;
    n.operstate = topo::OperState::kUp;
    n.speed_mbps = speed;
    n.master = master;
    return n;
}

/// bond0 over eth0/eth1 (speeds given, -1 unknown) in `mode`, plus
/// bond0.7 on it and a plain eth9.
topo::Snapshot machine(topo::BondMode mode, int s0, int s1, const char *active = "") {
    topo::Snapshot s;
    s.netdevs.push_back(nd("eth0", s0, "bond0"));
    s.netdevs.push_back(nd("eth1", s1, "bond0"));
    topo::NetdevInfo b = nd("bond0", -1);
    b.bond = topo::BondInfo{};
    b.bond->mode = mode;
    b.bond->slaves = {"eth0", "eth1"};
    b.bond->active_slave = active;
    s.netdevs.push_back(b);
    topo::NetdevInfo v = nd("bond0.7", -1);
    v.kind = "vlan";
    v.parent = "bond0";
    v.vlan_id = 7;
    s.netdevs.push_back(v);
    s.netdevs.push_back(nd("eth9", -1));
    return s;
}

} // namespace

TEST_CASE("rail speed: IB speed and width codes", "[rail][speed]") {
    struct Row {
        uint32_t speed, width, mbps;
        const char *why;
    };
    const Row rows[] = {
        {1, 1, 2000, "1X SDR"},     {2, 2, 16000, "4X DDR"},    {4, 2, 32000, "4X QDR"},
        {8, 2, 40000, "4X FDR10"},  {16, 2, 54544, "4X FDR"},   {32, 1, 25000, "1X EDR"},
        {32, 16, 50000, "2X EDR"},  {32, 2, 100000, "4X EDR"},  {64, 2, 200000, "4X HDR"},
        {64, 4, 400000, "8X HDR"},  {128, 2, 400000, "4X NDR"}, {128, 8, 1200000, "12X NDR"},
        {256, 2, 800000, "4X XDR"}, {64, 16, 100000, "2X HDR"},
    };
    const topo::Snapshot s = machine(topo::BondMode::k8023ad, -1, -1);
    for (const Row &r : rows) {
        CAPTURE(r.speed, r.width);
        auto bw = rail_bandwidth(s, "eth9", PortSpeed{r.speed, r.width});
        CHECK(bw.mbps == r.mbps);
        CHECK_THAT(bw.why, Catch::Matchers::StartsWith(r.why));
    }
    CHECK(select::ib_lane_mbps(3) == 0);
    CHECK(select::ib_width_lanes(3) == 0);
}

TEST_CASE("rail speed: Ethernet speed first (rxe, plain ports), VLANs as their parent",
          "[rail][speed]") {
    topo::Snapshot s = machine(topo::BondMode::k8023ad, 25000, 25000);
    s.netdevs.back().speed_mbps = 10000; // eth9
    // rdma_rxe over a 10G NIC reports 1X SDR (ib_get_eth_speed's rounding
    // or a driver without a speed): the netdev's own speed wins.
    auto rxe = rail_bandwidth(s, "eth9", PortSpeed{1, 1});
    CHECK(rxe.mbps == 10000);
    CHECK(rxe.why == "Ethernet speed of eth9");
    auto vlan = rail_bandwidth(s, "bond0.7", PortSpeed{32, 1});
    CHECK(vlan.mbps == 50000);
    CHECK(vlan.why == "2 members x 25 Gb/s of bond0, LAG spreads");
}

TEST_CASE("rail speed: a bond spreads over its members, active-backup uses one",
          "[rail][speed][lag]") {
    struct Row {
        const char *what;
        topo::BondMode mode;
        int s0, s1;
        const char *active;
        PortSpeed port;
        uint32_t mbps;
        const char *why;
    };
    const Row rows[] = {
        {"802.3ad 2 x 25G",
         topo::BondMode::k8023ad,
         25000,
         25000,
         "",
         {32, 1},
         50000,
         "2 members x 25 Gb/s of bond0, LAG spreads"},
        {"balance-xor, unequal members",
         topo::BondMode::kBalanceXor,
         25000,
         10000,
         "",
         {},
         35000,
         "2 members, 35 Gb/s in all of bond0, LAG spreads"},
        {"802.3ad, one member without a speed (down)",
         topo::BondMode::k8023ad,
         25000,
         -1,
         "",
         {},
         25000,
         "1 member x 25 Gb/s of bond0, LAG spreads"},
        {"active-backup 2 x 100G: one",
         topo::BondMode::kActiveBackup,
         100000,
         100000,
         "eth1",
         {},
         100000,
         "1 member x 100 Gb/s of bond0, active-backup uses one"},
        {"active-backup, the active member's speed",
         topo::BondMode::kActiveBackup,
         10000,
         25000,
         "eth1",
         {},
         25000,
         "1 member x 25 Gb/s of bond0, active-backup uses one"},
        {"mlx5 LAG without Ethernet speeds: the codes per member",
         topo::BondMode::k8023ad,
         -1,
         -1,
         "",
         {32, 1},
         50000,
         "1X EDR (active_speed 32, active_width 1) x 2 LAG members, LAG spreads"},
        {"active-backup without Ethernet speeds: the codes once",
         topo::BondMode::kActiveBackup,
         -1,
         -1,
         "eth0",
         {32, 2},
         100000,
         "4X EDR (active_speed 32, active_width 2)"},
    };
    for (const Row &r : rows) {
        CAPTURE(r.what);
        const topo::Snapshot s = machine(r.mode, r.s0, r.s1, r.active);
        auto bw = rail_bandwidth(s, "bond0", r.port);
        CHECK(bw.mbps == r.mbps);
        CHECK(bw.why == r.why);
    }
}

TEST_CASE("rail speed: unknown speed keeps the default and says so", "[rail][speed]") {
    const topo::Snapshot s = machine(topo::BondMode::k8023ad, -1, -1);
    for (PortSpeed p : {PortSpeed{0, 0}, PortSpeed{0, 2}, PortSpeed{32, 0}, PortSpeed{3, 2}}) {
        CAPTURE(p.active_speed, p.active_width);
        auto bw = rail_bandwidth(s, "eth9", p);
        CHECK_FALSE(bw.derived());
        CHECK(bw.mbps == 0);
        CHECK_THAT(bw.why, contains_text("speed unknown") &&
                               contains_text("keeping the default"));
    }
    // A netdev the snapshot does not have: nothing to go by either.
    CHECK_FALSE(rail_bandwidth(s, "nosuch0", PortSpeed{}).derived());
}

TEST_CASE("rail speed: the fixtures' rails", "[rail][speed][fixtures]") {
    using testing::fixture;
    auto two = [](const char *netdev) {
        return rail_bandwidth(fixture("mlx5_two_bonds"), netdev, PortSpeed{});
    };
    CHECK(two("bond0").mbps == 50000);
    CHECK(two("bond0").why == "2 members x 25 Gb/s of bond0, LAG spreads");
    CHECK(two("bond1").mbps == 100000);
    CHECK(two("bond1").why == "1 member x 100 Gb/s of bond1, active-backup uses one");
    CHECK(rail_bandwidth(fixture("mlx5_lag_vxlan"), "bond1", PortSpeed{}).mbps == 50000);
    // Fixtures captured without a speed fall back to the port's codes.
    CHECK(rail_bandwidth(fixture("rxe_bond"), "bond0", PortSpeed{1, 1}).mbps == 4000);
}
