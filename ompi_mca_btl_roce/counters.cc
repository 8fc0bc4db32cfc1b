// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "counters.h"

namespace roce::btl {

uint64_t BtlCounters::total(uint64_t PathCounters::*field) const noexcept {
    uint64_t sum = 0;
    for (const auto &p : paths) {
        sum += p.*field;
    }
    return sum;
}

uint64_t BtlCounters::paths_up() const noexcept {
    uint64_t n = 0;
    for (const auto &p : paths) {
        n += p.state == PathState::kUp ? 1 : 0;
    }
    return n;
}

uint64_t BtlCounters::rail_total(uint64_t RailCounters::*field) const noexcept {
    uint64_t sum = 0;
    for (const auto &r : rails) {
        sum += r.*field;
    }
    return sum;
}

void add_drops(CmDrops &into, const CmDrops &from) noexcept {
    into.malformed += from.malformed;
    into.misdirected += from.misdirected;
    into.unauthenticated += from.unauthenticated;
    into.unknown_sender += from.unknown_sender;
    into.unexpected += from.unexpected;
}

PathSlotState slot_state(PathState s) noexcept {
    switch (s) {
    case PathState::kIdle:
        return PathSlotState::kIdle;
    case PathState::kConnecting:
        return PathSlotState::kConnecting;
    case PathState::kAwaitRtu:
        return PathSlotState::kAwaitRtu;
    case PathState::kUp:
        return PathSlotState::kUp;
    }
    return PathSlotState::kNoPath;
}

} // namespace roce::btl
