// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "catch.h"
#include "pml_roce_params.h"
#include "pml_roce_wire.h"

using namespace roce::pml;

TEST_CASE("pml options: defaults and bounds are accepted", "[pml][params]") {
    auto d = validate_pml_options(kDefaultEagerLimit, kDefaultPriority, 0);
    REQUIRE(d.is_ok());
    CHECK(d->eager_limit == 8192u);
    CHECK(d->priority == 5);
    CHECK(validate_pml_options(kMinEagerLimit, 0, 0).is_ok());
    CHECK(validate_pml_options(kMaxEagerLimit, 100, 100).is_ok());
}

TEST_CASE("pml options: each invalid value is named with what is allowed", "[pml][params]") {
    auto e = validate_pml_options(63, 5, 0);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.status().message() ==
          "pml_roce_eager_limit = 63 is invalid: allowed values are 64..4194304 (bytes)");
    e = validate_pml_options(4194305, 5, 0);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.status().message().find("pml_roce_eager_limit = 4194305") == 0);
    e = validate_pml_options(8192, -1, 0);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.status().message() == "pml_roce_priority = -1 is invalid: allowed values are 0..100");
    e = validate_pml_options(8192, 5, 101);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.status().message() == "pml_roce_verbose = 101 is invalid: allowed values are 0..100");
}

TEST_CASE("pml rendezvous options: bounds and refusals", "[pml][params]") {
    CHECK(check_rendezvous_options(kDefaultPipelineDepth, 0).is_ok());
    CHECK(check_rendezvous_options(kMinPipelineDepth, kMaxRgetLimit).is_ok());
    CHECK(check_rendezvous_options(kMaxPipelineDepth, 65536).is_ok());
    auto e = check_rendezvous_options(0, 0);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.message() == "pml_roce_pipeline_depth = 0 is invalid: allowed values are 1..1024 "
                         "(fragments)");
    e = check_rendezvous_options(1025, 0);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.message().find("pml_roce_pipeline_depth = 1025") == 0);
    e = check_rendezvous_options(8, -1);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.message().find("pml_roce_rget_limit = -1 is invalid") == 0);
}

TEST_CASE("pml split min: off, bounds and refusals", "[pml][params][split]") {
    CHECK(check_split_min(0).is_ok()); // never split
    CHECK(check_split_min(128).is_ok());
    CHECK(check_split_min(kDefaultSplitMin).is_ok());
    CHECK(check_split_min(kMaxSplitMin).is_ok());
    auto e = check_split_min(127);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.message() == "pml_roce_split_min = 127 is invalid: allowed values are "
                         "0 (off) or 128..4611686018427387904 (bytes)");
    CHECK_FALSE(check_split_min(kMaxSplitMin + 1).is_ok());
    CHECK_FALSE(check_split_min(-1).is_ok());
}

TEST_CASE("pml stream limit: bounds and refusals", "[pml][params]") {
    CHECK(check_stream_limit(0).is_ok()); // never stream
    CHECK(check_stream_limit(kDefaultStreamLimit).is_ok());
    CHECK(check_stream_limit(kMaxStreamLimit).is_ok());
    // The largest a receiver accepts is the wire's limit.
    CHECK(static_cast<uint64_t>(kMaxStreamLimit) == roce::pml::wire::kMaxStream);
    auto e = check_stream_limit(kMaxStreamLimit + 1);
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.message() == "pml_roce_stream_limit = 1048577 is invalid: allowed values are "
                         "0..1048576 (bytes)");
    CHECK_FALSE(check_stream_limit(-1).is_ok());
}
