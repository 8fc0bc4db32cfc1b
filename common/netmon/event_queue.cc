// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/event_queue.h"

namespace roce::netmon {

void EventQueue::attach(Monitor &m, EventFilter filter) {
    sub_ = m.subscribe(filter, [this](const Event &e) { push(e); });
}

void EventQueue::push(const Event &e) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (q_.size() >= capacity_) {
            q_.pop_front();
            lost_ = true;
            dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        q_.push_back(e);
    }
    pushed_.fetch_add(1, std::memory_order_release);
}

size_t EventQueue::drain(std::vector<Event> *out) {
    // Read the counter first: an event pushed after this load is either in
    // the queue we take below or makes changed() true again.
    uint64_t pushed = pushed_.load(std::memory_order_acquire);
    std::deque<Event> taken;
    bool lost = false;
    {
        std::lock_guard<std::mutex> g(mu_);
        taken.swap(q_);
        lost = lost_;
        lost_ = false;
    }
    seen_ = pushed;
    size_t n = 0;
    if (lost) {
        Event e;
        e.kind = EventKind::kResync;
        out->push_back(std::move(e));
        ++n;
    }
    for (auto &e : taken) {
        out->push_back(std::move(e));
        ++n;
    }
    return n;
}

} // namespace roce::netmon
