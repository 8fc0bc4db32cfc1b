// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The receiver's bookkeeping of streamed messages (pml_roce_stream.h):
// targeted cases for each rule, then a randomized test that streams many
// messages at once through a network that reorders pieces around their
// RNDV, duplicates them and injects forged ones, with a receiver that does
// exactly what pml_roce_recvstream.cc does (stage under the lock, hand the
// staged bytes over at bind, unpack later pieces into the receive, clipped
// to its buffer). Invariants: a message completes exactly once, only after
// every byte arrived, with the sender's bytes in the buffer (up to its
// capacity, nothing written beyond it); forged pieces never reach a
// receive; at the end nothing is live or staged.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "catch.h"
#include "pml_roce_stream.h"
#include "pml_roce_wire.h"

using namespace roce::pml;
using namespace roce::pml::rndv;

namespace {

// A receive: an exact-size buffer (capacity may be below the message).
struct Recv {
    std::vector<uint8_t> buf;
    int completions = 0;
};

// Copies [off, off + n) of `src` (message offsets) into the receive, clipped.
void unpack(Recv &r, uint64_t off, const uint8_t *src, uint64_t n) {
    if (off >= r.buf.size()) {
        return;
    }
    uint64_t k = std::min<uint64_t>(n, r.buf.size() - off);
    std::memcpy(r.buf.data() + off, src, k);
}

// One STREAM fragment, as cb_stream handles it. Returns its outcome.
Outcome deliver_piece(StreamTable &t, const StreamKey &k, uint64_t msg_len, uint64_t off,
                      const uint8_t *bytes, uint64_t n) {
    StreamTable::Piece p = t.piece(k, msg_len, off, n);
    if (p.outcome != Outcome::kAccepted) {
        return p.outcome;
    }
    void *owner = nullptr;
    if (p.owner == nullptr) {
        REQUIRE(p.stage != nullptr);
        std::memcpy(p.stage, bytes, n);
        REQUIRE_FALSE(t.settle(k, &owner)); // no receive: cannot complete
        return p.outcome;
    }
    auto *r = static_cast<Recv *>(p.owner);
    unpack(*r, off, bytes, n);
    if (t.settle(k, &owner)) {
        REQUIRE(owner == r);
        ++r->completions;
    }
    return p.outcome;
}

// The RNDV matched `r`, with the message's first `first` bytes.
Outcome deliver_rndv(StreamTable &t, const StreamKey &k, uint64_t msg_len, const uint8_t *msg,
                     uint64_t first, Recv &r) {
    StreamTable::Binding b = t.bind(k, msg_len, first, &r);
    if (b.outcome != Outcome::kAccepted) {
        return b.outcome;
    }
    unpack(r, 0, msg, first);
    for (const auto &rg : b.ranges) {
        REQUIRE(rg.first >= first);
        REQUIRE(rg.second <= msg_len);
        unpack(r, rg.first, b.stage + rg.first, rg.second - rg.first);
    }
    t.drop_stage(k);
    void *owner = nullptr;
    if (t.settle(k, &owner)) {
        REQUIRE(owner == &r);
        ++r.completions;
    }
    return b.outcome;
}

std::vector<uint8_t> pattern(uint64_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (uint64_t i = 0; i < n; ++i) {
        v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
    }
    return v;
}

} // namespace

TEST_CASE("pml stream: pieces before their RNDV are kept and handed over", "[pml][stream]") {
    StreamTable t;
    const StreamKey k{3, 1, 42};
    auto msg = pattern(1000, 1);
    Recv r;
    r.buf.assign(1000, 0);
    CHECK(deliver_piece(t, k, 1000, 600, msg.data() + 600, 400) == Outcome::kAccepted);
    CHECK(deliver_piece(t, k, 1000, 100, msg.data() + 100, 500) == Outcome::kAccepted);
    CHECK(t.staged() == 1);
    CHECK(t.staged_bytes() == 1000);
    CHECK(r.completions == 0);
    CHECK(deliver_rndv(t, k, 1000, msg.data(), 100, r) == Outcome::kAccepted);
    CHECK(r.completions == 1);
    CHECK(r.buf == msg);
    CHECK(t.live() == 0);
    CHECK(t.staged() == 0);
    CHECK(t.staged_bytes() == 0);
    // A late copy of a piece of the closed message is a duplicate, not a
    // new message to stage.
    CHECK(deliver_piece(t, k, 1000, 100, msg.data() + 100, 500) == Outcome::kDuplicate);
    CHECK(t.live() == 0);
}

TEST_CASE("pml stream: RNDV first, pieces in any order, complete exactly once", "[pml][stream]") {
    StreamTable t;
    const StreamKey k{0, 0, 1};
    auto msg = pattern(4096, 9);
    Recv r;
    r.buf.assign(4096, 0);
    CHECK(deliver_rndv(t, k, 4096, msg.data(), 1000, r) == Outcome::kAccepted);
    CHECK(t.staged() == 0);
    CHECK(t.staged_bytes() == 0); // bound at once: nothing staged
    CHECK(deliver_piece(t, k, 4096, 3000, msg.data() + 3000, 1096) == Outcome::kAccepted);
    CHECK(deliver_piece(t, k, 4096, 3000, msg.data() + 3000, 1096) == Outcome::kDuplicate);
    CHECK(r.completions == 0);
    CHECK(deliver_piece(t, k, 4096, 1000, msg.data() + 1000, 2000) == Outcome::kAccepted);
    CHECK(r.completions == 1);
    CHECK(r.buf == msg);
    CHECK(t.live() == 0);
}

TEST_CASE("pml stream: a receive shorter than the message completes after every byte", "[pml][stream]") {
    StreamTable t;
    const StreamKey k{0, 0, 7};
    auto msg = pattern(3000, 5);
    Recv r;
    r.buf.assign(1500, 0); // exact-size: a write beyond it would be caught by ASan
    CHECK(deliver_piece(t, k, 3000, 2000, msg.data() + 2000, 1000) == Outcome::kAccepted);
    CHECK(deliver_rndv(t, k, 3000, msg.data(), 1000, r) == Outcome::kAccepted);
    CHECK(r.completions == 0); // [1000, 2000) still missing
    CHECK(deliver_piece(t, k, 3000, 1000, msg.data() + 1000, 1000) == Outcome::kAccepted);
    CHECK(r.completions == 1);
    CHECK(std::equal(r.buf.begin(), r.buf.end(), msg.begin()));
}

TEST_CASE("pml stream: inconsistent, overlapping and repeated headers are refused", "[pml][stream]") {
    StreamTable t;
    const StreamKey k{1, 2, 3};
    auto msg = pattern(1000, 3);
    Recv r, r2;
    r.buf.assign(1000, 0);
    r2.buf.assign(1000, 0xee);
    // Nothing outside the message, nothing empty, nothing of length 0.
    CHECK(t.piece(k, 1000, 900, 101).outcome == Outcome::kOutOfRange);
    CHECK(t.piece(k, 1000, 10, 0).outcome == Outcome::kOutOfRange);
    CHECK(t.piece(k, 0, 0, 1).outcome == Outcome::kOutOfRange);
    CHECK(t.live() == 0); // refusals create nothing
    CHECK(deliver_piece(t, k, 1000, 500, msg.data() + 500, 100) == Outcome::kAccepted);
    // Another length for the same message.
    CHECK(t.piece(k, 999, 0, 10).outcome == Outcome::kOutOfRange);
    CHECK(t.bind(k, 999, 10, &r).outcome == Outcome::kOutOfRange);
    // Partly overlapping bytes.
    CHECK(t.piece(k, 1000, 550, 100).outcome == Outcome::kOverlap);
    // Staged bytes inside what the RNDV claims to bring.
    CHECK(t.bind(k, 1000, 501, &r).outcome == Outcome::kOverlap);
    CHECK(r.completions == 0);
    CHECK(deliver_rndv(t, k, 1000, msg.data(), 500, r) == Outcome::kAccepted);
    // A second RNDV for a message that has its receive.
    CHECK(t.bind(k, 1000, 500, &r2).outcome == Outcome::kDuplicate);
    CHECK(deliver_piece(t, k, 1000, 600, msg.data() + 600, 400) == Outcome::kAccepted);
    CHECK(r.completions == 1);
    CHECK(r.buf == msg);
    CHECK(std::all_of(r2.buf.begin(), r2.buf.end(), [](uint8_t b) { return b == 0xee; }));
    // After closing: its RNDV again is a duplicate too.
    CHECK(t.bind(k, 1000, 500, &r2).outcome == Outcome::kDuplicate);
}

TEST_CASE("pml stream: staged messages are bounded and keys kept apart", "[pml][stream]") {
    StreamTable t;
    uint8_t byte = 1;
    for (std::size_t i = 0; i < StreamTable::kMaxStaged; ++i) {
        REQUIRE(deliver_piece(t, StreamKey{0, 0, i + 1}, 64, 1, &byte, 1) == Outcome::kAccepted);
    }
    CHECK(t.staged() == StreamTable::kMaxStaged);
    CHECK(t.staged_bytes() == 64 * StreamTable::kMaxStaged);
    CHECK(t.piece(StreamKey{0, 0, 999999}, 64, 1, 1).outcome == Outcome::kNoMemory);
    // The same id from another sender or communicator is another message.
    CHECK(t.piece(StreamKey{0, 1, 1}, 64, 1, 1).outcome == Outcome::kNoMemory);
    CHECK(t.piece(StreamKey{0, 0, 1}, 64, 2, 1).outcome == Outcome::kAccepted);
    CHECK(t.clear() == StreamTable::kMaxStaged);
    CHECK(t.staged_bytes() == 0);
    CHECK(t.piece(StreamKey{0, 1, 1}, 64, 1, 1).outcome == Outcome::kAccepted);
}

TEST_CASE("pml stream: fuzz - reordered, duplicated and forged pieces", "[pml][stream][fuzz]") {
    const char *env = std::getenv("ROCE_PML_FUZZ_SEED");
    const uint64_t seed0 = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261203;
    uint64_t forged_refused = 0, dups = 0, completed = 0, strays = 0;
    for (int run = 0; run < 300; ++run) {
        std::mt19937_64 rng(seed0 + static_cast<uint64_t>(run));
        auto u = [&](uint64_t lo, uint64_t hi) {
            return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
        };
        StreamTable t;
        struct Msg {
            StreamKey key;
            std::vector<uint8_t> data;
            uint64_t first;
            Recv recv;
        };
        const int nmsg = static_cast<int>(u(1, 12));
        std::vector<Msg> msgs(static_cast<std::size_t>(nmsg));
        // Events: 0 = the RNDV, 1 = a piece [off, off + n); -1 = forged.
        struct Ev {
            int msg, what;
            uint64_t off, n;
        };
        std::vector<Ev> evs;
        for (int m = 0; m < nmsg; ++m) {
            Msg &x = msgs[static_cast<std::size_t>(m)];
            x.key = StreamKey{static_cast<uint32_t>(u(0, 2)), static_cast<int32_t>(u(0, 2)),
                              static_cast<uint64_t>(m) + 1};
            uint64_t len = u(2, 70000);
            x.data = pattern(len, static_cast<uint8_t>(u(0, 255)));
            x.first = u(1, std::min<uint64_t>(len - 1, 8000));
            x.recv.buf.assign(u(0, 3) == 0 ? u(0, len) : len, 0);
            evs.push_back({m, 0, 0, x.first});
            for (uint64_t off = x.first; off < len;) {
                uint64_t n = std::min<uint64_t>(len - off, u(1, 9000));
                evs.push_back({m, 1, off, n});
                if (u(0, 5) == 0) {
                    evs.push_back({m, 1, off, n}); // a duplicate
                }
                off += n;
            }
            for (int f = static_cast<int>(u(0, 3)); f > 0; --f) {
                evs.push_back({m, -1, u(0, len), u(1, 9000)});
            }
        }
        std::shuffle(evs.begin(), evs.end(), rng);
        for (const Ev &e : evs) {
            Msg &x = msgs[static_cast<std::size_t>(e.msg)];
            const uint64_t len = x.data.size();
            if (e.what == 0) {
                REQUIRE(deliver_rndv(t, x.key, len, x.data.data(), x.first, x.recv) == Outcome::kAccepted);
            } else if (e.what == 1) {
                Outcome o = deliver_piece(t, x.key, len, e.off, x.data.data() + e.off, e.n);
                REQUIRE((o == Outcome::kAccepted || o == Outcome::kDuplicate));
                dups += o == Outcome::kDuplicate;
            } else if (e.off % 2 == 0) {
                // Forged, outside the message: refused whatever came
                // before (a duplicate once the message is closed).
                uint64_t off = len - std::min<uint64_t>(len, e.n) + 1 + e.off % 7;
                std::vector<uint8_t> junk(e.n, 0x5a);
                REQUIRE(deliver_piece(t, x.key, len, off, junk.data(), e.n) ==
                        (x.recv.completions == 1 ? Outcome::kDuplicate : Outcome::kOutOfRange));
                ++forged_refused;
            } else {
                // Forged, for a message nobody sends (another id): kept
                // until finalize, never reaches a receive.
                std::vector<uint8_t> junk(e.n, 0x5a);
                StreamKey fk{x.key.ctx, x.key.src, 1000 + e.off};
                Outcome o = deliver_piece(t, fk, 100000, e.off % 50000, junk.data(), e.n);
                REQUIRE((o == Outcome::kAccepted || o == Outcome::kDuplicate || o == Outcome::kOverlap));
                ++strays;
            }
        }
        for (Msg &x : msgs) {
            INFO("run " << run << " message " << x.key.id << " len " << x.data.size());
            REQUIRE(x.recv.completions == 1);
            REQUIRE(std::equal(x.recv.buf.begin(), x.recv.buf.end(), x.data.begin()));
            ++completed;
        }
        // Only the strays are left, all staged; finalize frees them.
        const std::size_t left = t.live();
        CHECK(left == t.staged());
        CHECK(t.clear() == left);
        CHECK(t.staged_bytes() == 0);
    }
    CHECK(completed > 1500);
    CHECK(forged_refused > 100);
    CHECK(strays > 100);
    CHECK(dups > 100);
}
