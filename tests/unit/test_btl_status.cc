// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Errors in the btl: util::Status inside, one OPAL code at the C function
// table (to_opal). The mapping for every Code, and flow control seen from
// both sides: the Module facade answers kResourceExhausted with no message,
// the C table OPAL_ERR_OUT_OF_RESOURCE, which is what the PML falls back on.
#include <string>
#include <vector>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "btl_roce_log.h"
#include "catch.h"
#include "data/data_path.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using namespace roce::testing::e2e;
using util::Code;
using util::Status;

TEST_CASE("to_opal: every Code has its OPAL code, whatever the message", "[btl][status]") {
    struct Row {
        Code code;
        int opal;
    };
    // The ones the PML and osc/rdma branch on: OUT_OF_RESOURCE (retry after
    // progress, sendi's fall-back), UNREACH, BAD_PARAM, NOT_SUPPORTED.
    const std::vector<Row> rows = {
        {Code::kInvalidArgument, OPAL_ERR_BAD_PARAM},
        {Code::kNotFound, OPAL_ERR_NOT_FOUND},
        {Code::kUnavailable, OPAL_ERR_UNREACH},
        {Code::kPermissionDenied, OPAL_ERR_PERM},
        {Code::kResourceExhausted, OPAL_ERR_OUT_OF_RESOURCE},
        {Code::kTimeout, OPAL_ERR_TIMEOUT},
        {Code::kProtocol, OPAL_ERR_UNPACK_FAILURE},
        {Code::kUnsupported, OPAL_ERR_NOT_SUPPORTED},
        {Code::kInternal, OPAL_ERROR},
    };
    CHECK(btl::to_opal(Status::ok()) == OPAL_SUCCESS);
    for (const Row &r : rows) {
        CAPTURE(util::code_name(r.code));
        CHECK(btl::to_opal(Status(r.code, "")) == r.opal);
        CHECK(btl::to_opal(Status(r.code, "with some context", 22)) == r.opal);
        CHECK(r.opal < 0); // never OPAL's positive "complete, no callback"
    }
    // Every error code is in the table (kOk is the first enumerator, kInternal the last).
    CHECK(rows.size() == static_cast<size_t>(Code::kInternal));
    // Flow control: the data path's retry_later() is OUT_OF_RESOURCE, and empty.
    Status r = btl::retry_later();
    CHECK(r.code() == Code::kResourceExhausted);
    CHECK(r.message().empty());
    CHECK(btl::to_opal(r) == OPAL_ERR_OUT_OF_RESOURCE);
}

TEST_CASE("btl status: out of credits, sendi is kResourceExhausted inside and "
          "OPAL_ERR_OUT_OF_RESOURCE at the C table; send queues and answers OPAL_SUCCESS",
          "[btl][status][credits]") {
    verbs::note_destroy_failure(0); // what an earlier test left; teardown checks it
    FabricOptions o;
    o.fixture = "mlx5_lag";
    o.credits = 4;
    o.tweak = [](btl::ModuleConfig &c) { c.num_paths = 1; };
    BtlFabric f(o);
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(f.procs[1]->received.size() == 1);

    mca_btl_base_module_t *b = f.procs[0]->btl();
    mca_btl_base_endpoint_t *e = f.procs[0]->eps[1];
    char hdr[16] = {};
    // p1 does not progress: no credit comes back. sendi goes out while p0
    // has credits (one stays in reserve), then the C table answers the code
    // the PML falls back to alloc + send on.
    int sent = 0;
    int rc = OPAL_SUCCESS;
    for (; sent < 2 * static_cast<int>(o.credits); ++sent) {
        rc = b->btl_sendi(b, e, nullptr, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER,
                          MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, BtlFabric::kTag, nullptr);
        if (rc != OPAL_SUCCESS) {
            break;
        }
    }
    CHECK(rc == OPAL_ERR_OUT_OF_RESOURCE);
    CHECK(sent >= 1);
    CHECK(sent <= static_cast<int>(o.credits) - 1);
    const btl::Path &p = f.ep(0, 1).path_at(0);
    CHECK(p.tx.credits.available() <= p.tx.credits.reserve());

    // The same through the Module facade: the Status, with no message (the
    // hot path formats nothing), and nothing logged for it at the C table.
    const size_t lines = f.log.lines.size();
    mca_btl_base_descriptor_t *back = nullptr;
    Status s =
        f.procs[0]->module->sendi(&f.ep(0, 1), nullptr, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER,
                                  MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, BtlFabric::kTag, &back);
    CHECK(s.code() == Code::kResourceExhausted);
    CHECK(s.message().empty());
    CHECK(back == nullptr); // nothing was packed: the convertor is untouched
    CHECK(b->btl_sendi(b, e, nullptr, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER,
                       MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, BtlFabric::kTag,
                       nullptr) == OPAL_ERR_OUT_OF_RESOURCE);
    CHECK(f.log.lines.size() == lines);

    // send is accepted all the same - queued until credits return - and
    // answers exactly OPAL_SUCCESS: never 1 ("complete, no callback").
    CHECK(f.send(0, 1, msg(0, 1, 1)) == OPAL_SUCCESS);

    // A real error keeps its context: the C table logs the message at debug
    // level and answers the code (an RDMA write without a remote handle).
    uint64_t word = 0;
    mca_btl_base_registration_handle_t *l = f.reg(0, &word, sizeof(word));
    REQUIRE(l != nullptr);
    CHECK(b->btl_put(b, e, &word, 0x1000, l, nullptr, sizeof(word), 0, MCA_BTL_NO_ORDER, nullptr,
                     nullptr, nullptr) == OPAL_ERR_BAD_PARAM);
    CHECK(f.log.contains("no remote registration handle"));
    CHECK(b->btl_deregister_mem(b, l) == OPAL_SUCCESS);

    // p1 progresses: credits come back, the queued send and the sendis arrive.
    f.run(40);
    CHECK(f.procs[1]->received.size() == 1 + static_cast<size_t>(sent) + 1);
    CHECK(f.log.errors == 0);
    teardown(f);
}
