// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The transport choice of whole modules over FakeVerbs (issue 19): what
// each module decides at create from btl_roce_transport, the threshold, the
// job size and the device, what it logs, the DC queues a port that chose DC
// makes and publishes, and that data still flows (over RC: this build has
// no DC data path yet, and says so).
#include <cerrno>
#include <string>

#include "btl_e2e_util.h"
#include "catch.h"
#include "util/strings.h"

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

/// Every process chose DC and made its DC queues: the DCT at RTR and
/// `dcis` DCIs at RTS, all on the module's device; its advertisement names
/// the DCT (number and key, the key of no other process), each end sees
/// the other's DC target (dc_with_peer); and a message still goes from 0 to
/// 1 and back (over RC, this build).
void dc_published_and_working(BtlFabric &f, size_t dcis) {
    std::vector<uint64_t> keys;
    std::vector<btl::wire::PortAdvert> adverts;
    for (auto &p : f.procs) {
        REQUIRE(p->module->transport().dc);
        const btl::DcResources *dc = p->module->dc();
        REQUIRE(dc != nullptr);
        CHECK(f.fake.qp_state(dc->target().qp().get()) == IBV_QPS_RTR);
        REQUIRE(dc->dcis() == dcis);
        for (size_t i = 0; i < dc->dcis(); ++i) {
            CHECK(f.fake.qp_state(dc->dci(i).qp().get()) == IBV_QPS_RTS);
            CHECK(dc->dci(i).number() != dc->dct_number());
        }
        btl::wire::PortAdvert a = p->module->advert();
        CHECK(a.flags == btl::wire::kPortFlagDct);
        CHECK(a.dct_number == dc->dct_number());
        CHECK(a.dct_number != 0);
        CHECK(a.dc_key == dc->access_key());
        CHECK(a.dc_key != 0);
        keys.push_back(a.dc_key);
        adverts.push_back(a);
    }
    REQUIRE(keys.size() == 2);
    CHECK(keys[0] != keys[1]);
    CHECK(btl::dc_with_peer(true, adverts[1]));
    CHECK(btl::dc_with_peer(true, adverts[0]));
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(20);
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 1));
    CHECK(from(f, 0, 1) == expected(1, 0, 0, 1));
    // Finalize: the DCIs and the DCT go before the Device's SRQ and CQ
    // (which refuse to go while a QP uses them), nothing left behind.
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

TEST_CASE("btl dc e2e: auto above the threshold on an mlx5 device with DC makes and publishes "
          "its DC queues, and says this build carries RC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kAuto, 0));
    // Per process: one probe (a DC target created and destroyed), then the
    // DCT and btl_roce_dc_dcis (8) DCIs.
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2 * (1 + 1 + 8));
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: DC (1 peers above "
                            "btl_roce_dc_peer_threshold 0; mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "initiators ready and published, but this build of the roce BTL "
                            "still carries data over RC (its DC data path is not written yet, "
                            "issue 19)") == 2);
    for (auto &p : f.procs) {
        const btl::DcResources *dc = p->module->dc();
        REQUIRE(dc != nullptr);
        CHECK(f.log.contains(
            util::format("DC target 0x%x and 8 initiators ready", dc->dct_number())));
    }
    CHECK_FALSE(f.log.contains("warning: transport")); // auto: not a refusal
    dc_published_and_working(f, 8);
}

TEST_CASE("btl dc e2e: the DC queues follow btl_roce_dc_dcis", "[btl][e2e][transport]") {
    FabricOptions o = with_transport("mlx5_lag", btl::TransportMode::kAuto, 0);
    auto base = o.tweak;
    o.tweak = [base](btl::ModuleConfig &c) {
        base(c);
        c.transport.dc_dcis = 3;
    };
    BtlFabric f(o);
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2 * (1 + 1 + 3));
    CHECK(lines_with(f.log, "and 3 initiators ready and published") == 2);
    dc_published_and_working(f, 3);
}

TEST_CASE("btl dc e2e: a port whose DC queues cannot be made publishes none and runs RC, "
          "saying why",
          "[btl][e2e][transport]") {
    FabricOptions o = with_transport("mlx5_lag", btl::TransportMode::kAuto, 0);
    // Process 0's second DCI: its probe, its DCT and its first DCI pass.
    o.setup = [](FakeVerbs &fake) { fake.fail(Call::kMlx5dvCreateQp, ENOMEM, 3, 1); };
    BtlFabric f(o);
    btl::Module &m0 = *f.procs[0]->module;
    btl::Module &m1 = *f.procs[1]->module;
    CHECK_FALSE(m0.transport().dc);
    CHECK(m0.dc() == nullptr);
    CHECK(m0.advert().flags == 0);
    CHECK(m0.advert().dct_number == 0);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: DC (1 peers above "
                            "btl_roce_dc_peer_threshold 0; mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "; but its DC queues could not be made (DC initiator 2 of 8: "
                            "mlx5dv_create_qp(DCI) on mlx5_bond_0 failed: Cannot allocate memory "
                            "(12)): using RC") == 1);
    // Process 1 made and published its own; towards process 0 it is RC
    // (process 0 publishes no DC target), and so it is the other way.
    REQUIRE(m1.transport().dc);
    CHECK(m1.advert().flags == btl::wire::kPortFlagDct);
    CHECK_FALSE(btl::dc_with_peer(true, m0.advert()));
    CHECK_FALSE(btl::dc_with_peer(false, m1.advert()));
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(20);
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 1));
    CHECK(from(f, 0, 1) == expected(1, 0, 0, 1));
    // The DCT and the first DCI process 0 made are gone with the failure;
    // the rest at finalize.
    teardown(f);
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

TEST_CASE("btl dc e2e: dc forced on mlx5 with DC makes its DC queues and warns that this build "
          "carries RC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kDc));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2 * (1 + 1 + 8));
    CHECK(lines_with(f.log, "warning: transport mlx5_bond_0:1: DC (btl_roce_transport = dc; "
                            "mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "still carries data over RC") == 2);
    for (auto &p : f.procs) {
        CHECK(p->module->transport().refused);
    }
    dc_published_and_working(f, 8);
}

TEST_CASE("btl dc e2e: rc forced never asks the device", "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kRc, 0));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 0);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: RC (btl_roce_transport = rc)") == 2);
    rc_published_and_working(f);
}
