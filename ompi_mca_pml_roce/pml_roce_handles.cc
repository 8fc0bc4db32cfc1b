// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_handles.h"

#include <new>

namespace roce::pml {

uint64_t HandleTable::insert(void *object) noexcept {
    if (object == nullptr) {
        return 0;
    }
    uint32_t index;
    if (free_head_ != 0) {
        index = free_head_ - 1;
        free_head_ = slots_[index].next_free;
    } else {
        if (slots_.size() >= UINT32_MAX - 1) {
            return 0;
        }
        try {
            slots_.emplace_back();
        } catch (const std::bad_alloc &) {
            return 0;
        }
        index = static_cast<uint32_t>(slots_.size() - 1);
    }
    Slot &s = slots_[index];
    s.object = object;
    s.next_free = 0;
    ++live_;
    return (static_cast<uint64_t>(s.generation) << 32) | (static_cast<uint64_t>(index) + 1);
}

const HandleTable::Slot *HandleTable::slot_of(uint64_t id) const noexcept {
    uint64_t low = id & 0xffffffffu;
    if (low == 0 || low > slots_.size()) {
        return nullptr;
    }
    const Slot &s = slots_[low - 1];
    if (s.object == nullptr || s.generation != static_cast<uint32_t>(id >> 32)) {
        return nullptr;
    }
    return &s;
}

HandleTable::Lookup HandleTable::lookup(uint64_t id) const noexcept {
    uint64_t low = id & 0xffffffffu;
    if (low == 0 || low > slots_.size()) {
        return {nullptr, State::kNever};
    }
    const Slot &s = slots_[low - 1];
    auto gen = static_cast<uint32_t>(id >> 32);
    if (s.object != nullptr && s.generation == gen) {
        return {s.object, State::kLive};
    }
    // Generations issued for this slot so far: 1 .. current (current only
    // while live, and then handled above).
    if (gen != 0 && gen < s.generation) {
        return {nullptr, State::kClosed};
    }
    return {nullptr, State::kNever};
}

void *HandleTable::find(uint64_t id) const noexcept {
    const Slot *s = slot_of(id);
    return s != nullptr ? s->object : nullptr;
}

void *HandleTable::erase(uint64_t id) noexcept {
    const Slot *cs = slot_of(id);
    if (cs == nullptr) {
        return nullptr;
    }
    auto index = static_cast<uint32_t>((id & 0xffffffffu) - 1);
    Slot &s = slots_[index];
    void *object = s.object;
    s.object = nullptr;
    // Generation 0 is never issued, so ids never collide with "0 = none"
    // in the high half either; skip it on wraparound.
    s.generation = s.generation == UINT32_MAX ? 1 : s.generation + 1;
    s.next_free = free_head_;
    free_head_ = index + 1;
    --live_;
    return object;
}

} // namespace roce::pml
