// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Manual overrides (GID index, qkey) are validated against the table, never
// used blindly: each invalid one is refused with its reason.
#include "catch.h"
#include "fixtures.h"
#include "select/options.h"
#include "select/selection.h"

using namespace roce;
using roce::testing::fixture;
using select::Options;

namespace {

select::PortChoice choose(const char *fix, const Options &o, const char *peer = nullptr,
                          bool privileged = false) {
    const topo::Snapshot &s = fixture(fix);
    std::optional<select::Peer> p;
    if (peer != nullptr) {
        p = *select::parse_peer(peer);
    }
    return select::select_port(s, s.devices[0], s.devices[0].ports[0], o, p ? &*p : nullptr,
                               privileged);
}

Options with_index(int index) {
    Options o;
    o.gid_index = index;
    return o;
}

} // namespace

TEST_CASE("override: each invalid GID index or qkey is refused with the reason",
          "[select][override]") {
    const std::string auto_choice =
        "; the automatic choice would be gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0, "
        "198.18.0.11/24) (unset btl_roce_gid_index to use it)";
    struct Case {
        const char *what;
        const char *fixture;
        Options options;
        std::string error;
    };
    Options v2 = with_index(2);
    v2.roce_version = select::RoceVersion::kV2;
    Options excluded = with_index(5);
    excluded.exclude = *select::parse_rules("x", "bond0.3027");
    Options ipv4 = with_index(1);
    ipv4.address_family = select::AddressFamily::kIPv4;
    Options controlled;
    controlled.qkey = 0x80000001u;
    Options no_v2_slot = with_index(5);
    no_v2_slot.include = *select::parse_rules("x", "198.18.0.0/24");

    const std::vector<Case> cases = {
        {"index out of range", "mlx5_lag", with_index(300),
         "btl_roce_gid_index = 300 is out of range: mlx5_bond_0:1 has 255 GID slots (0..254)" +
             auto_choice},
        {"empty slot", "mlx5_lag", with_index(8),
         "btl_roce_gid_index = 8: slot 8 of mlx5_bond_0:1 is empty (an address change frees and "
         "moves GID slots)" +
             auto_choice},
        {"the slot the bond's old address held, after the change", "mlx5_lag_readdressed",
         with_index(3),
         "btl_roce_gid_index = 3: slot 3 of mlx5_bond_0:1 is empty (an address change frees and "
         "moves GID slots); the automatic choice would be gid[5] ::ffff:198.19.0.11 (RoCE v2, "
         "bond0.3027, 198.19.0.11/24) (unset btl_roce_gid_index to use it)"},
        {"RoCE v1 when v2 is required", "mlx5_lag", v2,
         "btl_roce_gid_index = 2: gid[2] ::ffff:198.18.0.11 (RoCE v1, bond0, 198.18.0.11/24) is "
         "not usable: RoCE v1, but btl_roce_roce_version = 2 requires RoCE v2" +
             auto_choice},
        {"excluded netdev", "mlx5_lag", excluded,
         "btl_roce_gid_index = 5: gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027, "
         "198.19.0.11/24) is not usable: netdev bond0.3027 is excluded by btl_roce_if_exclude "
         "entry 'bond0.3027'" +
             auto_choice},
        {"address outside the include list", "mlx5_lag", no_v2_slot,
         "btl_roce_gid_index = 5: gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027, "
         "198.19.0.11/24) is not usable: address 198.19.0.11 is not in btl_roce_if_include "
         "(198.18.0.0/24)" +
             auto_choice},
        {"IPv6 link-local when IPv4 is required", "mlx5_lag", ipv4,
         "btl_roce_gid_index = 1: gid[1] fe80::ba59:9fff:fe10:2a (RoCE v2, bond0, "
         "fe80::ba59:9fff:fe10:2a/64) is not usable: IPv6, but btl_roce_address_family = ipv4" +
             auto_choice},
        {"qkey with bit 31 set, unprivileged", "mlx5_lag", controlled,
         "btl_roce_qkey = 0x80000001 has bit 31 set (a controlled qkey): ibv_modify_qp refuses "
         "it with EPERM (Operation not permitted) for a process without CAP_NET_RAW (Linux >= "
         "6.4); use a qkey below 0x80000000, e.g. the default 0x1ee7a330"},
    };
    for (const auto &c : cases) {
        INFO(c.what);
        auto pc = choose(c.fixture, c.options);
        INFO("explanation: " << pc.explanation());
        CHECK_FALSE(pc.ok());
        CHECK(pc.error == c.error);
    }
}

TEST_CASE("override: a valid GID index is used, checked and explained", "[select][override]") {
    auto pc = choose("mlx5_lag", with_index(5));
    REQUIRE(pc.ok());
    CHECK(pc.selection->gid_index == 5);
    CHECK(pc.selection->netdev == "bond0.3027");
    CHECK(pc.selection->path_mtu == IBV_MTU_1024);
    CHECK_THAT(pc.explanation(),
               contains_text(
                   "gid: gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027, 198.19.0.11/24), set by "
                   "btl_roce_gid_index = 5 and checked: the slot is populated, RoCE, of the "
                   "allowed version and family, on an allowed netdev"));
    for (const auto &v : pc.gids) {
        CHECK(v.chosen == (v.index == 5));
        if (v.index == 3) {
            CHECK(v.why == "not the configured btl_roce_gid_index = 5");
        }
    }

    // A peer outside its subnet is noted, not refused: routed RoCE v2.
    auto routed = choose("mlx5_lag", with_index(5), "198.18.0.12");
    REQUIRE(routed.ok());
    CHECK_THAT(routed.explanation(),
               contains_text("note: peer 198.18.0.12 is outside its subnet; used "
                             "because btl_roce_gid_index = 5 was set explicitly "
                             "(routed RoCE v2)"));

    // RoCE v1 by index is allowed under automatic version, with a note.
    auto v1 = choose("mlx5_lag", with_index(2));
    REQUIRE(v1.ok());
    CHECK_THAT(v1.explanation(),
               contains_text("note: gid[2] ::ffff:198.18.0.11 (RoCE v1, bond0, "
                             "198.18.0.11/24) is RoCE v1 (v2 would be preferred)"));
}

TEST_CASE("override: a controlled qkey is allowed only when privileged", "[select][override]") {
    Options o;
    o.qkey = 0x80000001u;
    auto pc = choose("mlx5_lag", o, nullptr, true);
    REQUIRE(pc.ok());
    CHECK(pc.selection->qkey == 0x80000001u);
    CHECK_THAT(pc.explanation(),
               contains_text("qkey: 0x80000001 is a controlled qkey (bit 31 set); "
                             "allowed because this process has root or CAP_NET_RAW"));
    // parse_options refuses it up front for an unprivileged process too.
    select::RawOptions raw;
    raw.prefix = "btl_roce_";
    raw.qkey = 0x80000001LL;
    auto parsed = select::parse_options(raw, false);
    REQUIRE_FALSE(parsed.is_ok());
    CHECK(parsed.status().sys_errno() == EPERM);
}
