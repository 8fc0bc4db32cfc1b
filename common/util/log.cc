// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/log.h"

#include <cstdio>

namespace roce::util {

const char *level_name(LogLevel level) noexcept {
    switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kTrace: return "trace";
    }
    return "log";
}

void StderrSink::write(LogLevel level, std::string_view line) noexcept {
    if (!enabled(level)) {
        return;
    }
    // One fprintf per line keeps lines from different threads whole.
    std::fprintf(stderr, "%s%s: %.*s\n", prefix_.c_str(), level_name(level),
                 static_cast<int>(line.size()), line.data());
}

void CaptureSink::write(LogLevel level, std::string_view line) noexcept {
    try {
        lines_.push_back({level, std::string(line)});
    } catch (...) {
        // A test sink that cannot allocate has nothing better to do.
    }
}

bool CaptureSink::contains(std::string_view needle) const {
    for (const auto &l : lines_) {
        if (l.text.find(needle) != std::string::npos) {
            return true;
        }
    }
    return false;
}

} // namespace roce::util
