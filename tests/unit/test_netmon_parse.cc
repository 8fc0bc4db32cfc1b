// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// parse_message() against messages laid out as Linux 6.1 emits them.
#include <linux/if_addr.h>
#include <linux/netlink.h>

#include "catch.h"
#include "netmon/nl_parse.h"
#include "nl_builder.h"

using namespace roce::netmon;
using namespace roce::netmon::test;
using roce::topo::BondMiiStatus;
using roce::topo::BondMode;
using roce::topo::OperState;

namespace {

ParsedMessage parse(const Bytes &b) {
    auto p = parse_message(reinterpret_cast<const nlmsghdr *>(b.data()));
    REQUIRE(p.is_ok());
    return *p;
}

} // namespace

TEST_CASE("parse: active-backup bond master", "[netmon][parse]") {
    LinkSpec s;
    s.ifindex = 4;
    s.name = "bond0";
    s.flags = kUp | kMasterFlags;
    s.mtu = 9000;
    s.kind = "bond";
    s.bond = BondSpec{};
    s.bond->mode = 1;
    s.bond->active_slave = 2;
    s.bond->miimon = 100;
    s.bond->xmit_hash_policy = 1;
    s.ifla_event = 3; // IFLA_EVENT_BONDING_FAILOVER
    auto p = parse(build_link(s));
    REQUIRE(p.type == ParsedMessage::Type::kLink);
    const LinkMessage &m = p.link;
    CHECK_FALSE(m.deleted);
    CHECK(m.ifindex == 4);
    CHECK(m.name == "bond0");
    CHECK(m.mtu == 9000);
    CHECK(m.operstate == OperState::kUp);
    CHECK(m.carrier);
    CHECK(m.mac == "52:54:00:00:00:00");
    CHECK(m.kind == "bond");
    CHECK(m.ifla_event == 3);
    REQUIRE(m.bond);
    CHECK(m.bond->mode == BondMode::kActiveBackup);
    CHECK(m.bond_active_slave_ifindex == 2);
    CHECK(m.bond->miimon_ms == 100);
    CHECK(m.bond->xmit_hash_policy == "layer3+4");
    CHECK(m.bond->ad_num_ports == -1); // not 802.3ad: unknown, not 0
    CHECK_FALSE(m.bond_slave);
}

TEST_CASE("parse: 802.3ad bond master with and without an active aggregator", "[netmon][parse]") {
    LinkSpec s;
    s.ifindex = 4;
    s.name = "bond0";
    s.flags = kUp | kMasterFlags;
    s.kind = "bond";
    s.bond = BondSpec{};
    s.bond->mode = 4;
    s.bond->xmit_hash_policy = 1;
    s.bond->ad_info = AdInfoSpec{3, 2, 9, 17, {0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}};
    auto p = parse(build_link(s));
    REQUIRE(p.link.bond);
    const auto &b = *p.link.bond;
    CHECK(b.mode == BondMode::k8023ad);
    CHECK(b.ad_aggregator_id == 3);
    CHECK(b.ad_num_ports == 2);
    CHECK(b.ad_actor_key == 9);
    CHECK(b.ad_partner_key == 17);
    CHECK(b.ad_partner_mac == "52:54:00:aa:bb:cc");
    CHECK(p.link.bond_active_slave_ifindex == 0); // attribute omitted in 802.3ad without one

    s.bond->ad_info.reset(); // bond_3ad_get_active_agg_info() failed: no nest
    auto q = parse(build_link(s));
    REQUIRE(q.link.bond);
    CHECK(q.link.bond->ad_num_ports == 0);
    CHECK(q.link.bond->ad_aggregator_id == -1);
}

TEST_CASE("parse: bond member (IFLA_INFO_SLAVE_DATA)", "[netmon][parse]") {
    LinkSpec s;
    s.ifindex = 2;
    s.name = "eth0";
    s.flags = kUpNoCarrier | kSlaveFlags;
    s.operstate = 2; // IF_OPER_DOWN
    s.carrier = false;
    s.master = 4;
    s.slave_kind = "bond";
    s.slave = BondSlaveSpec{};
    s.slave->state = 1;      // backup
    s.slave->mii_status = 2; // down
    s.slave->link_failure_count = 3;
    s.slave->perm_hwaddr = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
    s.slave->queue_id = 0;
    s.slave->mode_8023ad = true;
    s.slave->ad_aggregator_id = 2;
    s.slave->ad_actor_oper_port_state = 0x45;
    s.slave->ad_partner_oper_port_state = 0x01;
    auto p = parse(build_link(s));
    const LinkMessage &m = p.link;
    CHECK(m.master_ifindex == 4);
    CHECK_FALSE(m.carrier);
    CHECK(m.operstate == OperState::kDown);
    CHECK(m.slave_kind == "bond");
    CHECK(m.kind.empty());
    REQUIRE(m.bond_slave);
    CHECK_FALSE(m.bond_slave->active);
    CHECK(m.bond_slave->mii_status == BondMiiStatus::kDown);
    CHECK(m.bond_slave->link_failure_count == 3);
    CHECK(m.bond_slave->perm_hwaddr == "52:54:00:12:34:56");
    CHECK(m.bond_slave->ad_aggregator_id == 2);
    CHECK(m.bond_slave->ad_actor_oper_port_state == 0x45);
    CHECK(m.bond_slave->ad_partner_oper_port_state == 0x01);
}

TEST_CASE("parse: VLAN on a bond, and link messages that are not ours", "[netmon][parse]") {
    LinkSpec v;
    v.ifindex = 5;
    v.name = "bond0.3027";
    v.flags = kUp;
    v.kind = "vlan";
    v.vlan_id = 3027;
    v.link = 4;
    auto p = parse(build_link(v));
    CHECK(p.link.kind == "vlan");
    CHECK(p.link.vlan_id == 3027);
    CHECK(p.link.link_ifindex == 4);
    CHECK_FALSE(p.link.link_in_other_netns);

    LinkSpec br = v;
    br.family = 7; // AF_BRIDGE: port info, not the netdev
    br.type = 17;  // RTM_DELLINK here only means "left the bridge"
    CHECK(parse(build_link(br)).type == ParsedMessage::Type::kIgnored);

    LinkSpec del = v;
    del.type = 17;
    auto d = parse(build_link(del));
    CHECK(d.type == ParsedMessage::Type::kLink);
    CHECK(d.link.deleted);
}

TEST_CASE("parse: a truncated attribute is an error, never a half-read value", "[netmon][parse]") {
    LinkSpec s;
    s.ifindex = 2;
    s.name = "eth0";
    s.truncate_mtu = true;
    Bytes b = build_link(s);
    auto p = parse_message(reinterpret_cast<const nlmsghdr *>(b.data()));
    REQUIRE_FALSE(p.is_ok());
    CHECK(p.status().code() == roce::util::Code::kProtocol);
    CHECK(p.status().message().find("IFLA_MTU") != std::string::npos);

    Bytes shorthdr = build_link(LinkSpec{});
    auto *h = reinterpret_cast<nlmsghdr *>(shorthdr.data());
    h->nlmsg_len = NLMSG_HDRLEN + 4; // shorter than struct ifinfomsg
    CHECK_FALSE(parse_message(h).is_ok());
}

TEST_CASE("parse: IPv4, IPv6 and point-to-point addresses", "[netmon][parse]") {
    auto a = parse(build_addr({20, 4, "198.18.0.1", 24, "", IFA_F_PERMANENT}));
    REQUIRE(a.type == ParsedMessage::Type::kAddress);
    CHECK_FALSE(a.addr.deleted);
    CHECK(a.addr.ifindex == 4);
    CHECK(a.addr.address.address.to_string() == "198.18.0.1");
    CHECK(a.addr.address.prefix_len == 24);
    CHECK(a.addr.flags == IFA_F_PERMANENT);

    // Point to point: IFA_ADDRESS is the peer, IFA_LOCAL ours.
    auto p = parse(build_addr({20, 4, "10.0.0.1", 32, "10.0.0.2", IFA_F_PERMANENT}));
    CHECK(p.addr.address.address.to_string() == "10.0.0.1");

    // IFA_F_NOPREFIXROUTE (0x200) only fits in IFA_FLAGS, not in ifa_flags.
    auto v6 = parse(build_addr({21, 5, "fe80::5054:ff:fe00:1", 64, "", 0x200 | IFA_F_PERMANENT}));
    CHECK(v6.addr.deleted);
    CHECK(v6.addr.address.address.is_v6());
    CHECK(v6.addr.address.address.to_string() == "fe80::5054:ff:fe00:1");
    CHECK(v6.addr.address.prefix_len == 64);
    CHECK(v6.addr.flags == (0x200u | IFA_F_PERMANENT));
}

TEST_CASE("parse: NLMSG_DONE, NLMSG_ERROR and several messages per datagram", "[netmon][parse]") {
    auto d = parse(build_done(7, 1234));
    CHECK(d.type == ParsedMessage::Type::kDone);
    CHECK(d.seq == 7);
    CHECK(d.portid == 1234);
    auto e = parse(build_error(19, 8, 1234)); // ENODEV
    CHECK(e.type == ParsedMessage::Type::kError);
    CHECK(e.error == 19);

    Bytes dg = datagram({build_addr({20, 4, "198.18.0.1", 24, "", 0x80}), build_done(3, 9)});
    int n = 0;
    bool whole = for_each_message(dg.data(), dg.size(), [&n](const nlmsghdr *) { ++n; });
    CHECK(whole);
    CHECK(n == 2);
    CHECK_FALSE(for_each_message(dg.data(), dg.size() - 8, [](const nlmsghdr *) {}));
}
