// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Private to monitor.cc and monitor_loop.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "netmon/monitor.h"

namespace roce::netmon {

struct Subscription::Slot {
    std::recursive_mutex mu; // held while the callback runs
    bool active = true;
    EventFilter filter;
    Monitor::Callback cb;
};

struct Subscription::Registry {
    std::mutex mu;
    std::vector<std::shared_ptr<Slot>> slots;
};

struct Monitor::AtomicStats {
    std::atomic<uint64_t> wakeups{0};
    std::atomic<uint64_t> messages{0};
    std::atomic<uint64_t> parse_errors{0};
    std::atomic<uint64_t> overflows{0};
    std::atomic<uint64_t> resyncs{0};
    std::atomic<uint64_t> dump_retries{0};
    std::atomic<uint64_t> events{0};
    std::atomic<uint64_t> polls{0};
    std::atomic<uint64_t> rdma_refreshes{0};
    std::atomic<uint64_t> lacp_refreshes{0};
    std::atomic<int> rcvbuf{0};
};

} // namespace roce::netmon
