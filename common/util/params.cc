// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/params.h"

#include <string>

#include "util/strings.h"

namespace roce::util {

Status check_range(std::string_view param, int64_t value, int64_t lo, int64_t hi,
                   std::string_view allowed) {
    if (value >= lo && value <= hi) {
        return Status::ok();
    }
    std::string range = allowed.empty()
                            ? format("%lld..%lld", static_cast<long long>(lo),
                                     static_cast<long long>(hi))
                            : std::string(allowed);
    return Status(Code::kInvalidArgument,
                  format("%.*s = %lld is invalid: allowed values are %s",
                         static_cast<int>(param.size()), param.data(),
                         static_cast<long long>(value), range.c_str()));
}

Status check_one_of(std::string_view param, std::string_view value,
                    const std::vector<std::string_view> &names) {
    for (auto n : names) {
        if (n == value) {
            return Status::ok();
        }
    }
    std::vector<std::string> quoted;
    for (auto n : names) {
        quoted.push_back("'" + std::string(n) + "'");
    }
    return Status(Code::kInvalidArgument,
                  format("%.*s = '%.*s' is invalid: allowed values are %s",
                         static_cast<int>(param.size()), param.data(),
                         static_cast<int>(value.size()), value.data(),
                         join(quoted, ", ").c_str()));
}

} // namespace roce::util
