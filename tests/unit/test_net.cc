// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "catch.h"
#include "util/net.h"

using roce::util::IpAddress;
using roce::util::Subnet;

TEST_CASE("IpAddress parses and prints IPv4 and IPv6", "[util][net]") {
    auto a = IpAddress::parse("172.26.92.74");
    REQUIRE(a);
    CHECK(a->is_v4());
    CHECK(a->bits() == 32);
    CHECK(a->to_string() == "172.26.92.74");

    auto b = IpAddress::parse("fe80::1:2");
    REQUIRE(b);
    CHECK(b->is_v6());
    CHECK(b->is_link_local());
    CHECK(b->to_string() == "fe80::1:2");

    CHECK_FALSE(IpAddress::parse("300.1.1.1"));
    CHECK_FALSE(IpAddress::parse("bond0"));
    CHECK_FALSE(IpAddress::parse(""));
    CHECK(IpAddress().empty());
}

TEST_CASE("IpAddress converts to and from RoCE GIDs", "[util][net]") {
    auto a = *IpAddress::parse("198.18.0.1");
    auto gid = a.to_gid();
    std::array<uint8_t, 16> expect{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1};
    CHECK(gid == expect);
    CHECK(IpAddress::from_gid(gid) == a);

    auto v6 = *IpAddress::parse("2001:db8::5");
    CHECK(IpAddress::from_gid(v6.to_gid()) == v6);

    std::array<uint8_t, 16> zero{};
    CHECK(IpAddress::from_gid(zero).is_zero());
    CHECK_FALSE(a.is_zero());
}

TEST_CASE("Subnet parses, masks and tests membership", "[util][net]") {
    std::string why;
    auto s = Subnet::parse("198.18.0.77/24", &why);
    REQUIRE(s);
    CHECK(s->to_string() == "198.18.0.0/24");
    CHECK(s->contains(*IpAddress::parse("198.18.0.1")));
    CHECK_FALSE(s->contains(*IpAddress::parse("198.19.0.1")));
    // Textual IPv6 (even IPv4-mapped) is another family: use from_gid() for GIDs.
    CHECK_FALSE(s->contains(*IpAddress::parse("::ffff:198.18.0.1")));

    auto odd = Subnet::parse("10.1.2.3/13");
    REQUIRE(odd);
    CHECK(odd->to_string() == "10.0.0.0/13");
    CHECK(odd->contains(*IpAddress::parse("10.7.255.255")));
    CHECK_FALSE(odd->contains(*IpAddress::parse("10.8.0.0")));

    auto v6 = Subnet::parse("2001:db8:1::/48");
    REQUIRE(v6);
    CHECK(v6->contains(*IpAddress::parse("2001:db8:1:ffff::1")));
    CHECK_FALSE(v6->contains(*IpAddress::parse("198.18.0.1")));

    auto all = Subnet::parse("0.0.0.0/0");
    REQUIRE(all);
    CHECK(all->contains(*IpAddress::parse("8.8.8.8")));

    CHECK_FALSE(Subnet::parse("198.18.0.0/33", &why));
    CHECK(why == "prefix length must be 0..32 for IPv4");
    CHECK_FALSE(Subnet::parse("2001:db8::/129", &why));
    CHECK(why == "prefix length must be 0..128 for IPv6");
    CHECK_FALSE(Subnet::parse("198.18.0.0", &why));
    CHECK(why == "expected ADDRESS/PREFIXLEN");
    CHECK_FALSE(Subnet::parse("bond0/24", &why));
    CHECK(why == "'bond0' is not an IPv4 or IPv6 address");
    CHECK_FALSE(Subnet::parse("10.0.0.0/x", &why));
}

TEST_CASE("IpAddress tells unique-local IPv6 (fc00::/7) from link-local and global",
          "[util][net]") {
    CHECK(IpAddress::parse("fd93:16d3:59b6:2d::11")->is_unique_local());
    CHECK(IpAddress::parse("fc00::1")->is_unique_local());
    CHECK_FALSE(IpAddress::parse("fd93:16d3:59b6:2d::11")->is_link_local());
    CHECK_FALSE(IpAddress::parse("fe80::1")->is_unique_local());
    CHECK_FALSE(IpAddress::parse("fe00::1")->is_unique_local());
    CHECK_FALSE(IpAddress::parse("2001:db8::1")->is_unique_local());
    CHECK_FALSE(IpAddress::parse("252.0.0.1")->is_unique_local()); // IPv4 0xfc: not IPv6
}
