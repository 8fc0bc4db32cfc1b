// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The automatic addressing policy over the capture fixtures: each case
// asserts the chosen GID index and the explanation, or the refusal and its
// reason.
#include <functional>

#include "catch.h"
#include "fixtures.h"
#include "select/mtu.h"
#include "select/options.h"
#include "select/selection.h"

using namespace roce;
using roce::testing::fixture;
using select::Options;

namespace {

struct Case {
    const char *what;
    const char *fixture;
    std::string port;                          ///< "mlx5_bond_0:1"
    std::function<void(Options &)> configure;  ///< may be empty
    const char *peer;                          ///< nullptr: no peer
    int want_index;                            ///< -1: a refusal
    std::vector<std::string> want;             ///< each must appear in the explanation/error
    ibv_mtu want_mtu = IBV_MTU_1024;           ///< checked when want_index >= 0
};

select::PortChoice run(const Case &c, const topo::Snapshot &snap) {
    Options o;
    if (c.configure) {
        c.configure(o);
    }
    std::vector<select::Peer> peers;
    if (c.peer != nullptr) {
        auto p = select::parse_peer(c.peer);
        REQUIRE(p.is_ok());
        peers.push_back(*p);
    }
    auto report = select::select_all(snap, o, peers, false);
    for (auto &pc : report.ports) {
        if (pc.device + ":" + std::to_string(pc.port) == c.port) {
            return pc;
        }
    }
    FAIL("no result for " << c.port);
    return {};
}

void check(const Case &c, const topo::Snapshot &snap) {
    INFO(c.what);
    select::PortChoice pc = run(c, snap);
    std::string text = pc.explanation() + " | " + pc.error;
    INFO("explanation: " << pc.explanation());
    INFO("error: " << pc.error);
    if (c.want_index >= 0) {
        REQUIRE(pc.ok());
        CHECK(pc.error.empty());
        CHECK(pc.selection->gid_index == c.want_index);
        CHECK(pc.selection->path_mtu == c.want_mtu);
        CHECK(pc.selection->pkey_index == 0);
        CHECK(pc.selection->pkey == 0xffff);
        CHECK(pc.selection->qkey == select::kDefaultQkey);
        int chosen = 0;
        for (const auto &v : pc.gids) {
            chosen += v.chosen;
            CHECK(v.chosen == (v.index == c.want_index));
        }
        CHECK(chosen == 1);
    } else {
        CHECK_FALSE(pc.ok());
        CHECK_FALSE(pc.error.empty());
    }
    for (const auto &w : c.want) {
        CHECK_THAT(text, contains_text(w));
    }
}

const std::string kMtu4096Bond0 =
    "path_mtu: 4096 (IBV_MTU_4096) = min(port active MTU unknown (sysfs does not show it), bond0 "
    "MTU 9000 -> 4096 after 96 bytes of RoCE headers)";
const std::string kMtu1024Vlan =
    "path_mtu: 1024 (IBV_MTU_1024) = min(port active MTU unknown (sysfs does not show it), "
    "bond0.3027 MTU 1500 -> 1024 after 96 bytes of RoCE headers)";

} // namespace

TEST_CASE("select: the two-member mlx5 LAG, with and without peers", "[select][lag]") {
    const std::vector<Case> cases = {
        {"no peer: first RoCE v2 IPv4 GID, the tie with the VLAN explained", "mlx5_lag",
         "mlx5_bond_0:1", {}, nullptr, 3,
         {"port: mlx5_bond_0 port 1 of 1 (phys_port_cnt), ACTIVE, Ethernet",
          "gid: gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0, 198.18.0.11/24): best of 8 usable GIDs "
          "(link-local only as a last resort, RoCE v2 before v1, IPv4-mapped before IPv6, the "
          "port's own netdev or a VLAN on it before overlays and other devices, lowest index on "
          "ties)",
          "decided by: the lowest index, a tie (gid[5] on bond0.3027 ranked next)",
          "tie: gid[5] (bond0.3027) ranks the same and the lower index won; give a peer address "
          "or btl_roce_if_include to choose by subnet or netdev",
          "others: gid[0], gid[1], gid[6], gid[7]: link-local, a last resort; gid[2], gid[4]: "
          "RoCE v1 ranks below v2; gid[5]: same rank as gid[3], higher index",
          "pkey: pkey_index 0 holds 0xffff, the default full-membership pkey (table of 1 entry)",
          "qkey: 0x1ee7a330 (bit 31 clear, so no privilege is needed)", kMtu4096Bond0},
         IBV_MTU_4096},
        {"peer on the VLAN's subnet: the VLAN GID, MTU of the VLAN", "mlx5_lag", "mlx5_bond_0:1",
         {}, "198.19.0.12", 5,
         {"gid: gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027, 198.19.0.11/24): best of 2 usable "
          "GIDs",
          "reaches peer 198.19.0.12 (in 198.19.0.0/24)",
          "gid[0], gid[1], gid[2], gid[3], gid[6], gid[7]: does not reach peer 198.19.0.12",
          "gid[4]: RoCE v1 ranks below v2", kMtu1024Vlan},
         IBV_MTU_1024},
        {"peer on the bond's subnet", "mlx5_lag", "mlx5_bond_0:1", {}, "198.18.0.12/24", 3,
         {"reaches peer 198.18.0.12 (in 198.18.0.0/24)", kMtu4096Bond0}, IBV_MTU_4096},
        {"peer that advertises a wider subnet holding our address", "mlx5_lag", "mlx5_bond_0:1",
         {}, "198.19.5.7/16", 5,
         {"reaches peer 198.19.5.7 (its subnet 198.19.0.0/16 holds 198.19.0.11)"}},
        {"peer as an IPv4-mapped GID", "mlx5_lag", "mlx5_bond_0:1", {}, "::ffff:198.19.0.12", 5,
         {"reaches peer 198.19.0.12 (in 198.19.0.0/24)"}},
        {"unreachable peer: both sides' subnets named", "mlx5_lag", "mlx5_bond_0:1", {},
         "203.0.113.9", -1,
         {"no reachable GID on mlx5_bond_0:1 for peer 203.0.113.9: local subnets fe80::/64 on "
          "bond0 (gid[0], gid[1]), 198.18.0.0/24 on bond0 (gid[2], gid[3]), 198.19.0.0/24 on "
          "bond0.3027 (gid[4], gid[5]), fe80::/64 on bond0.3027 (gid[6], gid[7]); peer "
          "203.0.113.9 (prefix not advertised). Put both sides in one subnet (or VLAN), or set "
          "btl_roce_gid_index if the fabric routes RoCE v2 between them"}},
        {"unreachable peer with its subnet", "mlx5_lag", "mlx5_bond_0:1", {}, "203.0.113.9/24", -1,
         {"; peer 203.0.113.0/24 (203.0.113.9)."}},
        {"link-local peer: link-local as the last resort, the VLAN tie named", "mlx5_lag",
         "mlx5_bond_0:1", {}, "fe80::1", 1,
         {"reaches peer fe80::1 (both link-local: same link assumed)",
          "only link-local GIDs are usable: link-local is the last resort",
          "tie: gid[7] (bond0.3027) ranks the same and reaches the peer too and the lower index "
          "won; use btl_roce_if_include to choose by subnet or netdev"},
         IBV_MTU_4096},
        {"roce_version 1", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.roce_version = select::RoceVersion::kV1; }, nullptr, 2,
         {"gid: gid[2] ::ffff:198.18.0.11 (RoCE v1, bond0, 198.18.0.11/24)",
          "gid[1], gid[3], gid[5], gid[7]: RoCE v2, but btl_roce_roce_version = 1 requires RoCE "
          "v1"},
         IBV_MTU_4096},
        {"address_family ipv6 on an IPv4 fabric: link-local only", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.address_family = select::AddressFamily::kIPv6; }, nullptr, 1,
         {"gid[2], gid[3], gid[4], gid[5]: IPv4-mapped, but btl_roce_address_family = ipv6",
          "only link-local GIDs are usable"},
         IBV_MTU_4096},
        {"include the VLAN netdev", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.include = *select::parse_rules("x", "bond0.3027"); }, nullptr, 5,
         {"gid[0], gid[1], gid[2], gid[3]: netdev bond0 is not in btl_roce_if_include "
          "(bond0.3027)"}},
        {"exclude the bond's subnet", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.exclude = *select::parse_rules("x", "198.18.0.0/24"); }, nullptr, 5,
         {"gid[2], gid[3]: address 198.18.0.11 is excluded by btl_roce_if_exclude entry "
          "'198.18.0.0/24'"}},
        {"include device and subnet: both must match", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.include = *select::parse_rules("x", "mlx5_bond_0,198.19.0.0/24"); },
         nullptr, 5, {"address 198.18.0.11 is not in btl_roce_if_include (198.19.0.0/24)"}},
        {"include names a port the LAG device does not have", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.include = *select::parse_rules("x", "mlx5_bond_0:2"); }, nullptr, -1,
         {"mlx5_bond_0:1: not selected: btl_roce_if_include (mlx5_bond_0:2) does not list "
          "mlx5_bond_0:1"}},
        {"exclude the device", "mlx5_lag", "mlx5_bond_0:1",
         [](Options &o) { o.exclude = *select::parse_rules("x", "mlx5_bond_0"); }, nullptr, -1,
         {"mlx5_bond_0:1: excluded by btl_roce_if_exclude entry 'mlx5_bond_0'"}},
        {"re-addressed bond: the new address moved to slot 9", "mlx5_lag_readdressed",
         "mlx5_bond_0:1", {}, "198.18.0.30", 9,
         {"gid: gid[9] ::ffff:198.18.0.21 (RoCE v2, bond0, 198.18.0.21/24)",
          "reaches peer 198.18.0.30 (in 198.18.0.0/24)"},
         IBV_MTU_4096},
        {"re-addressed bond, no peer: the VLAN now has the lowest index", "mlx5_lag_readdressed",
         "mlx5_bond_0:1", {}, nullptr, 5,
         {"tie: gid[9] (bond0) ranks the same", "gid[4], gid[8]: RoCE v1 ranks below v2"}},
        {"rxe over the VM fabric's bond", "rxe_bond", "rxe_bond0:1", {}, "198.19.0.2", 2,
         {"gid: gid[2] ::ffff:198.19.0.1 (RoCE v2, bond0.3027, 198.19.0.1/24)"}},
    };
    for (const auto &c : cases) {
        check(c, fixture(c.fixture));
    }
}

TEST_CASE("select: notes about include/exclude entries that name nothing", "[select][rules]") {
    Options o;
    o.include = *select::parse_rules("x", "mlx5_bond_0:2,mlx5_bnd_0");
    auto report = select::select_all(fixture("mlx5_lag"), o, {}, false);
    CHECK(report.notes == std::vector<std::string>{
                              "btl_roce_if_include entry 'mlx5_bond_0:2' names port 2, but "
                              "mlx5_bond_0 has 1 port",
                              "btl_roce_if_include entry 'mlx5_bnd_0' names neither an RDMA "
                              "device nor a netdev here"});
    REQUIRE(report.ports.size() == 1);
    CHECK_FALSE(report.ports[0].ok());
}

TEST_CASE("select: IPv6-only network", "[select][ipv6]") {
    const std::vector<Case> cases = {
        {"global IPv6 when there is no IPv4", "mlx5_ipv6_only", "mlx5_0:1", {}, nullptr, 3,
         {"gid: gid[3] 2001:db8:1::11 (RoCE v2, ens1f0np0, 2001:db8:1::11/64)",
          "no usable IPv4-mapped GID: using global IPv6",
          "others: gid[0], gid[1]: link-local, a last resort; gid[2]: RoCE v1 ranks below v2",
          "path_mtu: 4096 (IBV_MTU_4096) = min(port active MTU unknown (sysfs does not show it), "
          "ens1f0np0 MTU 4200 -> 4096 after 96 bytes of RoCE headers)"},
         IBV_MTU_4096},
        {"IPv6 peer in the subnet", "mlx5_ipv6_only", "mlx5_0:1", {}, "2001:db8:1::12", 3,
         {"reaches peer 2001:db8:1::12 (in 2001:db8:1::/64)"}, IBV_MTU_4096},
        {"IPv6 peer in another subnet", "mlx5_ipv6_only", "mlx5_0:1", {}, "2001:db8:2::12/64", -1,
         {"no reachable GID on mlx5_0:1 for peer 2001:db8:2::12/64: local subnets fe80::/64 on "
          "ens1f0np0 (gid[0], gid[1]), 2001:db8:1::/64 on ens1f0np0 (gid[2], gid[3]); peer "
          "2001:db8:2::/64 (2001:db8:2::12)."}},
        {"address_family ipv4 on an IPv6-only network", "mlx5_ipv6_only", "mlx5_0:1",
         [](Options &o) { o.address_family = select::AddressFamily::kIPv4; }, nullptr, -1,
         {"no usable GID on mlx5_0:1: gid[0], gid[1], gid[2], gid[3]: IPv6, but "
          "btl_roce_address_family = ipv4"}},
    };
    for (const auto &c : cases) {
        check(c, fixture(c.fixture));
    }
}

TEST_CASE("select: a device with two separate, non-bonded ports", "[select][ports]") {
    const std::vector<Case> cases = {
        {"port 1 on eth2 (MTU 9000)", "mlx4_two_ports", "mlx4_0:1", {}, nullptr, 3,
         {"port: mlx4_0 port 1 of 2 (phys_port_cnt)",
          "gid: gid[3] ::ffff:198.18.1.11 (RoCE v2, eth2, 198.18.1.11/24)",
          "pkey: pkey_index 0 holds 0xffff, the default full-membership pkey (table of 128 "
          "entries)"},
         IBV_MTU_4096},
        {"port 2 on eth3 (MTU 1500)", "mlx4_two_ports", "mlx4_0:2", {}, nullptr, 3,
         {"port: mlx4_0 port 2 of 2 (phys_port_cnt)",
          "gid: gid[3] ::ffff:198.18.2.11 (RoCE v2, eth3, 198.18.2.11/24)"},
         IBV_MTU_1024},
        {"include port 2 only: port 1 refused", "mlx4_two_ports", "mlx4_0:1",
         [](Options &o) { o.include = *select::parse_rules("x", "mlx4_0:2"); }, nullptr, -1,
         {"mlx4_0:1: not selected: btl_roce_if_include (mlx4_0:2) does not list mlx4_0:1"}},
        {"include port 2 only: port 2 chosen", "mlx4_two_ports", "mlx4_0:2",
         [](Options &o) { o.include = *select::parse_rules("x", "mlx4_0:2"); }, nullptr, 3, {}},
        {"a peer on port 2's subnet cannot be reached from port 1", "mlx4_two_ports", "mlx4_0:1",
         {}, "198.18.2.12", -1, {"no reachable GID on mlx4_0:1 for peer 198.18.2.12"}},
        {"... but from port 2", "mlx4_two_ports", "mlx4_0:2", {}, "198.18.2.12", 3, {}},
    };
    for (const auto &c : cases) {
        check(c, fixture(c.fixture));
    }
}

TEST_CASE("select: port, netdev, pkey and MTU conditions", "[select][port]") {
    auto base = [] { return fixture("mlx5_lag"); };
    auto port0 = [](topo::Snapshot &s) -> topo::PortInfo & { return s.devices[0].ports[0]; };
    struct Variant {
        const char *what;
        std::function<void(topo::Snapshot &)> change;
        int want_index;
        std::vector<std::string> want;
        ibv_mtu want_mtu;
    };
    const std::vector<Variant> variants = {
        {"a VLAN that is down is demoted, not hidden",
         [](topo::Snapshot &s) {
             for (auto &n : s.netdevs) {
                 if (n.name == "bond0.3027") {
                     n.operstate = topo::OperState::kDown;
                 }
             }
         },
         3, {"gid[4], gid[5], gid[6], gid[7]: netdev bond0.3027 is not up"}, IBV_MTU_4096},
        {"port down", [&](topo::Snapshot &s) { port0(s).state = topo::PortState::kDown; }, -1,
         {"mlx5_bond_0:1: port state is DOWN, not ACTIVE (is the netdev or a bond member down?)"},
         IBV_MTU_1024},
        {"InfiniBand port",
         [&](topo::Snapshot &s) { port0(s).link_layer = topo::LinkLayer::kInfiniBand; }, -1,
         {"link layer is InfiniBand, not Ethernet: ompi-roce uses RoCE ports only"}, IBV_MTU_1024},
        {"empty GID table", [&](topo::Snapshot &s) { port0(s).gids.clear(); }, -1,
         {"the GID table of mlx5_bond_0:1 is empty: its netdev has no IP address and no "
          "link-local address (is it up?)"},
         IBV_MTU_1024},
        {"no default pkey",
         [&](topo::Snapshot &s) { port0(s).pkeys = {0x7fff, 0x8001}; }, -1,
         {"no pkey slot holds the default full-membership pkey 0xffff (table: [0] 0x7fff, [1] "
          "0x8001)"},
         IBV_MTU_1024},
        {"a netdev MTU too small for RoCE",
         [](topo::Snapshot &s) {
             for (auto &n : s.netdevs) {
                 n.mtu = n.name == "bond0" ? 300 : n.mtu;
             }
         },
         -1, {"netdev bond0 has MTU 300, too small for RoCE (at least 352 = 256 bytes of payload "
              "+ 96 bytes of RoCE headers)"},
         IBV_MTU_1024},
        {"active MTU known and lower than the netdev's",
         [&](topo::Snapshot &s) { port0(s).active_mtu = 2048; }, 3,
         {"path_mtu: 2048 (IBV_MTU_2048) = min(port active MTU 2048, bond0 MTU 9000 -> 4096 "
          "after 96 bytes of RoCE headers)"},
         IBV_MTU_2048},
    };
    for (const auto &v : variants) {
        INFO(v.what);
        topo::Snapshot s = base();
        v.change(s);
        auto pc = select::select_port(s, s.devices[0], s.devices[0].ports[0], Options{}, nullptr,
                                      false);
        std::string text = pc.explanation() + " | " + pc.error;
        INFO(text);
        CHECK(pc.ok() == (v.want_index >= 0));
        if (pc.ok()) {
            CHECK(pc.selection->gid_index == v.want_index);
            CHECK(pc.selection->path_mtu == v.want_mtu);
        }
        for (const auto &w : v.want) {
            CHECK_THAT(text, contains_text(w));
        }
    }

    topo::Snapshot ib_style = base();
    port0(ib_style).pkeys = {0x7fff, 0x8001, 0xffff};
    auto pc = select::select_port(ib_style, ib_style.devices[0], ib_style.devices[0].ports[0],
                                  Options{}, nullptr, false);
    REQUIRE(pc.ok());
    CHECK(pc.selection->pkey_index == 2);
}

TEST_CASE("select: IB MTU from the netdev MTU, as the kernel's iboe_get_mtu", "[select][mtu]") {
    struct {
        int netdev;
        int ib;
    } table[] = {{1500, 1024}, {9000, 4096}, {4200, 4096}, {4191, 2048}, {4192, 4096},
                 {2144, 2048}, {2143, 1024}, {1120, 1024}, {1119, 512}, {352, 256}, {351, 0}};
    for (const auto &r : table) {
        INFO("netdev MTU " << r.netdev);
        CHECK(select::iboe_mtu_bytes(r.netdev) == r.ib);
    }
    // What port and netdev carry together (0: unknown).
    CHECK(select::carried_mtu_bytes(4096, 1500) == 1024);
    CHECK(select::carried_mtu_bytes(1024, 9000) == 1024);
    CHECK(select::carried_mtu_bytes(0, 9000) == 4096);
    CHECK(select::carried_mtu_bytes(2048, 0) == 2048);
    CHECK(select::carried_mtu_bytes(0, 0) == 0);
    CHECK(select::carried_mtu_bytes(0, 351) == 0);
    CHECK(select::mtu_enum(1024) == IBV_MTU_1024);
    CHECK(select::mtu_enum(3000) == IBV_MTU_2048);
    CHECK(select::mtu_enum(0) == IBV_MTU_256);
    CHECK(select::mtu_bytes(IBV_MTU_4096) == 4096);
    CHECK(select::mtu_bytes(static_cast<ibv_mtu>(7)) == 0);
    CHECK(std::string(select::mtu_name(IBV_MTU_512)) == "IBV_MTU_512");
    CHECK(std::string(select::mtu_name(static_cast<ibv_mtu>(0))) == "invalid");
}

TEST_CASE("select: peer addresses from the command line", "[select][peer]") {
    auto p = select::parse_peer("::ffff:198.19.0.12/120");
    REQUIRE(p.is_ok());
    CHECK(p->addresses[0].address.to_string() == "198.19.0.12");
    CHECK(p->addresses[0].prefix_len == 24);
    auto bad = select::parse_peer("node7");
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().message() == "peer 'node7' is not an IPv4 or IPv6 address (forms: "
                                    "198.19.0.12, 198.19.0.12/24, ::ffff:198.19.0.12, "
                                    "2001:db8::12/64)");
    CHECK_FALSE(select::parse_peer("198.19.0.12/33").is_ok());
    CHECK_FALSE(select::parse_peer("198.19.0.12/x").is_ok());
}

TEST_CASE("policy: with a peer reachable from two subnets both ends pick the same one",
          "[select][peer]") {
    // The peer has an address on the bond's subnet and one on the VLAN's.
    select::Peer peer;
    peer.name = "node2";
    for (const char *a : {"198.19.0.12", "198.18.0.12"}) {
        select::PeerAddress pa;
        pa.address = *util::IpAddress::parse(a);
        pa.prefix_len = 24;
        pa.type = topo::GidType::kRoceV2;
        peer.addresses.push_back(pa);
    }
    // On mlx5_lag the bond's GID sits below the VLAN's; after the bond was
    // readdressed (mlx5_lag_readdressed) its new GID sits above. The slot
    // order differs, the choice of subnet must not: a peer whose table is
    // ordered the other way makes the same choice, and the two ends meet.
    for (const char *fix : {"mlx5_lag", "mlx5_lag_readdressed"}) {
        INFO(fix);
        const topo::Snapshot &s = fixture(fix);
        select::PortChoice pc = select::select_port(s, s.devices[0], s.devices[0].ports[0],
                                                    Options{}, &peer, false);
        REQUIRE(pc.ok());
        CHECK(util::Subnet::of(util::IpAddress::from_gid(pc.selection->gid), 24).to_string() ==
              "198.18.0.0/24");
        CHECK(pc.selection->gid_index == (std::string(fix) == "mlx5_lag" ? 3 : 9));
    }
}

// Issue 16's public shapes as capture fixtures (tests/fixtures/README.md
// says where each comes from): the chosen index and the explanation's key
// phrases, with and without a peer.
TEST_CASE("select: GID tables users posted publicly", "[select][fixtures][public]") {
    const std::string kMtu4096Bond1 =
        "path_mtu: 4096 (IBV_MTU_4096) = min(port active MTU unknown (sysfs does not show it), "
        "bond1 MTU 9000 -> 4096 after 96 bytes of RoCE headers)";
    const std::vector<Case> cases = {
        {"ucx#9484: a VXLAN with the bond's address listed first loses to the bond",
         "mlx5_lag_vxlan", "mlx5_bond_0:1", {}, nullptr, 5,
         {"gid: gid[5] ::ffff:30.153.10.175 (RoCE v2, bond1, 30.153.10.175/24)",
          "decided by: the port's own netdev or a VLAN on it before other devices (gid[3] on "
          "b3.vxlan.30100 ranked next)",
          "gid[3] on b3.vxlan.30100 (a VXLAN overlay: the NIC does not encapsulate RoCE) lost to "
          "gid[5] on bond1, the port's own netdev"},
         IBV_MTU_4096},
        {"ucx#9484 with a peer both GIDs reach", "mlx5_lag_vxlan", "mlx5_bond_0:1", {},
         "30.153.10.176", 5,
         {"reaches peer 30.153.10.176",
          "gid[3] on b3.vxlan.30100 (a VXLAN overlay: the NIC does not encapsulate RoCE) lost to "
          "gid[5] on bond1, the port's own netdev"},
         IBV_MTU_4096},
        {"two bonded devices: the first rail on its subnet", "mlx5_two_bonds", "mlx5_bond_0:1", {},
         "198.18.0.12", 3, {"reaches peer 198.18.0.12 (in 198.18.0.0/24)"}, IBV_MTU_4096},
        {"two bonded devices: the second rail on its subnet", "mlx5_two_bonds", "mlx5_bond_1:1",
         {}, "198.20.0.12", 3, {"reaches peer 198.20.0.12 (in 198.20.0.0/24)", kMtu4096Bond1},
         IBV_MTU_4096},
        {"two bonded devices: the first rail does not reach the second's subnet",
         "mlx5_two_bonds", "mlx5_bond_0:1", {}, "198.20.0.12/24", -1,
         {"no reachable GID on mlx5_bond_0:1 for peer 198.20.0.12/24"}},
        {"uccl#803: IPv6-only bnxt_re, link-local and ULA: the ULA RoCE v2 entry",
         "bnxt_ipv6_ula", "bnxt_re0:1", {}, nullptr, 3,
         {"gid: gid[3] fd93:16d3:59b6:1::11 (RoCE v2, ens3f0np0, fd93:16d3:59b6:1::11/64)",
          "no usable IPv4-mapped GID: using unique-local IPv6 (fc00::/7, routed within the site)",
          "gid[0], gid[1]: link-local, a last resort"},
         IBV_MTU_4096},
        {"uccl#803 with a ULA peer", "bnxt_ipv6_ula", "bnxt_re0:1", {}, "fd93:16d3:59b6:1::12", 3,
         {"reaches peer fd93:16d3:59b6:1::12 (in fd93:16d3:59b6:1::/64)"}, IBV_MTU_4096},
        {"link-local RoCE v2 at [1], IPv4 RoCE v2 at [3]: [3]", "mlx5_gid3", "mlx5_0:1", {},
         nullptr, 3,
         {"gid: gid[3] ::ffff:192.168.60.11 (RoCE v2, ens1f0np0, 192.168.60.11/24)",
          "decided by: RoCE v2 before v1 (gid[2] on ens1f0np0 ranked next)",
          "gid[0], gid[1]: link-local, a last resort"},
         IBV_MTU_4096},
        {"link-local RoCE v2 at [1] stays a last resort with a peer", "mlx5_gid3", "mlx5_0:1", {},
         "192.168.60.12", 3, {"reaches peer 192.168.60.12 (in 192.168.60.0/24)"}, IBV_MTU_4096},
    };
    for (const auto &c : cases) {
        check(c, fixture(c.fixture));
    }
}
