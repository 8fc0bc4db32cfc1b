// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/rate_limit.h"

#include "util/strings.h"

namespace roce::util {

void RateLimiter::evict_stale(double now) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        bool stale = it->second.suppressed == 0 && now - it->second.last_line >= interval_;
        it = stale ? entries_.erase(it) : std::next(it);
    }
}

uint64_t RateLimiter::hit(const std::string &key, double now) {
    ++total_;
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        if (entries_.size() >= max_keys_) {
            evict_stale(now);
        }
        const std::string &k = entries_.size() >= max_keys_ ? std::string(overflow_key()) : key;
        it = entries_.try_emplace(k).first;
    }
    Entry &e = it->second;
    if (e.reported && now - e.last_line < interval_) {
        ++e.suppressed;
        return 0;
    }
    uint64_t n = e.suppressed + 1;
    e.suppressed = 0;
    e.last_line = now;
    e.reported = true;
    return n;
}

bool RateLimiter::warn(LogSink &log, const std::string &key, double now,
                       const std::string &line) {
    uint64_t n = hit(key, now);
    if (n == 0) {
        return false;
    }
    log.write(LogLevel::kWarn,
              n == 1 ? line
                     : format("%s (%llu such since the last report)", line.c_str(),
                              static_cast<unsigned long long>(n)));
    return true;
}

} // namespace roce::util
