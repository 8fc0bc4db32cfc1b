// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Helpers shared by the netmon unit and netns tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "netmon/event.h"
#include "util/log.h"

namespace roce::netmon::test {

/// A LogSink the monitor thread may write to while the test reads it.
class LockedCapture final : public util::LogSink {
public:
    bool enabled(util::LogLevel l) const noexcept override { return l <= util::LogLevel::kInfo; }
    void write(util::LogLevel l, std::string_view line) noexcept override {
        std::lock_guard<std::mutex> g(mu_);
        lines_.emplace_back(std::string(util::level_name(l)) + ": " + std::string(line));
    }
    bool contains(const std::string &needle) const {
        std::lock_guard<std::mutex> g(mu_);
        for (const auto &l : lines_) {
            if (l.find(needle) != std::string::npos) {
                return true;
            }
        }
        return false;
    }
    std::string all() const {
        std::lock_guard<std::mutex> g(mu_);
        std::string s;
        for (const auto &l : lines_) {
            s += l + "\n";
        }
        return s;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> lines_;
};

/// Collects events delivered on the monitor thread; waits for them.
class Collector {
public:
    void operator()(const Event &e) {
        std::lock_guard<std::mutex> g(mu_);
        events_.push_back(e);
        cv_.notify_all();
    }
    std::function<void(const Event &)> callback() {
        return [this](const Event &e) { (*this)(e); };
    }
    /// Waits until `pred(events)` holds; false on timeout.
    bool wait(const std::function<bool(const std::vector<Event> &)> &pred,
              std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        std::unique_lock<std::mutex> lk(mu_);
        return cv_.wait_for(lk, timeout, [&] { return pred(events_); });
    }
    /// Waits for an event of kind `k` on `netdev` ("" any) after index `from`.
    bool wait_for(EventKind k, const std::string &netdev, size_t from = 0,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        return wait(
            [&](const std::vector<Event> &ev) {
                for (size_t i = from; i < ev.size(); ++i) {
                    if (ev[i].kind == k && (netdev.empty() || ev[i].netdev == netdev)) {
                        return true;
                    }
                }
                return false;
            },
            timeout);
    }
    std::vector<Event> events() const {
        std::lock_guard<std::mutex> g(mu_);
        return events_;
    }
    size_t size() const {
        std::lock_guard<std::mutex> g(mu_);
        return events_.size();
    }
    void clear() {
        std::lock_guard<std::mutex> g(mu_);
        events_.clear();
    }

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Event> events_;
};

/// Polls `pred` every `step` until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()> &pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5),
                       std::chrono::milliseconds step = std::chrono::milliseconds(1)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(step);
    }
    return pred();
}

} // namespace roce::netmon::test
