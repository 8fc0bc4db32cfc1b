// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The pml's rendezvous bookkeeping (pml_roce_rndv.h): targeted cases for
// each rule, then a randomized fuzz target that runs many rendezvous at
// once between a sender (AnswerTable) and a receiver (FragTable) over a
// network that duplicates, reorders, delays and truncates messages and
// injects forged ones, with every message encoded and decoded by the real
// wire codec. Invariants, checked at every step:
//  - a receive completes at most once, only when every byte it asked for
//    was written exactly once with the sender's content, with nothing
//    being unpacked, and nothing outside [0, wanted) written at all;
//  - no accepted FRAG lies outside its receive's range (so nothing is ever
//    written outside the buffer, which is an exact-size heap block);
//  - a send accepts at most one answer, and only a genuine one;
//  - at the end every rendezvous completed (unless a truncated copy of a
//    FRAG was accepted first, which must leave it incomplete, not wrong),
//    no id is left open and the tables grew to no more than the peak of
//    open rendezvous.
// Deterministic: ROCE_PML_FUZZ_SEED=<n> picks another master seed and
// ROCE_PML_FUZZ_RUNS=<n> the number of runs (default 1500).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "pml_roce_rndv.h"
#include "pml_roce_wire.h"

using namespace roce::pml;
using namespace roce::pml::rndv;

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// ------------------------------------------------------------ targeted ----

// What the pml does with one FRAG (pml_roce_rdma.cc): admit; if accepted,
// unpack and settle. True when that FRAG completed the receive.
bool frag(FragTable &t, uint64_t id, uint64_t off, uint64_t len, Outcome *out = nullptr) {
    FragTable::Admission a = t.admit(id, off, len);
    if (out != nullptr) {
        *out = a.outcome;
    }
    return a.outcome == Outcome::kAccepted && t.settle(*a.account);
}

TEST_CASE("pml rndv: a duplicated FRAG is dropped and never completes a receive early",
          "[pml][rndv]") {
    FragTable t;
    FragAccount a;
    uint64_t id = t.open(a, 0, 100, &a);
    REQUIRE(id != 0);
    Outcome o;
    REQUIRE_FALSE(frag(t, id, 0, 50, &o));
    REQUIRE(o == Outcome::kAccepted);
    // The same FRAG again (a btl retransmission, a late copy): bytes
    // [50, 100) never arrived, so the receive must not complete.
    CHECK_FALSE(frag(t, id, 0, 50, &o));
    CHECK(o == Outcome::kDuplicate);
    CHECK_FALSE(a.complete());
    CHECK_FALSE(frag(t, id, 10, 20, &o)); // inside what arrived
    CHECK(o == Outcome::kDuplicate);
    CHECK(a.arrived() == 50);
    CHECK(t.live() == 1);
    CHECK(frag(t, id, 50, 50, &o));
    CHECK(o == Outcome::kAccepted);
    CHECK(a.complete());
    CHECK(a.arrived() == 100);
    // The id is closed: a late copy is a duplicate, not a new receive.
    CHECK(t.live() == 0);
    auto late = t.admit(id, 50, 50);
    CHECK(late.outcome == Outcome::kDuplicate);
    CHECK(late.account == nullptr);
}

TEST_CASE("pml rndv: a copy arriving while the first is being unpacked is dropped", "[pml][rndv]") {
    FragTable t;
    FragAccount a;
    uint64_t id = t.open(a, 0, 100, &a);
    auto first = t.admit(id, 0, 100);
    REQUIRE(first.outcome == Outcome::kAccepted);
    REQUIRE(first.account == &a);
    CHECK(t.admit(id, 0, 100).outcome == Outcome::kDuplicate); // unpack of the first not done
    CHECK(t.admit(id, 60, 40).outcome == Outcome::kDuplicate);
    CHECK_FALSE(a.complete());
    CHECK(t.settle(a)); // the first one's unpack ends: complete
}

TEST_CASE("pml rndv: FRAGs in any order complete exactly once, only when all arrived",
          "[pml][rndv]") {
    FragTable t;
    FragAccount a;
    uint64_t id = t.open(a, 16, 116, &a); // RNDV carried the first 16 bytes
    // 5 FRAGs of 20 bytes, arriving 4, 2, 0, 3, 1; unpacks overlap.
    int order[] = {4, 2, 0, 3, 1};
    int settled = 0;
    for (int k : order) {
        REQUIRE(t.admit(id, 16 + 20 * k, 20).outcome == Outcome::kAccepted);
        CHECK(a.pieces() <= 3);
        if (k != 3) {
            ++settled;
            CHECK_FALSE(t.settle(a));
        }
    }
    CHECK(a.arrived() == 100);
    CHECK(a.pieces() == 0);    // all coalesced into the contiguous start
    CHECK_FALSE(a.complete()); // one FRAG is still being unpacked
    CHECK(t.settle(a));
    CHECK(settled == 4);
}

TEST_CASE("pml rndv: FRAGs outside the range or overlapping inconsistently are refused",
          "[pml][rndv]") {
    FragTable t;
    FragAccount a;
    uint64_t id = t.open(a, 100, 200, &a);
    struct Case {
        uint64_t off, len;
        Outcome want;
    } cases[] = {
        {99, 1, Outcome::kOutOfRange},     // before lo
        {99, 10, Outcome::kOutOfRange},    // straddles lo
        {200, 1, Outcome::kOutOfRange},    // at hi
        {190, 11, Outcome::kOutOfRange},   // straddles hi
        {150, 0, Outcome::kOutOfRange},    // empty
        {kMax, 1, Outcome::kOutOfRange},   // offset + len overflows
        {150, kMax, Outcome::kOutOfRange}, // length overflows
        {0, kMax, Outcome::kOutOfRange},
    };
    for (const Case &c : cases) {
        INFO("offset " << c.off << " length " << c.len);
        CHECK(t.admit(id, c.off, c.len).outcome == c.want);
    }
    CHECK(a.arrived() == 0);
    REQUIRE(t.admit(id, 120, 20).outcome == Outcome::kAccepted); // [120, 140)
    CHECK_FALSE(t.settle(a));
    CHECK(t.admit(id, 110, 20).outcome == Outcome::kOverlap); // [110, 130)
    CHECK(t.admit(id, 130, 20).outcome == Outcome::kOverlap); // [130, 150)
    CHECK(t.admit(id, 100, 100).outcome == Outcome::kOverlap);
    CHECK(t.admit(id, 125, 5).outcome == Outcome::kDuplicate);
    REQUIRE(t.admit(id, 100, 20).outcome == Outcome::kAccepted); // [100, 120): prefix to 140
    CHECK_FALSE(t.settle(a));
    CHECK(t.admit(id, 130, 20).outcome == Outcome::kOverlap); // straddles the prefix end
    CHECK(t.admit(id, 100, 40).outcome == Outcome::kDuplicate);
    CHECK(a.arrived() == 40);
    REQUIRE(t.admit(id, 140, 60).outcome == Outcome::kAccepted);
    CHECK(t.settle(a));
}

TEST_CASE("pml rndv: separate pieces are bounded and their memory is given back", "[pml][rndv]") {
    FragTable t;
    FragAccount a;
    const uint64_t n = FragAccount::kMaxPieces + 10;
    uint64_t id = t.open(a, 0, 2 * n, &a);
    // Every odd byte: each FRAG is a separate piece.
    for (uint64_t i = 0; i < FragAccount::kMaxPieces; ++i) {
        REQUIRE(t.admit(id, 2 * i + 1, 1).outcome == Outcome::kAccepted);
        REQUIRE_FALSE(t.settle(a));
    }
    CHECK(a.pieces() == FragAccount::kMaxPieces);
    CHECK(t.admit(id, 2 * FragAccount::kMaxPieces + 3, 1).outcome == Outcome::kTooFragmented);
    // A FRAG that joins two pieces (or extends one) needs no new one.
    REQUIRE(t.admit(id, 2, 1).outcome == Outcome::kAccepted);
    CHECK_FALSE(t.settle(a));
    CHECK(a.pieces() == FragAccount::kMaxPieces - 1);
    REQUIRE(t.admit(id, 2 * FragAccount::kMaxPieces, 1).outcome == Outcome::kAccepted);
    CHECK_FALSE(t.settle(a));
    CHECK(a.pieces() == FragAccount::kMaxPieces - 1);
    // Filling byte 0 absorbs the pieces that now touch the start.
    REQUIRE(t.admit(id, 0, 1).outcome == Outcome::kAccepted);
    CHECK_FALSE(t.settle(a));
    CHECK(a.pieces() == FragAccount::kMaxPieces - 2);
    // Reopening for the next message starts empty.
    FragTable t2;
    uint64_t id2 = t2.open(a, 0, 10, &a);
    CHECK(a.pieces() == 0);
    CHECK(a.arrived() == 0);
    REQUIRE(t2.admit(id2, 0, 10).outcome == Outcome::kAccepted);
    CHECK(t2.settle(a));
}

TEST_CASE("pml rndv: FRAG ids - closed ones are duplicates, never-issued ones unknown",
          "[pml][rndv]") {
    FragTable t;
    FragAccount a, b;
    uint64_t ida = t.open(a, 0, 8, &a);
    REQUIRE(t.admit(ida, 0, 8).outcome == Outcome::kAccepted);
    REQUIRE(t.settle(a));
    uint64_t idb = t.open(b, 0, 8, &b); // reuses a's slot with a new generation
    CHECK(idb != ida);
    CHECK(t.admit(ida, 0, 8).outcome == Outcome::kDuplicate);
    CHECK(t.admit(0, 0, 8).outcome == Outcome::kUnknown);
    const uint64_t next_generation = idb + (uint64_t{1} << 32);
    CHECK(t.admit(next_generation, 0, 8).outcome == Outcome::kUnknown);
    CHECK(t.admit(idb + 1, 0, 8).outcome == Outcome::kUnknown); // a slot never used
    CHECK(t.admit(kMax, 0, 8).outcome == Outcome::kUnknown);
    CHECK(b.arrived() == 0);
    REQUIRE(t.admit(idb, 0, 8).outcome == Outcome::kAccepted);
    CHECK(t.settle(b));
}

struct FakeSend {
    SendPhase phase = SendPhase::kIdle;
    uint64_t total = 0;
    bool can_split = false; ///< an RGET over a btl that can put (SendView::split set)
    uint8_t split = 0;
};

SendView view_of(const void *p) noexcept {
    auto *s = static_cast<FakeSend *>(const_cast<void *>(p));
    return {s->phase, s->total, s->can_split ? &s->split : nullptr};
}

TEST_CASE("pml rndv: an ACK or FIN is accepted once, only in the right state and range",
          "[pml][rndv]") {
    AnswerTable t(view_of);
    FakeSend rndv{SendPhase::kHeaderPending, 1000}, rget{SendPhase::kWaitFin, 500};
    uint64_t id1 = t.open(&rndv), id2 = t.open(&rget);
    // Header not sent yet: no answer can be genuine.
    CHECK(t.claim_ack(id1, 0, 1000).outcome == Outcome::kWrongState);
    rndv.phase = SendPhase::kWaitAck;
    CHECK(t.claim_fin(id1, 1000).outcome == Outcome::kWrongState); // FIN for a RNDV
    CHECK(t.claim_ack(id1, 1001, 0).outcome == Outcome::kOutOfRange);
    CHECK(t.claim_ack(id1, 10, 991).outcome == Outcome::kOutOfRange);
    CHECK(t.claim_ack(id1, kMax, kMax).outcome == Outcome::kOutOfRange);
    auto c = t.claim_ack(id1, 10, 990);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK(c.request == &rndv);
    CHECK(t.claim_ack(id1, 10, 990).outcome == Outcome::kDuplicate); // the same ACK again
    CHECK(t.claim_fin(id1, 0).outcome == Outcome::kDuplicate);
    CHECK(t.claim_fin(id2, 501).outcome == Outcome::kOutOfRange); // more than the message
    CHECK(t.claim_fin(id2, 500).outcome == Outcome::kAccepted);
    CHECK(t.claim_fin(id2, 500).outcome == Outcome::kDuplicate);
    CHECK(t.claim_ack(id2, 0, 500).outcome == Outcome::kDuplicate);
    CHECK(t.claim_ack(0, 0, 0).outcome == Outcome::kUnknown);
    CHECK(t.claim_ack(id2 + 7, 0, 0).outcome == Outcome::kUnknown);
    CHECK(t.live() == 0);
}

TEST_CASE("pml rndv: a split RGET's PUT and FIN are each accepted once, in either order",
          "[pml][rndv][split]") {
    AnswerTable t(view_of);
    FakeSend a{SendPhase::kWaitFin, 1 << 20, true}, b{SendPhase::kWaitFin, 1 << 20, true};
    uint64_t ida = t.open(&a), idb = t.open(&b);
    // PUT first (the order the receiver sends them in).
    auto c = t.claim_put(ida, 1 << 19, 1 << 19);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK(c.request == &a);
    CHECK(c.first_split);
    CHECK(a.split == kSplitPut);
    CHECK(t.live() == 2); // the FIN is still to come
    CHECK(t.claim_put(ida, 1 << 19, 1 << 19).outcome == Outcome::kDuplicate); // a second PUT
    CHECK(t.claim_fin(ida, 1 << 19).outcome ==
          Outcome::kWrongState); // a FIN that does not say split
    c = t.claim_fin(ida, 1 << 19, true);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK_FALSE(c.first_split);
    CHECK(t.live() == 1); // both arrived: the id is closed
    CHECK(t.claim_fin(ida, 1 << 19, true).outcome == Outcome::kDuplicate);
    CHECK(t.claim_put(ida, 1 << 19, 1 << 19).outcome == Outcome::kDuplicate);
    // The FIN overtook the PUT: the id waits for the PUT, which is still owed.
    c = t.claim_fin(idb, 4096, true);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK(c.first_split);
    CHECK(t.live() == 1);
    CHECK(t.claim_fin(idb, 4096, true).outcome == Outcome::kDuplicate);
    c = t.claim_put(idb, 4096, (1 << 20) - 4096);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK_FALSE(c.first_split);
    CHECK(t.live() == 0);
}

TEST_CASE("pml rndv: PUTs outside the message, empty, or for a send that cannot split are refused",
          "[pml][rndv][split]") {
    AnswerTable t(view_of);
    FakeSend s{SendPhase::kWaitFin, 1000, true}, plain{SendPhase::kWaitFin, 1000, false},
        rndv{SendPhase::kWaitAck, 1000, true};
    uint64_t id = t.open(&s), idp = t.open(&plain), idr = t.open(&rndv);
    CHECK(t.claim_put(id, 0, 1000).outcome == Outcome::kOutOfRange);  // the receiver gets nothing
    CHECK(t.claim_put(id, 500, 0).outcome == Outcome::kOutOfRange);   // length 0
    CHECK(t.claim_put(id, 500, 501).outcome == Outcome::kOutOfRange); // past the end
    CHECK(t.claim_put(id, 1001, 1).outcome == Outcome::kOutOfRange);
    CHECK(t.claim_put(id, kMax, kMax).outcome == Outcome::kOutOfRange);
    CHECK(s.split == 0); // nothing refused changed the request
    CHECK(t.claim_put(idp, 500, 500).outcome == Outcome::kWrongState); // no put btl: no split
    CHECK(t.claim_fin(idp, 500, true).outcome == Outcome::kWrongState);
    CHECK(t.claim_put(idr, 500, 500).outcome == Outcome::kWrongState); // a RNDV, not an RGET
    CHECK(t.claim_put(idr + 99, 500, 500).outcome == Outcome::kUnknown);
    CHECK(t.claim_put(id, 500, 500).outcome == Outcome::kAccepted);
    CHECK(t.claim_fin(id, 1001, true).outcome == Outcome::kOutOfRange);
    // The receiver's get failed: its ACK for the rest of [0, 500) replaces
    // the FIN, and must say split like the FIN.
    CHECK(t.claim_ack(id, 100, 400).outcome == Outcome::kWrongState);
    auto c = t.claim_ack(id, 100, 400, true);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK_FALSE(c.first_split);
    CHECK(t.claim_ack(id, 100, 400, true).outcome == Outcome::kDuplicate);
    CHECK(t.claim_put(id, 500, 500).outcome == Outcome::kDuplicate);
    CHECK(t.claim_ack(idr, 0, 500, true).outcome == Outcome::kWrongState); // a RNDV never splits
    CHECK(t.claim_fin(idp, 1000).outcome == Outcome::kAccepted); // a plain RGET is unchanged
    CHECK(t.claim_ack(idr, 0, 1000).outcome == Outcome::kAccepted);
    CHECK(t.live() == 0);
    // A split ACK that overtook the PUT: the id waits for the PUT.
    FakeSend o{SendPhase::kWaitFin, 1000, true};
    uint64_t ido = t.open(&o);
    c = t.claim_ack(ido, 0, 500, true);
    CHECK(c.outcome == Outcome::kAccepted);
    CHECK(c.first_split);
    CHECK(t.live() == 1);
    CHECK(t.claim_put(ido, 500, 500).outcome == Outcome::kAccepted);
    CHECK(t.live() == 0);
}

TEST_CASE("pml rndv: a PUT-FIN brings exactly its range, once; FRAGs may replace it",
          "[pml][rndv][split]") {
    FragTable t;
    FragAccount put, frags;
    uint64_t idp = t.open(put, 512, 1000, &put, true);
    uint64_t idf = t.open(frags, 100, 512, &frags); // a get fallback: not a put range
    CHECK(put.is_put());
    CHECK_FALSE(frags.is_put());
    CHECK(t.admit_put(idf, 100, 412).outcome == Outcome::kWrongState);
    CHECK(t.admit_put(idp, 512, 487).outcome == Outcome::kOutOfRange); // short
    CHECK(t.admit_put(idp, 511, 489).outcome == Outcome::kOutOfRange); // another range
    CHECK(t.admit_put(idp, 512, 489).outcome == Outcome::kOutOfRange); // past it
    CHECK(t.admit_put(idp + 99, 512, 488).outcome == Outcome::kUnknown);
    CHECK(put.arrived() == 0);
    FragTable::Admission a = t.admit_put(idp, 512, 488);
    REQUIRE(a.outcome == Outcome::kAccepted);
    CHECK(a.account == &put);
    CHECK(t.admit_put(idp, 512, 488).outcome == Outcome::kDuplicate); // twice, before it settled
    CHECK(t.admit(idp, 600, 10).outcome == Outcome::kDuplicate);      // a FRAG inside it
    CHECK(t.settle(put));
    CHECK(put.complete());
    CHECK(t.admit_put(idp, 512, 488).outcome == Outcome::kDuplicate); // twice, after: id closed

    // The sender could not put: FRAGs bring the range; a PUT-FIN then is refused.
    FragAccount put2;
    uint64_t id2 = t.open(put2, 512, 1000, &put2, true);
    Outcome o;
    CHECK_FALSE(frag(t, id2, 512, 100, &o));
    CHECK(o == Outcome::kAccepted);
    CHECK(t.admit_put(id2, 512, 488).outcome == Outcome::kOverlap);
    CHECK(frag(t, id2, 612, 388, &o));
    CHECK(put2.complete());
    CHECK(t.admit_put(id2, 512, 488).outcome == Outcome::kDuplicate);
    // A put account reused for a plain receive is no put range any more.
    uint64_t id3 = t.open(put2, 0, 10, &put2);
    CHECK(t.admit_put(id3, 0, 10).outcome == Outcome::kWrongState);
    CHECK(frag(t, id3, 0, 10));
    CHECK(frag(t, idf, 100, 412));
    CHECK(t.live() == 0);
}

// --------------------------------------------------------------- fuzz ----

class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() {
        // splitmix64
        uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
    uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); } // [lo, hi]
    bool chance(unsigned percent) { return below(100) < percent; }

private:
    uint64_t s_;
};

uint64_t env_u64(const char *name, uint64_t dflt) {
    const char *v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : dflt;
}

uint8_t content(uint32_t rdv, uint64_t offset) {
    uint64_t x = (uint64_t{rdv} << 40) ^ offset ^ 0x5bd1e995;
    x *= 0x9E3779B97F4A7C15ull;
    return static_cast<uint8_t>((x >> 56) + 1);
}

enum class MsgKind : uint8_t { kAck, kFin, kFrag };

// A message on the network: encoded header bytes (maybe truncated or
// damaged) and, for a FRAG, its payload.
struct Msg {
    MsgKind kind;
    std::vector<uint8_t> header;
    std::vector<uint8_t> payload;
    uint32_t rdv;      ///< rendezvous it belongs to (forgeries: the one they aim at)
    bool genuine;      ///< sent by the protocol (copies too)
    bool cut_payload;  ///< a copy of a genuine FRAG with part of its payload missing
    unsigned hold = 0; ///< steps it stays on the network at least (delay)
};

struct Totals {
    uint64_t rendezvous = 0, frags = 0, accepted_frags = 0, dup_frags = 0, refused_frags = 0;
    uint64_t answers = 0, accepted_answers = 0, dup_answers = 0, refused_answers = 0;
    uint64_t bad_headers = 0, forged = 0, copies = 0, cut = 0, tainted = 0, fallbacks = 0;
    uint64_t completed_early_checks = 0, max_pieces = 0, max_pending = 0;
};

class Run {
public:
    Run(uint64_t master, uint32_t run, Totals &t)
        : master_(master), run_(run), rng_(master ^ (uint64_t{run} << 20)), t_(t) {}

    void run() {
        // Some rendezvous start at once, the others while earlier ones run
        // (so ids of finished ones are closed and their slots reused).
        const uint32_t n = static_cast<uint32_t>(rng_.range(1, 24));
        uint32_t started = 0;
        for (uint32_t at_once = static_cast<uint32_t>(rng_.range(1, n)); started < at_once;) {
            start(started++);
        }
        uint64_t steps = 0;
        while (!net_.empty() || !unpacking_.empty() || started < n) {
            ++steps;
            check(steps < 2'000'000, "the network never drains (unbounded growth?)");
            check(net_.size() < 200'000, "the network grows without bound");
            t_.max_pending = std::max<uint64_t>(t_.max_pending, net_.size());
            if (started < n && ((net_.empty() && unpacking_.empty()) || rng_.chance(2))) {
                start(started++);
            } else if (!unpacking_.empty() && (net_.empty() || rng_.chance(30))) {
                finish_unpack(rng_.below(unpacking_.size()));
            } else {
                step_network();
            }
        }
        finish();
    }

private:
    struct Recv {
        uint64_t capacity = 0, wanted = 0, lo = 0;
        std::unique_ptr<uint8_t[]> buf; // exactly `capacity` bytes: ASan sees any overrun
        std::vector<uint8_t> writes;    // per byte of the buffer
        FragAccount account;
        uint64_t id = 0;
        bool opened = false, complete = false, tainted = false;
    };
    struct Send {
        FakeSend state;
        uint64_t id = 0;
        int answers = 0;
        bool complete = false;
    };
    struct Unpack {
        uint32_t rdv;
        uint64_t offset;
        std::vector<uint8_t> data;
    };

    [[noreturn]] void fail(const std::string &what) {
        std::ostringstream o;
        o << what << " (master seed " << master_ << ", run " << run_
          << "; repeat with ROCE_PML_FUZZ_SEED=" << master_ << ")";
        FAIL(o.str());
        std::abort(); // FAIL throws; keep [[noreturn]] honest
    }
    // Cheap on the hot path: the message is a literal; checks whose message
    // is built call fail() under their own `if`.
    void check(bool ok, const char *what) {
        if (!ok) {
            fail(what);
        }
    }

    void start(uint32_t i) {
        ++t_.rendezvous;
        auto s = std::make_unique<Send>();
        auto r = std::make_unique<Recv>();
        s->state.total = rng_.chance(10) ? rng_.range(1, 8) : rng_.range(1, 40000);
        r->capacity =
            rng_.chance(20) ? rng_.range(0, s->state.total) : s->state.total + rng_.below(64);
        r->wanted = std::min(s->state.total, r->capacity);
        r->buf.reset(new uint8_t[r->capacity == 0 ? 1 : r->capacity]);
        std::memset(r->buf.get(), 0, r->capacity);
        r->writes.assign(r->capacity, 0);
        bool rget = rng_.chance(40);
        s->state.phase = rget ? SendPhase::kWaitFin : SendPhase::kWaitAck;
        s->id = sends_table_.open(&s->state);
        check(s->id != 0, "AnswerTable::open failed");
        peak_sends_ = std::max(peak_sends_, ++open_sends_);
        sends_.push_back(std::move(s));
        recvs_.push_back(std::move(r));
        // The header is matched at the receiver (the matcher's business,
        // tests/unit/test_match*); what it asks for comes back as answers.
        receive_header(i, rget);
    }

    void write(Recv &r, uint32_t rdv, uint64_t offset, const uint8_t *data, uint64_t n) {
        check(offset <= r.capacity && n <= r.capacity - offset, "a write outside the buffer");
        for (uint64_t k = 0; k < n; ++k) {
            check(data[k] == content(rdv, offset + k), "written data is not the sender's");
            r.buf[offset + k] = data[k];
            if (++r.writes[offset + k] != 1) {
                fail("a byte written twice (offset " + std::to_string(offset + k) + ")");
            }
        }
    }
    void write_genuine(Recv &r, uint32_t rdv, uint64_t offset, uint64_t n) {
        std::vector<uint8_t> d(n);
        for (uint64_t k = 0; k < n; ++k) {
            d[k] = content(rdv, offset + k);
        }
        write(r, rdv, offset, d.data(), n);
    }

    void complete_recv(uint32_t rdv) {
        Recv &r = *recvs_[rdv];
        check(!r.complete, "a receive completed twice");
        for (uint64_t k = 0; k < r.capacity; ++k) {
            unsigned want = k < r.wanted ? 1 : 0;
            if (r.writes[k] != want) {
                fail("receive " + std::to_string(rdv) + " completed with byte " +
                     std::to_string(k) + " written " + std::to_string(r.writes[k]) +
                     " times (wanted " + std::to_string(r.wanted) + " of " +
                     std::to_string(r.capacity) + ")");
            }
            if (want == 1 && r.buf[k] != content(rdv, k)) {
                fail("receive " + std::to_string(rdv) + " completed with wrong data at " +
                     std::to_string(k));
            }
        }
        ++t_.completed_early_checks;
        r.complete = true;
    }

    // The receiver's answer to the header (pml_roce_recvfrag.cc deliver_rndv,
    // pml_roce_rdma.cc rget_start/getop_finish/recv_ask_frags).
    void receive_header(uint32_t rdv, bool rget) {
        Recv &r = *recvs_[rdv];
        const uint64_t src = sends_[rdv]->id;
        uint64_t have; // bytes the receiver has without FRAGs
        if (rget) {
            bool get_fails = r.wanted > 0 && rng_.chance(40);
            have = get_fails ? rng_.below(r.wanted) : r.wanted;
            write_genuine(r, rdv, 0, have);
            if (!get_fails) {
                queue(MsgKind::kFin, rdv, wire::make_fin(src, r.wanted));
                complete_recv(rdv);
                return;
            }
            ++t_.fallbacks;
        } else {
            have = std::min<uint64_t>(r.wanted, rng_.chance(30) ? 0 : rng_.below(4096));
            write_genuine(r, rdv, 0, have);
            if (have >= r.wanted) {
                queue(MsgKind::kAck, rdv, wire::make_ack(src, 0, have, 0));
                complete_recv(rdv);
                return;
            }
        }
        r.lo = have;
        r.id = recv_table_.open(r.account, have, r.wanted, &r);
        check(r.id != 0, "FragTable::open failed");
        r.opened = true;
        ++open_recvs_;
        peak_open_ = std::max(peak_open_, open_recvs_);
        queue(MsgKind::kAck, rdv, wire::make_ack(src, r.id, have, r.wanted - have));
    }

    template <typename H>
    void queue(MsgKind kind, uint32_t rdv, const H &h, std::vector<uint8_t> payload = {},
               bool genuine = true) {
        Msg m;
        m.kind = kind;
        m.header.resize(sizeof h);
        std::memcpy(m.header.data(), &h, sizeof h);
        m.payload = std::move(payload);
        m.rdv = rdv;
        m.genuine = genuine;
        m.cut_payload = false;
        m.hold = rng_.chance(10) ? static_cast<unsigned>(rng_.range(1, 200)) : 0;
        net_.push_back(std::move(m));
    }

    // The sender's FRAGs for an accepted ACK, cut the way several btls with
    // different max_send_size (and a convertor stopping early) cut them.
    void send_frags(uint32_t rdv, uint64_t dst, uint64_t offset, uint64_t size) {
        uint64_t end = offset + size;
        uint64_t typical = rng_.range(std::max<uint64_t>(1, size / 256), 9000);
        while (offset < end) {
            uint64_t n = std::min(end - offset, rng_.chance(20) ? rng_.range(1, typical) : typical);
            std::vector<uint8_t> p(n);
            for (uint64_t k = 0; k < n; ++k) {
                p[k] = content(rdv, offset + k);
            }
            queue(MsgKind::kFrag, rdv, wire::make_frag(dst, offset), std::move(p));
            offset += n;
        }
    }

    // A forged message: never acceptable (an unknown or closed id, the wrong
    // state, or a range outside the request). A forgery with a live id, the
    // right state and an in-range offset is indistinguishable from the
    // sender (the wire is not authenticated at this layer) and not made.
    void forge() {
        ++t_.forged;
        uint32_t rdv = static_cast<uint32_t>(rng_.below(recvs_.size()));
        const Recv &r = *recvs_[rdv];
        const Send &s = *sends_[rdv];
        uint64_t never =
            (rng_.range(1u << 20, 1u << 30) << 32) | rng_.range(1, 64); // generation far ahead
        switch (rng_.below(6)) {
        case 0: { // FRAG for an id never issued, or a closed one
            uint64_t id = rng_.chance(50) || r.id == 0 ? never : r.id;
            if (id == r.id && !r.complete) {
                id = never;
            }
            queue(MsgKind::kFrag, rdv, wire::make_frag(id, rng_.below(r.capacity + 1)),
                  std::vector<uint8_t>(rng_.range(1, 64), 0xee), false);
            break;
        }
        case 1: { // FRAG for a live receive, outside its range
            if (r.id == 0) {
                return;
            }
            uint64_t off, len;
            switch (rng_.below(4)) {
            case 0:
                off = r.wanted, len = rng_.range(1, 100);
                break; // at or past the end
            case 1:
                off = r.wanted - 1, len = rng_.range(2, 100);
                break; // straddles the end
            case 2:
                off = r.lo > 0 ? rng_.below(r.lo) : r.wanted + 5, len = r.wanted;
                break; // before lo
            default:
                off = kMax - rng_.below(50), len = rng_.range(1, 100);
                break; // overflow
            }
            queue(MsgKind::kFrag, rdv, wire::make_frag(r.id, off), std::vector<uint8_t>(len, 0xee),
                  false);
            break;
        }
        case 2: // ACK for an unknown id
            queue(MsgKind::kAck, rdv, wire::make_ack(never, 0, 0, 0), {}, false);
            break;
        case 3: // ACK for the live send, asking for bytes beyond the message
            queue(MsgKind::kAck, rdv,
                  wire::make_ack(s.id, 7, s.state.total + rng_.below(3),
                                 rng_.range(1, wire::kMaxLength - s.state.total - 3)),
                  {}, false);
            break;
        case 4: // FIN for a RNDV (wrong state) or claiming more than the message
            if (s.state.phase == SendPhase::kWaitFin) {
                queue(MsgKind::kFin, rdv, wire::make_fin(s.id, s.state.total + rng_.range(1, 1000)),
                      {}, false);
            } else if (s.state.phase == SendPhase::kWaitAck) {
                queue(MsgKind::kFin, rdv, wire::make_fin(s.id, 0), {}, false);
            }
            break;
        default: // an answer for a closed send
            if (s.complete) {
                queue(MsgKind::kAck, rdv, wire::make_ack(s.id, 0, 0, 0), {}, false);
            }
            break;
        }
    }

    void step_network() {
        if (rng_.chance(3)) {
            forge();
            return;
        }
        std::size_t i = rng_.below(net_.size());
        if (net_[i].hold > 0) { // delayed: not yet
            --net_[i].hold;
            return;
        }
        Msg m = net_[i];
        if (!rng_.chance(12)) {
            net_[i] = std::move(net_.back());
            net_.pop_back();
            deliver(m, false);
            return;
        }
        // Duplicated: one copy is delivered now, the other stays on the
        // network for later. Either copy may lose the end of its payload;
        // the one delivered now may be truncated or damaged on the way
        // (the codec must refuse it; the other copy still arrives).
        ++t_.copies;
        Msg &later = net_[i];
        later.hold = rng_.chance(50) ? static_cast<unsigned>(rng_.range(1, 500)) : 0;
        // (Only genuine ones: cutting a forgery that straddles the end of
        // its receive could make it a valid FRAG.)
        if (m.kind == MsgKind::kFrag && m.genuine && m.payload.size() > 1 && rng_.chance(15)) {
            Msg &victim = rng_.chance(50) ? m : later;
            victim.payload.resize(rng_.range(1, victim.payload.size() - 1));
            victim.cut_payload = true;
            ++t_.cut;
        }
        if (rng_.chance(25)) {
            if (rng_.chance(50)) {
                m.header.resize(rng_.below(m.header.size()));
            } else {
                m.header[2 + rng_.below(2)] ^= static_cast<uint8_t>(rng_.range(1, 255)); // flags
            }
            deliver(m, true);
            return;
        }
        deliver(m, false);
    }

    void deliver(const Msg &m, bool damaged) {
        switch (m.kind) {
        case MsgKind::kFrag: {
            wire::FragHdr h;
            wire::Defect d =
                wire::decode_frag(m.header.data(), m.header.size(), m.payload.size(), h);
            if (d != wire::Defect::kNone) {
                check(damaged || !m.genuine, "a genuine FRAG failed to decode");
                ++t_.bad_headers;
                return;
            }
            ++t_.frags;
            FragTable::Admission a = recv_table_.admit(h.dst_req, h.offset, m.payload.size());
            if (a.outcome == Outcome::kDuplicate) {
                ++t_.dup_frags;
            } else if (a.outcome != Outcome::kAccepted) {
                ++t_.refused_frags;
                // Only a shortened copy, or the FRAG a shortened copy got
                // in ahead of, may be refused (it overlaps inconsistently).
                if (m.genuine && !m.cut_payload && !recvs_[m.rdv]->tainted) {
                    fail(std::string("a genuine FRAG refused: ") + outcome_name(a.outcome));
                }
            }
            if (a.outcome != Outcome::kAccepted) {
                return;
            }
            ++t_.accepted_frags;
            if (!m.genuine) {
                fail("a forged FRAG accepted: id " + std::to_string(h.dst_req) + " offset " +
                     std::to_string(h.offset) + " length " + std::to_string(m.payload.size()) +
                     " for receive " + std::to_string(m.rdv));
            }
            auto *r = static_cast<Recv *>(a.account->owner());
            check(r == recvs_[m.rdv].get(), "a FRAG accepted for another receive");
            check(!r->complete, "a FRAG accepted by a completed receive");
            check(h.offset >= r->lo && h.offset < r->wanted &&
                      m.payload.size() <= r->wanted - h.offset,
                  "an accepted FRAG outside the range its receive asked for");
            if (m.cut_payload) {
                r->tainted = true; // the rest of that FRAG's range can never arrive now
            }
            t_.max_pieces = std::max<uint64_t>(t_.max_pieces, a.account->pieces());
            check(a.account->pieces() <= FragAccount::kMaxPieces, "pieces beyond the cap");
            unpacking_.push_back(Unpack{m.rdv, h.offset, m.payload});
            return;
        }
        case MsgKind::kAck:
        case MsgKind::kFin: {
            bool ack = m.kind == MsgKind::kAck;
            wire::AckHdr ah;
            wire::FinHdr fh;
            wire::Defect d = ack ? wire::decode_ack(m.header.data(), m.header.size(), 0, ah)
                                 : wire::decode_fin(m.header.data(), m.header.size(), 0, fh);
            if (d != wire::Defect::kNone) {
                check(damaged || !m.genuine, "a genuine answer failed to decode");
                ++t_.bad_headers;
                return;
            }
            ++t_.answers;
            AnswerTable::Claim c = ack ? sends_table_.claim_ack(ah.src_req, ah.offset, ah.size)
                                       : sends_table_.claim_fin(fh.src_req, fh.size);
            if (c.outcome == Outcome::kDuplicate) {
                ++t_.dup_answers;
                return;
            }
            if (c.outcome != Outcome::kAccepted) {
                ++t_.refused_answers;
                if (m.genuine) {
                    fail(std::string("a genuine answer refused: ") + outcome_name(c.outcome));
                }
                return;
            }
            ++t_.accepted_answers;
            check(m.genuine, "a forged answer accepted");
            auto *fs = static_cast<FakeSend *>(c.request);
            Send &s = *sends_[m.rdv];
            check(fs == &s.state, "an answer accepted for another send");
            check(++s.answers == 1, "a send accepted two answers");
            --open_sends_;
            if (!ack || ah.size == 0) {
                s.state.phase = SendPhase::kIdle;
                s.complete = true;
                return;
            }
            check(ah.offset + ah.size <= s.state.total, "an accepted ACK beyond the message");
            s.state.phase = SendPhase::kPipeline;
            send_frags(m.rdv, ah.dst_req, ah.offset, ah.size);
            s.state.phase = SendPhase::kIdle; // every FRAG handed to the network
            s.complete = true;
            return;
        }
        }
    }

    void finish_unpack(std::size_t i) {
        Unpack u = std::move(unpacking_[i]);
        unpacking_[i] = std::move(unpacking_.back());
        unpacking_.pop_back();
        Recv &r = *recvs_[u.rdv];
        write(r, u.rdv, u.offset, u.data.data(), u.data.size());
        bool others = std::any_of(unpacking_.begin(), unpacking_.end(),
                                  [&](const Unpack &o) { return o.rdv == u.rdv; });
        if (recv_table_.settle(r.account)) {
            check(!others, "a receive completed while a FRAG of it was still being unpacked");
            --open_recvs_;
            complete_recv(u.rdv);
        }
    }

    void finish() {
        std::size_t incomplete = 0;
        for (uint32_t i = 0; i < recvs_.size(); ++i) {
            const Recv &r = *recvs_[i];
            if (!sends_[i]->complete) {
                fail("send " + std::to_string(i) + " never got its answer");
            }
            if (!r.complete) {
                if (!r.tainted) {
                    fail("receive " + std::to_string(i) + " never completed (" +
                         std::to_string(r.account.arrived()) + " of " +
                         std::to_string(r.wanted - r.lo) + " FRAG bytes)");
                }
                ++incomplete;
                ++t_.tainted;
            }
        }
        check(sends_table_.live() == 0, "send ids left open");
        check(recv_table_.live() == incomplete, "receive ids left open");
        check(sends_table_.capacity() <= peak_sends_,
              "the send table outgrew the peak of open sends");
        check(recv_table_.capacity() <= peak_open_,
              "the receive table outgrew the peak of open receives");
    }

    uint64_t master_;
    uint32_t run_;
    Rng rng_;
    Totals &t_;
    FragTable recv_table_;
    AnswerTable sends_table_{view_of};
    std::vector<std::unique_ptr<Send>> sends_;
    std::vector<std::unique_ptr<Recv>> recvs_;
    std::vector<Msg> net_;
    std::vector<Unpack> unpacking_;
    std::size_t open_recvs_ = 0, peak_open_ = 0, open_sends_ = 0, peak_sends_ = 0;
};


// Split RGETs: random orders, copies and forgeries of PUT, split FIN,
// split ACK and plain answers against AnswerTable, checked after every
// message: each send accepts at most one PUT and one answer, owes its put
// exactly once (first_split), and its id closes exactly when both came.
TEST_CASE("pml rndv: split answers in random order, copied and forged", "[pml][rndv][split][fuzz]") {
    const uint64_t master = env_u64("ROCE_PML_FUZZ_SEED", 20261203);
    const uint64_t runs = env_u64("ROCE_PML_FUZZ_RUNS", 1500);
    uint64_t accepted = 0, refused = 0;
    for (uint64_t run = 0; run < runs; ++run) {
        Rng rng(master ^ (run << 24) ^ 0x5117);
        AnswerTable t(view_of);
        const std::size_t n = 1 + rng.below(16);
        std::vector<FakeSend> sends(n);
        std::vector<uint64_t> ids(n);
        std::vector<int> puts(n, 0), answers(n, 0), owed(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            sends[i] = FakeSend{SendPhase::kWaitFin, 128 + rng.below(1 << 20), rng.chance(90)};
            ids[i] = t.open(&sends[i]);
            REQUIRE(ids[i] != 0);
        }
        for (int step = 0; step < 64; ++step) {
            const std::size_t i = rng.below(n);
            FakeSend &s = sends[i];
            const uint64_t k = rng.chance(80) ? 1 + rng.below(s.total - 1) : rng.below(s.total + 2);
            const uint64_t size = rng.chance(80) ? s.total - std::min(k, s.total) : rng.next();
            // A forged id: the slot of send i with a generation not issued yet.
            const uint64_t id = rng.chance(90) ? ids[i] : ids[i] + ((1 + rng.below(3)) << 32);
            AnswerTable::Claim c{};
            const int what = static_cast<int>(rng.below(4));
            switch (what) {
            case 0: c = t.claim_put(id, k, size); break;
            case 1: c = t.claim_fin(id, k, true); break;
            case 2: c = t.claim_ack(id, rng.below(k + 1), k, true); break;
            default: c = t.claim_fin(id, k, false); break;
            }
            if (c.outcome != Outcome::kAccepted) {
                ++refused;
                continue;
            }
            ++accepted;
            REQUIRE(c.request == &s); // only the id's own send
            REQUIRE(id == ids[i]);
            if (what == 0) {
                ++puts[i];
                CHECK(k > 0);
                CHECK(size > 0);
                CHECK(k + size <= s.total);
            } else {
                ++answers[i];
            }
            owed[i] += c.first_split ? 1 : 0;
            CHECK(puts[i] <= 1);
            CHECK(answers[i] <= 1);
            if (what == 3) {
                CHECK(puts[i] == 0); // a plain answer only to a send nobody split
                CHECK(s.split == 0);
            } else {
                CHECK(s.can_split);
                CHECK(owed[i] == 1);
            }
        }
        std::size_t open = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const bool closed = answers[i] == 1 && (puts[i] == 1 || sends[i].split == 0);
            open += closed ? 0 : 1;
            if (closed) { // every later copy is a duplicate and changes nothing
                CHECK(t.claim_put(ids[i], 1, 1).outcome == Outcome::kDuplicate);
                CHECK(t.claim_fin(ids[i], 0, true).outcome == Outcome::kDuplicate);
            }
        }
        CHECK(t.live() == open);
    }
    CHECK(accepted > runs); // both outcomes occur, or the test proves nothing
    CHECK(refused > runs);
}

} // namespace

TEST_CASE("pml rndv: fuzz - duplicated, reordered, delayed, truncated and forged messages",
          "[pml][rndv][fuzz]") {
    const uint64_t seed = env_u64("ROCE_PML_FUZZ_SEED", 14);
    const uint64_t runs = env_u64("ROCE_PML_FUZZ_RUNS", 1500);
    INFO("ROCE_PML_FUZZ_SEED=" << seed);
    Totals t;
    for (uint64_t i = 0; i < runs; ++i) {
        Run(seed, static_cast<uint32_t>(i), t).run();
    }
    std::printf(
        "pml rndv fuzz: seed %" PRIu64 ", %" PRIu64 " runs, %" PRIu64 " rendezvous (%" PRIu64
        " RGET fallbacks); FRAGs %" PRIu64 " (accepted %" PRIu64 ", duplicates %" PRIu64
        ", refused %" PRIu64 "); answers %" PRIu64 " (accepted %" PRIu64 ", duplicates %" PRIu64
        ", refused %" PRIu64 "); %" PRIu64 " copies (%" PRIu64 " with a cut payload, %" PRIu64
        " receives left incomplete by one), %" PRIu64 " forgeries, %" PRIu64
        " damaged headers refused; peak %" PRIu64 " messages in flight, %" PRIu64 " pieces\n",
        seed, runs, t.rendezvous, t.fallbacks, t.frags, t.accepted_frags, t.dup_frags,
        t.refused_frags, t.answers, t.accepted_answers, t.dup_answers, t.refused_answers, t.copies,
        t.cut, t.tainted, t.forged, t.bad_headers, t.max_pending, t.max_pieces);
    std::fflush(stdout);
    // Every kind of event must have happened for the run to mean anything.
    CHECK(t.dup_frags > 0);
    CHECK(t.dup_answers > 0);
    CHECK(t.refused_frags > 0);
    CHECK(t.refused_answers > 0);
    CHECK(t.bad_headers > 0);
    CHECK(t.cut > 0);
    CHECK(t.fallbacks > 0);
    CHECK(t.max_pieces > 1);
    CHECK(t.completed_early_checks == t.rendezvous - t.tainted);
}
