// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "catch.h"
#include "select/options.h"

using namespace roce::select;
using roce::util::Code;

namespace {
RawOptions raw() {
    RawOptions r;
    r.prefix = "btl_roce_";
    return r;
}
} // namespace

TEST_CASE("options: defaults are valid and automatic", "[select][options]") {
    auto o = parse_options(raw(), false);
    REQUIRE(o.is_ok());
    CHECK(o->include.empty());
    CHECK(o->exclude.empty());
    CHECK(o->gid_index == -1);
    CHECK(o->roce_version == RoceVersion::kAuto);
    CHECK(o->address_family == AddressFamily::kAuto);
    CHECK(o->qkey == kDefaultQkey);
    CHECK((kDefaultQkey & kControlledQkeyBit) == 0);
}

TEST_CASE("options: include rules of every form", "[select][options]") {
    RawOptions r = raw();
    r.if_include = "mlx5_bond_0, mlx5_0:2, bond0.3027, 198.18.0.0/24, 2001:db8::/64";
    auto o = parse_options(r, false);
    REQUIRE(o.is_ok());
    REQUIRE(o->include.size() == 5);
    CHECK(o->include[0].kind == InterfaceRule::Kind::kName);
    CHECK(o->include[0].name == "mlx5_bond_0");
    CHECK(o->include[1].kind == InterfaceRule::Kind::kDevicePort);
    CHECK(o->include[1].name == "mlx5_0");
    CHECK(o->include[1].port == 2);
    CHECK(o->include[2].kind == InterfaceRule::Kind::kName);
    CHECK(o->include[2].name == "bond0.3027");
    CHECK(o->include[3].kind == InterfaceRule::Kind::kSubnet);
    CHECK(o->include[3].subnet.to_string() == "198.18.0.0/24");
    CHECK(o->include[4].kind == InterfaceRule::Kind::kSubnet);
    CHECK(o->include[4].subnet.to_string() == "2001:db8::/64");
    CHECK(o->include[4].text == "2001:db8::/64");
}

TEST_CASE("options: invalid values name parameter, value and the allowed forms",
          "[select][options]") {
    struct Case {
        const char *what;
        RawOptions r;
        Code code;
        const char *message;
    };
    std::vector<Case> cases;
    {
        RawOptions r = raw();
        r.gid_index = -7;
        cases.push_back({"negative gid index", r, Code::kInvalidArgument,
                         "btl_roce_gid_index = -7 is invalid: allowed values are -1 (automatic) "
                         "or a GID table index 0..65535"});
    }
    {
        RawOptions r = raw();
        r.gid_index = 70000;
        cases.push_back({"huge gid index", r, Code::kInvalidArgument,
                         "btl_roce_gid_index = 70000 is invalid: allowed values are -1 "
                         "(automatic) or a GID table index 0..65535"});
    }
    {
        RawOptions r = raw();
        r.roce_version = 3;
        cases.push_back({"roce version 3", r, Code::kInvalidArgument,
                         "btl_roce_roce_version = 3 is invalid: allowed values are auto (prefer "
                         "v2), 1 or 2"});
    }
    {
        RawOptions r = raw();
        r.address_family = 5;
        cases.push_back({"family 5", r, Code::kInvalidArgument,
                         "btl_roce_address_family = 5 is invalid: allowed values are auto, ipv4 "
                         "or ipv6"});
    }
    {
        RawOptions r = raw();
        r.if_include = "mlx5_0";
        r.if_exclude = "bond0";
        cases.push_back({"include and exclude", r, Code::kInvalidArgument,
                         "btl_roce_if_include and btl_roce_if_exclude are both set ('mlx5_0' and "
                         "'bond0'): set only one of them"});
    }
    {
        RawOptions r = raw();
        r.if_include = "198.18.0.0/40";
        cases.push_back({"bad prefix", r, Code::kInvalidArgument,
                         "btl_roce_if_include: entry '198.18.0.0/40' is invalid: prefix length "
                         "must be 0..32 for IPv4; accepted forms are DEVICE (e.g. mlx5_bond_0), "
                         "DEVICE:PORT (e.g. mlx5_bond_0:1), NETDEV (e.g. bond0.3027) or "
                         "ADDRESS/PREFIXLEN (e.g. 198.18.0.0/24)"});
    }
    {
        RawOptions r = raw();
        r.if_exclude = "mlx5_0:0";
        cases.push_back({"port 0", r, Code::kInvalidArgument,
                         "btl_roce_if_exclude: entry 'mlx5_0:0' is invalid: the port after ':' "
                         "must be a number 1..255; accepted forms are DEVICE (e.g. mlx5_bond_0), "
                         "DEVICE:PORT (e.g. mlx5_bond_0:1), NETDEV (e.g. bond0.3027) or "
                         "ADDRESS/PREFIXLEN (e.g. 198.18.0.0/24)"});
    }
    {
        RawOptions r = raw();
        r.qkey = 0x80000001LL;
        cases.push_back({"controlled qkey unprivileged", r, Code::kPermissionDenied,
                         "btl_roce_qkey = 0x80000001 is invalid for this process: bit 31 is set "
                         "(a controlled qkey), which the kernel refuses with 'Operation not "
                         "permitted' unless the process has CAP_NET_RAW; use a qkey below "
                         "0x80000000, e.g. the default 0x1ee7a330"});
    }
    {
        RawOptions r = raw();
        r.qkey = 0;
        cases.push_back({"qkey zero", r, Code::kInvalidArgument,
                         "btl_roce_qkey = 0 is invalid: allowed values are 1..0xffffffff (bit 31 "
                         "only for privileged processes)"});
    }
    for (const auto &c : cases) {
        SECTION(c.what) {
            auto o = parse_options(c.r, false);
            REQUIRE_FALSE(o.is_ok());
            CHECK(o.status().code() == c.code);
            CHECK(o.status().message() == c.message);
        }
    }
}

TEST_CASE("options: odd list entries are refused with the reason", "[select][options]") {
    auto check_refused = [](const char *text, const char *why) {
        auto rules = parse_rules("btl_roce_if_include", text);
        INFO(text);
        REQUIRE_FALSE(rules.is_ok());
        CHECK(rules.status().message().find(why) != std::string::npos);
    };
    check_refused("198.18.0.1", "an address needs a prefix length");
    check_refused("fe80::1", "an address needs a prefix length");
    check_refused("eth0;rm -rf", "names may contain only");
    check_refused("mlx5_0:abc", "the port after ':' must be a number 1..255");
    check_refused(":1", "'' is not a device name");
    check_refused("bond0/24", "'bond0' is not an IPv4 or IPv6 address");
    auto empty = parse_rules("btl_roce_if_include", " , ");
    REQUIRE(empty.is_ok());
    CHECK(empty->empty());
}

TEST_CASE("options: a controlled qkey is allowed for privileged processes",
          "[select][options]") {
    RawOptions r = raw();
    r.qkey = 0x80010000LL;
    auto o = parse_options(r, true);
    REQUIRE(o.is_ok());
    CHECK(o->qkey == 0x80010000u);
}
