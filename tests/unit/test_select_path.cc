// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// One addressing decision per path (select_path), whether a peer address is
// on a selection's link (on_link), and what a newer snapshot does to a
// selection (revalidate): tables of cases over the capture fixtures.
#include <algorithm>
#include <functional>

#include "catch.h"
#include "fixtures.h"
#include "qp/preflight.h"
#include "qp/transitions.h"
#include "select/path.h"

using namespace roce;
using roce::testing::fixture;
using select::Validity;

namespace {

/// "198.18.0.12/24", "198.18.0.12" (no prefix advertised), "v1:198.18.0.12/24".
select::PeerAddress peer_address(const std::string &text) {
    bool v1 = text.rfind("v1:", 0) == 0;
    auto p = select::parse_peer(v1 ? text.substr(3) : text);
    REQUIRE(p.is_ok());
    select::PeerAddress a = p->addresses.front();
    a.type = v1 ? topo::GidType::kRoceV1 : topo::GidType::kRoceV2;
    return a;
}

select::PeerPort peer_port(const std::vector<std::string> &addresses, ibv_mtu mtu) {
    select::PeerPort pp;
    pp.peer.name = "rank 1";
    for (const auto &a : addresses) {
        pp.peer.addresses.push_back(peer_address(a));
    }
    pp.path_mtu = mtu;
    return pp;
}

std::string gid_text(const std::array<uint8_t, 16> &g) {
    return util::IpAddress::from_gid(g).to_string();
}

struct PathCase {
    const char *what;
    const char *fixture;
    select::PortRef port;
    std::vector<std::string> peer; ///< the peer's advertised addresses, its order
    ibv_mtu peer_mtu;
    std::function<void(select::Options &)> configure;
    int want_index;          ///< -1: a refusal; -2: any slot
    const char *want_remote; ///< with want_index >= 0
    int want_remote_prefix;
    ibv_mtu want_mtu;
    std::vector<std::string> want; ///< each in the explanation or the error
};

// A table reads better one case per row.
// clang-format off
const std::vector<PathCase> kPathCases = {
    {"same subnet, the peer's prefix advertised", "mlx5_lag", {"mlx5_bond_0", 1},
     {"198.18.0.12/24"}, IBV_MTU_4096, {}, 3, "198.18.0.12", 24, IBV_MTU_4096,
     {"remote: 198.18.0.12 (in 198.18.0.0/24), prefix 24"}},
    {"the VLAN's subnet: its GID and its MTU", "mlx5_lag", {"mlx5_bond_0", 1},
     {"198.19.0.12/24"}, IBV_MTU_4096, {}, 5, "198.19.0.12", 24, IBV_MTU_1024,
     {"bond0.3027"}},
    {"two shared subnets: both ends take the lower one; the remote is the peer's address on it",
     "mlx5_lag", {"mlx5_bond_0", 1}, {"198.19.0.12/24", "198.18.0.12/24"}, IBV_MTU_4096, {}, 3,
     "198.18.0.12", 24, IBV_MTU_4096, {"numerically lower"}},
    {"the peer's smaller MTU is the path's", "mlx5_lag", {"mlx5_bond_0", 1},
     {"198.18.0.12/24"}, IBV_MTU_2048, {}, 3, "198.18.0.12", 24, IBV_MTU_2048,
     {"path_mtu: 2048, the peer's (ours allows 4096)"}},
    {"no prefix advertised: ours decides, none is assumed", "mlx5_lag", {"mlx5_bond_0", 1},
     {"198.18.0.99"}, IBV_MTU_4096, {}, 3, "198.18.0.99", -1, IBV_MTU_4096,
     {"prefix not advertised"}},
    {"the peer's real prefix (/16) holds our address although ours (/24) does not hold it",
     "mlx5_lag", {"mlx5_bond_0", 1}, {"198.18.1.5/16"}, IBV_MTU_4096, {}, 3, "198.18.1.5", 16,
     IBV_MTU_4096, {"its subnet 198.18.0.0/16 holds 198.18.0.11"}},
    {"the same address without a prefix is not reachable: no /24 is invented", "mlx5_lag",
     {"mlx5_bond_0", 1}, {"198.18.1.5"}, IBV_MTU_4096, {}, -1, nullptr, -1, IBV_MTU_4096,
     {"no reachable GID", "198.18.1.5 (prefix not advertised)"}},
    {"a RoCE v1 peer is addressed from our v1 GID", "mlx5_lag", {"mlx5_bond_0", 1},
     {"v1:198.18.0.12/24"}, IBV_MTU_4096, {}, 2, "198.18.0.12", 24, IBV_MTU_4096, {}},
    {"gid_index set and the peer in another subnet: routed RoCE v2", "mlx5_lag",
     {"mlx5_bond_0", 1}, {"10.1.2.3/24"}, IBV_MTU_4096,
     [](select::Options &o) { o.gid_index = 3; }, 3, "10.1.2.3", 24, IBV_MTU_4096,
     {"routed: btl_roce_gid_index is set", "outside its subnet"}},
    {"gid_index set and the peer has no GID of that family", "mlx5_lag", {"mlx5_bond_0", 1},
     {"2001:db8:1::12/64"}, IBV_MTU_4096, [](select::Options &o) { o.gid_index = 3; }, -1,
     nullptr, -1, IBV_MTU_4096, {"advertises no RoCE v2 GID of that family"}},
    {"a port the device does not have", "mlx5_lag", {"mlx5_bond_0", 2}, {"198.18.0.12/24"},
     IBV_MTU_4096, {}, -1, nullptr, -1, IBV_MTU_4096,
     {"mlx5_bond_0:2 is not in the snapshot (no such port)"}},
    {"a device that is gone", "mlx5_lag", {"mlx5_bond_1", 1}, {"198.18.0.12/24"}, IBV_MTU_4096,
     {}, -1, nullptr, -1, IBV_MTU_4096, {"no such device"}},
    {"IPv6 only", "mlx5_ipv6_only", {"mlx5_0", 1}, {"2001:db8:1::12/64"}, IBV_MTU_4096, {}, -2,
     "2001:db8:1::12", 64, IBV_MTU_4096, {"2001:db8:1::/64"}},
    {"soft-RoCE over the bond's VLAN", "rxe_bond", {"rxe_bond0", 1}, {"198.19.0.2/24"},
     IBV_MTU_4096, {}, 2, "198.19.0.2", 24, IBV_MTU_1024, {}},
    {"two separate ports: port 2's subnet is not port 1's", "mlx4_two_ports", {"mlx4_0", 1},
     {"198.18.2.12/24"}, IBV_MTU_4096, {}, -1, nullptr, -1, IBV_MTU_4096,
     {"no reachable GID on mlx4_0:1"}},
    {"another rail's port: only link-local connects, the peer's routable subnet is not ours",
     "mlx5_two_bonds", {"mlx5_bond_1", 1}, {"fe80::ba59:9fff:fe40:11/64", "198.18.0.12/24"},
     IBV_MTU_4096, {}, -1, nullptr, -1, IBV_MTU_4096,
     {"only link-local addresses connect mlx5_bond_1:1 to peer rank 1", "while the peer's "
      "routable addresses (198.18.0.12/24) are on no subnet of this port"}},
    {"the same rail's port: its routable subnet is ours", "mlx5_two_bonds", {"mlx5_bond_1", 1},
     {"fe80::ba59:9fff:fe40:21/64", "198.20.0.12/24"}, IBV_MTU_4096, {}, 3, "198.20.0.12", 24,
     IBV_MTU_4096, {"remote: 198.20.0.12 (in 198.20.0.0/24)"}},
    {"a peer with only link-local addresses is still reached over link-local", "mlx5_two_bonds",
     {"mlx5_bond_1", 1}, {"fe80::ba59:9fff:fe40:21/64"}, IBV_MTU_4096, {}, 1,
     "fe80::ba59:9fff:fe40:21", 64, IBV_MTU_4096, {}},
};
// clang-format on

} // namespace

TEST_CASE("select_path: one decision per path, with the remote GID, the MTU and why",
          "[select][path]") {
    for (const auto &c : kPathCases) {
        INFO(c.what);
        const topo::Snapshot &snap = fixture(c.fixture);
        select::Options o;
        if (c.configure) {
            c.configure(o);
        }
        select::PathDecision d =
            select::select_path(snap, c.port, o, peer_port(c.peer, c.peer_mtu), false);
        std::string text = d.explanation() + " | " + d.error;
        INFO(text);
        if (c.want_index == -1) {
            CHECK_FALSE(d.ok());
            CHECK_FALSE(d.error.empty());
        } else {
            REQUIRE(d.ok());
            CHECK(d.error.empty());
            if (c.want_index >= 0) {
                CHECK(d.selection->gid_index == c.want_index);
            }
            CHECK(d.selection->device == c.port.device);
            CHECK(d.selection->port == c.port.port);
            CHECK(gid_text(d.remote_gid) == c.want_remote);
            CHECK(d.remote_prefix_len == c.want_remote_prefix);
            CHECK(d.selection->path_mtu == c.want_mtu);
            // The remote GID is of the chosen GID's family.
            CHECK(util::IpAddress::from_gid(d.remote_gid).family() ==
                  util::IpAddress::from_gid(d.selection->gid).family());
        }
        for (const auto &w : c.want) {
            CHECK_THAT(text, contains_text(w));
        }
    }
}

TEST_CASE("select_path: the local choice is select_port's for the same peer", "[select][path]") {
    // select_path adds the remote end; it never chooses our GID differently.
    for (const auto &c : kPathCases) {
        const topo::Snapshot &snap = fixture(c.fixture);
        const topo::DeviceInfo *dev = snap.find_device(c.port.device);
        const topo::PortInfo *port = dev != nullptr ? dev->find_port(c.port.port) : nullptr;
        if (port == nullptr) {
            continue;
        }
        INFO(c.what);
        select::Options o;
        if (c.configure) {
            c.configure(o);
        }
        select::PeerPort pp = peer_port(c.peer, IBV_MTU_4096);
        select::PortChoice pc = select::select_port(snap, *dev, *port, o, &pp.peer, false);
        select::PathDecision d = select::select_path(snap, c.port, o, pp, false);
        if (!d.ok()) {
            continue; // refused for the remote end (checked above) or like select_port
        }
        REQUIRE(pc.ok());
        CHECK(d.selection->gid_index == pc.selection->gid_index);
        CHECK(d.selection->path_mtu == pc.selection->path_mtu);
    }
}

TEST_CASE("on_link: a peer heard from a new address", "[select][path]") {
    const topo::Snapshot &snap = fixture("mlx5_lag");
    select::Options o;
    o.gid_index = 3; // 198.18.0.11/24 on bond0
    auto pc =
        select::select_port(snap, snap.devices[0], snap.devices[0].ports[0], o, nullptr, false);
    REQUIRE(pc.ok());
    struct Case {
        const char *remote;
        bool want;
    };
    for (const Case &c : std::vector<Case>{{"198.18.0.40/24", true},
                                           {"198.18.0.40", true},
                                           {"198.19.0.40/24", false},
                                           {"198.18.1.40", false},
                                           {"198.18.1.40/16", true},
                                           {"v1:198.18.0.40/24", false},
                                           {"2001:db8::40/64", false}}) {
        INFO(c.remote);
        CHECK(select::on_link(snap, *pc.selection, peer_address(c.remote)) == c.want);
    }
}

namespace {

using Edit = std::function<void(topo::Snapshot &)>;

topo::PortInfo &lag_port(topo::Snapshot &s) {
    return s.devices[0].ports[0];
}

void move_gid(topo::Snapshot &s, int from, int to) {
    auto &gids = lag_port(s).gids;
    for (auto &g : gids) {
        if (g.index == from) {
            g.index = to;
        }
    }
    std::sort(gids.begin(), gids.end(),
              [](const topo::GidEntry &a, const topo::GidEntry &b) { return a.index < b.index; });
}

void drop_gid(topo::Snapshot &s, int index) {
    auto &gids = lag_port(s).gids;
    gids.erase(std::remove_if(gids.begin(), gids.end(),
                              [&](const topo::GidEntry &g) { return g.index == index; }),
               gids.end());
}

void set_mtu(topo::Snapshot &s, const std::string &netdev, int mtu) {
    for (auto &n : s.netdevs) {
        if (n.name == netdev) {
            n.mtu = mtu;
        }
    }
}

struct RevalidateCase {
    const char *what;
    int gid_index;       ///< selected on mlx5_lag with this override
    const char *fixture; ///< the newer snapshot, before `edit`
    Edit edit;           ///< may be empty
    Validity want;
    int want_gid_index;
    int want_pkey_index;
    std::vector<std::string> want_why;
};

// A table reads better one case per row.
// clang-format off
const std::vector<RevalidateCase> kRevalidateCases = {
    {"the same snapshot", 3, "mlx5_lag", {}, Validity::kUnchanged, 3, 0, {}},
    {"another address replaced, ours untouched", 5, "mlx5_lag_readdressed", {},
     Validity::kUnchanged, 5, 0, {}},
    {"our address replaced on the bond (the slot is empty)", 3, "mlx5_lag_readdressed", {},
     Validity::kReselect, 3, 0, {"::ffff:198.18.0.11", "is empty"}},
    {"our GID moved to another slot", 3, "mlx5_lag", [](topo::Snapshot &s) { move_gid(s, 3, 12); },
     Validity::kMoved, 12, 0, {"gid_index 3 -> 12"}},
    {"our slot now holds another GID, ours is elsewhere", 3, "mlx5_lag",
     [](topo::Snapshot &s) { move_gid(s, 3, 12); move_gid(s, 5, 3); },
     Validity::kMoved, 12, 0, {"gid_index 3 -> 12"}},
    {"our slot now holds another GID, ours is gone", 3, "mlx5_lag",
     [](topo::Snapshot &s) { drop_gid(s, 3); move_gid(s, 5, 3); },
     Validity::kReselect, 3, 0, {"holds ::ffff:198.19.0.11 on bond0.3027"}},
    {"the same link-local value on the VLAN is not our GID on the bond", 1, "mlx5_lag",
     [](topo::Snapshot &s) { drop_gid(s, 1); }, Validity::kReselect, 1, 0, {"RoCE v2, bond0)"}},
    {"the pkey moved", 3, "mlx5_lag",
     [](topo::Snapshot &s) { lag_port(s).pkeys = {0x7fff, 0xffff}; }, Validity::kMoved, 3, 1,
     {"pkey_index 0 -> 1"}},
    {"the pkey is gone", 3, "mlx5_lag", [](topo::Snapshot &s) { lag_port(s).pkeys = {0x7fff}; },
     Validity::kReselect, 3, 0, {"holds 0xffff"}},
    {"the GID and the pkey moved", 3, "mlx5_lag",
     [](topo::Snapshot &s) { move_gid(s, 3, 12); lag_port(s).pkeys = {0x7fff, 0xffff}; },
     Validity::kMoved, 12, 1, {"gid_index 3 -> 12", "pkey_index 0 -> 1"}},
    {"the bond's MTU shrank below the path's", 3, "mlx5_lag",
     [](topo::Snapshot &s) { set_mtu(s, "bond0", 1500); }, Validity::kReselect, 3, 0,
     {"path_mtu 4096 no longer fits", "1024"}},
    {"the VLAN's MTU grew: the smaller path MTU still fits", 5, "mlx5_lag",
     [](topo::Snapshot &s) { set_mtu(s, "bond0.3027", 9000); }, Validity::kUnchanged, 5, 0, {}},
    {"the port is down: the addressing stays", 3, "mlx5_lag",
     [](topo::Snapshot &s) { lag_port(s).state = topo::PortState::kDown; }, Validity::kUnchanged,
     3, 0, {}},
    {"the device is gone (a LAG re-registered it)", 3, "mlx5_lag",
     [](topo::Snapshot &s) { s.devices[0].name = "mlx5_bond_1"; }, Validity::kReselect, 3, 0,
     {"mlx5_bond_0 is no longer present"}},
    {"the port is gone", 3, "mlx5_lag", [](topo::Snapshot &s) { lag_port(s).port = 2; },
     Validity::kReselect, 3, 0, {"has no port 1"}},
};
// clang-format on

} // namespace

TEST_CASE("revalidate: unchanged, moved or reselect, and why", "[select][path]") {
    const topo::Snapshot &base = fixture("mlx5_lag");
    for (const auto &c : kRevalidateCases) {
        INFO(c.what);
        select::Options o;
        o.gid_index = c.gid_index;
        auto pc =
            select::select_port(base, base.devices[0], base.devices[0].ports[0], o, nullptr, false);
        REQUIRE(pc.ok());
        topo::Snapshot now = fixture(c.fixture);
        if (c.edit) {
            c.edit(now);
        }
        select::Revalidation r = select::revalidate(*pc.selection, now);
        INFO(r.why);
        CHECK(r.validity == c.want);
        CHECK(r.selection.gid_index == c.want_gid_index);
        CHECK(r.selection.pkey_index == c.want_pkey_index);
        CHECK(r.why.empty() == (c.want == Validity::kUnchanged));
        for (const auto &w : c.want_why) {
            CHECK_THAT(r.why, contains_text(w));
        }
        // What revalidate accepts (and follows), preflight passes untouched
        // against the same snapshot; what it rejects, preflight refuses at
        // one transition at least.
        qp::RemoteEnd remote{pc.selection->gid, 0x99, 0};
        size_t refused = 0, corrected = 0;
        for (auto t : {qp::Transition::kResetToInit, qp::Transition::kInitToRtr}) {
            qp::ModifyRequest req =
                qp::build_request(qp::QpType::kRC, t, r.selection, &remote, qp::QpParams{});
            qp::PreflightContext ctx{qp::QpType::kRC, t, r.selection, false};
            qp::PreflightResult pf = qp::preflight(now, ctx, req);
            refused += pf.ok() ? 0 : 1;
            corrected += pf.corrections.size();
        }
        if (c.want == Validity::kReselect) {
            CHECK(refused > 0);
        } else {
            CHECK(refused == 0);
            CHECK(corrected == 0);
        }
    }
}

TEST_CASE("revalidate: a select_path result with the peer's MTU", "[select][path]") {
    const topo::Snapshot &snap = fixture("mlx5_lag");
    select::PathDecision d =
        select::select_path(snap, {"mlx5_bond_0", 1}, select::Options{},
                            peer_port({"198.18.0.12/24"}, IBV_MTU_1024), false);
    REQUIRE(d.ok());
    CHECK(select::revalidate(*d.selection, snap).validity == Validity::kUnchanged);
    topo::Snapshot smaller = snap;
    set_mtu(smaller, "bond0", 1500); // carries 1024: the path's MTU still fits
    CHECK(select::revalidate(*d.selection, smaller).validity == Validity::kUnchanged);
    set_mtu(smaller, "bond0", 1000); // carries 512
    CHECK(select::revalidate(*d.selection, smaller).validity == Validity::kReselect);
}
