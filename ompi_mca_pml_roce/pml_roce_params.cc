// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_params.h"

#include "util/params.h"

namespace roce::pml {

util::Result<PmlOptions> validate_pml_options(int64_t eager_limit, int64_t priority,
                                              int64_t verbose) {
    util::Status s = util::check_range("pml_roce_eager_limit", eager_limit, kMinEagerLimit,
                                       kMaxEagerLimit, "64..4194304 (bytes)");
    if (!s) {
        return s;
    }
    s = util::check_range("pml_roce_priority", priority, 0, 100);
    if (!s) {
        return s;
    }
    s = util::check_range("pml_roce_verbose", verbose, 0, 100);
    if (!s) {
        return s;
    }
    PmlOptions o;
    o.eager_limit = static_cast<size_t>(eager_limit);
    o.priority = static_cast<int>(priority);
    o.verbose = static_cast<int>(verbose);
    return o;
}

util::Status check_rendezvous_options(int64_t pipeline_depth, int64_t rget_limit) {
    util::Status s = util::check_range("pml_roce_pipeline_depth", pipeline_depth,
                                       kMinPipelineDepth, kMaxPipelineDepth, "1..1024 (fragments)");
    if (!s) {
        return s;
    }
    return util::check_range("pml_roce_rget_limit", rget_limit, 0, kMaxRgetLimit,
                             "0..4611686018427387904 (bytes)");
}

util::Status check_split_min(int64_t split_min) {
    if (split_min == 0) {
        return util::Status::ok();
    }
    return util::check_range("pml_roce_split_min", split_min, 128, kMaxSplitMin,
                             "0 (off) or 128..4611686018427387904 (bytes)");
}

util::Status check_stream_limit(int64_t stream_limit) {
    return util::check_range("pml_roce_stream_limit", stream_limit, 0, kMaxStreamLimit,
                             "0..1048576 (bytes)");
}

} // namespace roce::pml
