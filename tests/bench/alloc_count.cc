// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "alloc_count.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_allocs{0};
std::atomic<int64_t> g_live_bytes{0};
} // namespace

void *operator new(size_t n) {
    void *p = std::malloc(n == 0 ? 1 : n);
    if (p == nullptr) {
        throw std::bad_alloc();
    }
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
    return p;
}
void operator delete(void *p) noexcept {
    if (p != nullptr) {
        g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)),
                               std::memory_order_relaxed);
        std::free(p);
    }
}
void operator delete(void *p, size_t) noexcept {
    operator delete(p);
}

namespace roce::bench {

uint64_t allocations() noexcept { return g_allocs.load(std::memory_order_relaxed); }
int64_t live_bytes() noexcept { return g_live_bytes.load(std::memory_order_relaxed); }

} // namespace roce::bench
