// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "match/reorder_ring.h"

#include <new>

namespace roce::pml::match::detail {

namespace {
constexpr uint32_t kFirstCapacity = 16;
}

bool ReorderRing::reserve(uint32_t distance) noexcept {
    if (distance < capacity_) {
        return true;
    }
    uint32_t cap = capacity_ == 0 ? kFirstCapacity : capacity_;
    while (cap <= distance) {
        cap *= 2;
    }
    Entry *fresh = new (std::nothrow) Entry[cap]();
    if (fresh == nullptr) {
        return false;
    }
    // Held messages all lie less than the old capacity ahead of the expected
    // sequence number, so they keep distinct slots at the larger capacity.
    for (uint32_t i = 0; i < capacity_; ++i) {
        if (slots_[i].used) {
            fresh[slots_[i].seq & (cap - 1)] = slots_[i];
        }
    }
    delete[] slots_;
    slots_ = fresh;
    capacity_ = cap;
    return true;
}

void ReorderRing::clear() noexcept {
    for (uint32_t i = 0; i < capacity_; ++i) {
        slots_[i].used = false;
    }
    count_ = 0;
}

} // namespace roce::pml::match::detail
