// Copyright (c) 2026 ompi-roce developers. See LICENSE.
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
