// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "netmon/monitor.h"

namespace roce::netmon {

/// Hands monitor events to a consumer that polls, such as the btl progress
/// loop: the monitor thread appends, the consumer checks changed() - one
/// relaxed atomic load, no syscall, no lock - and drains when it is true.
///
/// Bounded: when more than `capacity` events are waiting the oldest are
/// dropped and the next drain() starts with a kResync event, telling the
/// consumer to re-read the whole picture (Monitor::snapshot()).
///
/// One consumer thread (changed()/drain()); attach() before the monitor's
/// events matter to you. Destroy the queue before the Monitor or after it,
/// either is fine (the subscription is released first).
class EventQueue {
public:
    explicit EventQueue(size_t capacity = 4096) : capacity_(capacity) {}
    ~EventQueue() { sub_.unsubscribe(); }
    EventQueue(const EventQueue &) = delete;
    EventQueue &operator=(const EventQueue &) = delete;

    /// Subscribes to `m` with `filter`, replacing an earlier attach().
    void attach(Monitor &m, EventFilter filter = EventFilter::all());

    /// True when events arrived since the last drain(). Consumer thread only.
    bool changed() const noexcept { return pushed_.load(std::memory_order_acquire) != seen_; }

    /// Moves every waiting event to `out` (appended, in seq order); returns
    /// how many. Consumer thread only.
    size_t drain(std::vector<Event> *out);

    /// Events dropped because the consumer fell more than `capacity` behind.
    uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

private:
    void push(const Event &e);

    const size_t capacity_;
    Subscription sub_;
    std::mutex mu_;
    std::deque<Event> q_; // guarded by mu_
    bool lost_ = false;   // guarded by mu_
    std::atomic<uint64_t> pushed_{0};
    std::atomic<uint64_t> dropped_{0};
    uint64_t seen_ = 0; // consumer thread only
};

} // namespace roce::netmon
