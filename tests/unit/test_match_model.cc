// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Randomized model-based test of the matching engine: thousands of random
// interleavings of sends, (reordered) arrivals, duplicates, receives
// (specific and wildcard), probes, mprobes, cancels and a communicator
// created late, each step checked against match_model.h.
//
// Environment: ROCE_MATCH_SEED=<n> repeats a run (the seed is printed),
// ROCE_MATCH_ITERATIONS=<n> changes the number of interleavings.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "fuzz_util.h"
#include "match/comm_matcher.h"
#include "match/early_arrivals.h"
#include "match_model.h"
#include "match_test_util.h"

using namespace roce::pml::match;
using match_model::Event;
using match_model::Msg;
using match_model::ReferenceMatcher;
using match_test::id_of;
using match_test::ptr;

namespace {

uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
        return fallback;
    }
    char *end = nullptr;
    unsigned long long x = std::strtoull(v, &end, 0);
    if (end == v || *end != '\0') {
        FAIL(name << "=" << v << " is not a number");
    }
    return x;
}

using Rng = roce::testing::fuzz::Rng; // splitmix64: the same sequence everywhere

struct Sender {
    uint16_t next_seq = 0;
    std::vector<Msg> in_flight; // sent, not delivered, in sending order
    std::vector<Msg> recent;    // delivered lately, for duplicate injection
};

struct Comm {
    uint32_t context = 0;
    int32_t size = 1;
    bool overtake = false;
    std::size_t max_idle = 1024;
    std::vector<uint16_t> base; // first sequence number of each sender
    std::unique_ptr<CommMatcher> engine;
    std::unique_ptr<ReferenceMatcher> model;
    std::vector<Sender> senders;
    std::vector<Msg> early; // delivered before the communicator existed
    std::vector<std::pair<uintptr_t, PostedHandle>> posted;
    std::vector<std::pair<uintptr_t, PostedHandle>> stale;
    bool created() const { return engine != nullptr; }
};

struct Totals {
    uint64_t ops = 0;
    uint64_t arrivals = 0;
    uint64_t held = 0;
    uint64_t matched_on_arrival = 0;
    uint64_t matched_on_post = 0;
    uint64_t wildcard_posts = 0;
    uint64_t probes = 0;
    uint64_t mprobes_found = 0;
    uint64_t cancels = 0;
    uint64_t duplicates = 0;
    uint64_t keep_failures = 0;
    uint64_t make_failures = 0;
    uint64_t early = 0;
};

struct Trace {
    const char *op;
    uint32_t context;
    int32_t source;
    int32_t tag;
    uint32_t seq;
    uintptr_t id;
};

class Run {
public:
    Run(uint64_t master, uint32_t iteration, Totals &totals)
        : master_(master), iteration_(iteration),
          rng_(master ^ (0x5851f42d4c957f2dULL * (iteration + 1))), totals_(totals) {}

    void run() {
        window_ = kWindows[rng_.below(5)];
        setup(a_, 1);
        setup(b_, 2);
        create(a_);
        uint32_t steps = 50 + rng_.below(550);
        uint32_t create_b_at = rng_.below(steps + 1);
        for (step_ = 0; step_ < steps; ++step_) {
            if (step_ == create_b_at) {
                create(b_);
            }
            Comm &c = rng_.chance(60) ? a_ : b_;
            one_op(c);
            check_counts(a_);
            check_counts(b_);
            ++totals_.ops;
        }
        if (!b_.created()) {
            create(b_);
        }
        finish(a_);
        finish(b_);
        check(early_.size() == 0, "early store empty at the end");
    }

private:
    static constexpr uint32_t kWindows[5] = {1, 2, 3, 8, 32};
    static constexpr int32_t kTags[6] = {-4, -2, 0, 1, 2, 3};
    static constexpr std::size_t kIdleLimits[4] = {0, 1, 3, 1024};

    void check(bool ok, const char *what) {
        if (!ok) {
            FAIL(report(what));
        }
    }

    std::string report(const char *what) const {
        std::ostringstream o;
        o << "divergence from the reference matcher: " << what << "\n  master seed " << master_
          << " (rerun: ROCE_MATCH_SEED=" << master_ << "), iteration " << iteration_ << ", step "
          << step_ << ", window " << window_ << "\n  last operations:\n";
        for (const Trace &t : trace_) {
            o << "    " << t.op << " ctx " << t.context << " source " << t.source << " tag "
              << t.tag << " seq " << t.seq << " id " << t.id << "\n";
        }
        return o.str();
    }

    void note(const char *op, const Comm &c, int32_t source, int32_t tag, uint32_t seq,
              uintptr_t id) {
        if (trace_.size() == 40) {
            trace_.erase(trace_.begin());
        }
        trace_.push_back(Trace{op, c.context, source, tag, seq, id});
    }

    void setup(Comm &c, uint32_t context) {
        c.context = context;
        c.size = 1 + static_cast<int32_t>(rng_.below(5));
        c.overtake = rng_.chance(10);
        // Small limits make empty buckets get erased and re-created all the time.
        c.max_idle = kIdleLimits[rng_.below(4)];
        c.senders.resize(static_cast<std::size_t>(c.size));
        for (Sender &s : c.senders) {
            // Often start right below 2^16 so the run crosses the wrap.
            s.next_seq = rng_.chance(30) ? static_cast<uint16_t>(65536 - rng_.below(24)) : 0;
            c.base.push_back(s.next_seq);
        }
    }

    void create(Comm &c) {
        CommMatcher::Options o;
        o.allow_overtake = c.overtake;
        o.max_idle_buckets = c.max_idle;
        auto r = CommMatcher::create(c.size, o);
        check(r.is_ok(), "create");
        c.engine = std::move(r.value());
        c.model = std::make_unique<ReferenceMatcher>(c.size, c.overtake);
        for (int32_t s = 0; s < c.size; ++s) {
            check(CommMatcherTestPeer::set_expected(*c.engine, s, c.base[s]), "set_expected");
            c.model->set_expected(s, c.base[s]);
        }
        note("create", c, c.size, c.overtake, static_cast<uint32_t>(c.max_idle), c.early.size());
        roce::util::Status st =
            early_.transfer(c.context, *c.engine, [&](void *, Verdict, const roce::util::Status &why) {
                check(false, why.message().c_str());
            });
        check(st.is_ok(), "transfer of early messages");
        for (const Msg &m : c.early) {
            for (const Event &e : c.model->arrive(m)) {
                check(e.kind != Event::kMatched, "early message matched in the model");
            }
            remember(c, m);
        }
        c.early.clear();
    }

    void remember(Comm &c, const Msg &m) {
        std::vector<Msg> &r = c.senders[m.source].recent;
        if (r.size() == 8) {
            r.erase(r.begin());
        }
        r.push_back(m);
    }

    int32_t pick_source(const Comm &c) {
        return rng_.chance(25) ? kAnySource : static_cast<int32_t>(rng_.below(c.size));
    }
    int32_t pick_tag(bool wildcard_ok) {
        return wildcard_ok && rng_.chance(25) ? kAnyTag : kTags[rng_.below(6)];
    }

    void one_op(Comm &c) {
        uint32_t r = rng_.below(90);
        if (r < 22) {
            send(c);
        } else if (r < 48) {
            deliver(c);
        } else if (!c.created()) {
            deliver(c); // nothing else exists yet for this communicator
        } else if (r < 68) {
            post(c);
        } else if (r < 74) {
            cancel(c);
        } else if (r < 80) {
            probe(c, false);
        } else if (r < 85) {
            probe(c, true);
        } else if (r < 88) {
            duplicate(c);
        } else {
            int32_t s = static_cast<int32_t>(rng_.below(c.size));
            note("next_ready", c, s, 0, 0, 0);
            check(c.engine->next_ready(s).kind == ArrivalKind::kNone, "next_ready when drained");
        }
    }

    void send(Comm &c) {
        Sender &s = c.senders[rng_.below(c.size)];
        int32_t source = static_cast<int32_t>(&s - c.senders.data());
        Msg m{source, pick_tag(false), s.next_seq++, next_id_++};
        note("send", c, m.source, m.tag, m.seq, m.id);
        s.in_flight.push_back(m);
    }

    Event translate(Comm &c, const Arrival &a, uintptr_t in_hand) {
        switch (a.kind) {
        case ArrivalKind::kMatched: {
            uintptr_t request = id_of(a.request);
            bool found = false;
            for (std::size_t i = 0; i < c.posted.size(); ++i) {
                if (c.posted[i].first == request) {
                    c.stale.push_back(c.posted[i]);
                    c.posted.erase(c.posted.begin() + static_cast<long>(i));
                    found = true;
                    break;
                }
            }
            check(found, "matched a request that is not posted");
            ++totals_.matched_on_arrival;
            return Event{Event::kMatched,
                         a.message.payload != nullptr ? id_of(a.message.payload) : in_hand,
                         request};
        }
        case ArrivalKind::kQueued:
            return Event{Event::kQueued, id_of(a.message.payload), 0};
        case ArrivalKind::kHeld:
            ++totals_.held;
            return Event{Event::kHeld, id_of(a.message.payload), 0};
        default:
            check(false, "arrival neither matched, queued nor held");
            return Event{};
        }
    }

    void deliver(Comm &c) {
        std::vector<Sender *> busy;
        for (Sender &s : c.senders) {
            if (!s.in_flight.empty()) {
                busy.push_back(&s);
            }
        }
        if (busy.empty()) {
            send(c);
            return;
        }
        Sender &s = *busy[rng_.below(static_cast<uint32_t>(busy.size()))];
        uint32_t n = static_cast<uint32_t>(s.in_flight.size());
        uint32_t idx = rng_.below(c.overtake ? n : std::min(n, window_));
        Msg m = s.in_flight[idx];
        s.in_flight.erase(s.in_flight.begin() + idx);
        Envelope env{m.source, m.tag, m.seq};
        ++totals_.arrivals;
        if (!c.created()) {
            note("early", c, m.source, m.tag, m.seq, m.id);
            check(early_.hold(c.context, env, ptr(m.id)).is_ok(), "early hold");
            c.early.push_back(m);
            ++totals_.early;
            return;
        }
        bool keep_fails = rng_.chance(3);
        note(keep_fails ? "arrive(keep fails)" : "arrive", c, m.source, m.tag, m.seq, m.id);
        bool stores = c.model->would_store(m);
        int keeps = 0;
        Arrival a = c.engine->arrive(env, [&]() -> void * {
            ++keeps;
            return keep_fails ? nullptr : ptr(m.id);
        });
        check(a.message.source == m.source && a.message.tag == m.tag && a.message.seq == m.seq,
              "envelope echoed");
        if (keep_fails && stores) {
            check(a.kind == ArrivalKind::kRejected && a.verdict == Verdict::kNoMemory,
                  "a failed keep refuses the message");
            check(keeps == 1, "keep called once");
            s.in_flight.insert(s.in_flight.begin() + idx, m); // the network retries it
            ++totals_.keep_failures;
            return;
        }
        std::vector<Event> got = {translate(c, a, m.id)};
        check(keeps == (got[0].kind == Event::kMatched ? 0 : 1), "keep called iff stored");
        while (a.more_ready) {
            a = c.engine->next_ready(m.source);
            got.push_back(translate(c, a, 0));
        }
        std::vector<Event> want = c.model->arrive(m);
        check(got == want, "events of an arrival");
        remember(c, m);
    }

    void duplicate(Comm &c) {
        if (c.overtake) {
            return;
        }
        Sender &s = c.senders[rng_.below(c.size)];
        if (s.recent.empty()) {
            return;
        }
        const Msg &m = s.recent[rng_.below(static_cast<uint32_t>(s.recent.size()))];
        note("duplicate", c, m.source, m.tag, m.seq, m.id);
        int keeps = 0;
        Arrival a = match_test::deliver(*c.engine, m.source, m.tag, m.seq, m.id, &keeps);
        check(a.kind == ArrivalKind::kRejected && a.verdict == Verdict::kDuplicate && keeps == 0,
              "a duplicate is refused untouched");
        ++totals_.duplicates;
    }

    void post(Comm &c) {
        int32_t source = pick_source(c);
        int32_t tag = pick_tag(true);
        uintptr_t request = next_request_++;
        // A third of the receives make their request on demand (the pml's
        // blocking receive); some of those fail to make it.
        bool lazy = rng_.chance(33);
        bool make_fails = lazy && rng_.chance(10);
        note(lazy ? (make_fails ? "post(make fails)" : "post(make)") : "post", c, source, tag, 0,
             request);
        int makes = 0;
        Posting p = lazy ? c.engine->post(source, tag,
                                          [&]() -> void * {
                                              ++makes;
                                              return make_fails ? nullptr : ptr(request);
                                          })
                         : c.engine->post(source, tag, ptr(request));
        if (make_fails && !p.matched) {
            check(p.verdict == Verdict::kNoMemory && makes == 1,
                  "a failed make refuses the receive");
            check(c.engine->posted_count() == c.model->posted_count(), "refused: nothing posted");
            ++totals_.make_failures;
            return;
        }
        std::optional<Msg> want = c.model->post(source, tag, request);
        check(makes == (lazy && !want ? 1 : 0), "request made iff posted");
        check(p.verdict == Verdict::kOk, "post accepted");
        check(p.matched == want.has_value(), "post matched or not");
        if (want) {
            check(id_of(p.message.payload) == want->id && p.message.source == want->source &&
                      p.message.tag == want->tag && p.message.seq == want->seq,
                  "the unexpected message a receive takes");
            ++totals_.matched_on_post;
        } else {
            c.posted.emplace_back(request, p.handle);
        }
        totals_.wildcard_posts += (source == kAnySource || tag == kAnyTag) ? 1 : 0;
    }

    void cancel(Comm &c) {
        bool live = !c.posted.empty() && (c.stale.empty() || rng_.chance(80));
        auto &from = live ? c.posted : c.stale;
        if (from.empty()) {
            return;
        }
        std::size_t i = rng_.below(static_cast<uint32_t>(from.size()));
        auto [request, handle] = from[i];
        note(live ? "cancel" : "cancel(stale)", c, 0, 0, 0, request);
        bool got = c.engine->cancel(handle);
        bool want = c.model->cancel(request);
        check(got == want && got == live, "cancel result");
        if (live) {
            c.stale.push_back(from[i]);
            c.posted.erase(c.posted.begin() + static_cast<long>(i));
        }
        ++totals_.cancels;
    }

    void probe(Comm &c, bool remove) {
        int32_t source = pick_source(c);
        int32_t tag = pick_tag(true);
        note(remove ? "improbe" : "iprobe", c, source, tag, 0, 0);
        Probe p = remove ? c.engine->improbe(source, tag) : c.engine->iprobe(source, tag);
        std::optional<Msg> want =
            remove ? c.model->improbe(source, tag) : c.model->iprobe(source, tag);
        check(p.verdict == Verdict::kOk, "probe accepted");
        check(p.found == want.has_value(), "probe found or not");
        if (want) {
            check(id_of(p.message.payload) == want->id && p.message.source == want->source &&
                      p.message.tag == want->tag && p.message.seq == want->seq,
                  "the message a probe finds");
            totals_.mprobes_found += remove ? 1 : 0;
        }
        ++totals_.probes;
    }

    void check_counts(Comm &c) {
        if (!c.created()) {
            check(early_.count(c.context) == c.early.size(), "early count");
            return;
        }
        check(c.engine->posted_count() == c.model->posted_count(), "posted count");
        check(c.engine->unexpected_count() == c.model->unexpected_count(), "unexpected count");
        check(c.engine->held_count() == c.model->held_count(), "held count");
    }

    void finish(Comm &c) {
        for (;;) {
            bool any = false;
            for (const Sender &s : c.senders) {
                any = any || !s.in_flight.empty();
            }
            if (!any) {
                break;
            }
            deliver(c);
            check_counts(c);
        }
        check(c.engine->held_count() == 0, "nothing held once everything arrived");
        std::multiset<uintptr_t> requests, payloads, want_requests, want_payloads;
        c.engine->drain([&](void *r) { requests.insert(id_of(r)); },
                        [&](const Message &m) { payloads.insert(id_of(m.payload)); });
        for (const auto &r : c.model->posted()) {
            want_requests.insert(r.request);
        }
        for (const Msg &m : c.model->unexpected()) {
            want_payloads.insert(m.id);
        }
        check(requests == want_requests, "drained requests");
        check(payloads == want_payloads, "drained messages");
    }

    uint64_t master_;
    uint32_t iteration_;
    Rng rng_;
    Totals &totals_;
    uint32_t window_ = 1;
    uint32_t step_ = 0;
    Comm a_, b_;
    EarlyArrivals early_;
    uintptr_t next_id_ = 1;
    uintptr_t next_request_ = 1;
    std::vector<Trace> trace_;
};

} // namespace

TEST_CASE("match: randomized comparison against the reference matcher", "[match][model]") {
    uint64_t seed =
        env_u64("ROCE_MATCH_SEED",
                static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    uint64_t iterations = env_u64("ROCE_MATCH_ITERATIONS", 2000);
    std::printf("randomized matching test: seed %llu (repeat with ROCE_MATCH_SEED=%llu), "
                "%llu interleavings\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(iterations));
    std::fflush(stdout);
    INFO("ROCE_MATCH_SEED=" << seed);
    Totals t;
    for (uint64_t i = 0; i < iterations; ++i) {
        Run(seed, static_cast<uint32_t>(i), t).run();
    }
    std::printf("randomized matching test: %llu operations checked step by step: %llu arrivals "
                "(%llu held out of order, %llu before their communicator existed, %llu refused "
                "keeps), %llu refused request makes, %llu duplicates refused, %llu matched on "
                "arrival, %llu receives took an unexpected message, %llu wildcard receives, "
                "%llu probes (%llu mprobes found a message), %llu cancels\n",
                (unsigned long long)t.ops, (unsigned long long)t.arrivals,
                (unsigned long long)t.held, (unsigned long long)t.early,
                (unsigned long long)t.keep_failures, (unsigned long long)t.make_failures,
                (unsigned long long)t.duplicates,
                (unsigned long long)t.matched_on_arrival, (unsigned long long)t.matched_on_post,
                (unsigned long long)t.wildcard_posts, (unsigned long long)t.probes,
                (unsigned long long)t.mprobes_found, (unsigned long long)t.cancels);
    // Each kind of interaction must actually have happened for the run to
    // mean anything.
    CHECK(t.ops > iterations * 50);
    CHECK(t.held > 0);
    CHECK(t.early > 0);
    CHECK(t.matched_on_arrival > 0);
    CHECK(t.matched_on_post > 0);
    CHECK(t.mprobes_found > 0);
    CHECK(t.cancels > 0);
    CHECK(t.duplicates > 0);
    CHECK(t.keep_failures > 0);
    CHECK(t.make_failures > 0);
}
