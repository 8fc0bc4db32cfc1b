// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Fuzz target: util::Json. Random values must survive dump -> parse exactly;
// mutated `ip -j` output and random bytes must parse into a value whose dump
// is clean and stable, or fail with a clean, printable error - quickly.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <regex>

#include "bounded.h"
#include "catch.h"
#include "fixtures.h"
#include "fuzz_util.h"
#include "topo/fs.h"
#include "util/json.h"
#include "util/strings.h"

using roce::util::Json;
using namespace roce::testing::fuzz;

namespace {

/// The test's own UTF-8 encoder: an oracle shares no code with what it checks.
void put_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
        return;
    }
    const size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char kLead[] = {0, 0, 0xc0, 0xe0, 0xf0};
    char b[4];
    for (size_t i = n - 1; i > 0; --i, cp >>= 6) {
        b[i] = static_cast<char>(0x80 | (cp & 0x3f));
    }
    b[0] = static_cast<char>(kLead[n] | cp);
    out.append(b, n);
}

/// A valid UTF-8 string that likes the characters JSON must escape.
std::string random_text(Rng &r) {
    std::string s;
    for (int64_t i = 0, n = r.range(0, 12); i < n; ++i) {
        uint32_t cp;
        switch (r.below(6)) {
        case 0:
            cp = static_cast<uint32_t>(r.below(0x20));
            break; // C0
        case 1:
            cp = r.pick(std::vector<uint32_t>{'"', '\\', '/', 0x7f});
            break;
        case 2:
            cp = static_cast<uint32_t>(r.range(0x80, 0x9f));
            break; // C1
        case 3:
            cp = static_cast<uint32_t>(r.range(0xa0, 0xd7ff));
            break;
        case 4:
            cp = static_cast<uint32_t>(r.range(0x10000, 0x10ffff));
            break;
        default:
            cp = static_cast<uint32_t>(r.range(0x20, 0x7e));
            break;
        }
        put_utf8(s, cp);
    }
    return s;
}

Json random_number(Rng &r) {
    switch (r.below(5)) {
    case 0:
        return Json(static_cast<int64_t>(r.range(-1000, 100000)));
    case 1: {
        const auto v = static_cast<int64_t>(r.next() >> (1 + r.below(63))); // < 2^63
        return Json(r.chance(50) ? v : -v);
    }
    case 4:
        return Json(static_cast<int64_t>(r.chance(50) ? INT64_MAX : INT64_MIN));
    case 2: {
        double d = 0;
        uint64_t bits = r.next();
        std::memcpy(&d, &bits, sizeof(d));
        return Json(std::isfinite(d) ? d : 0.5);
    }
    default:
        return Json(static_cast<double>(r.range(-100000, 100000)) / 64.0);
    }
}

/// A random value built through the API (so every string is valid UTF-8).
Json random_value(Rng &r, int depth) {
    switch (r.below(depth >= 4 ? 4 : 6)) {
    case 0:
        return Json();
    case 1:
        return Json(r.chance(50));
    case 2:
        return random_number(r);
    case 3:
        return Json(random_text(r));
    case 4: {
        Json a = Json::array();
        for (int64_t i = 0, n = r.range(0, 5); i < n; ++i) {
            a.push(random_value(r, depth + 1));
        }
        return a;
    }
    default: {
        Json o = Json::object();
        // Sometimes more members than kIndexFrom, so the index is exercised;
        // repeated names replace.
        int64_t n = r.chance(20) ? r.range(15, 40) : r.range(0, 6);
        for (int64_t i = 0; i < n; ++i) {
            std::string key = r.chance(30) ? std::to_string(r.below(8)) : random_text(r);
            o[key] = random_value(r, depth + 1);
        }
        return o;
    }
    }
}

bool strings_are_utf8(const Json &v) {
    switch (v.type()) {
    case Json::Type::kString:
        return is_utf8(v.as_string());
    case Json::Type::kArray:
        return std::all_of(v.items().begin(), v.items().end(), strings_are_utf8);
    case Json::Type::kObject:
        return std::all_of(v.members().begin(), v.members().end(), [](const auto &m) {
            return is_utf8(m.first) && strings_are_utf8(m.second);
        });
    default:
        return true;
    }
}

/// Every member is found by its own name, at its own position (the index and
/// the member list agree), and names are unique.
bool lookups_agree(const Json &v) {
    for (const auto &x : v.items()) {
        if (!lookups_agree(x)) {
            return false;
        }
    }
    const auto &m = v.members();
    for (size_t i = 0; i < m.size(); ++i) {
        if (v.find(m[i].first) != &m[i].second || !lookups_agree(m[i].second)) {
            return false;
        }
    }
    return true;
}

std::string without_newlines(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
    return s;
}

/// The properties of one parse of `text`; "" when they hold.
std::string check_parse(const std::string &text) {
    auto doc = Json::parse(text);
    if (!doc) {
        const std::string msg = doc.status().message();
        static const std::regex kForm("malformed JSON at byte ([0-9]+): expected .+");
        std::smatch m;
        if (doc.status().code() != roce::util::Code::kInvalidArgument ||
            !std::regex_match(msg, m, kForm) || std::stoull(m[1]) > text.size() ||
            !is_printable(msg)) {
            return "bad error: " + msg;
        }
        return "";
    }
    if (!lookups_agree(*doc)) {
        return "find() disagrees with members()";
    }
    const std::string d = doc->dump();
    if (!is_clean_utf8(d)) {
        return "dump is not clean UTF-8: " + d;
    }
    auto again = Json::parse(d);
    if (!again) {
        return "dump does not parse: " + again.status().message() + " in " + d;
    }
    if (again->dump() != d) {
        return "dump(parse(dump)) != dump: " + d;
    }
    if (strings_are_utf8(*doc) && !(*again == *doc)) {
        return "parse(dump) != value: " + d;
    }
    auto pretty = Json::parse(doc->dump(2));
    if (!pretty || pretty->dump() != d || !is_clean_utf8(without_newlines(doc->dump(2)))) {
        return "pretty dump differs: " + doc->dump(2);
    }
    return "";
}

std::vector<std::string> seeds() {
    std::vector<std::string> out;
    for (const char *fix : {"mlx5_lag", "mlx4_two_ports", "rxe_bond", "mlx5_ipv6_only"}) {
        for (const char *f : {"/ip-link.json", "/ip-addr.json"}) {
            auto t = roce::topo::fs::read_text(roce::testing::fixture_dir(fix) + f);
            REQUIRE(t.is_ok());
            out.push_back(*t);
        }
    }
    for (const char *s : {"{}", "[]", "\"\\ud83d\\ude00\\u0000\\u001b\"", "-0.0e-0",
                          "[1e308,-1e-308,123456789012345678,1234567890123456789]",
                          "{\"a\":{\"a\":{\"a\":[[[[null]]]]}}}", "[true,false,null]",
                          "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""}) {
        out.emplace_back(s);
    }
    return out;
}

const std::vector<std::string> kDict = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u",
    "\\ud800",
    "\\udc00",
    "\\u0000",
    "true",
    "false",
    "null",
    "-",
    "0",
    "1e",
    "1e400",
    ".5",
    "E+",
    "\"ifname\":",
    "\"ifindex\":",
    "\x1b",
    "\x7f",
    "\xc2\x9b",
    "\xff",
    "\xed\xa0\x80",
    "  ",
    "\n",
    "\t",
};

} // namespace

TEST_CASE("fuzz json: random values survive dump and parse exactly", "[fuzz][json]") {
    Rng r(seed(0x6a736f6e01));
    const size_t n = cases(4000);
    for (size_t i = 0; i < n; ++i) {
        Json v = random_value(r, 0);
        const std::string d = v.dump();
        INFO("case " << i << ": " << d);
        REQUIRE(is_clean_utf8(d));
        auto p = Json::parse(d);
        REQUIRE(p.is_ok());
        REQUIRE(*p == v);
        REQUIRE(p->dump() == d);
        REQUIRE(lookups_agree(*p));
        auto pretty = Json::parse(v.dump(2));
        REQUIRE(pretty.is_ok());
        REQUIRE(*pretty == v);
    }
}

TEST_CASE("fuzz json: mutated ip -j output and random bytes parse cleanly or fail cleanly",
          "[fuzz][json]") {
    Rng r(seed(0x6a736f6e02));
    const std::vector<std::string> corpus = seeds();
    const size_t n = cases(12000);
    // A parse is linear in its input; a case (at most 64 KiB) taking a
    // quarter of a second means something is not.
    const double slow = 0.25 * roce::testing::kSlowdown; // CPU seconds
    size_t ok = 0;
    for (size_t i = 0; i < n; ++i) {
        std::string text;
        if (r.chance(15)) {
            text = random_bytes(r, 256, "{}[],:\"\\0123456789.eE+-truefalsn ");
        } else {
            text = mutate(r.pick(corpus), r, kDict, r.pick(corpus), 64 << 10, 3);
        }
        const double start = roce::testing::thread_cpu_seconds();
        std::string bad = check_parse(text);
        const double took = roce::testing::thread_cpu_seconds() - start;
        INFO("case " << i << " (seed " << seed(0x6a736f6e02)
                     << "), input: " << roce::util::printable(text.substr(0, 300)));
        REQUIRE(bad == "");
        REQUIRE(took < slow);
        ok += Json::parse(text).is_ok();
    }
    // The mutations must reach both outcomes, or the target tests little.
    CHECK(ok > n / 20);
    CHECK(ok < n - n / 20);
}

TEST_CASE("fuzz json: nesting at and past the limit", "[fuzz][json]") {
    Rng r(seed(0x6a736f6e03));
    for (int depth = 60; depth <= 70; ++depth) {
        std::string open, close;
        for (int i = 0; i < depth; ++i) {
            bool obj = r.chance(50);
            open += obj ? "{\"k\":" : "[";
            close.insert(0, obj ? "}" : "]");
        }
        auto p = Json::parse(open + "0" + close);
        INFO("depth " << depth);
        CHECK(p.is_ok() == (depth <= 64));
        CHECK(check_parse(open + "0" + close) == "");
    }
}
