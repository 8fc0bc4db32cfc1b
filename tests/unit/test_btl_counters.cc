// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's counter snapshot (counters.h): the sums and the slot layout the
// MPI_T performance variables publish.
#include <cstdint>
#include <vector>

#include "catch.h"
#include "counters.h"

using namespace roce::btl;

namespace {

PathCounters path(uint32_t vpid, uint16_t i, PathState s, uint64_t sent, uint64_t failovers) {
    PathCounters p;
    p.peer_vpid = vpid;
    p.path = i;
    p.state = s;
    p.bytes_sent = sent;
    p.failovers = failovers;
    return p;
}

} // namespace

TEST_CASE("counters: totals and paths up over every path", "[btl][counters]") {
    BtlCounters c;
    CHECK(c.total(&PathCounters::bytes_sent) == 0);
    CHECK(c.paths_up() == 0);
    c.paths.push_back(path(1, 0, PathState::kUp, 100, 0));
    c.paths.push_back(path(1, 1, PathState::kIdle, 50, 2));
    c.paths.push_back(path(3, 0, PathState::kUp, 7, 1));
    CHECK(c.total(&PathCounters::bytes_sent) == 157);
    CHECK(c.total(&PathCounters::failovers) == 3);
    CHECK(c.total(&PathCounters::reconnects) == 0);
    CHECK(c.paths_up() == 2);
}

TEST_CASE("counters: drops add up by reason", "[btl][counters]") {
    CmDrops a, b;
    a.malformed = 1;
    a.unauthenticated = 2;
    b.malformed = 10;
    b.unexpected = 4;
    b.misdirected = 5;
    b.unknown_sender = 6;
    add_drops(a, b);
    CHECK(a.malformed == 11);
    CHECK(a.unauthenticated == 2);
    CHECK(a.misdirected == 5);
    CHECK(a.unknown_sender == 6);
    CHECK(a.unexpected == 4);
    CHECK(a.total() == 28);
}

TEST_CASE("counters: slots hold the paths in order, then the fill value", "[btl][counters]") {
    BtlCounters c;
    c.paths.push_back(path(4, 0, PathState::kUp, 9, 0));
    c.paths.push_back(path(5, 0, PathState::kAwaitRtu, 8, 0));
    unsigned long long bytes[4];
    fill_slots(c, bytes, 4, 77ULL, [](const PathCounters &p) { return p.bytes_sent; });
    CHECK(bytes[0] == 9);
    CHECK(bytes[1] == 8);
    CHECK(bytes[2] == 77);
    CHECK(bytes[3] == 77);
    int states[3];
    fill_slots(c, states, 3, static_cast<int>(PathSlotState::kNoPath),
               [](const PathCounters &p) { return static_cast<int>(slot_state(p.state)); });
    CHECK(states[0] == 3);
    CHECK(states[1] == 2);
    CHECK(states[2] == -1);
    // More paths than slots: only the first ones are published.
    unsigned long long one[1];
    fill_slots(c, one, 1, 0ULL, [](const PathCounters &p) { return p.peer_vpid; });
    CHECK(one[0] == 4);
}

TEST_CASE("counters: every path state has its published value", "[btl][counters]") {
    CHECK(slot_state(PathState::kIdle) == PathSlotState::kIdle);
    CHECK(slot_state(PathState::kConnecting) == PathSlotState::kConnecting);
    CHECK(slot_state(PathState::kAwaitRtu) == PathSlotState::kAwaitRtu);
    CHECK(slot_state(PathState::kUp) == PathSlotState::kUp);
}
