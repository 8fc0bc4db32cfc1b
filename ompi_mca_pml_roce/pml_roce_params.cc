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

} // namespace roce::pml
