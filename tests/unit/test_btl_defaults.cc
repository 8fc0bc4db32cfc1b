// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's generic parameters as Open MPI registers them: what the
// component hands mca_btl_base_param_register must come out of its final
// mca_btl_base_param_verify with every capability the module has.
#include "btl_roce_module.h"
#include "catch.h"
#include "ompi_series.h"
#include "opal/mca/btl/base/base.h"

#include <cstddef>
#include <cstdlib>
#include <string>

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

// Open MPI's own names of the btl flags (btl/base/btl_base_mca.c; exported
// by libopen-pal in 4.1 and 5.0, not declared in an installed header):
// ompi_info prints btl_roce_flags through them.
extern "C" mca_base_var_enum_value_flag_t mca_btl_base_flag_enum_flags[];

TEST_CASE("btl defaults: ompi_info can name every flag registered as btl_roce_flags",
          "[btl][params]") {
    mca_btl_base_module_t t;
    btl::btl_defaults(t, nullptr);
    REQUIRE(mca_btl_base_param_verify(&t) == OPAL_SUCCESS);
    mca_base_var_enum_flag_t *names = nullptr;
    REQUIRE(mca_base_var_enum_create_flag("roce_test_btl_flags", mca_btl_base_flag_enum_flags,
                                          &names) == OPAL_SUCCESS);
    char *text = nullptr;
    // A bit without a name fails the whole conversion, and ompi_info then
    // shows the parameter with an empty value (what 5.0.7's ompi_info
    // printed while the remote-completion flag was registered).
    const int rc = names->super.string_from_value(&names->super, static_cast<int>(t.btl_flags),
                                                  &text);
    CHECK(rc == OPAL_SUCCESS);
    const std::string shown = text != nullptr ? text : "";
    free(text);
    OBJ_RELEASE(names);
    INFO("btl_roce_flags shown as '" << shown << "'");
    for (const char *f : {"send", "put", "get", "inplace", "atomics", "fetching-atomics"}) {
        CHECK(("," + shown + ",").find(std::string(",") + f + ",") != std::string::npos);
    }
}

TEST_CASE("btl defaults: 5.0's osc/rdma can use the btl's own RDMA", "[btl][params]") {
    mca_btl_base_module_t t;
    btl::btl_defaults(t, nullptr);
    REQUIRE(mca_btl_base_param_verify(&t) == OPAL_SUCCESS);
    const uint32_t flags = btl::module_flags(t.btl_flags);
#if ROCE_OMPI_SERIES == 41
    // 4.1 has no remote-completion flag: its osc/rdma needs RDMA and
    // fetching atomics only (checked above).
    CHECK(ROCE_BTL_FLAGS_REMOTE_COMPLETION == 0);
    CHECK(flags == t.btl_flags);
#else
    // What 5.0.7's osc/rdma asks of an "accelerated" btl (RDMA, fetching
    // atomics with ADD, remote completion). Without remote completion it
    // emulates every put and get with active messages over the btls' sends
    // (btl/base am_rdma) instead of using the btl's RDMA. The module adds it
    // to what was registered.
    const uint32_t want = MCA_BTL_FLAGS_RDMA | MCA_BTL_FLAGS_ATOMIC_FOPS |
                          MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION;
    CHECK((flags & want) == want);
    CHECK((t.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD) != 0);
    // Nothing is added to a btl_roce_flags without RDMA or atomics.
    CHECK(btl::module_flags(MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE) ==
          (MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE));
#endif
}

TEST_CASE("btl defaults: osc/rdma's lock words stay 8-byte aligned", "[btl][params][rails]") {
    // osc/rdma (5.0, allocate_state_shared) lays its shared segment out as
    // the rank array (8-byte entries: node id, rank), one region
    // {int64 base, int64 len, btl_registration_handle_size bytes of handle},
    // then each process's state, whose lock words it changes with the btl's
    // 8-byte atomics: state_base = local_rank_array_size + 16 +
    // btl_registration_handle_size. The btl refuses an atomic on an address
    // that is not 8-byte aligned, and a 44-byte handle made osc/rdma spin on
    // that refusal forever.
    mca_btl_base_module_t t;
    btl::btl_defaults(t, nullptr);
    REQUIRE(mca_btl_base_param_verify(&t) == OPAL_SUCCESS);
    const size_t handle_size = t.btl_registration_handle_size;
    CHECK(handle_size == sizeof(mca_btl_base_registration_handle_t));
    CHECK(handle_size <= MCA_BTL_REG_HANDLE_MAX_SIZE);
    for (size_t ranks = 1; ranks <= 9; ++ranks) {
        CAPTURE(ranks, handle_size);
        const size_t local_rank_array_size = 8 * ranks;
        const size_t region_size = 16 + handle_size;
        const size_t state_base = local_rank_array_size + region_size;
        CHECK(state_base % 8 == 0);
        // The region array of a dynamic window: each region carries a copy.
        CHECK((local_rank_array_size + 3 * region_size) % 8 == 0);
    }
    // Every key of every rail of the table is in what is copied.
    CHECK(offsetof(mca_btl_base_registration_handle_t, rails) + sizeof(uint32_t) <= handle_size);
}
