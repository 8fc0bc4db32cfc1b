// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "util/log.h"

namespace roce::util {

/// Decides which occurrences of a repeated event deserve a log line: at most
/// one line per key per interval, each carrying how many events it stands
/// for. Used where the events come from outside (datagrams from the fabric),
/// so that a flood of them costs a counter increment, not a line each.
///
/// The number of keys is bounded: once `max_keys` distinct keys are tracked,
/// events of new keys share one overflow key (so an attacker who varies the
/// key cannot grow memory or the log). Keys whose last line is more than an
/// interval old are forgotten when room is needed.
///
/// Pure bookkeeping, the caller passes the time; not thread-safe.
class RateLimiter {
public:
    /// `interval_s` > 0: seconds between two lines of one key.
    explicit RateLimiter(double interval_s = 10.0, size_t max_keys = 64)
        : interval_(interval_s), max_keys_(max_keys) {}

    /// Records one event of `key` at time `now` (seconds, monotonic). Returns
    /// the number of events the caller should report in a line now - this
    /// one and those suppressed since the key's previous line - or 0 when
    /// no line is due.
    uint64_t hit(const std::string &key, double now);

    /// hit(), and when a line is due, writes `line` at warning level on
    /// `log` - with " (N such since the last report)" when it stands for
    /// more than this one event. Returns whether it wrote.
    bool warn(LogSink &log, const std::string &key, double now, const std::string &line);

    /// Events recorded in total (reported or not).
    uint64_t total() const noexcept { return total_; }
    /// Keys tracked now (at most max_keys + 1, the overflow key).
    size_t keys() const noexcept { return entries_.size(); }

    /// The key under which events of untracked keys are counted.
    static const char *overflow_key() noexcept { return "(other)"; }

private:
    struct Entry {
        double last_line = 0;
        uint64_t suppressed = 0;
        bool reported = false;
    };
    void evict_stale(double now);

    double interval_;
    size_t max_keys_;
    uint64_t total_ = 0;
    std::unordered_map<std::string, Entry> entries_;
};

} // namespace roce::util
