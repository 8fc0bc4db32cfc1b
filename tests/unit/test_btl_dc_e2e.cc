// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The transport choice of whole modules over FakeVerbs (issue 19): what
// each module decides at create from btl_roce_transport, the threshold, the
// job size and the device, what it logs, the DC queues a port that chose DC
// makes and publishes; and the DC data path (data/dc_send.cc, dc_rdma.cc):
// sends both ways in order and intact, the DCI per peer, DCI errors
// recovered, a wrong key, fragments that name no DC peer refused, put, get
// and the atomics.
#include <cerrno>
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>
#include <string>

#include "btl_e2e_util.h"
#include "catch.h"
#include "qp/dc.h"
#include "qp/transitions.h"
#include "util/strings.h"
#include "verbs/handles.h"

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
/// the other's DC target (dc_with_peer); and a message goes from 0 to 1 and
/// back over DC.
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
    // No connection: the first sends go at once, over DC.
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(20);
    CHECK(f.ep(0, 1).dc());
    CHECK(f.ep(1, 0).dc());
    CHECK(f.procs[0]->module->dc_stats().sends == 1);
    CHECK(f.procs[1]->module->dc_stats().received == 1);
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
          "its DC queues, and says what goes over DC",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kAuto, 0));
    // Per process: one probe (a DC target created and destroyed), then the
    // DCT and btl_roce_dc_dcis (8) DCIs.
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2 * (1 + 1 + 8));
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: DC (1 peers above "
                            "btl_roce_dc_peer_threshold 0; mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "initiators ready and published: sends, RDMA and atomics to peers "
                            "with a DC target go over DC") == 2);
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

TEST_CASE("btl dc e2e: dc forced on mlx5 with DC makes its DC queues and uses DC, without a "
          "warning",
          "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kDc));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 2 * (1 + 1 + 8));
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: DC (btl_roce_transport = dc; "
                            "mlx5_bond_0: DC supported") == 2);
    CHECK(lines_with(f.log, "sends, RDMA and atomics to peers with a DC target go over DC") == 2);
    CHECK_FALSE(f.log.contains("warning: transport"));
    for (auto &p : f.procs) {
        CHECK_FALSE(p->module->transport().refused);
    }
    dc_published_and_working(f, 8);
}

TEST_CASE("btl dc e2e: rc forced never asks the device", "[btl][e2e][transport]") {
    BtlFabric f(with_transport("mlx5_lag", btl::TransportMode::kRc, 0));
    CHECK(f.fake.calls(Call::kMlx5dvCreateQp) == 0);
    CHECK(lines_with(f.log, "info: transport mlx5_bond_0:1: RC (btl_roce_transport = rc)") == 2);
    rc_published_and_working(f);
}

// ---- the DC data path: sends (data/dc_send.cc) ----------------------------------

namespace {

/// A fabric of `procs` processes on mlx5 with DC forced, every peer added.
FabricOptions dc_fabric(size_t procs = 2) {
    FabricOptions o = with_transport("mlx5_lag", btl::TransportMode::kDc);
    o.procs = procs;
    return o;
}

/// What a send's completion callback saw.
struct SendResult {
    int calls = 0;
    int status = 1;
};
void send_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *des,
               int status) {
    auto *r = static_cast<SendResult *>(des->des_cbdata);
    ++r->calls;
    r->status = status;
}

/// alloc + send of `payload` from i to j with send_done counting into `r`.
int send_cb(BtlFabric &f, size_t i, size_t j, const std::string &payload, SendResult &r) {
    mca_btl_base_module_t *b = f.procs[i]->btl();
    mca_btl_base_descriptor_t *d = b->btl_alloc(b, f.procs[i]->eps[j], MCA_BTL_NO_ORDER,
                                                payload.size(), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(d != nullptr);
    std::memcpy(d->des_segments[0].seg_addr.pval, payload.data(), payload.size());
    d->des_cbfunc = send_done;
    d->des_cbdata = &r;
    return b->btl_send(b, f.procs[i]->eps[j], d, BtlFabric::kTag);
}

/// Payload n from i to j of `size` bytes: "p<i>->p<j>#<n>:" then bytes that
/// depend on i, j, n and their offset.
std::string sized(size_t i, size_t j, int n, size_t size) {
    std::string s = msg(i, j, n) + ":";
    while (s.size() < size) {
        s.push_back(
            static_cast<char>((s.size() * 31 + i * 7 + j * 13 + static_cast<size_t>(n)) & 0xff));
    }
    s.resize(size);
    return s;
}

/// What process r received from s, in delivery order.
std::vector<std::string> in_order(BtlFabric &f, size_t r, size_t s) {
    std::vector<std::string> out;
    const std::string prefix = util::format("p%zu->p%zu#", s, r);
    for (const auto &m : f.procs[r]->received) {
        if (m.compare(0, prefix.size(), prefix) == 0) {
            out.push_back(m);
        }
    }
    return out;
}

/// The DCI process i sends to process j with.
const qp::DcInitiator &dci_to(BtlFabric &f, size_t i, size_t j) {
    return f.procs[i]->module->dc()->dci(f.ep(i, j).dc_route().dci);
}

} // namespace

TEST_CASE("btl dc e2e: sends of every size up to the eager limit go both ways over DC, in order "
          "and intact",
          "[btl][e2e][dc]") {
    FabricOptions o = dc_fabric();
    auto base = o.tweak;
    o.tweak = [base](btl::ModuleConfig &c) {
        base(c);
        // As large as a slot allows (the module lowers them to that): the
        // last bytes of the largest fragment's slot hold the trailer.
        c.btl.btl_max_send_size = 1 << 20;
        c.btl.btl_eager_limit = 1 << 20;
    };
    BtlFabric f(o);
    const int rc_qps = f.fake.calls(Call::kCreateQp);
    f.add_all();
    const size_t eager = f.procs[0]->btl()->btl_eager_limit;
    const size_t slot = f.procs[0]->module->device().config().recv_slot;
    REQUIRE(eager == slot - btl::wire::kFragHeaderSize - btl::wire::kForwardHeaderSize);
    REQUIRE(btl::wire::kForwardHeaderSize >= btl::wire::kDcSenderSize);
    // (At least 12 bytes: the message name is at the start of each.)
    const std::vector<size_t> sizes = {12, 13, 64, 255, 512, eager - 1, eager};
    std::vector<std::string> sent01, sent10;
    int n = 0;
    for (int round = 0; round < 3; ++round) {
        for (size_t size : sizes) {
            sent01.push_back(sized(0, 1, n, size));
            sent10.push_back(sized(1, 0, n, size));
            REQUIRE(f.send(0, 1, sent01.back()) == OPAL_SUCCESS);
            REQUIRE(f.send(1, 0, sent10.back()) == OPAL_SUCCESS);
            ++n;
        }
        f.run(2); // some in flight while the next round is posted
    }
    f.run(30);
    CHECK(in_order(f, 1, 0) == sent01);
    CHECK(in_order(f, 0, 1) == sent10);
    // No RC QP, no connection: the peers were never connected.
    CHECK(f.fake.calls(Call::kCreateQp) == rc_qps);
    CHECK(f.ep(0, 1).state == btl::EpState::kClosed);
    for (size_t i = 0; i < 2; ++i) {
        const btl::DcStats &st = f.procs[i]->module->dc_stats();
        CHECK(st.sends == sent01.size());
        CHECK(st.received == sent01.size());
        CHECK(st.refused_malformed + st.refused_unknown + st.duplicates + st.errors == 0);
    }
    CHECK(f.log.errors == 0);
    teardown(f);
}

TEST_CASE("btl dc e2e: sendi goes over DC", "[btl][e2e][dc]") {
    BtlFabric f(dc_fabric());
    f.add_all();
    mca_btl_base_module_t *b = f.procs[0]->btl();
    std::string hdr = sized(0, 1, 0, 48);
    mca_btl_base_descriptor_t *des = nullptr;
    REQUIRE(b->btl_sendi(b, f.procs[0]->eps[1], nullptr, hdr.data(), hdr.size(), 0,
                         MCA_BTL_NO_ORDER, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, BtlFabric::kTag,
                         &des) == OPAL_SUCCESS);
    CHECK(des == nullptr);
    f.run(10);
    CHECK(in_order(f, 1, 0) == std::vector<std::string>{hdr});
    teardown(f);
}

TEST_CASE("btl dc e2e: a send's DCI follows the peer; each peer's sends keep one DCI",
          "[btl][e2e][dc]") {
    BtlFabric f(dc_fabric(4));
    f.add_all();
    // Peers of process 0 on their DCIs, the same answer every time.
    std::vector<uint32_t> dcis;
    for (size_t j = 0; j < 4; ++j) {
        dcis.push_back(f.ep(0, j).dc_route().dci);
        CHECK(dcis.back() < 8);
    }
    for (int n = 0; n < 20; ++n) {
        for (size_t j = 1; j < 4; ++j) {
            REQUIRE(f.send(0, j, msg(0, j, n)) == OPAL_SUCCESS);
        }
    }
    // Everything is in flight (nothing ran): each peer's sends sit on its
    // DCI alone.
    for (size_t j = 1; j < 4; ++j) {
        size_t mine = 0;
        for (size_t k = 1; k < 4; ++k) {
            mine += dcis[k] == dcis[j] ? 20 : 0;
        }
        CHECK(f.procs[0]->module->data_path().dci_outstanding(dcis[j]) == mine);
    }
    f.run(30);
    for (size_t j = 1; j < 4; ++j) {
        CHECK(in_order(f, j, 0) == expected(0, j, 0, 20));
    }
    teardown(f);
}

TEST_CASE("btl dc e2e: a DCI error is recovered; nothing is lost or doubled",
          "[btl][e2e][dc][recover]") {
    BtlFabric f(dc_fabric());
    f.add_all();
    std::vector<SendResult> results(6);
    for (int n = 0; n < 6; ++n) {
        REQUIRE(send_cb(f, 0, 1, msg(0, 1, n), results[static_cast<size_t>(n)]) == OPAL_SUCCESS);
    }
    const qp::DcInitiator &dci = dci_to(f, 0, 1);
    const uint32_t number = dci.number();
    // The link breaks under the DCI: the first send reached process 1 but
    // its acknowledgement is lost, so it completes in error; the DCI goes
    // to ERR and the other five flush.
    f.fake.break_qp(dci.qp().get(), IBV_WC_RETRY_EXC_ERR, 1);
    f.run(30);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 6));
    for (const auto &r : results) {
        CHECK(r.calls == 1);
        CHECK(r.status == OPAL_SUCCESS);
    }
    const btl::DcStats &st = f.procs[0]->module->dc_stats();
    CHECK(st.errors == 1);
    CHECK(st.requeued == 6);
    CHECK(st.recoveries == 1);
    CHECK(st.failed == 0);
    CHECK(f.procs[1]->module->dc_stats().duplicates == 1); // the copy of the first
    CHECK(f.fake.qp_state(dci.qp().get()) == IBV_QPS_RTS);
    CHECK(dci.number() == number);
    CHECK(f.procs[0]->errors.empty());
    // The peer is not lost: more goes.
    REQUIRE(f.send(0, 1, msg(0, 1, 6)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 7));
    teardown(f);
}

TEST_CASE("btl dc e2e: a DCI error with several peers' sends on it loses and doubles nothing",
          "[btl][e2e][dc][recover]") {
    FabricOptions o = dc_fabric(4);
    auto base = o.tweak;
    o.tweak = [base](btl::ModuleConfig &c) {
        base(c);
        c.transport.dc_dcis = 1; // every peer on the one DCI
    };
    BtlFabric f(o);
    f.add_all();
    std::vector<SendResult> results(15);
    for (int n = 0; n < 5; ++n) {
        for (size_t j = 1; j < 4; ++j) {
            REQUIRE(send_cb(f, 0, j, msg(0, j, n), results[static_cast<size_t>(n) * 3 + j - 1]) ==
                    OPAL_SUCCESS);
        }
    }
    const qp::DcInitiator &dci = f.procs[0]->module->dc()->dci(0);
    REQUIRE(f.procs[0]->module->data_path().dci_outstanding(0) == 15);
    // The first four reached their peers, their ACKs lost; the oldest
    // completes in error, the other fourteen flush.
    f.fake.break_qp(dci.qp().get(), IBV_WC_RETRY_EXC_ERR, 4);
    f.run(30);
    for (size_t j = 1; j < 4; ++j) {
        CHECK(in_order(f, j, 0) == expected(0, j, 0, 5));
    }
    for (const auto &r : results) {
        CHECK(r.calls == 1);
        CHECK(r.status == OPAL_SUCCESS);
    }
    const btl::DcStats &st = f.procs[0]->module->dc_stats();
    CHECK(st.errors == 1);
    CHECK(st.requeued == 15);
    CHECK(st.recoveries == 1);
    uint64_t dups = 0;
    for (size_t j = 1; j < 4; ++j) {
        dups += f.procs[j]->module->dc_stats().duplicates;
    }
    CHECK(dups == 4); // the copies of the four that had arrived
    CHECK(f.procs[0]->errors.empty());
    teardown(f);
}

TEST_CASE("btl dc e2e: on an mlx5 LAG the DCIs take its ports in turn, again after a recovery",
          "[btl][e2e][dc][lag]") {
    FabricOptions o = dc_fabric();
    o.setup = [](FakeVerbs &fake) { fake.device("mlx5_bond_0").num_lag_ports = 2; };
    BtlFabric f(o);
    for (auto &p : f.procs) {
        const btl::DcResources *dc = p->module->dc();
        REQUIRE(dc != nullptr);
        for (size_t i = 0; i < dc->dcis(); ++i) {
            CHECK(dc->lag_port(i) == i % 2 + 1);
            CHECK(f.fake.qp_lag_port(dc->dci(i).qp().get()) == i % 2 + 1);
        }
    }
    f.add_all();
    SendResult r;
    REQUIRE(send_cb(f, 0, 1, msg(0, 1, 0), r) == OPAL_SUCCESS);
    const size_t which = f.ep(0, 1).dc_route().dci;
    const qp::DcInitiator &dci = dci_to(f, 0, 1);
    f.fake.break_qp(dci.qp().get(), IBV_WC_RETRY_EXC_ERR, 0);
    f.run(20);
    CHECK(r.calls == 1);
    CHECK(r.status == OPAL_SUCCESS);
    CHECK(f.procs[0]->module->dc_stats().recoveries == 1);
    // The reset cleared the binding; the recovery set it again.
    CHECK(f.fake.qp_lag_port(dci.qp().get()) == which % 2 + 1);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 1));
    teardown(f);
}

TEST_CASE("btl dc e2e: sends from a peer not added yet are held until it is, then delivered in "
          "order",
          "[btl][e2e][dc][lazy]") {
    BtlFabric f(dc_fabric(3));
    std::vector<opal_proc_t *> all;
    for (auto &p : f.procs) {
        all.push_back(&p->proc);
    }
    // Processes 0 and 2 add everyone; process 1 only 0 and itself (Open MPI
    // adds remote processes lazily).
    for (size_t i : {size_t{0}, size_t{2}}) {
        auto &p = f.procs[i];
        p->eps.assign(all.size(), nullptr);
        REQUIRE(p->btl()->btl_add_procs(p->btl(), all.size(), all.data(), p->eps.data(), nullptr) ==
                OPAL_SUCCESS);
    }
    auto &p1 = f.procs[1];
    p1->eps.assign(all.size(), nullptr);
    REQUIRE(p1->btl()->btl_add_procs(p1->btl(), 2, all.data(), p1->eps.data(), nullptr) ==
            OPAL_SUCCESS);
    for (int n = 0; n < 5; ++n) {
        REQUIRE(f.send(2, 1, msg(2, 1, n)) == OPAL_SUCCESS);
    }
    f.fake.run_dc(); // they arrive at process 1, which has no endpoint for 2
    f.run(10);
    CHECK(in_order(f, 1, 2) == expected(2, 1, 0, 5));
    const btl::DcStats &st = p1->module->dc_stats();
    CHECK(st.held == 5);
    CHECK(st.received == 5);
    CHECK(st.refused_unknown == 0);
    // More from 2 goes straight in now, after what was held.
    REQUIRE(f.send(2, 1, msg(2, 1, 5)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(in_order(f, 1, 2) == expected(2, 1, 0, 6));
    CHECK(st.held == 5);
    teardown(f);
}

TEST_CASE("btl dc e2e: a wrong key fails the send once and the peer, and the DCI serves the "
          "others",
          "[btl][e2e][dc][recover]") {
    BtlFabric f(dc_fabric(3));
    f.add_all();
    // Process 0's view of process 1's key is wrong.
    btl::DcRoute r = f.ep(0, 1).dc_route();
    r.key ^= 0x1;
    f.ep(0, 1).set_dc_route(r);
    SendResult bad;
    REQUIRE(send_cb(f, 0, 1, msg(0, 1, 0), bad) == OPAL_SUCCESS);
    f.run(30);
    CHECK(bad.calls == 1);
    CHECK(bad.status == OPAL_ERR_UNREACH);
    CHECK(in_order(f, 1, 0).empty());
    const btl::DcStats &st = f.procs[0]->module->dc_stats();
    CHECK(st.errors == 2); // the first try and the one retry: no loop
    CHECK(st.failed == 1);
    CHECK(st.recoveries == 2);
    CHECK(f.fake.dct_key_violations(f.procs[1]->module->dc()->target().qp().get()) == 2);
    CHECK(f.ep(0, 1).state == btl::EpState::kFailed);
    REQUIRE(f.procs[0]->errors.size() == 1);
    CHECK(f.procs[0]->errors[0].find("a wrong DC access key") != std::string::npos);
    CHECK(f.log.contains("DC send completion error"));
    // The DCI is back, and process 2 is reached (on whichever DCI).
    CHECK(f.fake.qp_state(dci_to(f, 0, 1).qp().get()) == IBV_QPS_RTS);
    SendResult good;
    REQUIRE(send_cb(f, 0, 2, msg(0, 2, 0), good) == OPAL_SUCCESS);
    f.run(10);
    CHECK(good.calls == 1);
    CHECK(good.status == OPAL_SUCCESS);
    CHECK(in_order(f, 2, 0) == expected(0, 2, 0, 1));
    // The failed peer is refused from now on, without a post.
    CHECK(f.send(0, 1, msg(0, 1, 1)) == OPAL_ERR_UNREACH);
    teardown(f);
}

namespace {

/// Someone on process `from`'s device who is not a DC peer of the target's
/// (or claims to be another): its own PD, CQ and DCI, sending whatever
/// bytes the test makes to a DC target, with its right key.
struct Forger {
    Forger(BtlFabric &f, btl::Module &from, const std::array<uint8_t, 16> &dgid)
        : api(f.fake.api()) {
        ibv_context *ctx = from.device().context();
        pd = verbs::Pd(api.alloc_pd(ctx), verbs::PdDeleter{&api});
        cq = verbs::Cq(api.create_cq(ctx, 16, nullptr, nullptr, 0), verbs::CqDeleter{&api});
        REQUIRE(pd);
        REQUIRE(cq);
        mem.assign(2048, 0);
        mr = verbs::Mr(api.reg_mr(pd.get(), mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE),
                       verbs::MrDeleter{&api});
        REQUIRE(mr);
        const select::Selection &sel = from.plan().selection;
        auto d = qp::DcInitiator::create(api, ctx, pd.get(), cq.get(), qp::DciCaps{}, sel,
                                         qp::cache_snapshot_source(*f.cache, from.plan().device),
                                         false, nullptr);
        REQUIRE(d);
        dci = std::make_unique<qp::DcInitiator>(std::move(d.value()));
        REQUIRE(dci->activate());
        ibv_ah_attr a = qp::build_ah_attr(sel, dgid, qp::QpParams{});
        ah = verbs::Ah(api.create_ah(pd.get(), &a), verbs::AhDeleter{&api});
        REQUIRE(ah);
    }
    /// Sends `bytes` to the DC target `dctn` with `key`.
    /// Each from its own 256 bytes of `mem`: the device reads them when it
    /// executes the work request, later.
    void send(const std::vector<uint8_t> &bytes, uint32_t dctn, uint64_t key) {
        REQUIRE(bytes.size() <= 256);
        REQUIRE(used + 256 <= mem.size());
        uint8_t *at = mem.data() + used;
        used += 256;
        std::memcpy(at, bytes.data(), bytes.size());
        ibv_sge sge{reinterpret_cast<uint64_t>(at), static_cast<uint32_t>(bytes.size()), mr->lkey};
        qp::DcWork w;
        w.op = qp::DcWork::Op::kSend;
        w.flags = IBV_SEND_SIGNALED;
        w.sge = &sge;
        w.num_sge = 1;
        w.ah = ah.get();
        w.dctn = dctn;
        w.dc_key = key;
        REQUIRE(dci->post(&w, 1));
    }
    const verbs::VerbsApi &api;
    verbs::Pd pd;
    verbs::Cq cq;
    std::vector<uint8_t> mem;
    size_t used = 0;
    verbs::Mr mr;
    std::unique_ptr<qp::DcInitiator> dci; // before ah: its work names it
    verbs::Ah ah;
};

/// A DC data fragment: header (tag, seq), `payload`, then the trailer of
/// `sender` - with `reserved` in its last byte.
std::vector<uint8_t> dc_fragment(const std::string &payload, uint32_t seq,
                                 const btl::wire::DcSender &sender, uint8_t reserved = 0,
                                 btl::wire::FragType type = btl::wire::FragType::kData) {
    std::vector<uint8_t> out(btl::wire::kFragHeaderSize + payload.size() +
                             btl::wire::kDcSenderSize);
    btl::wire::FragHeader h;
    h.tag = BtlFabric::kTag;
    h.type = type;
    h.seq = seq;
    btl::wire::encode(h, out.data());
    std::memcpy(out.data() + btl::wire::kFragHeaderSize, payload.data(), payload.size());
    btl::wire::encode(sender, out.data() + out.size() - btl::wire::kDcSenderSize);
    out.back() = reserved;
    return out;
}

} // namespace

TEST_CASE("btl dc e2e: DC fragments naming no DC peer, or malformed, are refused and counted",
          "[btl][e2e][dc][forged]") {
    BtlFabric f(dc_fabric(3));
    f.add_all();
    btl::Module &victim = *f.procs[1]->module;
    const uint32_t dctn = victim.dc()->dct_number();
    const uint64_t key = victim.dc()->access_key();
    const uint64_t p0 = f.procs[0]->name;
    {
        // From process 2's device, with the victim's key (a process of the
        // job has it): only the trailer says who sends.
        Forger forger(f, *f.procs[2]->module, f.ep(2, 1).path().dgid);
        // Unknown process.
        forger.send(dc_fragment("forged-unknown", 0, {0x9999000000000007ull, 0}), dctn, key);
        // A real peer, but a port it does not reach us from.
        forger.send(dc_fragment("forged-port", 0, {p0, 3}), dctn, key);
        // Malformed: a reserved byte of the trailer, a fragment too short
        // for a trailer, a credit message (DC has no credits), a port
        // beyond kMaxPorts.
        forger.send(dc_fragment("forged-reserved", 0, {p0, 0}, 0x5a), dctn, key);
        forger.send(std::vector<uint8_t>(12, 0), dctn, key);
        forger.send(dc_fragment("", 0, {p0, 0}, 0, btl::wire::FragType::kCredit), dctn, key);
        forger.send(dc_fragment("forged-far-port", 0, {p0, 99}), dctn, key);
        f.run(10);
    }
    const btl::DcStats &st = victim.dc_stats();
    CHECK(st.refused_unknown == 2);
    CHECK(st.refused_malformed == 4);
    CHECK(st.received == 0);
    for (const auto &m : f.procs[1]->received) {
        CHECK(m.find("forged") == std::string::npos);
    }
    CHECK(f.log.contains("naming process 0x9999000000000007 port 0: not a peer of ours over DC"));
    CHECK(f.log.contains("refused a 39-byte fragment on our DC target: DC sender trailer with "
                         "reserved byte 15 set"));
    // The buffers went back to the SRQ and the real peers still get through
    // (process 0's first fragment, number 0, was not spent by the forgery).
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    REQUIRE(f.send(2, 1, msg(2, 1, 0)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 1));
    CHECK(in_order(f, 1, 2) == expected(2, 1, 0, 1));
    teardown(f);
}

// ---- the DC data path: RDMA and atomics (data/dc_rdma.cc) -----------------------

TEST_CASE("btl dc e2e: put, get (small and in chunks), fetch-add and compare-swap over DC",
          "[btl][e2e][dc][rdma]") {
    FabricOptions o = dc_fabric();
    auto base = o.tweak;
    o.tweak = [base](btl::ModuleConfig &c) {
        base(c);
        c.rdma_chunk = 16 * 1024; // 64 KiB goes in 4 chunks
    };
    BtlFabric f(o);
    const int rc_qps = f.fake.calls(Call::kCreateQp);
    f.add_all();
    const size_t len = 64 * 1024;
    std::vector<uint8_t> src(len), dst(len, 0), remote_src(len), got(len, 0);
    for (size_t k = 0; k < len; ++k) {
        src[k] = static_cast<uint8_t>(k * 7 + 1);
        remote_src[k] = static_cast<uint8_t>(k * 13 + 5);
    }
    const std::vector<uint8_t> remote_copy = remote_src;
    auto *l_src = f.reg(0, src.data(), len);
    auto *l_got = f.reg(0, got.data(), len);
    auto *r_dst = f.reg(1, dst.data(), len);
    auto *r_src = f.reg(1, remote_src.data(), len);
    REQUIRE((l_src && l_got && r_dst && r_src));
    alignas(8) uint64_t counter = 40;
    alignas(8) uint64_t word = 7;
    alignas(8) uint64_t fetched = 0, swapped = 0;
    auto *r_ctr = f.reg(1, &counter, sizeof(counter));
    auto *r_word = f.reg(1, &word, sizeof(word));
    auto *l_fetched = f.reg(0, &fetched, sizeof(fetched));
    auto *l_swapped = f.reg(0, &swapped, sizeof(swapped));
    REQUIRE((r_ctr && r_word && l_fetched && l_swapped));

    mca_btl_base_module_t *b = f.procs[0]->btl();
    mca_btl_base_endpoint_t *e = f.procs[0]->eps[1];
    RdmaResult put_small, put, get, add, cas;
    REQUIRE(b->btl_put(b, e, src.data(), reinterpret_cast<uint64_t>(dst.data()), l_src, r_dst, 100,
                       0, MCA_BTL_NO_ORDER, rdma_done, &put_small, nullptr) == OPAL_SUCCESS);
    f.run(5);
    CHECK(put_small.calls == 1);
    CHECK(put_small.status == OPAL_SUCCESS);
    CHECK(std::equal(src.begin(), src.begin() + 100, dst.begin()));
    CHECK(dst[100] == 0);
    REQUIRE(b->btl_put(b, e, src.data(), reinterpret_cast<uint64_t>(dst.data()), l_src, r_dst, len,
                       0, MCA_BTL_NO_ORDER, rdma_done, &put, nullptr) == OPAL_SUCCESS);
    REQUIRE(b->btl_get(b, e, got.data(), reinterpret_cast<uint64_t>(remote_src.data()), l_got,
                       r_src, len, 0, MCA_BTL_NO_ORDER, rdma_done, &get, nullptr) == OPAL_SUCCESS);
    REQUIRE(b->btl_atomic_fop(b, e, &fetched, reinterpret_cast<uint64_t>(&counter), l_fetched,
                              r_ctr, MCA_BTL_ATOMIC_ADD, 2, 0, MCA_BTL_NO_ORDER, rdma_done, &add,
                              nullptr) == OPAL_SUCCESS);
    REQUIRE(b->btl_atomic_cswap(b, e, &swapped, reinterpret_cast<uint64_t>(&word), l_swapped,
                                r_word, 7, 99, 0, MCA_BTL_NO_ORDER, rdma_done, &cas,
                                nullptr) == OPAL_SUCCESS);
    f.run(20);
    REQUIRE(b->btl_flush(b, e) == OPAL_SUCCESS);
    for (const RdmaResult *r : {&put, &get, &add, &cas}) {
        CHECK(r->calls == 1);
        CHECK(r->status == OPAL_SUCCESS);
    }
    CHECK(dst == src);
    CHECK(got == remote_src);
    CHECK(got == remote_copy); // read from there, not written there
    CHECK(counter == 42);
    CHECK(fetched == 40);
    CHECK(word == 99);
    CHECK(swapped == 7);
    // 1 small put, 4 + 4 chunks, 2 atomics; no RC QP, no connection.
    CHECK(f.procs[0]->module->dc_stats().rdma == 11);
    CHECK(f.fake.calls(Call::kCreateQp) == rc_qps);
    CHECK(f.ep(0, 1).state == btl::EpState::kClosed);
    CHECK(f.log.errors == 0);
    teardown(f);
}

TEST_CASE("btl dc e2e: RDMA flushed by a DCI error runs again; an atomic hit by it fails once",
          "[btl][e2e][dc][rdma][recover]") {
    BtlFabric f(dc_fabric());
    f.add_all();
    const size_t len = 4096;
    std::vector<uint8_t> src(len), dst(len, 0);
    for (size_t k = 0; k < len; ++k) {
        src[k] = static_cast<uint8_t>(k * 3 + 11);
    }
    auto *l_src = f.reg(0, src.data(), len);
    auto *r_dst = f.reg(1, dst.data(), len);
    alignas(8) uint64_t counter = 40;
    auto *r_ctr = f.reg(1, &counter, sizeof(counter));
    REQUIRE((l_src && r_dst && r_ctr));
    mca_btl_base_module_t *b = f.procs[0]->btl();
    mca_btl_base_endpoint_t *e = f.procs[0]->eps[1];
    RdmaResult add, put;
    // The atomic first: it gets the error (and ran: delivered, ACK lost);
    // the put behind it flushes and goes again after the recovery.
    REQUIRE(b->btl_atomic_op(b, e, reinterpret_cast<uint64_t>(&counter), r_ctr, MCA_BTL_ATOMIC_ADD,
                             2, 0, MCA_BTL_NO_ORDER, rdma_done, &add, nullptr) == OPAL_SUCCESS);
    REQUIRE(b->btl_put(b, e, src.data(), reinterpret_cast<uint64_t>(dst.data()), l_src, r_dst, len,
                       0, MCA_BTL_NO_ORDER, rdma_done, &put, nullptr) == OPAL_SUCCESS);
    f.fake.break_qp(dci_to(f, 0, 1).qp().get(), IBV_WC_RETRY_EXC_ERR, 1);
    f.run(20);
    CHECK(add.calls == 1);
    CHECK(add.status == OPAL_ERROR);
    CHECK(counter == 42); // applied once, not repeated
    CHECK(put.calls == 1);
    CHECK(put.status == OPAL_SUCCESS);
    CHECK(dst == src);
    const btl::DcStats &st = f.procs[0]->module->dc_stats();
    CHECK(st.errors == 1);
    CHECK(st.rdma_failed == 1);
    CHECK(st.recoveries == 1);
    CHECK(f.fake.qp_state(dci_to(f, 0, 1).qp().get()) == IBV_QPS_RTS);
    CHECK(f.procs[0]->errors.empty()); // the peer is not lost
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 1));
    teardown(f);
}

TEST_CASE("btl dc e2e: held fragments of a process that is not ours are refused once looked up",
          "[btl][e2e][dc][lazy]") {
    BtlFabric f(dc_fabric(3));
    f.add_all();
    btl::Module &victim = *f.procs[1]->module;
    {
        // A name of our job (jobid 0x1234) beyond its size: not even looked up.
        Forger forger(f, *f.procs[2]->module, f.ep(2, 1).path().dgid);
        forger.send(dc_fragment("beyond-size", 0, {(uint64_t{0x1234} << 32) | 7, 0}),
                    victim.dc()->dct_number(), victim.dc()->access_key());
        f.run(10);
    }
    CHECK(victim.dc_stats().held == 0);
    CHECK(victim.dc_stats().refused_unknown == 1);
    teardown(f);
}

TEST_CASE("btl dc e2e: at finalize what is on the DCIs completes or flushes, each callback once, "
          "then the DCIs go and the DCT last",
          "[btl][e2e][dc][finalize]") {
    FabricOptions o = dc_fabric();
    o.tweak = [](btl::ModuleConfig &c) {
        c.transport.mode = btl::TransportMode::kDc;
        c.device.sq_depth = 4; // each DCI takes 4 work requests at a time
    };
    BtlFabric f(o);
    f.add_all();
    std::vector<SendResult> sent(6);
    // Two sends executed on the wire, their completions not polled yet.
    REQUIRE(send_cb(f, 0, 1, msg(0, 1, 0), sent[0]) == OPAL_SUCCESS);
    REQUIRE(send_cb(f, 0, 1, msg(0, 1, 1), sent[1]) == OPAL_SUCCESS);
    CHECK(f.fake.run_dc() == 2);
    // A put and a send on the DCI that never run (the link is gone), and
    // three sends waiting for room on it.
    std::vector<uint8_t> src(64, 7), dst(64, 0);
    auto *l_src = f.reg(0, src.data(), src.size());
    auto *r_dst = f.reg(1, dst.data(), dst.size());
    REQUIRE((l_src && r_dst));
    mca_btl_base_module_t *b = f.procs[0]->btl();
    RdmaResult put;
    REQUIRE(b->btl_put(b, f.procs[0]->eps[1], src.data(), reinterpret_cast<uint64_t>(dst.data()),
                       l_src, r_dst, src.size(), 0, MCA_BTL_NO_ORDER, rdma_done, &put,
                       nullptr) == OPAL_SUCCESS);
    for (int n = 2; n < 6; ++n) {
        REQUIRE(send_cb(f, 0, 1, msg(0, 1, n), sent[static_cast<size_t>(n)]) == OPAL_SUCCESS);
    }
    const size_t i = f.ep(0, 1).dc_route().dci;
    CHECK(f.procs[0]->module->data_path().dci_outstanding(i) == 4);
    CHECK(put.calls == 0);
    const btl::DcResources &dc = *f.procs[0]->module->dc();
    std::vector<uint32_t> dcis;
    for (size_t k = 0; k < dc.dcis(); ++k) {
        dcis.push_back(dc.dci(k).number());
    }
    const uint32_t dct = dc.dct_number();
    const uint32_t ud = f.procs[0]->module->device().ud_qp()->qp_num;
    const size_t destroyed_before = f.fake.destroyed_qps().size();

    REQUIRE(f.finalize(0) == OPAL_SUCCESS);
    CHECK_FALSE(f.procs[0]->module);
    // Every callback ran once, before finalize returned: the executed sends
    // as sent, the rest in error.
    for (size_t n = 0; n < sent.size(); ++n) {
        INFO("send " << n);
        CHECK(sent[n].calls == 1);
        CHECK(sent[n].status == (n < 2 ? OPAL_SUCCESS : OPAL_ERR_UNREACH));
    }
    CHECK(put.calls == 1);
    CHECK(put.status == OPAL_ERR_UNREACH);
    CHECK(f.log.contains("never completed") == false);
    // The order: the DCIs, then the DCT, then the rest (the UD QP).
    std::vector<uint32_t> order(f.fake.destroyed_qps().begin() +
                                    static_cast<std::ptrdiff_t>(destroyed_before),
                                f.fake.destroyed_qps().end());
    REQUIRE(order.size() >= dcis.size() + 2);
    std::vector<uint32_t> first(order.begin(),
                                order.begin() + static_cast<std::ptrdiff_t>(dcis.size()));
    std::vector<uint32_t> want = dcis;
    std::sort(first.begin(), first.end());
    std::sort(want.begin(), want.end());
    CHECK(first == want);
    CHECK(order[dcis.size()] == dct);
    CHECK(std::find(order.begin() + static_cast<std::ptrdiff_t>(dcis.size()) + 1, order.end(),
                    ud) != order.end());
    // Nothing runs later: process 1 receives what was executed, and no
    // callback of process 0 runs again.
    f.run(5);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 2));
    for (const auto &r : sent) {
        CHECK(r.calls == 1);
    }
    CHECK(put.calls == 1);
    teardown(f); // no QP, AH or buffer left behind
}

TEST_CASE("btl dc e2e: a DC peer has no endpoint until used; the first fragment from it makes "
          "the receiver's, and callbacks name it by the handle of add_procs",
          "[btl][e2e][dc][lazy]") {
    BtlFabric f(dc_fabric());
    f.add_all();
    for (size_t i = 0; i < 2; ++i) {
        CHECK(f.procs[i]->module->dc_peers() == 0);
        CHECK(btl::is_dc_handle(f.procs[i]->eps[1 - i]));
    }
    for (int n = 0; n < 3; ++n) {
        REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
    }
    CHECK(f.procs[0]->module->dc_peers() == 1); // its first use
    CHECK(f.procs[1]->module->dc_peers() == 0);
    f.run(20);
    CHECK(in_order(f, 1, 0) == expected(0, 1, 0, 3));
    CHECK(f.procs[1]->module->dc_peers() == 1); // made by the first fragment's look-up
    CHECK(f.procs[1]->module->dc_stats().held >= 1);
    CHECK(f.procs[1]->module->dc_stats().refused_unknown == 0);
    btl::Endpoint *ep = f.procs[1]->module->endpoint(f.procs[1]->eps[0]);
    REQUIRE(ep != nullptr);
    CHECK(ep->as_opal() == f.procs[1]->eps[0]);
    CHECK(f.procs[1]->module->dc_peers() == 1); // the same one, not another
    // And the way back goes at once.
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(in_order(f, 0, 1) == expected(1, 0, 0, 1));
    teardown(f);
}
