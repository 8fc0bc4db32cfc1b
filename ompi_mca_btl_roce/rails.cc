// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "rails.h"

#include <algorithm>

namespace roce::btl {

void Rails::join(Module *m, uint16_t port_index) {
    std::lock_guard<std::mutex> g(mu_);
    for (Rail &r : rails_) {
        if (r.module == m) {
            r.port = port_index;
            return;
        }
    }
    Rail r;
    r.module = m;
    r.port = port_index;
    rails_.push_back(std::move(r));
}

void Rails::leave(Module *m) {
    std::lock_guard<std::mutex> g(mu_);
    rails_.erase(std::remove_if(rails_.begin(), rails_.end(),
                                [m](const Rail &r) { return r.module == m; }),
                 rails_.end());
}

void Rails::set_reach(const Module *m, uint64_t peer, bool reached) {
    std::lock_guard<std::mutex> g(mu_);
    for (Rail &r : rails_) {
        if (r.module == m) {
            if (reached) {
                r.reached.insert(peer);
            } else {
                r.reached.erase(peer);
            }
            return;
        }
    }
}

Module *Rails::sibling(const Module *self, uint64_t peer) const {
    std::lock_guard<std::mutex> g(mu_);
    const Rail *best = nullptr;
    for (const Rail &r : rails_) {
        if (r.module != self && r.reached.count(peer) != 0 &&
            (best == nullptr || r.port < best->port)) {
            best = &r;
        }
    }
    return best ? best->module : nullptr;
}

Module *Rails::at_port(uint16_t port_index) const {
    std::lock_guard<std::mutex> g(mu_);
    for (const Rail &r : rails_) {
        if (r.port == port_index) {
            return r.module;
        }
    }
    return nullptr;
}

int Rails::port_of(const Module *m) const {
    std::lock_guard<std::mutex> g(mu_);
    for (const Rail &r : rails_) {
        if (r.module == m) {
            return r.port;
        }
    }
    return -1;
}

std::vector<std::pair<uint16_t, Module *>> Rails::members() const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::pair<uint16_t, Module *>> out;
    out.reserve(rails_.size());
    for (const Rail &r : rails_) {
        out.emplace_back(r.port, r.module);
    }
    return out;
}

} // namespace roce::btl
