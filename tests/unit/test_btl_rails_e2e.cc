// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Two rails per process end to end over FakeVerbs (issue 16): the
// mlx5_two_bonds machine has two RDMA devices, each over its own bond on its
// own subnet, and every process runs one btl module per device, as the
// component does. Each module tells Open MPI's bml which peers it reaches
// (add_procs' bitmap): a peer on both subnets is reachable over both rails,
// a peer on one subnet only over that rail, and the other rail makes no
// endpoint for it. Each module's btl_bandwidth is its rail's speed.
#include <cstring>
#include <string>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"
#include "util/net.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using namespace roce::testing::e2e;

namespace {

/// Process 2 publishes rail 1 (mlx5_bond_1) in 198.99.0.0/24, a subnet no
/// other process has: only rail 0 reaches it.
void move_rail1_of_proc2(size_t i, btl::wire::ModexAddress &a) {
    REQUIRE(a.ports.size() == 2);
    if (i != 2) {
        return;
    }
    for (auto &g : a.ports[1].gids) {
        if (!util::IpAddress::from_gid(g.gid).is_v4()) {
            continue;
        }
        g.gid = util::IpAddress::parse("198.99.0.13")->to_gid();
        g.prefix_len = 24;
    }
}

int send_on(BtlFabric &f, size_t i, size_t r, mca_btl_base_endpoint_t *ep,
            const std::string &payload) {
    mca_btl_base_module_t *b = rail(f, i, r).base();
    mca_btl_base_descriptor_t *d =
        b->btl_alloc(b, ep, MCA_BTL_NO_ORDER, payload.size(), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(d != nullptr);
    std::memcpy(d->des_segments[0].seg_addr.pval, payload.data(), payload.size());
    d->des_cbfunc = nullptr;
    return b->btl_send(b, ep, d, BtlFabric::kTag);
}

} // namespace

TEST_CASE("btl rails: each rail reaches the peers on its subnet, and weighs its speed",
          "[btl][e2e][rails]") {
    verbs::note_destroy_failure(0);
    FabricOptions o;
    o.fixture = "mlx5_two_bonds";
    o.procs = 3;
    o.all_rails = true;
    o.modex = move_rail1_of_proc2;
    BtlFabric f(o);
    for (size_t i = 0; i < o.procs; ++i) {
        REQUIRE(f.procs[i]->more_rails.size() == 1);
        CHECK(rail(f, i, 0).plan().device == "mlx5_bond_0");
        CHECK(rail(f, i, 1).plan().device == "mlx5_bond_1");
        // bond0: 802.3ad over 2 x 25G; bond1: active-backup over 2 x 100G.
        CHECK(rail(f, i, 0).base()->btl_bandwidth == 50000);
        CHECK(rail(f, i, 1).base()->btl_bandwidth == 100000);
        CHECK(rail(f, i, 0).base()->btl_latency == rail(f, i, 1).base()->btl_latency);
    }
    // The sink adds "btl roce: " (Open MPI's output stream, docs/mca-params.md
    // quotes the line as printed): the message must not carry it twice.
    CHECK(f.log.contains("mlx5_bond_0:1: bandwidth 50000 Mb/s (2 members x 25 Gb/s "
                         "of bond0, LAG spreads), latency 10 us"));
    CHECK(f.log.contains("mlx5_bond_1:1: bandwidth 100000 Mb/s (1 member x 100 Gb/s "
                         "of bond1, active-backup uses one), latency 10 us"));
    CHECK_FALSE(f.log.contains("btl roce: mlx5_bond_"));

    // Processes 0 and 1 are on both subnets; process 2's rail 1 is elsewhere.
    std::vector<mca_btl_base_endpoint_t *> eps[2][2];
    for (size_t i = 0; i < 2; ++i) {
        CAPTURE(i);
        CHECK(add_on_rail(f, i, 0, eps[i][0]) == std::vector<bool>{true, true, true});
        CHECK(add_on_rail(f, i, 1, eps[i][1]) == std::vector<bool>{true, true, false});
    }
    // Rail 1 says why: process 2's routable address is on no subnet of it,
    // and link-local (fe80::/64 on every link) proves nothing.
    CHECK(f.log.contains("mlx5_bond_1:1 cannot reach"));
    CHECK(f.log.contains("while the peer's routable addresses (198.99.0.13/24) are on no subnet "
                         "of this port: its port is on another network"));
    // Process 2 adds the others too (so that it answers their requests on rail 0).
    std::vector<mca_btl_base_endpoint_t *> eps2;
    CHECK(add_on_rail(f, 2, 0, eps2) == std::vector<bool>{true, true, true});
    f.procs[2]->eps = eps2;
    // Each rail's endpoints use that rail's device, towards the peer's same rail.
    for (size_t r = 0; r < 2; ++r) {
        const btl::Endpoint &e = *btl::Endpoint::from(eps[0][r][1]);
        CHECK(e.path().selection.device == (r == 0 ? "mlx5_bond_0" : "mlx5_bond_1"));
        CHECK(util::IpAddress::from_gid(e.path().dgid).to_string() ==
              (r == 0 ? "198.18.0.11" : "198.20.0.11"));
    }

    // Traffic over both rails to process 1, over rail 0 to process 2.
    for (int n = 0; n < 3; ++n) {
        REQUIRE(send_on(f, 0, 0, eps[0][0][1], msg(0, 1, n)) == OPAL_SUCCESS);
        REQUIRE(send_on(f, 0, 1, eps[0][1][1], msg(0, 1, 3 + n)) == OPAL_SUCCESS);
        REQUIRE(send_on(f, 0, 0, eps[0][0][2], msg(0, 2, n)) == OPAL_SUCCESS);
    }
    REQUIRE(f.run_until(
        [&] { return f.procs[1]->received.size() == 6 && f.procs[2]->received.size() == 3; }));
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 6));
    CHECK(from(f, 2, 0) == expected(0, 2, 0, 3));
    CHECK(btl::Endpoint::from(eps[0][1][1])->state == btl::EpState::kConnected);
    CHECK(f.log.errors == 0);
    teardown(f);
}
