// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include <string>

#include "catch.h"
#include "util/log.h"
#include "util/rate_limit.h"

using roce::util::CaptureSink;
using roce::util::RateLimiter;

TEST_CASE("rate limit: one line per key per interval, carrying the count", "[util][ratelimit]") {
    RateLimiter r(10.0, 4);
    CHECK(r.hit("a", 0.0) == 1);
    for (int i = 0; i < 999; ++i) {
        CHECK(r.hit("a", 0.001 * i) == 0);
    }
    CHECK(r.hit("b", 1.0) == 1); // keys are independent
    // The first event after the interval reports itself and the 999 suppressed.
    CHECK(r.hit("a", 10.5) == 1000);
    CHECK(r.hit("a", 11.0) == 0);
    CHECK(r.total() == 1003);
}

TEST_CASE("rate limit: varying the key cannot grow memory or the log", "[util][ratelimit]") {
    RateLimiter r(10.0, 4);
    size_t lines = 0;
    for (int i = 0; i < 100000; ++i) {
        lines += r.hit("key " + std::to_string(i), 1.0) > 0 ? 1 : 0;
    }
    CHECK(r.keys() <= 5); // 4 keys and the overflow key
    CHECK(lines == 5);    // 4 first lines and one for everything else
    // Later, the stale keys make room again.
    CHECK(r.hit("fresh", 20.0) == 1);
    CHECK(r.keys() <= 5);
}

TEST_CASE("rate limit: warn() writes the line with the count", "[util][ratelimit]") {
    RateLimiter r(10.0, 4);
    CaptureSink log;
    CHECK(r.warn(log, "k", 0.0, "dropped x"));
    CHECK_FALSE(r.warn(log, "k", 1.0, "dropped x"));
    CHECK_FALSE(r.warn(log, "k", 2.0, "dropped x"));
    CHECK(r.warn(log, "k", 12.0, "dropped x"));
    REQUIRE(log.lines().size() == 2);
    CHECK(log.lines()[0].text == "dropped x");
    CHECK(log.lines()[1].text == "dropped x (3 such since the last report)");
    CHECK(log.lines()[1].level == roce::util::LogLevel::kWarn);
}
