// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include <limits>

#include "catch.h"
#include "util/params.h"
#include "util/strings.h"

using namespace roce::util;

TEST_CASE("split_list trims and drops empty entries", "[util][strings]") {
    CHECK(split_list("") .empty());
    CHECK(split_list(" , ,").empty());
    CHECK(split_list("a, b,,c ") == std::vector<std::string>{"a", "b", "c"});
    CHECK(split_list("mlx5_bond_0:1") == std::vector<std::string>{"mlx5_bond_0:1"});
    CHECK(split_list("x;y", ';') == std::vector<std::string>{"x", "y"});
}

TEST_CASE("parse_int accepts whole decimal or hex numbers only", "[util][strings]") {
    CHECK(parse_int("0") == 0);
    CHECK(parse_int("-7") == -7);
    CHECK(parse_int(" 42 ") == 42);
    CHECK(parse_int("0x1ee7a330") == 0x1ee7a330);
    CHECK(parse_int("+5") == 5);
    CHECK_FALSE(parse_int(""));
    CHECK_FALSE(parse_int("-"));
    CHECK_FALSE(parse_int("12abc"));
    CHECK_FALSE(parse_int("1.5"));
    CHECK_FALSE(parse_int("0x"));
    CHECK_FALSE(parse_int("99999999999999999999"));
    CHECK(parse_int("-9223372036854775808") == std::numeric_limits<int64_t>::min());
    CHECK_FALSE(parse_int("9223372036854775808"));
}

TEST_CASE("parse_uint rejects signs and overflow", "[util][strings]") {
    CHECK(parse_uint("18446744073709551615") == std::numeric_limits<uint64_t>::max());
    CHECK_FALSE(parse_uint("18446744073709551616"));
    CHECK_FALSE(parse_uint("-1"));
    CHECK(parse_uint("0xFF") == 255u);
}

TEST_CASE("format, join and hex32", "[util][strings]") {
    CHECK(format("%s:%d", "rxe0", 1) == "rxe0:1");
    CHECK(format("%s", "") == "");
    CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
    CHECK(join({}, ",") == "");
    CHECK(hex32(0x1ee7a330) == "0x1ee7a330");
    CHECK(hex32(0x80000001u) == "0x80000001");
}

TEST_CASE("check_range names the parameter, the value and the range", "[util][params]") {
    CHECK(check_range("pml_roce_priority", 5, 0, 100).is_ok());
    CHECK(check_range("pml_roce_priority", 0, 0, 100).is_ok());
    CHECK(check_range("pml_roce_priority", 100, 0, 100).is_ok());
    Status s = check_range("pml_roce_priority", 101, 0, 100);
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message() == "pml_roce_priority = 101 is invalid: allowed values are 0..100");
    s = check_range("btl_roce_gid_index", -7, -1, 65535, "-1 (automatic) or 0..65535");
    CHECK(s.message() ==
          "btl_roce_gid_index = -7 is invalid: allowed values are -1 (automatic) or 0..65535");
}

TEST_CASE("check_one_of lists the allowed names", "[util][params]") {
    CHECK(check_one_of("p", "sport", {"auto", "off", "affinity", "sport"}).is_ok());
    Status s = check_one_of("btl_roce_lag_policy", "fast", {"auto", "off"});
    CHECK(s.message() == "btl_roce_lag_policy = 'fast' is invalid: allowed values are 'auto', 'off'");
}

TEST_CASE("printable escapes every byte a terminal could act on", "[util][strings]") {
    CHECK(printable("mlx5_bond_0:1 bond0.3027") == "mlx5_bond_0:1 bond0.3027");
    CHECK(printable("a\\b") == "a\\b"); // printable ASCII, backslash included, is unchanged
    CHECK(printable("\x1b]0;owned\x07") == "\\x1b]0;owned\\x07");
    CHECK(printable(std::string("nul\0x", 5)) == "nul\\x00x");
    CHECK(printable("\x7f\x9b\xff") == "\\x7f\\x9b\\xff"); // DEL, C1 CSI, not UTF-8
    CHECK(printable("caf\xc3\xa9") == "caf\\xc3\\xa9");    // UTF-8 too: ASCII out, always
    CHECK(printable("two\nlines\r") == "two\\x0alines\\x0d");
    CHECK(printable("two\nlines\r", true) == "two\nlines\\x0d");
    // Every byte value: the result is printable ASCII (plus kept newlines).
    std::string all;
    for (int c = 0; c < 256; ++c) {
        all += static_cast<char>(c);
    }
    for (bool keep : {false, true}) {
        std::string out = printable(all, keep);
        CHECK(out.size() == 95 + 161 * 4 - (keep ? 3 : 0));
        for (char c : out) {
            CHECK(((c >= 0x20 && c < 0x7f) || (keep && c == '\n')));
        }
    }
}
