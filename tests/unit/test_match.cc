// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Targeted tests of the matching engine, one MPI rule at a time.
#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "catch.h"
#include "match/comm_matcher.h"
#include "match/early_arrivals.h"
#include "match_test_util.h"

using namespace roce::pml::match;
using match_test::deliver;
using match_test::id_of;
using match_test::ptr;

namespace {

std::unique_ptr<CommMatcher> make(int32_t size, bool overtake = false) {
    CommMatcher::Options o;
    o.allow_overtake = overtake;
    auto r = CommMatcher::create(size, o);
    REQUIRE(r.is_ok());
    return std::move(r.value());
}

PostedHandle post_ok(CommMatcher &m, int32_t source, int32_t tag, uintptr_t request) {
    Posting p = m.post(source, tag, ptr(request));
    REQUIRE(p.verdict == Verdict::kOk);
    REQUIRE_FALSE(p.matched);
    return p.handle;
}

} // namespace

TEST_CASE("match: a message matches a posted receive; a receive takes an unexpected message",
          "[match]") {
    auto m = make(4);
    post_ok(*m, 2, 7, 100);
    int keeps = 0;
    Arrival a = deliver(*m, 2, 7, 0, 500, &keeps);
    CHECK(a.kind == ArrivalKind::kMatched);
    CHECK(id_of(a.request) == 100);
    CHECK(a.message.payload == nullptr); // matched in hand: keep never called
    CHECK(keeps == 0);
    CHECK(a.message.source == 2);
    CHECK(a.message.tag == 7);
    CHECK_FALSE(a.more_ready);

    a = deliver(*m, 2, 7, 1, 501, &keeps);
    CHECK(a.kind == ArrivalKind::kQueued);
    CHECK(id_of(a.message.payload) == 501);
    CHECK(keeps == 1);
    CHECK(m->unexpected_count() == 1);
    Posting p = m->post(2, 7, ptr(101));
    CHECK(p.matched);
    CHECK(id_of(p.message.payload) == 501);
    CHECK(p.message.seq == 1);
    CHECK(m->unexpected_count() == 0);
    CHECK(m->posted_count() == 0);
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 0);
}

TEST_CASE("match: posting order decides between specific and wildcard receives", "[match]") {
    // Every order of posting the four receive kinds that accept (1, 5): the
    // first posted must win, the others stay posted in order.
    struct Kind {
        int32_t source;
        int32_t tag;
    };
    std::array<Kind, 4> kinds = {{{1, 5}, {1, kAnyTag}, {kAnySource, 5}, {kAnySource, kAnyTag}}};
    std::array<int, 4> order = {0, 1, 2, 3};
    int permutations = 0;
    do {
        auto m = make(3);
        for (int k : order) {
            post_ok(*m, kinds[k].source, kinds[k].tag, 10 + k);
        }
        for (int i = 0; i < 4; ++i) {
            Arrival a = deliver(*m, 1, 5, static_cast<Seq>(i), 900 + i);
            INFO("permutation " << permutations << " message " << i);
            REQUIRE(a.kind == ArrivalKind::kMatched);
            CHECK(id_of(a.request) == static_cast<uintptr_t>(10 + order[i]));
        }
        CHECK(m->posted_count() == 0);
        ++permutations;
    } while (std::next_permutation(order.begin(), order.end()));
    CHECK(permutations == 24);
}

TEST_CASE("match: an earlier wildcard wins over a later specific receive, and vice versa",
          "[match]") {
    auto m = make(4);
    post_ok(*m, kAnySource, kAnyTag, 1); // posted first
    post_ok(*m, 3, 9, 2);
    Arrival a = deliver(*m, 3, 9, 0, 50);
    CHECK(id_of(a.request) == 1);
    a = deliver(*m, 3, 9, 1, 51);
    CHECK(id_of(a.request) == 2);

    post_ok(*m, 3, 9, 3); // specific first this time
    post_ok(*m, kAnySource, 9, 4);
    a = deliver(*m, 3, 9, 2, 52);
    CHECK(id_of(a.request) == 3);
    // A message from another source skips the specific receive.
    post_ok(*m, 3, 9, 5);
    a = deliver(*m, 0, 9, 0, 53);
    CHECK(id_of(a.request) == 4);
    CHECK(m->posted_count() == 1);
}

TEST_CASE("match: ANY_TAG never matches negative (collective) tags", "[match]") {
    auto m = make(2);
    post_ok(*m, 1, kAnyTag, 1);
    post_ok(*m, kAnySource, kAnyTag, 2);
    Arrival a = deliver(*m, 1, -17, 0, 40);
    CHECK(a.kind == ArrivalKind::kQueued); // neither wildcard receive took it
    CHECK(m->posted_count() == 2);
    // Probes with ANY_TAG do not see it either; the exact tag does.
    CHECK_FALSE(m->iprobe(1, kAnyTag).found);
    CHECK_FALSE(m->iprobe(kAnySource, kAnyTag).found);
    CHECK(m->iprobe(kAnySource, -17).found);
    Probe pr = m->iprobe(1, -17);
    REQUIRE(pr.found);
    CHECK(id_of(pr.message.payload) == 40);
    // A tag >= 0 goes to the earliest wildcard; a negative exact receive
    // takes the collective message.
    a = deliver(*m, 1, 0, 1, 41);
    CHECK(id_of(a.request) == 1);
    Posting p = m->post(kAnySource, -17, ptr(3));
    CHECK(p.matched);
    CHECK(id_of(p.message.payload) == 40);
    // A posted negative-tag receive is matched only by that tag.
    post_ok(*m, 1, -5, 4);
    a = deliver(*m, 1, -6, 2, 42);
    CHECK(a.kind == ArrivalKind::kQueued);
    a = deliver(*m, 1, -5, 3, 43);
    CHECK(id_of(a.request) == 4);
}

TEST_CASE("match: a wildcard receive takes the earliest admitted unexpected message", "[match]") {
    auto m = make(3);
    deliver(*m, 2, 4, 0, 1);
    deliver(*m, 0, 5, 0, 2);
    deliver(*m, 2, -3, 1, 3);
    deliver(*m, 0, 4, 1, 4);
    deliver(*m, 1, 5, 0, 5);
    CHECK(m->unexpected_count() == 5);
    CHECK(id_of(m->post(kAnySource, 5, ptr(9)).message.payload) == 2);
    CHECK(id_of(m->post(0, kAnyTag, ptr(9)).message.payload) == 4);
    CHECK(id_of(m->post(kAnySource, kAnyTag, ptr(9)).message.payload) == 1);
    CHECK(id_of(m->post(kAnySource, kAnyTag, ptr(9)).message.payload) == 5);
    CHECK_FALSE(m->post(kAnySource, kAnyTag, ptr(9)).matched); // only tag -3 is left
    CHECK(id_of(m->post(2, -3, ptr(9)).message.payload) == 3);
    CHECK(m->unexpected_count() == 0);
}

TEST_CASE("match: messages arriving out of sequence are held until their turn", "[match]") {
    auto m = make(2);
    post_ok(*m, 1, kAnyTag, 10);
    post_ok(*m, 1, kAnyTag, 11);
    int keeps = 0;
    Arrival a = deliver(*m, 1, 3, 2, 102, &keeps);
    CHECK(a.kind == ArrivalKind::kHeld);
    CHECK(keeps == 1);
    a = deliver(*m, 1, 3, 1, 101, &keeps);
    CHECK(a.kind == ArrivalKind::kHeld);
    CHECK(m->held_count() == 2);
    CHECK_FALSE(m->iprobe(1, 3).found); // held messages are not visible yet
    CHECK(m->next_ready(1).kind == ArrivalKind::kNone);

    a = deliver(*m, 1, 3, 0, 100, &keeps);
    CHECK(a.kind == ArrivalKind::kMatched);
    CHECK(id_of(a.request) == 10);
    CHECK(a.message.seq == 0);
    REQUIRE(a.more_ready);
    a = m->next_ready(1);
    CHECK(a.kind == ArrivalKind::kMatched);
    CHECK(id_of(a.request) == 11);
    CHECK(id_of(a.message.payload) == 101); // the kept payload goes back
    CHECK(a.message.seq == 1);
    REQUIRE(a.more_ready);
    a = m->next_ready(1);
    CHECK(a.kind == ArrivalKind::kQueued);
    CHECK(a.message.seq == 2);
    CHECK_FALSE(a.more_ready);
    CHECK(m->next_ready(1).kind == ArrivalKind::kNone);
    CHECK(m->held_count() == 0);
    CHECK(m->unexpected_count() == 1);
    CHECK(keeps == 2);
}

TEST_CASE("match: sequence numbers wrap around at 2^16, also while reordered", "[match]") {
    auto m = make(2);
    // Stream 70000 messages in order through the real counter.
    for (uint32_t i = 0; i < 70000; ++i) {
        Arrival a = deliver(*m, 0, 1, static_cast<Seq>(i), 1 + i);
        REQUIRE(a.kind == ArrivalKind::kQueued);
        REQUIRE(m->post(0, 1, ptr(1)).matched);
    }
    CHECK(CommMatcherTestPeer::expected(*m, 0) == static_cast<Seq>(70000));

    // Reordered across the wrap: 65534, 65535, 0, 1 delivered backwards.
    REQUIRE(CommMatcherTestPeer::set_expected(*m, 1, 65534));
    const Seq seqs[] = {65534, 65535, 0, 1};
    for (int i = 3; i >= 1; --i) {
        CHECK(deliver(*m, 1, 8, seqs[i], 10 + i).kind == ArrivalKind::kHeld);
    }
    Arrival a = deliver(*m, 1, 8, seqs[0], 10);
    CHECK(a.kind == ArrivalKind::kQueued);
    std::vector<Seq> admitted = {a.message.seq};
    while (a.more_ready) {
        a = m->next_ready(1);
        admitted.push_back(a.message.seq);
    }
    CHECK(admitted == std::vector<Seq>{65534, 65535, 0, 1});
    for (uintptr_t want = 10; want < 14; ++want) {
        CHECK(id_of(m->post(1, 8, ptr(1)).message.payload) == want);
    }
    CHECK(CommMatcherTestPeer::expected(*m, 1) == 2);
}

TEST_CASE("match: duplicates and messages from the past are refused without side effects",
          "[match]") {
    auto m = make(2);
    int keeps = 0;
    CHECK(deliver(*m, 0, 1, 0, 1, &keeps).kind == ArrivalKind::kQueued);
    Arrival a = deliver(*m, 0, 1, 0, 2, &keeps); // seq 0 again
    CHECK(a.kind == ArrivalKind::kRejected);
    CHECK(a.verdict == Verdict::kDuplicate);
    CHECK(deliver(*m, 0, 1, 5, 3, &keeps).kind == ArrivalKind::kHeld);
    a = deliver(*m, 0, 1, 5, 4, &keeps); // held twice
    CHECK(a.verdict == Verdict::kDuplicate);
    // 32767 ahead is accepted (held); 32768 ahead is "behind" in serial arithmetic.
    CHECK(deliver(*m, 0, 1, 1 + 32767, 5, &keeps).kind == ArrivalKind::kHeld);
    CHECK(deliver(*m, 0, 1, static_cast<Seq>(1 + 32768), 6, &keeps).verdict == Verdict::kDuplicate);
    CHECK(keeps == 3);
    CHECK(m->held_count() == 2);
    CHECK(m->unexpected_count() == 1);
    CHECK(m->stats().rejected == 3);
}

TEST_CASE("match: invalid envelopes and receive arguments are refused", "[match]") {
    auto m = make(3);
    int keeps = 0;
    CHECK(deliver(*m, 3, 0, 0, 1, &keeps).verdict == Verdict::kBadSource);
    CHECK(deliver(*m, -1, 0, 0, 1, &keeps).verdict == Verdict::kBadSource);
    CHECK(deliver(*m, 0, kAnyTag, 0, 1, &keeps).verdict == Verdict::kBadTag);
    CHECK(keeps == 0);
    CHECK(deliver(*m, 0, 0, 0, 1, &keeps).kind == ArrivalKind::kQueued); // seq 0 still expected
    CHECK(m->post(3, 0, ptr(1)).verdict == Verdict::kBadSource);
    CHECK(m->post(-2, 0, ptr(1)).verdict == Verdict::kBadSource);
    CHECK(m->iprobe(7, 0).verdict == Verdict::kBadSource);
    CHECK(m->improbe(-3, 0).verdict == Verdict::kBadSource);
    CHECK(m->next_ready(3).kind == ArrivalKind::kRejected);
    CHECK_FALSE(CommMatcher::create(0).is_ok());
    CHECK(CommMatcher::create(0).status().code() == roce::util::Code::kInvalidArgument);

    auto st = explain(Verdict::kBadSource, Envelope{9, 3, 12}, 4, 3);
    CHECK(st.code() == roce::util::Code::kProtocol);
    CHECK(st.message() == "match header from source 9 (tag 3, seq 12) on context 4: the source "
                          "is not a rank of the communicator (size 3)");
    CHECK(explain(Verdict::kOk, Envelope{}, 0, 1).is_ok());
    CHECK(std::string(verdict_name(Verdict::kDuplicate)) == "duplicate sequence number");
}

TEST_CASE("match: a failing keep callback refuses the message and changes nothing", "[match]") {
    auto m = make(2);
    Arrival a = m->arrive(Envelope{1, 4, 0}, []() -> void * { return nullptr; });
    CHECK(a.kind == ArrivalKind::kRejected);
    CHECK(a.verdict == Verdict::kNoMemory);
    CHECK(m->unexpected_count() == 0);
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 0);
    a = m->arrive(Envelope{1, 4, 3}, []() -> void * { return nullptr; });
    CHECK(a.verdict == Verdict::kNoMemory);
    CHECK(m->held_count() == 0);
    // The same message offered again is accepted: seq 0 was not consumed.
    CHECK(deliver(*m, 1, 4, 0, 7).kind == ArrivalKind::kQueued);
    CHECK(deliver(*m, 1, 4, 3, 8).kind == ArrivalKind::kHeld);

    // Buckets made for the refused message do not linger: with no idle
    // buckets allowed the index is empty again.
    MatcherOptions o;
    o.max_idle_buckets = 0;
    CommMatcher m0(2, o);
    a = m0.arrive(Envelope{1, 4, 0}, []() -> void * { return nullptr; });
    CHECK(a.verdict == Verdict::kNoMemory);
    CHECK(CommMatcherTestPeer::index_size(m0) == 0);
}

TEST_CASE("match: post with a request made on demand (blocking receives)", "[match]") {
    auto m = make(3);
    int makes = 0;
    auto make_request = [&makes](uintptr_t id) {
        return [&makes, id]() -> void * {
            ++makes;
            return ptr(id);
        };
    };
    // A message that is here already is taken: no request is made.
    REQUIRE(deliver(*m, 1, 5, 0, 100).kind == ArrivalKind::kQueued);
    REQUIRE(deliver(*m, 2, -3, 0, 101).kind == ArrivalKind::kQueued);
    Posting p = m->post(1, 5, make_request(1));
    CHECK(p.verdict == Verdict::kOk);
    CHECK(p.matched);
    CHECK(id_of(p.message.payload) == 100);
    p = m->post(kAnySource, -3, make_request(2));
    CHECK(p.matched);
    CHECK(id_of(p.message.payload) == 101);
    CHECK(makes == 0);
    CHECK(m->unexpected_count() == 0);
    // Nothing here: the request is made once and posted, for every kind of
    // receive, and later messages match it in posting order.
    const int32_t kinds[4][2] = {{1, 5}, {kAnySource, 5}, {1, kAnyTag}, {kAnySource, kAnyTag}};
    uintptr_t id = 10;
    for (const auto &k : kinds) {
        p = m->post(k[0], k[1], make_request(id++));
        CHECK(p.verdict == Verdict::kOk);
        CHECK_FALSE(p.matched);
        CHECK(p.handle.node != nullptr);
    }
    CHECK(makes == 4);
    CHECK(m->posted_count() == 4);
    for (uintptr_t want = 10; want < 14; ++want) {
        Arrival a = deliver(*m, 1, 5, static_cast<Seq>(want - 9), 200 + want);
        CHECK(a.kind == ArrivalKind::kMatched);
        CHECK(id_of(a.request) == want);
    }
    // The handle of a request made on demand cancels it.
    p = m->post(0, 7, make_request(20));
    CHECK(m->cancel(p.handle));
    CHECK(m->posted_count() == 0);
    // When the request cannot be made, the post is refused and nothing
    // changed: no receive posted, and (no idle buckets allowed) no bucket
    // left in the index, for every kind of receive.
    MatcherOptions o;
    o.max_idle_buckets = 0;
    CommMatcher m0(3, o);
    int failed = 0;
    auto fail = [&failed]() -> void * {
        ++failed;
        return nullptr;
    };
    for (const auto &k : kinds) {
        p = m0.post(k[0], k[1], fail);
        CHECK(p.verdict == Verdict::kNoMemory);
        CHECK_FALSE(p.matched);
        CHECK(m0.posted_count() == 0);
        CHECK(CommMatcherTestPeer::index_size(m0) == 0);
    }
    CHECK(failed == 4);
    // ... and the same receive can be posted again.
    p = m0.post(1, 5, make_request(30));
    CHECK(p.verdict == Verdict::kOk);
    CHECK(id_of(deliver(m0, 1, 5, 0, 300).request) == 30);
    // No node for the receive: the request is not even made.
    CommMatcher m1(3, o);
    CommMatcherTestPeer::limit_posted_nodes(m1, 0);
    makes = 0;
    p = m1.post(2, 5, make_request(31));
    CHECK(p.verdict == Verdict::kNoMemory);
    CHECK(makes == 0);
    CHECK(CommMatcherTestPeer::index_size(m1) == 0);
}

TEST_CASE("match: wildcard lists are built on first use, in admission order", "[match]") {
    MatcherOptions o;
    o.max_idle_buckets = 0;
    CommMatcher m(3, o);
    // Admission order: ids 1..7; tags 5, 6 and a collective's -2.
    const int32_t msgs[7][2] = {{2, 5}, {1, 6}, {0, -2}, {1, 5}, {2, -2}, {0, 6}, {2, 5}};
    Seq seq[3] = {0, 0, 0};
    for (uintptr_t i = 0; i < 7; ++i) {
        int32_t src = msgs[i][0];
        REQUIRE(deliver(m, src, msgs[i][1], seq[src]++, i + 1).kind == ArrivalKind::kQueued);
    }
    // No wildcard asked for yet: only the (source, tag) buckets exist.
    CHECK(CommMatcherTestPeer::index_size(m) == 6);
    // Built now: each wildcard takes the earliest admitted message it accepts.
    CHECK(id_of(m.iprobe(kAnySource, 6).message.payload) == 2);
    CHECK(id_of(m.post(kAnySource, 6, ptr(51)).message.payload) == 2);
    CHECK(id_of(m.post(kAnySource, -2, ptr(52)).message.payload) == 3);
    // ANY_TAG lists, built from what is left (ids 1, 4, 5, 6, 7), skip tag -2.
    CHECK(id_of(m.post(2, kAnyTag, ptr(53)).message.payload) == 1);
    CHECK(id_of(m.post(kAnySource, kAnyTag, ptr(54)).message.payload) == 4);
    // Messages arriving later join every list.
    REQUIRE(deliver(m, 1, 6, seq[1]++, 8).kind == ArrivalKind::kQueued);
    CHECK(id_of(m.improbe(kAnySource, kAnyTag).message.payload) == 6);
    CHECK(id_of(m.post(kAnySource, 5, ptr(55)).message.payload) == 7);
    CHECK(id_of(m.post(1, kAnyTag, ptr(56)).message.payload) == 8);
    CHECK(id_of(m.post(kAnySource, -2, ptr(57)).message.payload) == 5);
    CHECK(m.unexpected_count() == 0);
    CHECK(CommMatcherTestPeer::index_size(m) == 0);

    // Out of memory while building the (ANY_SOURCE, t) lists: refused,
    // nothing changed, and the buckets made for them are gone again. 62
    // tags leave 2 of the bucket pool's first chunk of 64; the limit stops it
    // growing, so the build makes 2 buckets and fails at the third.
    CommMatcher m2(2, o);
    for (int32_t t = 0; t < 62; ++t) {
        REQUIRE(deliver(m2, 1, t, static_cast<Seq>(t), 100 + t).kind == ArrivalKind::kQueued);
    }
    CommMatcherTestPeer::limit_buckets(m2, 64);
    CHECK(m2.iprobe(kAnySource, 3).verdict == Verdict::kNoMemory);
    CHECK(m2.improbe(kAnySource, 3).verdict == Verdict::kNoMemory);
    Posting p = m2.post(kAnySource, 3, ptr(60));
    CHECK(p.verdict == Verdict::kNoMemory);
    CHECK_FALSE(p.matched);
    CHECK(m2.posted_count() == 0);
    CHECK(m2.unexpected_count() == 62);
    CHECK(CommMatcherTestPeer::index_size(m2) == 62);
    // An ANY_TAG lookup needs no bucket: it works meanwhile.
    CHECK(id_of(m2.iprobe(1, kAnyTag).message.payload) == 100);
    CommMatcherTestPeer::limit_buckets(m2, 1000);
    CHECK(id_of(m2.post(kAnySource, 3, ptr(61)).message.payload) == 103);
    CHECK(id_of(m2.post(kAnySource, kAnyTag, ptr(62)).message.payload) == 100);
}

TEST_CASE("match: the oldest empty bucket is erased first", "[match]") {
    MatcherOptions o;
    o.max_idle_buckets = 2;
    CommMatcher m(1, o);
    Seq seq = 0;
    auto use = [&](int32_t tag) {
        post_ok(m, 0, tag, static_cast<uintptr_t>(tag));
        REQUIRE(deliver(m, 0, tag, seq++, 100).kind == ArrivalKind::kMatched);
    };
    use(1);
    use(2);
    use(3); // emptied in the order 1, 2, 3: the oldest, 1, goes
    CHECK(CommMatcherTestPeer::index_size(m) == 2);
    CHECK_FALSE(CommMatcherTestPeer::has_bucket(m, 0, 1));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 2));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 3));
    use(2); // used again: now the newest empty one
    use(4); // empty now: 3, 2, 4: 3 goes
    CHECK(CommMatcherTestPeer::index_size(m) == 2);
    CHECK_FALSE(CommMatcherTestPeer::has_bucket(m, 0, 3));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 2));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 4));
    use(4); // the newest, used again at once
    use(5); // 2, 4, 5: 2 goes
    CHECK_FALSE(CommMatcherTestPeer::has_bucket(m, 0, 2));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 4));
    CHECK(CommMatcherTestPeer::has_bucket(m, 0, 5));
}

TEST_CASE("match: cancel removes only a posted, unmatched receive", "[match]") {
    auto m = make(2);
    PostedHandle h1 = post_ok(*m, 0, 1, 1);
    PostedHandle h2 = post_ok(*m, kAnySource, kAnyTag, 2);
    PostedHandle h3 = post_ok(*m, 0, 1, 3);
    CHECK(m->cancel(h1));
    CHECK_FALSE(m->cancel(h1)); // twice
    // The cancelled receive no longer matches; the next in posting order does.
    Arrival a = deliver(*m, 0, 1, 0, 50);
    CHECK(id_of(a.request) == 2);
    CHECK_FALSE(m->cancel(h2)); // already matched
    CHECK(m->cancel(h3));
    CHECK(deliver(*m, 0, 1, 1, 51).kind == ArrivalKind::kQueued);
    CHECK(m->posted_count() == 0);
    CHECK_FALSE(m->cancel(PostedHandle{}));
    // A stale handle whose node was reused for a new receive is refused.
    PostedHandle h4 = post_ok(*m, 1, 2, 4);
    CHECK(h4.node == h3.node); // LIFO pool: the same node came back
    CHECK_FALSE(m->cancel(h3));
    CHECK(m->posted_count() == 1);
    CHECK(m->cancel(h4));
    // Left: the unexpected (0, 1) message's bucket (no (ANY_SOURCE, t) lookup
    // ever happened, so there are no (ANY_SOURCE, 1) lists).
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 1);
}

TEST_CASE("match: cancel of an ANY_SOURCE receive keeps the tag index consistent", "[match]") {
    auto m = make(2);
    PostedHandle h = post_ok(*m, kAnySource, 6, 1);
    CHECK(m->cancel(h));
    post_ok(*m, 1, 6, 2);
    CHECK(id_of(deliver(*m, 1, 6, 0, 9).request) == 2);
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 0);
}

TEST_CASE("match: iprobe leaves the message, improbe removes it (mprobe)", "[match]") {
    auto m = make(3);
    deliver(*m, 1, 2, 0, 70);
    deliver(*m, 2, 2, 0, 71);
    Probe p = m->iprobe(kAnySource, 2);
    REQUIRE(p.found);
    CHECK(id_of(p.message.payload) == 70);
    CHECK(p.message.source == 1);
    CHECK(m->iprobe(kAnySource, 2).found); // still there
    CHECK(m->unexpected_count() == 2);

    p = m->improbe(kAnySource, kAnyTag);
    REQUIRE(p.found);
    CHECK(id_of(p.message.payload) == 70);
    CHECK(m->unexpected_count() == 1);
    // Gone for probes and for receives: the next one is source 2's.
    CHECK(id_of(m->iprobe(kAnySource, 2).message.payload) == 71);
    CHECK_FALSE(m->iprobe(1, 2).found);
    Posting r = m->post(kAnySource, 2, ptr(5));
    CHECK(id_of(r.message.payload) == 71);
    CHECK_FALSE(m->improbe(kAnySource, kAnyTag).found);
    CHECK_FALSE(m->iprobe(0, 2).found);
}

TEST_CASE("match: messages for a communicator not created yet wait for add_comm", "[match]") {
    EarlyArrivals early;
    // Context 7 does not exist yet; messages come in, one source reordered.
    REQUIRE(early.hold(7, Envelope{1, 3, 1}, ptr(201)).is_ok());
    REQUIRE(early.hold(7, Envelope{0, 3, 0}, ptr(100)).is_ok());
    REQUIRE(early.hold(8, Envelope{0, 3, 0}, ptr(300)).is_ok());
    REQUIRE(early.hold(7, Envelope{1, 3, 0}, ptr(200)).is_ok());
    REQUIRE(early.hold(7, Envelope{1, -4, 2}, ptr(202)).is_ok());
    CHECK(early.count(7) == 4);
    CHECK(early.size() == 5);

    auto m = make(2);
    std::vector<uintptr_t> refused;
    auto st = early.transfer(7, *m, [&](void *payload, Verdict, const roce::util::Status &) {
        refused.push_back(id_of(payload));
    });
    CHECK(st.is_ok());
    CHECK(refused.empty());
    CHECK(early.count(7) == 0);
    CHECK(early.size() == 1);
    CHECK(m->unexpected_count() == 4);
    CHECK(m->held_count() == 0);
    // Admission order: (0,3,s0) and source 1 in sequence order 0, 1, 2.
    CHECK(id_of(m->post(1, 3, ptr(1)).message.payload) == 200);
    CHECK(id_of(m->post(kAnySource, 3, ptr(1)).message.payload) == 100);
    CHECK(id_of(m->post(kAnySource, 3, ptr(1)).message.payload) == 201);
    CHECK(id_of(m->post(1, -4, ptr(1)).message.payload) == 202);
    // The next message from source 1 is seq 3.
    CHECK(deliver(*m, 1, 3, 3, 203).kind == ArrivalKind::kQueued);
    // Nothing held for a context: transfer is a no-op.
    CHECK(early.transfer(9, *m, [](void *, Verdict, const roce::util::Status &) {}).is_ok());
}

TEST_CASE("match: early messages a communicator refuses are handed back", "[match]") {
    EarlyArrivals early;
    REQUIRE(early.hold(5, Envelope{4, 3, 0}, ptr(1)).is_ok()); // source outside size 2
    REQUIRE(early.hold(5, Envelope{0, 3, 0}, ptr(2)).is_ok());
    REQUIRE(early.hold(5, Envelope{0, 3, 0}, ptr(3)).is_ok()); // duplicate
    auto m = make(2);
    std::vector<uintptr_t> refused;
    std::vector<Verdict> verdicts;
    auto st = early.transfer(5, *m, [&](void *payload, Verdict v, const roce::util::Status &why) {
        refused.push_back(id_of(payload));
        verdicts.push_back(v);
        CHECK(why.code() == roce::util::Code::kProtocol);
    });
    CHECK_FALSE(st.is_ok());
    CHECK(st.message().find("source 4") != std::string::npos);
    CHECK(refused == std::vector<uintptr_t>{1, 3});
    CHECK(verdicts == std::vector<Verdict>{Verdict::kBadSource, Verdict::kDuplicate});
    CHECK(m->unexpected_count() == 1);

    // A matcher with posted receives is refused before anything moves.
    REQUIRE(early.hold(6, Envelope{0, 3, 0}, ptr(4)).is_ok());
    auto m2 = make(2);
    post_ok(*m2, 0, 9, 1);
    st = early.transfer(6, *m2, [](void *, Verdict, const roce::util::Status &) {});
    CHECK(st.code() == roce::util::Code::kInternal);
    CHECK(early.count(6) == 1);
    std::vector<uintptr_t> released;
    CHECK(early.drain([&](uint32_t ctx, const Message &msg) {
        CHECK(ctx == 6);
        released.push_back(id_of(msg.payload));
    }) == 1);
    CHECK(released == std::vector<uintptr_t>{4});
    CHECK(early.size() == 0);
}

TEST_CASE("match: allow_overtake admits every message as it arrives", "[match]") {
    auto m = make(2, /*overtake=*/true);
    CHECK(m->allow_overtake());
    post_ok(*m, 0, kAnyTag, 1);
    Arrival a = deliver(*m, 0, 5, 9, 10); // any sequence number
    CHECK(a.kind == ArrivalKind::kMatched);
    CHECK(deliver(*m, 0, 5, 3, 11).kind == ArrivalKind::kQueued);
    CHECK(deliver(*m, 0, 5, 3, 12).kind == ArrivalKind::kQueued); // not a duplicate here
    CHECK(m->held_count() == 0);
    CHECK(id_of(m->post(0, 5, ptr(2)).message.payload) == 11);
}

TEST_CASE("match: drain hands back every posted receive, unexpected and held message", "[match]") {
    auto m = make(3);
    post_ok(*m, 0, 1, 1);
    post_ok(*m, kAnySource, 2, 2);
    post_ok(*m, 1, kAnyTag, 3);
    post_ok(*m, kAnySource, kAnyTag, 4);
    deliver(*m, 2, -9, 0, 10);
    deliver(*m, 2, -8, 1, 11);
    deliver(*m, 2, 6, 5, 12); // held
    deliver(*m, 0, -1000, 0, 13);
    CHECK(m->posted_count() == 4);
    CHECK(m->unexpected_count() == 3);
    CHECK(m->held_count() == 1);
    std::set<uintptr_t> requests;
    std::set<uintptr_t> payloads;
    std::size_t n = m->drain([&](void *r) { requests.insert(id_of(r)); },
                             [&](const Message &msg) { payloads.insert(id_of(msg.payload)); });
    CHECK(n == 8);
    CHECK(requests == std::set<uintptr_t>{1, 2, 3, 4});
    CHECK(payloads == std::set<uintptr_t>{10, 11, 12, 13});
    CHECK(m->posted_count() == 0);
    CHECK(m->unexpected_count() == 0);
    CHECK(m->held_count() == 0);
    CHECK(CommMatcherTestPeer::index_size(*m) == 0);
    CHECK(CommMatcherTestPeer::bucket_nodes_live(*m) == 0);
    // Still usable afterwards; sequence state kept (source 2 expects seq 2).
    CHECK(deliver(*m, 2, 6, 2, 20).kind == ArrivalKind::kQueued);
    CHECK(m->post(2, kAnyTag, ptr(9)).matched);
}

TEST_CASE("match: 10,000 posted receives, each message matches the last one posted", "[match]") {
    auto m = make(64);
    const int n = 10000;
    for (int i = 0; i < n; ++i) {
        post_ok(*m, i % 64, i / 64, 1 + i);
    }
    for (int i = n - 1; i >= 0; --i) {
        int src = i % 64;
        Arrival a = deliver(*m, src, i / 64, static_cast<Seq>((n - 1 - i) / 64), 0);
        REQUIRE(a.kind == ArrivalKind::kMatched);
        REQUIRE(id_of(a.request) == static_cast<uintptr_t>(1 + i));
    }
    CHECK(m->posted_count() == 0);
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 0);
    MatcherStats s = m->stats();
    CHECK(s.peak_posted == static_cast<std::size_t>(n));
    CHECK(s.matched_on_arrival == static_cast<uint64_t>(n));
}

TEST_CASE("match: 10,000 unexpected messages, receives posted newest first", "[match]") {
    auto m = make(16);
    const int n = 10000;
    for (int i = 0; i < n; ++i) {
        REQUIRE(deliver(*m, i % 16, i, static_cast<Seq>(i / 16), 1 + i).kind ==
                ArrivalKind::kQueued);
    }
    for (int i = n - 1; i >= 0; --i) {
        Posting p = m->post(i % 16, i, ptr(1));
        REQUIRE(p.matched);
        REQUIRE(id_of(p.message.payload) == static_cast<uintptr_t>(1 + i));
    }
    CHECK(m->unexpected_count() == 0);
    CHECK(m->stats().peak_unexpected == static_cast<std::size_t>(n));
}

TEST_CASE("match: buckets of (source, tag) pairs no longer in use are reclaimed", "[match]") {
    auto m = make(8);
    CHECK(m->post(0, 77, ptr(1)).verdict == Verdict::kOk);
    deliver(*m, 0, 77, 0, 1);
    CHECK(CommMatcherTestPeer::index_size(*m) == 1); // kept for reuse...
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 0);
    CHECK(m->post(0, 77, ptr(2)).verdict == Verdict::kOk); // ...and reused
    CHECK(CommMatcherTestPeer::index_size(*m) == 1);
    CHECK(id_of(deliver(*m, 0, 77, 1, 1).request) == 2);
    // 100,000 distinct keys, each used once: the index must not keep them all.
    for (int i = 0; i < 100000; ++i) {
        post_ok(*m, i % 8, i, 1);
        REQUIRE(deliver(*m, i % 8, i, static_cast<Seq>(i / 8 + (i % 8 == 0 ? 2 : 0)), 2).kind ==
                ArrivalKind::kMatched);
    }
    // At most max_idle_buckets (1024) empty ones stay, at load <= 1/2.
    CHECK(CommMatcherTestPeer::index_size(*m) == 1024);
    CHECK(CommMatcherTestPeer::index_capacity(*m) <= 4096);
    CHECK(m->stats().peak_posted == 1);
    // Keys in use are never reclaimed, however many there are.
    for (int i = 0; i < 5000; ++i) {
        post_ok(*m, i % 8, 1000000 + i, 10 + i);
    }
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 5000);
    CHECK(CommMatcherTestPeer::index_capacity(*m) >= 2 * 5000);
    for (int i = 0; i < 5000; ++i) {
        Arrival a = deliver(*m, i % 8, 1000000 + i,
                            static_cast<Seq>(12500 + i / 8 + (i % 8 == 0 ? 2 : 0)), 0);
        REQUIRE(a.kind == ArrivalKind::kMatched);
        REQUIRE(id_of(a.request) == static_cast<uintptr_t>(10 + i));
    }
}

TEST_CASE("match: running out of engine memory changes nothing and recovers", "[match]") {
    auto m = make(2);
    CommMatcherTestPeer::limit_unexpected_nodes(*m, 2);
    int keeps = 0;
    REQUIRE(deliver(*m, 0, 1, 0, 100, &keeps).kind == ArrivalKind::kQueued);
    REQUIRE(deliver(*m, 0, 1, 1, 101, &keeps).kind == ArrivalKind::kQueued);
    Arrival a = deliver(*m, 0, 1, 2, 102, &keeps);
    CHECK(a.verdict == Verdict::kNoMemory);
    CHECK(keeps == 2); // refused before the pml copied anything
    CHECK(m->unexpected_count() == 2);
    // Held messages need no node; seq 2 is still the expected one.
    CHECK(deliver(*m, 0, 1, 4, 104, &keeps).kind == ArrivalKind::kHeld);
    CHECK(deliver(*m, 0, 1, 3, 103, &keeps).kind == ArrivalKind::kHeld);
    CHECK(id_of(m->post(0, 1, ptr(1)).message.payload) == 100);
    a = deliver(*m, 0, 1, 2, 102, &keeps); // offered again: now fits
    CHECK(a.kind == ArrivalKind::kQueued);
    REQUIRE(a.more_ready);
    a = m->next_ready(0); // seq 3 needs a node: none left
    CHECK(a.kind == ArrivalKind::kRejected);
    CHECK(a.verdict == Verdict::kNoMemory);
    CHECK(m->held_count() == 2); // seq 3 stays held, ready
    CHECK(id_of(m->post(0, 1, ptr(2)).message.payload) == 101);
    // The next arrival from that source reports the ready message.
    a = deliver(*m, 0, 1, 5, 105, &keeps);
    CHECK(a.kind == ArrivalKind::kHeld);
    REQUIRE(a.more_ready);
    a = m->next_ready(0);
    CHECK(a.kind == ArrivalKind::kQueued);
    CHECK(a.message.seq == 3);
    CHECK(id_of(a.message.payload) == 103);
    CHECK(a.more_ready);
    // Receives with nothing to take cannot be posted without a node either.
    CommMatcherTestPeer::limit_posted_nodes(*m, 0);
    Posting p = m->post(1, 9, ptr(3));
    CHECK(p.verdict == Verdict::kNoMemory);
    CHECK_FALSE(p.matched);
    CHECK(m->posted_count() == 0);
    CHECK(CommMatcherTestPeer::live_buckets(*m) == 1); // (0, 1)
    // A receive that takes a message needs no node.
    CHECK(id_of(m->post(0, kAnyTag, ptr(4)).message.payload) == 102);
}
