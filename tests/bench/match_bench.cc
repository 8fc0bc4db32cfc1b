// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// match_bench: cost of the pml's matching engine with many posted receives or
// many unexpected messages, in the cases where ob1's linear search is worst
// (the message matches the LAST posted receive; the receive matches the LAST
// unexpected message). Results and exact commands: docs/perf/matching.md.
//
// usage: match_bench [--reps R] [--sizes N,N,...] [--case NAME] [--callgrind]
//   --reps R       timed repetitions per case and size (default 201; median reported)
//   --sizes        queue lengths (default 100,1000,10000)
//   --case NAME    run only the case named NAME
//   --callgrind    print how many operations the measured phases (the functions
//                  named measure_*) ran in total instead of timings, to divide
//                  the instructions callgrind collects with
//                  --toggle-collect='*measure_*' by (one case and size per run)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "match/comm_matcher.h"

using namespace roce::pml::match;

namespace {

constexpr int32_t kSources = 64;

int g_bad = 0; // any surprise outcome: the numbers would be meaningless

void *fake(uintptr_t v) {
    return reinterpret_cast<void *>(v);
}

/// One communicator plus the sender-side sequence numbers the bench keeps
/// consistent, and the keys in the order they were posted or arrived.
struct Fixture {
    std::unique_ptr<CommMatcher> m;
    std::vector<Seq> next_seq = std::vector<Seq>(kSources, 0);
    std::vector<int32_t> tags; // posting / arrival order; back() is the last
    int32_t next_tag = 0;
    bool wild_source = false;

    explicit Fixture(bool any_source) : m(new CommMatcher(kSources)), wild_source(any_source) {}

    static int32_t source_of(int32_t tag) { return tag % kSources; }

    Arrival arrive(int32_t tag) {
        int32_t s = source_of(tag);
        return m->arrive(Envelope{s, tag, next_seq[s]++}, []() { return fake(2); });
    }
    void post_fresh() {
        int32_t tag = next_tag++;
        Posting p = m->post(wild_source ? kAnySource : source_of(tag), tag, fake(1));
        g_bad += p.matched || p.verdict != Verdict::kOk;
        tags.push_back(tag);
    }
    void arrive_fresh() {
        int32_t tag = next_tag++;
        g_bad += arrive(tag).kind != ArrivalKind::kQueued;
        tags.push_back(tag);
    }
};

// The measured phases. noinline and named measure_* so that callgrind can
// count exactly their instructions (--toggle-collect='measure_*').

/// k messages arrive, each matching the most recently posted receive.
__attribute__((noinline)) void measure_match_last_posted(Fixture &f, int k) {
    for (int i = 0; i < k; ++i) {
        int32_t tag = f.tags.back();
        f.tags.pop_back();
        g_bad += f.arrive(tag).kind != ArrivalKind::kMatched;
    }
}

/// k receives are posted, each matching the most recently arrived message.
__attribute__((noinline)) void measure_post_last_unexpected(Fixture &f, int k) {
    for (int i = 0; i < k; ++i) {
        int32_t tag = f.tags.back();
        f.tags.pop_back();
        Posting p = f.m->post(f.wild_source ? kAnySource : Fixture::source_of(tag), tag, fake(1));
        g_bad += !p.matched;
    }
}

/// Steady state with n posted: a message matches the last posted receive,
/// then a new receive is posted (so n stay posted).
__attribute__((noinline)) void measure_match_and_repost(Fixture &f, int k) {
    for (int i = 0; i < k; ++i) {
        int32_t tag = f.tags.back();
        f.tags.pop_back();
        g_bad += f.arrive(tag).kind != ArrivalKind::kMatched;
        f.post_fresh();
    }
}

/// Steady state with n unexpected: a receive takes the last unexpected
/// message, then a new message arrives unexpected.
__attribute__((noinline)) void measure_take_and_rearrive(Fixture &f, int k) {
    for (int i = 0; i < k; ++i) {
        int32_t tag = f.tags.back();
        f.tags.pop_back();
        Posting p = f.m->post(f.wild_source ? kAnySource : Fixture::source_of(tag), tag, fake(1));
        g_bad += !p.matched;
        f.arrive_fresh();
    }
}

/// Ping-pong on one key next to n other posted receives: a receive for
/// (0, -7) is posted, then its message arrives (the common small-message
/// path, where a (source, tag) pair is used again and again).
__attribute__((noinline)) void measure_post_then_match_same_key(Fixture &f, int k) {
    for (int i = 0; i < k; ++i) {
        Posting p = f.m->post(0, -7, fake(1));
        g_bad += p.matched;
        g_bad += f.m->arrive(Envelope{0, -7, f.next_seq[0]++}, []() { return fake(2); }).kind !=
                 ArrivalKind::kMatched;
    }
}

struct Case {
    const char *name;
    const char *what;
    bool unexpected; // queue of unexpected messages (else posted receives)
    bool any_source; // receives are (ANY_SOURCE, tag)
    bool steady;     // pair with a refill (else the measured op alone)
    bool same_key = false;
};

const Case kCases[] = {
    {"posted", "message matches the last of N posted (src,tag) receives", false, false, false},
    {"posted-steady", "same, plus re-posting one receive (N stay posted)", false, false, true},
    {"unexpected", "receive (src,tag) takes the last of N unexpected", true, false, false},
    {"unexpected-steady", "same, plus one new unexpected arrival (N stay)", true, false, true},
    {"posted-anysrc", "message matches the last of N (ANY_SOURCE,tag) receives", false, true,
     false},
    {"unexpected-anysrc", "receive (ANY_SOURCE,tag) takes the last of N unexpected", true, true,
     false},
    {"same-key", "post (src,tag) then its message arrives, next to N posted", false, false, true,
     true},
};

double now_ns() {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// Fills the queue to n, then per repetition times k operations, refilling
/// untimed afterwards so every repetition starts with n queued.
std::vector<double> run_case(const Case &c, int n, int reps, bool callgrind) {
    Fixture f(c.any_source);
    for (int i = 0; i < n; ++i) {
        c.unexpected ? f.arrive_fresh() : f.post_fresh();
    }
    // The one-op cases shrink the queue while timing: k = n/10 (at least 10)
    // keeps it within 90..100% of n.
    int k = c.steady ? 1000 : std::max(10, n / 10);
    std::vector<double> per_op;
    long total_ops = 0;
    for (int r = 0; r < reps + 5; ++r) {
        double t0 = now_ns();
        if (c.same_key) {
            measure_post_then_match_same_key(f, k);
        } else if (c.steady) {
            c.unexpected ? measure_take_and_rearrive(f, k) : measure_match_and_repost(f, k);
        } else {
            c.unexpected ? measure_post_last_unexpected(f, k) : measure_match_last_posted(f, k);
        }
        double t1 = now_ns();
        total_ops += k;
        if (!c.steady) {
            for (int i = 0; i < k; ++i) {
                c.unexpected ? f.arrive_fresh() : f.post_fresh();
            }
        }
        if (r >= 5) { // the first repetitions warm caches and pools up
            per_op.push_back((t1 - t0) / k);
        }
    }
    if (callgrind) {
        std::printf("%s N=%d: measured operations %ld\n", c.name, n, total_ops);
    }
    std::size_t queued = c.unexpected ? f.m->unexpected_count() : f.m->posted_count();
    g_bad += queued != static_cast<std::size_t>(n);
    return per_op;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

} // namespace

int main(int argc, char **argv) {
    int reps = 201;
    std::vector<int> sizes = {100, 1000, 10000};
    std::string only;
    bool callgrind = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--reps" && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else if (a == "--sizes" && i + 1 < argc) {
            sizes.clear();
            for (char *t = std::strtok(argv[++i], ","); t != nullptr;
                 t = std::strtok(nullptr, ",")) {
                sizes.push_back(std::atoi(t));
            }
        } else if (a == "--case" && i + 1 < argc) {
            only = argv[++i];
        } else if (a == "--callgrind") {
            callgrind = true;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--reps R] [--sizes N,N,...] [--case NAME] "
                         "[--callgrind]\n",
                         argv[0]);
            return 2;
        }
    }
    if (reps < 1 || sizes.empty()) {
        std::fprintf(stderr, "match_bench: --reps must be >= 1 and --sizes non-empty\n");
        return 2;
    }
    if (!callgrind) {
        std::printf("match_bench: ns per operation, median (p10..p90) of %d repetitions\n", reps);
        std::printf("%-18s %7s %9s %20s  %s\n", "case", "N", "median", "p10..p90", "what");
    }
    for (const Case &c : kCases) {
        if (!only.empty() && only != c.name) {
            continue;
        }
        for (int n : sizes) {
            std::vector<double> v = run_case(c, n, reps, callgrind);
            if (!callgrind) {
                char range[64];
                std::snprintf(range, sizeof range, "%.1f..%.1f", percentile(v, 0.1),
                              percentile(v, 0.9));
                std::printf("%-18s %7d %9.1f %20s  %s\n", c.name, n, percentile(v, 0.5), range,
                            c.what);
                std::fflush(stdout);
            }
        }
    }
    if (g_bad != 0) {
        std::fprintf(stderr,
                     "match_bench: %d operations did not behave as the case assumes; "
                     "the numbers above are invalid\n",
                     g_bad);
        return 1;
    }
    return 0;
}
