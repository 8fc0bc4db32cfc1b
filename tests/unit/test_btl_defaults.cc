// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's generic parameters as Open MPI registers them: what the
// component hands mca_btl_base_param_register must come out of its final
// mca_btl_base_param_verify with every capability the module has.
#include "btl_roce_module.h"
#include "catch.h"
#include "ompi_series.h"
#include "opal/mca/btl/base/base.h"

using namespace roce;

TEST_CASE("btl defaults: Open MPI's parameter check keeps RDMA, flush and the atomics",
          "[btl][params]") {
    mca_btl_base_module_t t;
    btl::btl_defaults(t, nullptr);
    // What mca_btl_base_param_register returns with, after registering.
    REQUIRE(mca_btl_base_param_verify(&t) == OPAL_SUCCESS);
    // Before the fix the function table was installed only in each module,
    // after registration: PUT, GET and RDMA_FLUSH were cleared here, so ob1
    // had no RDMA over roce and osc/rdma refused every window.
    const uint32_t want = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_GET |
                          MCA_BTL_FLAGS_RDMA_FLUSH | MCA_BTL_FLAGS_ATOMIC_OPS |
                          MCA_BTL_FLAGS_ATOMIC_FOPS;
    CHECK((t.btl_flags & want) == want);
    CHECK((t.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD) != 0);
    CHECK((t.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_CSWAP) != 0);
    // The functions behind the flags are there.
    CHECK(t.btl_put != nullptr);
    CHECK(t.btl_get != nullptr);
    CHECK(t.btl_flush != nullptr);
    CHECK(t.btl_atomic_fop != nullptr);
    CHECK(t.btl_atomic_cswap != nullptr);
}

TEST_CASE("btl defaults: 5.0's osc/rdma can use the btl's own RDMA", "[btl][params]") {
    mca_btl_base_module_t t;
    btl::btl_defaults(t, nullptr);
    REQUIRE(mca_btl_base_param_verify(&t) == OPAL_SUCCESS);
#if ROCE_OMPI_SERIES == 41
    // 4.1 has no remote-completion flag: its osc/rdma needs RDMA and
    // fetching atomics only (checked above).
    CHECK(ROCE_BTL_FLAGS_REMOTE_COMPLETION == 0);
#else
    // What 5.0.7's osc/rdma asks of an "accelerated" btl (RDMA, fetching
    // atomics with ADD, remote completion). Without remote completion it
    // emulates every put and get with active messages over the btls' sends
    // (btl/base am_rdma) instead of using the btl's RDMA.
    const uint32_t want = MCA_BTL_FLAGS_RDMA | MCA_BTL_FLAGS_ATOMIC_FOPS |
                          MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION;
    CHECK((t.btl_flags & want) == want);
    CHECK((t.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD) != 0);
#endif
}
