// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Fuzz target: the rtnetlink parser (netmon/nl_parse) and the model behind
// it. Random link and address messages built with nl_builder (the byte
// layout of Linux 6.1) must parse back to what was built; the same messages
// and recorded kernel traffic, mutated at the byte and the attribute level
// (lengths, types, truncation), must parse or fail with a clean kProtocol
// Status, each message copied to a buffer of exactly its own length so that
// AddressSanitizer sees any read past it; what parses must keep the model
// consistent.
#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "bounded.h"
#include "catch.h"
#include "fuzz_util.h"
#include "netmon/model.h"
#include "netmon/nl_parse.h"
#include "netmon/recording.h"
#include "nl_builder.h"
#include "util/strings.h"

#ifndef NETMON_FIXTURES
#error "NETMON_FIXTURES (the tests/fixtures/netlink directory) must be defined"
#endif

using namespace roce;
using namespace roce::netmon;
using namespace roce::netmon::test;
using namespace roce::testing::fuzz;

namespace {

Mac random_mac(Rng &r) {
    Mac m{};
    for (auto &b : m) {
        b = r.byte();
    }
    return m;
}

std::string mac_text(const Mac &m) {
    std::string s;
    for (size_t i = 0; i < m.size(); ++i) {
        s += util::format(i ? ":%02x" : "%02x", m[i]);
    }
    return s;
}

std::string random_name(Rng &r) {
    // No NUL (the kernel's names are C strings); control bytes are fair.
    std::string s = random_bytes(r, 15, "abcdefghijklmnopqrstuvwxyz0123456789.-_\x1b\n");
    s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
    return s;
}

LinkSpec random_link(Rng &r) {
    LinkSpec s;
    // Half of them among ifindexes 1..6, so that masters, lower devices and
    // active slaves point at each other (and at themselves) in the model.
    const bool small = r.chance(50);
    auto index = [&]() { return small ? r.range(1, 6) : r.range(1, 0x7fffffff); };
    s.type = r.chance(85) ? RTM_NEWLINK : RTM_DELLINK;
    s.ifindex = static_cast<int>(index());
    s.name = random_name(r);
    s.flags = static_cast<uint32_t>(r.next());
    s.mtu = static_cast<uint32_t>(r.chance(50) ? r.range(68, 9216) : r.next());
    s.operstate = static_cast<uint8_t>(r.range(0, 8));
    s.carrier = r.chance(50);
    s.mac = random_mac(r);
    s.master = r.chance(30) ? static_cast<uint32_t>(index()) : 0;
    s.link = r.chance(30) ? static_cast<uint32_t>(index()) : 0;
    s.ifla_event = r.chance(20) ? static_cast<uint32_t>(r.range(1, 20)) : 0;
    switch (r.below(5)) {
    case 0: {
        s.kind = "bond";
        BondSpec b;
        b.mode = static_cast<uint8_t>(r.chance(90) ? r.range(0, 6) : r.range(7, 255));
        b.active_slave = r.chance(50) ? static_cast<uint32_t>(index()) : 0;
        b.miimon = static_cast<uint32_t>(r.range(0, 100000));
        b.xmit_hash_policy = static_cast<uint8_t>(r.range(0, 9));
        b.min_links = static_cast<uint32_t>(r.range(0, 16));
        if (r.chance(70)) {
            AdInfoSpec ad;
            ad.aggregator = static_cast<uint16_t>(r.next());
            ad.num_ports = static_cast<uint16_t>(r.next());
            ad.actor_key = static_cast<uint16_t>(r.next());
            ad.partner_key = static_cast<uint16_t>(r.next());
            ad.partner_mac = random_mac(r);
            b.ad_info = ad;
        }
        s.bond = b;
        break;
    }
    case 1:
        s.kind = "vlan";
        s.vlan_id = static_cast<uint16_t>(r.next());
        break;
    case 2:
        s.kind = r.pick(std::vector<std::string>{"macvlan", "veth", "dummy"});
        break;
    default:
        break;
    }
    if (r.chance(30)) {
        s.slave_kind = "bond";
        BondSlaveSpec sl;
        sl.state = static_cast<uint8_t>(r.range(0, 3));
        sl.mii_status = static_cast<uint8_t>(r.range(0, 6));
        sl.link_failure_count = static_cast<uint32_t>(r.range(0, 1000));
        sl.perm_hwaddr = random_mac(r);
        sl.queue_id = static_cast<uint16_t>(r.next());
        sl.mode_8023ad = r.chance(50);
        sl.ad_aggregator_id = static_cast<uint16_t>(r.next());
        sl.ad_actor_oper_port_state = r.byte();
        sl.ad_partner_oper_port_state = static_cast<uint16_t>(r.next());
        s.slave = sl;
    }
    return s;
}

std::string ip_text(bool v6, Rng &r) {
    uint8_t b[16];
    for (auto &x : b) {
        x = r.byte();
    }
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(v6 ? AF_INET6 : AF_INET, b, buf, sizeof(buf));
    return buf;
}

AddrSpec random_addr(Rng &r) {
    AddrSpec s;
    const bool v6 = r.chance(50);
    s.type = r.chance(80) ? RTM_NEWADDR : RTM_DELADDR;
    s.ifindex = static_cast<int>(r.range(1, 0x7fffffff));
    s.address = ip_text(v6, r);
    s.prefix_len = static_cast<int>(r.range(0, v6 ? 128 : 32));
    s.peer = r.chance(20) ? ip_text(v6, r) : "";
    s.flags = static_cast<uint32_t>(r.next());
    return s;
}

/// What parse_message must make of a built link message ("" when it did).
std::string compare_link(const LinkSpec &s, const LinkMessage &m) {
    std::vector<std::string> bad;
    auto expect = [&](bool ok, const char *what) {
        if (!ok) {
            bad.emplace_back(what);
        }
    };
    expect(m.deleted == (s.type == RTM_DELLINK), "deleted");
    expect(m.ifindex == s.ifindex, "ifindex");
    expect(m.ifi_flags == s.flags, "flags");
    expect(m.name == s.name, "name");
    expect(m.mtu == static_cast<int>(s.mtu), "mtu");
    expect(static_cast<int>(m.operstate) ==
               (s.operstate == 0 || s.operstate > 6 ? 0 : static_cast<int>(s.operstate)),
           "operstate");
    expect(m.carrier == s.carrier, "carrier");
    expect(m.mac == mac_text(s.mac), "mac");
    expect(m.master_ifindex == static_cast<int>(s.master), "master");
    expect(m.link_ifindex == static_cast<int>(s.link), "link");
    expect(m.ifla_event == static_cast<int>(s.ifla_event), "ifla_event");
    expect(m.kind == s.kind, "kind");
    expect(m.slave_kind == s.slave_kind, "slave_kind");
    expect(m.vlan_id == (s.kind == "vlan" ? s.vlan_id : -1), "vlan_id");
    expect(m.bond.has_value() == s.bond.has_value(), "bond present");
    if (s.bond && m.bond) {
        const BondSpec &b = *s.bond;
        const topo::BondInfo &g = *m.bond;
        expect(static_cast<int>(g.mode) == (b.mode <= 6 ? b.mode : 255), "bond mode");
        expect(m.bond_active_slave_ifindex == static_cast<int>(b.active_slave), "active slave");
        expect(g.miimon_ms == static_cast<int>(b.miimon), "miimon");
        expect(g.min_links == static_cast<int>(b.min_links), "min_links");
        static const char *const kHash[] = {"layer2",   "layer3+4", "layer2+3",
                                            "encap2+3", "encap3+4", "vlan+srcmac"};
        expect(g.xmit_hash_policy ==
                   (b.xmit_hash_policy < 6 ? kHash[b.xmit_hash_policy] : "unknown"),
               "hash");
        const bool ad = b.mode == 4;
        expect(g.ad_num_ports == (!ad ? -1 : b.ad_info ? b.ad_info->num_ports : 0), "ad ports");
        if (ad && b.ad_info) {
            expect(g.ad_aggregator_id == b.ad_info->aggregator, "ad aggregator");
            expect(g.ad_partner_mac == mac_text(b.ad_info->partner_mac), "ad partner mac");
        }
    }
    expect(m.bond_slave.has_value() == s.slave.has_value(), "slave present");
    if (s.slave && m.bond_slave) {
        const BondSlaveSpec &x = *s.slave;
        const topo::BondSlaveInfo &g = *m.bond_slave;
        expect(g.active == (x.state == 0), "slave active");
        expect(static_cast<int>(g.mii_status) == (x.mii_status <= 3 ? x.mii_status : 255), "mii");
        expect(g.link_failure_count == static_cast<int>(x.link_failure_count), "failures");
        expect(g.perm_hwaddr == mac_text(x.perm_hwaddr), "perm mac");
        expect(g.queue_id == x.queue_id, "queue");
        expect(g.ad_aggregator_id == (x.mode_8023ad ? x.ad_aggregator_id : -1), "slave agg");
    }
    return util::join(bad, ", ");
}

std::string compare_addr(const AddrSpec &s, const AddrMessage &m) {
    auto want = util::IpAddress::parse(s.address);
    if (!want) {
        return "bad spec";
    }
    std::vector<std::string> bad;
    if (m.deleted != (s.type == RTM_DELADDR)) {
        bad.emplace_back("deleted");
    }
    if (m.ifindex != s.ifindex) {
        bad.emplace_back("ifindex");
    }
    if (!(m.address.address == *want) || m.address.prefix_len != s.prefix_len) {
        bad.emplace_back("address");
    }
    if (m.flags != s.flags) {
        bad.emplace_back("flags");
    }
    return util::join(bad, ", ");
}

/// The attribute headers of a message (offsets into it), nests included
/// when their payload reads as an attribute stream.
void attributes(const Bytes &b, size_t from, size_t to, std::vector<size_t> &out, int depth = 0) {
    size_t at = from;
    while (at + sizeof(nlattr) <= to) {
        nlattr a;
        std::memcpy(&a, b.data() + at, sizeof(a));
        if (a.nla_len < sizeof(nlattr) || at + a.nla_len > to) {
            return;
        }
        out.push_back(at);
        if (depth < 4 && a.nla_len > sizeof(nlattr) + 4) {
            std::vector<size_t> inner;
            attributes(b, at + NLA_HDRLEN, at + a.nla_len, inner, depth + 1);
            out.insert(out.end(), inner.begin(), inner.end());
        }
        at += NLA_ALIGN(a.nla_len);
    }
}

size_t family_header(uint16_t type) {
    switch (type) {
    case RTM_NEWLINK:
    case RTM_DELLINK:
        return NLMSG_ALIGN(sizeof(ifinfomsg));
    case RTM_NEWADDR:
    case RTM_DELADDR:
        return NLMSG_ALIGN(sizeof(ifaddrmsg));
    default:
        return 0;
    }
}

/// One attribute-aware mutation: a length, a type or the end of the message.
Bytes mutate_attrs(Bytes b, Rng &r) {
    if (b.size() < NLMSG_HDRLEN) {
        return b;
    }
    nlmsghdr h;
    std::memcpy(&h, b.data(), sizeof(h));
    std::vector<size_t> at;
    attributes(b, NLMSG_HDRLEN + family_header(h.nlmsg_type),
               std::min<size_t>(h.nlmsg_len, b.size()), at);
    if (at.empty() || r.chance(20)) {
        h.nlmsg_len =
            static_cast<uint32_t>(r.chance(50) ? r.pick(interesting()) : r.below(b.size() + 16));
        std::memcpy(b.data(), &h, sizeof(h));
        return b;
    }
    const size_t a = r.pick(at);
    nlattr na;
    std::memcpy(&na, b.data() + a, sizeof(na));
    switch (r.below(4)) {
    case 0:
        na.nla_len = static_cast<uint16_t>(r.range(0, na.nla_len + 8));
        break;
    case 1:
        na.nla_len = static_cast<uint16_t>(r.pick(interesting()));
        break;
    case 2:
        na.nla_type = static_cast<uint16_t>(r.range(0, 64) | (r.chance(10) ? NLA_F_NESTED : 0));
        break;
    default: // cut the message inside this attribute
        b.resize(a + r.below(na.nla_len + 1));
        h.nlmsg_len = static_cast<uint32_t>(b.size());
        std::memcpy(b.data(), &h, sizeof(h));
        return b;
    }
    std::memcpy(b.data() + a, &na, sizeof(na));
    return b;
}

/// Parses every message of a datagram, each from a buffer of exactly its
/// length, feeds what parses to `model`; "" when every property holds.
std::string parse_datagram(const Bytes &d, Model &model, size_t *parsed) {
    size_t visited = 0;
    std::string bad;
    bool whole = for_each_message(d.data(), d.size(), [&](const nlmsghdr *h) {
        if (!bad.empty()) {
            return;
        }
        const auto *p = reinterpret_cast<const uint8_t *>(h);
        if (p < d.data() || p + h->nlmsg_len > d.data() + d.size()) {
            bad = "for_each_message visited a message outside the buffer";
            return;
        }
        visited += NLMSG_ALIGN(h->nlmsg_len);
        std::unique_ptr<uint8_t[]> exact(new uint8_t[h->nlmsg_len]);
        std::memcpy(exact.get(), p, h->nlmsg_len);
        auto m = parse_message(reinterpret_cast<const nlmsghdr *>(exact.get()));
        if (!m) {
            if (m.status().code() != util::Code::kProtocol || m.status().message().empty() ||
                !is_printable(m.status().message())) {
                bad = "bad error: " + util::printable(m.status().message());
            }
            return;
        }
        ++*parsed;
        switch (m->type) {
        case ParsedMessage::Type::kLink:
            if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) {
                bad = "kLink from another message type";
            } else if (m->link.name.find('\0') != std::string::npos) {
                bad = "a name with a NUL";
            } else {
                model.apply(m->link);
            }
            break;
        case ParsedMessage::Type::kAddress:
            if (h->nlmsg_type != RTM_NEWADDR && h->nlmsg_type != RTM_DELADDR) {
                bad = "kAddress from another message type";
            } else if (m->addr.address.prefix_len < 0 ||
                       m->addr.address.prefix_len > m->addr.address.address.bits()) {
                bad = util::format("prefix length %d for an IPv%d address",
                                   m->addr.address.prefix_len,
                                   m->addr.address.address.bits() == 32 ? 4 : 6);
            } else {
                model.apply(m->addr);
            }
            break;
        default:
            break;
        }
    });
    if (bad.empty() && whole && visited != d.size()) {
        bad = "for_each_message said whole but did not cover the buffer";
    }
    if (bad.empty()) {
        const auto nd = model.netdevs();
        for (size_t i = 1; i < nd.size(); ++i) {
            if (nd[i - 1].ifindex >= nd[i].ifindex) {
                bad = "model netdevs not in ifindex order";
            }
        }
    }
    return bad;
}

} // namespace

TEST_CASE("netlink parse: a truncated bond attribute names the link with its name escaped",
          "[netmon][parse]") {
    LinkSpec s;
    s.ifindex = 7;
    s.name = "bond\x1b[2J";
    s.kind = "bond";
    s.bond = BondSpec{};
    s.bond->active_slave = 3;
    Bytes b = build_link(s);
    // IFLA_BOND_ACTIVE_SLAVE is a u32 (nla_len 8); make it 6 bytes long
    // (still 8 with padding, so the attributes after it stay in place).
    std::vector<size_t> at;
    attributes(b, NLMSG_HDRLEN + family_header(RTM_NEWLINK), b.size(), at);
    size_t found = 0;
    for (size_t a : at) {
        nlattr na;
        std::memcpy(&na, b.data() + a, sizeof(na));
        if (na.nla_type == IFLA_BOND_ACTIVE_SLAVE && na.nla_len == 8) {
            na.nla_len = 6;
            std::memcpy(b.data() + a, &na, sizeof(na));
            ++found;
        }
    }
    REQUIRE(found == 1);
    auto m = parse_message(reinterpret_cast<const nlmsghdr *>(b.data()));
    REQUIRE_FALSE(m.is_ok());
    CHECK(m.status().code() == util::Code::kProtocol);
    CHECK(m.status().message() ==
          "link 7 (bond\\x1b[2J): netlink attribute IFLA_BOND_ACTIVE_SLAVE is truncated");
}

TEST_CASE("netlink parse: an address prefix longer than the address is a protocol error",
          "[netmon][parse]") {
    for (const char *addr : {"198.18.0.1", "fe80::1"}) {
        AddrSpec s;
        s.ifindex = 3;
        s.address = addr;
        s.prefix_len = std::strchr(addr, ':') ? 129 : 33;
        auto m = parse_message(reinterpret_cast<const nlmsghdr *>(build_addr(s).data()));
        INFO(addr);
        REQUIRE_FALSE(m.is_ok());
        CHECK(m.status().code() == util::Code::kProtocol);
        CHECK(m.status().message() ==
              util::format("RTM_*ADDR for ifindex 3 has prefix length %d, longer than the "
                           "address (%d bits)",
                           s.prefix_len, std::strchr(addr, ':') ? 128 : 32));
    }
}

TEST_CASE("fuzz netlink: random messages parse back to what was built", "[fuzz][netlink]") {
    Rng r(seed(0x6e6c01));
    const size_t n = cases(3000);
    for (size_t i = 0; i < n; ++i) {
        INFO("case " << i);
        if (r.chance(60)) {
            LinkSpec s = random_link(r);
            Bytes b = build_link(s);
            auto m = parse_message(reinterpret_cast<const nlmsghdr *>(b.data()));
            INFO("link " << s.ifindex << " " << util::printable(s.name) << " kind " << s.kind);
            REQUIRE(m.is_ok());
            REQUIRE(m->type == ParsedMessage::Type::kLink);
            REQUIRE(compare_link(s, m->link) == "");
        } else {
            AddrSpec s = random_addr(r);
            Bytes b = build_addr(s);
            auto m = parse_message(reinterpret_cast<const nlmsghdr *>(b.data()));
            INFO("addr " << s.address << "/" << s.prefix_len << " peer " << s.peer);
            REQUIRE(m.is_ok());
            REQUIRE(m->type == ParsedMessage::Type::kAddress);
            REQUIRE(compare_addr(s, m->addr) == "");
        }
    }
}

TEST_CASE("fuzz netlink: mutated and random datagrams parse or fail cleanly", "[fuzz][netlink]") {
    Rng r(seed(0x6e6c02));
    std::vector<Bytes> corpus;
    for (const char *rec :
         {"/bond-8023ad.rec", "/bond-active-backup.rec", "/veth-macvlan-bridge.rec"}) {
        auto d = read_recording(std::string(NETMON_FIXTURES) + rec);
        REQUIRE(d.is_ok());
        corpus.insert(corpus.end(), d->begin(), d->end());
    }
    for (int i = 0; i < 200; ++i) {
        corpus.push_back(r.chance(60) ? build_link(random_link(r)) : build_addr(random_addr(r)));
    }
    corpus.push_back(build_done(1, 0));
    corpus.push_back(build_error(22, 2, 0));
    const size_t n = cases(20000);
    size_t parsed = 0, failed = 0;
    auto model = std::make_unique<Model>();
    const double slow = 0.1 * roce::testing::kSlowdown; // CPU seconds per datagram
    for (size_t i = 0; i < n; ++i) {
        Bytes d;
        switch (r.below(10)) {
        case 0: { // pure random bytes, sometimes with a plausible header
            std::string s = random_bytes(r, 128);
            d.assign(s.begin(), s.end());
            if (d.size() >= NLMSG_HDRLEN && r.chance(50)) {
                nlmsghdr h{
                    static_cast<uint32_t>(d.size()),
                    static_cast<uint16_t>(r.pick(std::vector<uint64_t>{16, 17, 20, 21, 2, 3})), 0,
                    0, 0};
                std::memcpy(d.data(), &h, sizeof(h));
            }
            break;
        }
        case 1:
        case 2:
        case 3: { // byte mutations
            const Bytes &a = r.pick(corpus);
            const Bytes &b = r.pick(corpus);
            std::string s = mutate(std::string(a.begin(), a.end()), r, {},
                                   std::string(b.begin(), b.end()), 16 << 10);
            d.assign(s.begin(), s.end());
            break;
        }
        case 4: { // several messages in one datagram, one of them harmed
            for (int64_t k = 0, m = r.range(2, 4); k < m; ++k) {
                Bytes one = r.pick(corpus);
                if (k == 0) {
                    one = mutate_attrs(one, r);
                }
                d.insert(d.end(), one.begin(), one.end());
            }
            break;
        }
        default: // attribute-level mutations
            d = r.pick(corpus);
            for (int64_t k = 0, m = r.range(1, 3); k < m; ++k) {
                d = mutate_attrs(d, r);
            }
            break;
        }
        // At least a header's worth, or for_each_message has nothing to do.
        const double start = roce::testing::thread_cpu_seconds();
        size_t before = parsed;
        if (i % 64 == 0) {
            model = std::make_unique<Model>(); // a fresh namespace now and then
        }
        std::string bad = parse_datagram(d, *model, &parsed);
        model->take_refresh_requests();
        INFO("case " << i << ": " << to_hex_line(d.data(), d.size()));
        REQUIRE(bad == "");
        REQUIRE(roce::testing::thread_cpu_seconds() - start < slow);
        failed += parsed == before;
    }
    WARN("fuzz netlink: " << n << " datagrams, " << parsed << " messages parsed, " << failed
                          << " datagrams with none");
    CHECK(parsed > n / 4);
    CHECK(failed > n / 20);
}
