// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's generic parameters as Open MPI registers them: what the
// component hands mca_btl_base_param_register must come out of its final
// mca_btl_base_param_verify with every capability the module has.
#include "btl_roce_module.h"
#include "catch.h"
#include "ompi_series.h"
#include "opal/mca/btl/base/base.h"

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
