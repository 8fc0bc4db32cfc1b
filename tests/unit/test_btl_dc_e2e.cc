// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The transport choice of whole modules over FakeVerbs (issue 19): what
// each module decides at create from btl_roce_transport, the threshold, the
// job size and the device, what it logs, what it publishes, and that data
// still flows (over RC: this build has no DC data path yet, and says so).
#include <string>

#include "btl_e2e_util.h"
#include "catch.h"

using namespace roce;
using namespace roce::testing;
using namespace roce::testing::e2e;

namespace {

FabricOptions with_transport(const char *fixture_name, btl::TransportMode mode,
                             uint32_t threshold = btl::kDefaultDcPeerThreshold) {
    FabricOptions o;
    o.fixture = fixture_name;
    o.tweak = [mode, threshold](btl::ModuleConfig &c) {
        c.transport.mode = mode;
        c.transport.dc_peer_threshold = threshold;
    };
    return o;
}

/// Every process published an RC port (no DC target), its module chose RC,
/// and a message goes from 0 to 1 and back.
void rc_published_and_working(BtlFabric &f) {
    for (auto &p : f.procs) {
        CHECK_FALSE(p->module->transport().dc);
        btl::wire::PortAdvert a = p->module->advert();
        CHECK(a.flags == 0);
        CHECK(a.dct_number == 0);
        CHECK(a.dc_key == 0);
    }
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(20);
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 1));
    CHECK(from(f, 0, 1) == expected(1, 0, 0, 1));
    teardown(f);
}

size_t lines_with(const KeepSink &log, const std::string &needle) {
    size_t n = 0;
    for (const auto &l : log.lines) {
        n += l.find(needle) != std::string::npos ? 1 : 0;
    }
    return n;
}

} // namespace

TEST_CASE("btl dc e2e: auto below the threshold is RC without asking the device",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kAuto));
    // Two processes: one peer, far below 256. No DC target was created to
    // find that out.
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 0);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: RC (1 peers, not above "
                            "btl_roce_dc_peer_threshold 256)") == 2);
    CHECK(f.log.errors == 0);
    CHECK_FALSE(f.log.contains("warning: transport"));
    rc_published_and_working(f);
}

TEST_CASE("btl dc e2e: auto above the threshold on an mlx5 device with DC asks it, and says "
          "this build carries RC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kAuto, 0));
    // One probe (a DC target created and destroyed) per process.
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: DC (1 peers above "
                            "btl_roce_dc_peer_threshold 0; mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "; but this build of the roce BTL carries data over RC only (its DC "
                            "data path is not written yet, issue 19): using RC") == 2);
    CHECK_FALSE(f.log.contains("warning: transport")); // auto: not a refusal
    rc_published_and_working(f);
}

TEST_CASE("btl dc e2e: auto on mlx5 whose firmware has no DC is RC, with the reason",
          "[btl][e2e][transport]") {
    FabricOptions o = with_transport("mlx5_lag", btl::TransportMode::kAuto, 0);
    o.setup = [](FakeVerbs &fake) { fake.device("mlx5_bond_0").dc = false; };
    BtlFabric f(o);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: RC (1 peers above "
                            "btl_roce_dc_peer_threshold 0, but mlx5_bond_0: mlx5dv_create_qp(DCT) "
                            "failed: Operation not supported (95)") == 2);
    CHECK_FALSE(f.log.contains("warning: transport"));
    rc_published_and_working(f);
}

TEST_CASE("btl dc e2e: dc forced on rxe warns, naming the device and the fix, and runs RC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("rxe_bond", btl::TransportMode::kDc));
    CHECK(lines_with(f.log, "warning: transport rxe_bond0:1: btl_roce_transport = dc, but DC "
                            "cannot run here (rxe_bond0 is not an mlx5 device") == 2);
    CHECK(lines_with(f.log, "Fix: btl_roce_transport = auto or rc, or an mlx5 device whose "
                            "firmware has DC (roce-doctor --check shows it)") == 2);
    for (auto &p : f.procs) {
        CHECK(p->module->transport().refused);
    }
    rc_published_and_working(f);
}

TEST_CASE("btl dc e2e: dc forced on mlx5 with DC warns that this build runs RC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kDc));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2);
    CHECK(lines_with(f.log, "warning: transport mlx5_bond_0:1: DC (btl_roce_transport = dc; "
                            "mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "carries data over RC only") == 2);
    rc_published_and_working(f);
}

TEST_CASE("btl dc e2e: rc forced never asks the device", "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kRc, 0));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 0);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: RC (btl_roce_transport = rc)") == 2);
    rc_published_and_working(f);
}
