// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace roce::util {

/// Checks lo <= value <= hi. The error names the parameter, the value and the
/// allowed range, e.g. "btl_roce_gid_index = -7 is invalid: allowed values
/// are -1 (automatic) or 0..65535". `allowed` replaces the default
/// "lo..hi" wording when non-empty.
Status check_range(std::string_view param, int64_t value, int64_t lo, int64_t hi,
                   std::string_view allowed = {});

/// Checks that `value` is one of `names` (exact, case-sensitive). The error
/// lists the allowed names.
Status check_one_of(std::string_view param, std::string_view value,
                    const std::vector<std::string_view> &names);

} // namespace roce::util
