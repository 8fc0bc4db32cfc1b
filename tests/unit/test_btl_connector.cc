// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's Connector (ompi_mca_btl_roce/connector/) through whole Modules
// over FakeVerbs: what it does beside the handshake - the UD QP brought back
// after the error state, and connections that still come up after it.
#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using namespace roce::testing::e2e;

namespace {

/// Moves process i's UD QP to the error state, as rxe does when the netdev
/// refuses a datagram (an active-backup bond between members): its posted
/// receives flush back, and it hears nothing until recovered.
void break_ud(BtlFabric &f, size_t i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    REQUIRE(f.fake.api().modify_qp(f.procs[i]->module->device().ud_qp(), &a, IBV_QP_STATE) == 0);
}

} // namespace

TEST_CASE("connector: a UD QP in the error state is recovered and the peer still connects",
          "[btl][connector]") {
    verbs::note_destroy_failure(0);
    FabricOptions o;
    o.procs = 3;
    BtlFabric f(o);
    f.add_all();
    // A connection made before: it must survive the UD QP's recovery.
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }));
    btl::Device &dev1 = f.procs[1]->module->device();
    const uint32_t ud_qpn = dev1.ud_qp()->qp_num;
    break_ud(f, 1);
    // The flushed receives tell process 1 at its next progress; the REQ of
    // a new peer then finds the recovered QP (same number: the number is in
    // the modex and cannot change).
    REQUIRE(f.send(2, 1, msg(2, 1, 0)) == OPAL_SUCCESS);
    REQUIRE(f.run_until([&] { return f.all_up(2, 1) && f.all_up(1, 2); }));
    f.run(5);
    CHECK(dev1.ud_recoveries() == 1);
    CHECK(dev1.ud_qp()->qp_num == ud_qpn);
    CHECK(dev1.ud_state() == IBV_QPS_RTS);
    CHECK(f.log.contains("was in the error state; recovered (1 so far)"));
    CHECK(from(f, 1, 2) == expected(2, 1, 0, 1));
    // The old connection carried on untouched, both ways.
    REQUIRE(f.send(0, 1, msg(0, 1, 1)) == OPAL_SUCCESS);
    REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
    f.run(10);
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 2));
    CHECK(from(f, 0, 1) == expected(1, 0, 0, 1));
    CHECK(f.log.errors == 0);
    teardown(f);
}
