// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include <chrono>
#include <cstdio>
#include <string>

#include "bounded.h"
#include "catch.h"
#include "util/json.h"

using roce::util::Json;

TEST_CASE("json: parses what ip -j prints and writes it back", "[util][json]") {
    auto doc = Json::parse(R"([{"ifindex":5,"ifname":"bond0","flags":["UP","LOWER_UP"],)"
                           R"("mtu":9000,"linkinfo":{"info_kind":"bond","info_data":)"
                           R"({"mode":"802.3ad","arp_validate":null,"ad_info":{"num_ports":2}}},)"
                           R"("valid_life_time":4294967295,"ratio":0.5,"up":true}])");
    REQUIRE(doc.is_ok());
    const Json &e = doc->items().at(0);
    CHECK(e.find("ifindex")->as_int() == 5);
    CHECK(e.find("ifname")->as_string() == "bond0");
    CHECK(e.find("flags")->items().size() == 2);
    CHECK(e.find("valid_life_time")->as_int() == 4294967295LL);
    CHECK(e.find("ratio")->as_number() == 0.5);
    CHECK(e.find("ratio")->as_int(-1) == -1); // not an integer
    CHECK(e.find("up")->as_bool());
    const Json *info = e.find("linkinfo")->find("info_data");
    REQUIRE(info != nullptr);
    CHECK(info->find("arp_validate")->is_null());
    CHECK(info->find("ad_info")->find("num_ports")->as_int() == 2);
    CHECK(e.find("missing") == nullptr);
    // Round trip: dump then parse gives the same value, keys in order.
    auto again = Json::parse(doc->dump(2));
    REQUIRE(again.is_ok());
    CHECK(*again == *doc);
    CHECK(doc->dump().substr(0, 30) == R"([{"ifindex":5,"ifname":"bond0")");
}

TEST_CASE("json: strings, escapes and surrogate pairs", "[util][json]") {
    auto s = Json::parse(R"("a\"b\\c\/d\n\u00e9\ud83d\ude00")");
    REQUIRE(s.is_ok());
    CHECK(s->as_string() == "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80");
    CHECK(Json("tab\there\x01").dump() == R"("tab\there\u0001")");
}

TEST_CASE("json: building objects keeps insertion order", "[util][json]") {
    Json o = Json::object();
    o["b"] = 1;
    o["a"] = Json::array();
    o["a"].push("x");
    o["a"].push(nullptr);
    o["b"] = 2; // replaces, keeps position
    CHECK(o.dump() == R"({"b":2,"a":["x",null]})");
    CHECK(o.dump(2) == "{\n  \"b\": 2,\n  \"a\": [\n    \"x\",\n    null\n  ]\n}");
    CHECK(Json::object().dump(2) == "{}");
}

TEST_CASE("json: errors name the byte offset and what was expected", "[util][json]") {
    struct Case {
        const char *text;
        const char *message;
    } cases[] = {
        {"", "malformed JSON at byte 0: expected a value (found end of input)"},
        {"[1,]", "malformed JSON at byte 3: expected a value (object, array, string, number, "
                 "true, false or null) (found ']')"},
        {"{\"a\" 1}", "malformed JSON at byte 5: expected ':' after a member name (found '1')"},
        {"[1] x", "malformed JSON at byte 4: expected end of input (found 'x')"},
        {"\"abc", "malformed JSON at byte 4: expected a closing '\"' (found end of input)"},
        {"\"\\q\"", "malformed JSON at byte 2: expected one of \" \\ / b f n r t u after '\\' "
                    "(found 'q')"},
        {"\"\\ud800\"", "malformed JSON at byte 7: expected a low surrogate \\uDC00..\\uDFFF "
                        "after a high surrogate (found '\"')"},
        {"1.", "malformed JSON at byte 2: expected digits after '.' (found end of input)"},
        {"tru", "malformed JSON at byte 0: expected a value (object, array, string, number, "
                "true, false or null) (found 't')"},
    };
    for (const auto &c : cases) {
        INFO(c.text);
        auto r = Json::parse(c.text);
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message() == c.message);
    }
    std::string deep(100, '[');
    auto r = Json::parse(deep);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("nesting limit") != std::string::npos);
}

namespace {

/// The shortest distinct member names, in order: every 1-character name, then
/// every 2-character one, ... (printable ASCII without '"' and '\\').
std::string nth_key(size_t n) {
    static const std::string alphabet = [] {
        std::string a;
        for (char c = 0x20; c < 0x7f; ++c) {
            if (c != '"' && c != '\\') {
                a += c;
            }
        }
        return a;
    }();
    const size_t k = alphabet.size();
    size_t len = 1, count = k;
    while (n >= count) {
        n -= count;
        ++len;
        count *= k;
    }
    std::string key(len, alphabet[0]);
    for (size_t i = len; i-- > 0;) {
        key[i] = alphabet[n % k];
        n /= k;
    }
    return key;
}

} // namespace

TEST_CASE("json: a 4 MiB object with as many members as fit parses, in O(n log n) not O(n^2)",
          "[util][json][limits]") {
    // The readers cap a file at 4 MiB; the worst case for an object is the
    // most members that fit: {"a":0,"b":0,...} with the shortest names.
    const size_t cap = 4u << 20;
    std::string text = "{";
    size_t keys = 0;
    for (;; ++keys) {
        std::string member = (keys ? ",\"" : "\"") + nth_key(keys) + "\":0";
        if (text.size() + member.size() + 1 > cap) {
            break;
        }
        text += member;
    }
    text += "}";
    REQUIRE(text.size() <= cap);
    REQUIRE(keys > 500000);
    auto r = roce::testing::run_bounded(
        [&](std::string &out) {
            const double cpu = roce::testing::thread_cpu_seconds();
            auto start = std::chrono::steady_clock::now();
            auto doc = Json::parse(text);
            double wall =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            out = std::to_string(roce::testing::thread_cpu_seconds() - cpu) + " " +
                  std::to_string(wall);
            if (!doc || doc->members().size() != keys) {
                return 1;
            }
            // Every member is found, first, middle and last.
            for (size_t i : {size_t{0}, keys / 2, keys - 1}) {
                const Json *v = doc->find(nth_key(i));
                if (v == nullptr || v->as_int(-1) != 0) {
                    return 2;
                }
            }
            return 0;
        },
        60.0);
    INFO(keys << " members, " << text.size() << " bytes");
    REQUIRE(r.finished);
    CHECK(r.exit_code == 0);
    double cpu = 0, wall = 0;
    REQUIRE(std::sscanf(r.output.c_str(), "%lf %lf", &cpu, &wall) == 2);
    WARN("json: " << keys << " members in " << text.size() << " bytes parsed in " << cpu
                  << " s of CPU (" << wall << " s of wall time on this machine)");
    // Not a performance target (that would be a benchmark): a guard against
    // the quadratic parse (a scan of the members so far at every member),
    // which needs minutes of CPU here - about 1.4e11 name comparisons. The
    // O(n log n) parse takes 1.0-1.3 s of CPU on these machines, quiet; the
    // limit is an order of magnitude from both, in CPU time, which other
    // processes on a loaded machine do not stretch. (It was 1 s, and failed
    // at 1.25 s on a quiet machine.)
    CHECK(cpu < 12.0 * roce::testing::kSlowdown);
}

TEST_CASE("json: a repeated member name keeps the first position and the last value",
          "[util][json]") {
    for (size_t extra : {size_t{0}, Json::kIndexFrom + 5}) {
        INFO("members before the repeat: " << extra);
        std::string text = "{\"a\":1,\"b\":2";
        for (size_t i = 0; i < extra; ++i) {
            text += ",\"k" + std::to_string(i) + "\":0";
        }
        text += ",\"a\":3}";
        auto doc = Json::parse(text);
        REQUIRE(doc.is_ok());
        CHECK(doc->members().size() == 2 + extra);
        CHECK(doc->members().front().first == "a");
        CHECK(doc->find("a")->as_int() == 3);
        CHECK(doc->dump().rfind("{\"a\":3,\"b\":2", 0) == 0);
    }
}

TEST_CASE("json: large objects are indexed, and copies keep working", "[util][json]") {
    Json o = Json::object();
    for (int i = 0; i < 1000; ++i) {
        o["k" + std::to_string(i)] = i;
    }
    o["k7"] = "seven"; // replaces in place
    REQUIRE(o.members().size() == 1000);
    Json copy = o;
    o["k999"] = false;
    for (const Json *j : {&o, &copy}) {
        CHECK(j->find("k0")->as_int() == 0);
        CHECK(j->find("k7")->as_string() == "seven");
        CHECK(j->find("k1000") == nullptr);
        CHECK(j->members()[7].first == "k7");
    }
    CHECK(o.find("k999")->is_bool());
    CHECK(copy.find("k999")->as_int() == 999);
    Json assigned;
    assigned = copy;
    assigned["new"] = 1;
    CHECK(assigned.members().size() == 1001);
    CHECK(copy.find("new") == nullptr);
    CHECK(assigned.find("new")->as_int() == 1);
    auto again = Json::parse(o.dump());
    REQUIRE(again.is_ok());
    CHECK(*again == o);
}

TEST_CASE("json: numbers beyond a double are an error, not an infinity", "[util][json]") {
    for (const char *text : {"1e400", "-1e400", "[1,2e999]"}) {
        INFO(text);
        auto r = Json::parse(text);
        REQUIRE_FALSE(r.is_ok());
        CHECK_THAT(r.status().message(),
                   contains_text("expected a number within the range of a double"));
    }
    auto tiny = Json::parse("1e-400"); // underflow is a plain 0
    REQUIRE(tiny.is_ok());
    CHECK(tiny->as_number() == 0);
    CHECK(Json(1e308 * 10).dump() == "null"); // only code can make one
}

TEST_CASE("json: dump writes valid UTF-8 with no raw control characters", "[util][json]") {
    CHECK(Json("del\x7f").dump() == R"("del\u007f")");
    CHECK(Json("c1\xc2\x9b[31m").dump() == R"("c1\u009b[31m")");                      // U+009B CSI
    CHECK(Json("caf\xc3\xa9 \xe2\x82\xac").dump() == "\"caf\xc3\xa9 \xe2\x82\xac\""); // kept
    CHECK(Json("bad\xff\xc3").dump() == "\"bad\xef\xbf\xbd\xef\xbf\xbd\"");           // U+FFFD each
    CHECK(Json("\xed\xa0\x80").dump() == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); // surrogate
    CHECK(Json("\xc0\xaf").dump() == "\"\xef\xbf\xbd\xef\xbf\xbd\"");                 // overlong
    // dump(parse(dump())) == dump(), whatever the bytes.
    for (const char *s : {"bad\xff", "\x1b[2J", "\xc2\x80", "ok"}) {
        std::string d = Json(s).dump();
        auto p = Json::parse(d);
        REQUIRE(p.is_ok());
        CHECK(p->dump() == d);
    }
}

TEST_CASE("json: integers near and past int64 print the same after a round trip", "[util][json]") {
    for (const char *text : {"-821982948586909184", "9223372036854775807", "-9223372036854775808",
                             "12345678901234567890123", "1e17"}) {
        INFO(text);
        auto a = Json::parse(text);
        REQUIRE(a.is_ok());
        auto b = Json::parse(a->dump());
        REQUIRE(b.is_ok());
        CHECK(b->dump() == a->dump());
        CHECK(*b == *a);
    }
    CHECK(Json::parse("-821982948586909184")->dump() == "-821982948586909184");
    // 2^63 and above are not converted to long long (undefined): a double.
    CHECK(Json(static_cast<uint64_t>(1) << 63).dump() == "9.2233720368547758e+18");
    CHECK(Json(INT64_MAX).dump() == "9.2233720368547758e+18");
}
