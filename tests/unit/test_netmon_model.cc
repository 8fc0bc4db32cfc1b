// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Replays hand-built (6.1 layout) and recorded rtnetlink messages through
// parse_message() and the Model: bond failover, 802.3ad member loss and
// removal, a VLAN on a bond, addresses, renames, resync diffs.
#include <linux/netlink.h>

#include <string>
#include <vector>

#include "catch.h"
#include "netmon/model.h"
#include "netmon/nl_parse.h"
#include "netmon/recording.h"
#include "nl_builder.h"

using namespace roce::netmon;
using namespace roce::netmon::test;
using roce::topo::BondMode;

namespace {

// Feeds built messages through the same path as the Monitor: bytes ->
// parse_message() -> Model::apply().
struct Replayer {
    Model model;
    std::vector<Event> feed(const Bytes &datagram) {
        std::vector<Event> out;
        bool whole = for_each_message(datagram.data(), datagram.size(), [&](const nlmsghdr *h) {
            auto p = parse_message(h);
            REQUIRE(p.is_ok());
            std::vector<Event> ev;
            if (p->type == ParsedMessage::Type::kLink) {
                ev = model.apply(p->link);
            } else if (p->type == ParsedMessage::Type::kAddress) {
                ev = model.apply(p->addr);
            }
            out.insert(out.end(), ev.begin(), ev.end());
        });
        REQUIRE(whole);
        return out;
    }
};

// "kind netdev [bond] [detail]" per event, to compare whole sequences.
std::vector<std::string> brief(const std::vector<Event> &ev) {
    std::vector<std::string> out;
    for (const auto &e : ev) {
        std::string s = std::string(to_string(e.kind)) + " " + e.netdev;
        if (!e.bond.empty() && e.bond != e.netdev) {
            s += " bond=" + e.bond;
        }
        switch (e.kind) {
        case EventKind::kMtuChanged:
        case EventKind::kLagMemberCountChanged:
            s += " " + std::to_string(e.old_value) + "->" + std::to_string(e.new_value);
            break;
        case EventKind::kActiveSlaveChanged:
        case EventKind::kNetdevRenamed:
            s += " " + e.old_name + "->" + e.new_name;
            break;
        case EventKind::kAddressAdded:
        case EventKind::kAddressRemoved:
            s += " " + e.address.address.to_string() + "/" + std::to_string(e.address.prefix_len);
            break;
        case EventKind::kRdmaDeviceAppeared:
        case EventKind::kRdmaDeviceDisappeared:
        case EventKind::kRdmaNetdevsChanged:
            s = std::string(to_string(e.kind)) + " " + e.rdma_device + ":" +
                std::to_string(e.rdma_port);
            break;
        default:
            break;
        }
        out.push_back(s);
    }
    return out;
}

using Strings = std::vector<std::string>;

LinkSpec member(int ifindex, const std::string &name, bool lacp) {
    LinkSpec s;
    s.ifindex = ifindex;
    s.name = name;
    s.flags = kUp | kSlaveFlags;
    s.master = 4;
    s.mac = {0x52, 0x54, 0, 0, 0, 0x10};
    s.slave_kind = "bond";
    s.slave = BondSlaveSpec{};
    s.slave->perm_hwaddr = {0x52, 0x54, 0, 0, 0, static_cast<uint8_t>(ifindex)};
    s.slave->mode_8023ad = lacp;
    return s;
}

LinkSpec bond(uint8_t mode, uint32_t active, std::optional<AdInfoSpec> ad = std::nullopt) {
    LinkSpec s;
    s.ifindex = 4;
    s.name = "bond0";
    s.flags = kUp | kMasterFlags;
    s.mac = {0x52, 0x54, 0, 0, 0, 0x10};
    s.kind = "bond";
    s.bond = BondSpec{};
    s.bond->mode = mode;
    s.bond->active_slave = active;
    s.bond->ad_info = ad;
    return s;
}

LinkSpec slave_down(LinkSpec s) {
    s.flags = kUpNoCarrier | kSlaveFlags;
    s.carrier = false;
    s.operstate = 2; // IF_OPER_DOWN
    s.slave->state = 1;
    s.slave->mii_status = 2;
    s.slave->link_failure_count += 1;
    return s;
}

// bond0 (ifindex 4) over eth0 (2) and eth1 (3), rxe_bond0 port 1 on bond0,
// as the kernel announces it while `ip link set ethN master bond0` runs.
Replayer bond_setup(uint8_t mode) {
    Replayer r;
    bool lacp = mode == 4;
    std::optional<AdInfoSpec> ad;
    if (lacp) {
        ad = AdInfoSpec{1, 2, 9, 9, {0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}};
    }
    LinkSpec e0 = member(2, "eth0", lacp);
    LinkSpec e1 = member(3, "eth1", lacp);
    if (mode == 1) {
        e1.slave->state = 1; // backup
    }
    auto ev = r.feed(datagram({build_link(bond(mode, 0)), build_link(e0), build_link(e1),
                               build_link(bond(mode, mode == 1 ? 2 : 0, ad))}));
    if (lacp) {
        // Members count once the aggregator reports them, not when enslaved.
        CHECK(brief(ev) == Strings{"netdev-added bond0", "netdev-added eth0",
                                   "bond-member-added eth0 bond=bond0", "netdev-added eth1",
                                   "bond-member-added eth1 bond=bond0",
                                   "lag-member-count-changed bond0 0->2"});
    } else {
        CHECK(brief(ev) ==
              Strings{"netdev-added bond0", "netdev-added eth0",
                      "bond-member-added eth0 bond=bond0", "lag-member-count-changed bond0 0->1",
                      "netdev-added eth1", "bond-member-added eth1 bond=bond0",
                      "lag-member-count-changed bond0 1->2", "active-slave-changed bond0 ->eth0"});
    }
    auto rdma = r.model.set_rdma_bindings({{"rxe_bond0", 1, "bond0", 4}});
    CHECK(brief(rdma) == Strings{"rdma-device-appeared rxe_bond0:1"});
    CHECK(r.model.lag_member_count(4) == 2);
    (void)r.model.take_refresh_requests();
    return r;
}

} // namespace

TEST_CASE("replay: active-backup failover on member carrier loss", "[netmon][model][bond]") {
    Replayer r = bond_setup(1);
    auto b = r.model.netdev(4);
    REQUIRE(b);
    REQUIRE(b->bond);
    CHECK(b->bond->mode == BondMode::kActiveBackup);
    CHECK(b->bond->slaves == Strings{"eth0", "eth1"});
    CHECK(b->bond->active_slave == "eth0");
    CHECK(b->bond->ad_num_ports == -1);

    // The driver's miimon sees eth0's carrier go: the member is announced
    // down (NETDEV_CHANGE + CHANGELOWERSTATE), eth1 becomes active, then the
    // master with the new active slave (NETDEV_BONDING_FAILOVER).
    LinkSpec e0 = member(2, "eth0", false);
    LinkSpec e1 = member(3, "eth1", false);
    auto ev = r.feed(datagram({build_link(slave_down(e0))}));
    CHECK(brief(ev) == Strings{"link-down eth0", "bond-member-down eth0 bond=bond0",
                               "lag-member-count-changed bond0 2->1"});
    for (const auto &e : ev) {
        REQUIRE(e.rdma.size() == 1); // a member inherits its bond's RDMA port
        CHECK(e.rdma[0].device == "rxe_bond0");
        CHECK(e.rdma[0].port == 1);
    }
    CHECK(r.feed(build_link(e1)).empty()); // eth1 now active: state only, no event
    LinkSpec failover = bond(1, 3);
    failover.ifla_event = 3;
    ev = r.feed(build_link(failover));
    CHECK(brief(ev) == Strings{"active-slave-changed bond0 eth0->eth1"});
    CHECK(ev[0].bond == "bond0");
    CHECK(r.model.netdev(4)->bond->active_slave == "eth1");
    auto slave = r.model.netdev(2)->bond_slave;
    REQUIRE(slave);
    CHECK_FALSE(slave->active);
    CHECK(slave->mii_status == roce::topo::BondMiiStatus::kDown);
    CHECK(slave->link_failure_count == 1);
    CHECK(r.model.take_refresh_requests().empty()); // not 802.3ad: nothing to re-read

    // Carrier back: member up, two usable members again, no failback
    // without a primary.
    ev = r.feed(build_link(member(2, "eth0", false)));
    CHECK(brief(ev) == Strings{"link-up eth0", "bond-member-up eth0 bond=bond0",
                               "lag-member-count-changed bond0 1->2"});
}

TEST_CASE("replay: 802.3ad member loss and removal change the LAG member count",
          "[netmon][model][bond]") {
    Replayer r = bond_setup(4);
    auto b = r.model.netdev(4);
    CHECK(b->bond->mode == BondMode::k8023ad);
    CHECK(b->bond->ad_num_ports == 2);
    CHECK(b->bond->ad_aggregator_id == 1);
    CHECK(b->bond->ad_partner_mac == "52:54:00:aa:bb:cc");
    CHECK(b->bond->active_slave.empty());

    // eth1 loses carrier. The kernel announces the member, not the bond:
    // the model asks for the bond to be re-read.
    LinkSpec e1 = slave_down(member(3, "eth1", true));
    e1.slave->ad_actor_oper_port_state = 0x05;
    auto ev = r.feed(build_link(e1));
    CHECK(brief(ev) == Strings{"link-down eth1", "bond-member-down eth1 bond=bond0"});
    CHECK(r.model.take_refresh_requests() == std::vector<int>{4});
    CHECK(r.model.take_refresh_requests().empty());
    // The reply to that RTM_GETLINK: one port left in the aggregator.
    ev = r.feed(build_link(bond(4, 0, AdInfoSpec{1, 1, 9, 9, {0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}})));
    CHECK(brief(ev) == Strings{"lag-member-count-changed bond0 2->1"});

    // `ip link set eth1 nomaster`: the member leaves the bond.
    LinkSpec gone = e1;
    gone.master = 0;
    gone.slave_kind.clear();
    gone.slave.reset();
    gone.flags = kUpNoCarrier;
    ev = r.feed(build_link(gone));
    CHECK(brief(ev) == Strings{"bond-member-removed eth1 bond=bond0"});
    CHECK(r.model.take_refresh_requests() == std::vector<int>{4});
    CHECK(r.model.netdev(4)->bond->slaves == Strings{"eth0"});
    CHECK_FALSE(r.model.netdev(3)->bond_slave);
    CHECK(r.model.netdev(3)->master.empty());

    // No active aggregator at all (partner gone): the kernel omits AD_INFO.
    ev = r.feed(build_link(bond(4, 0)));
    CHECK(brief(ev) == Strings{"lag-member-count-changed bond0 1->0"});
}

TEST_CASE("replay: VLAN on a bond, its addresses and the GID table moving",
          "[netmon][model][bond]") {
    Replayer r = bond_setup(1);
    LinkSpec v;
    v.ifindex = 6;
    v.name = "bond0.3027";
    v.flags = kUp;
    v.kind = "vlan";
    v.vlan_id = 3027;
    v.link = 4;
    auto ev = r.feed(build_link(v));
    CHECK(brief(ev) == Strings{"netdev-added bond0.3027"});
    CHECK(ev[0].rdma.empty()); // no GID on it yet
    auto n = r.model.netdev(6);
    REQUIRE(n);
    CHECK(n->parent == "bond0");
    CHECK(n->vlan_id == 3027);
    CHECK(n->kind == "vlan");

    ev = r.feed(build_addr({20, 4, "198.18.0.1", 24, "", 0x80}));
    CHECK(brief(ev) == Strings{"address-added bond0 198.18.0.1/24"});
    REQUIRE(ev[0].rdma.size() == 1);
    ev = r.feed(build_addr({20, 6, "198.19.0.1", 24, "", 0x80}));
    CHECK(brief(ev) == Strings{"address-added bond0.3027 198.19.0.1/24"});

    // The kernel gave the VLAN's address a GID: the binding source now
    // lists the VLAN netdev for the same port.
    ev = r.model.set_rdma_bindings(
        {{"rxe_bond0", 1, "bond0", 4}, {"rxe_bond0", 1, "bond0.3027", 6}});
    CHECK(brief(ev) == Strings{"rdma-netdevs-changed rxe_bond0:1"});
    CHECK(r.model.rdma_ports(6).size() == 1);

    // `ip addr replace` of the same address: a NEWADDR for a known address.
    CHECK(r.feed(build_addr({20, 6, "198.19.0.1", 24, "", 0x80})).empty());
    // Replacing it by another one: removal then addition.
    ev = r.feed(datagram({build_addr({21, 6, "198.19.0.1", 24, "", 0x80}),
                          build_addr({20, 6, "198.19.0.2", 24, "", 0x80})}));
    CHECK(brief(ev) == Strings{"address-removed bond0.3027 198.19.0.1/24",
                               "address-added bond0.3027 198.19.0.2/24"});
    REQUIRE(ev[1].rdma.size() == 1);

    // Jumbo frames on the bond, then the VLAN follows.
    LinkSpec jumbo = bond(1, 2);
    jumbo.mtu = 9000;
    ev = r.feed(build_link(jumbo));
    CHECK(brief(ev) == Strings{"mtu-changed bond0 1500->9000"});
    v.mtu = 9000;
    ev = r.feed(build_link(v));
    CHECK(brief(ev) == Strings{"mtu-changed bond0.3027 1500->9000"});

    // Deleting the VLAN takes its address with it.
    LinkSpec del = v;
    del.type = 17;
    ev = r.feed(build_link(del));
    CHECK(brief(ev) ==
          Strings{"address-removed bond0.3027 198.19.0.2/24", "netdev-removed bond0.3027"});
    CHECK_FALSE(r.model.netdev(6));
}

TEST_CASE("model: renames, link state and messages that change nothing", "[netmon][model]") {
    Replayer r;
    LinkSpec s;
    s.ifindex = 7;
    s.name = "veth0";
    s.kind = "veth";
    s.flags = 0x2 | 0x1000; // BROADCAST|MULTICAST, admin down
    s.operstate = 2;
    s.carrier = false;
    CHECK(brief(r.feed(build_link(s))) == Strings{"netdev-added veth0"});
    CHECK(r.feed(build_link(s)).empty());
    s.flags = kUp;
    s.operstate = 6;
    s.carrier = true;
    CHECK(brief(r.feed(build_link(s))) == Strings{"link-up veth0"});
    s.operstate = 0; // IF_OPER_UNKNOWN still counts as usable (loopback, tun)
    CHECK(r.feed(build_link(s)).empty());
    s.operstate = 3; // LOWERLAYERDOWN
    CHECK(brief(r.feed(build_link(s))) == Strings{"link-down veth0"});
    s.name = "uplink";
    CHECK(brief(r.feed(build_link(s))) == Strings{"netdev-renamed uplink veth0->uplink"});
    // A bridge master is not a bond: no member events.
    LinkSpec br;
    br.ifindex = 8;
    br.name = "br0";
    br.kind = "bridge";
    r.feed(build_link(br));
    s.master = 8;
    s.slave_kind = "bridge";
    CHECK(r.feed(build_link(s)).empty());
    CHECK(r.model.netdev(7)->master == "br0");
    CHECK(r.model.lag_member_count(8) == -1);
}

TEST_CASE("model: diff between two models is what a resync reports", "[netmon][model]") {
    Replayer a = bond_setup(1);
    a.feed(build_addr({20, 4, "198.18.0.1", 24, "", 0x80}));
    Replayer b = bond_setup(1);
    b.feed(build_addr({20, 4, "198.18.0.7", 24, "", 0x80}));
    b.feed(build_link(slave_down(member(2, "eth0", false))));
    b.feed(build_link(bond(1, 3)));
    LinkSpec m0;
    m0.ifindex = 9;
    m0.name = "m0";
    m0.kind = "macvlan";
    m0.link = 4;
    b.feed(build_link(m0));
    (void)b.model.set_rdma_bindings({{"rxe_bond0", 1, "bond0", 4}, {"rxe_eth0", 1, "eth0", 2}});

    auto ev = Model::diff(a.model, b.model);
    CHECK(brief(ev) ==
          Strings{"link-down eth0", "bond-member-down eth0 bond=bond0",
                  "active-slave-changed bond0 eth0->eth1", "lag-member-count-changed bond0 2->1",
                  "address-removed bond0 198.18.0.1/24", "address-added bond0 198.18.0.7/24",
                  "netdev-added m0", "rdma-device-appeared rxe_eth0:1"});
    CHECK(Model::diff(b.model, b.model).empty());
    CHECK(b.model.netdev(9)->parent == "bond0");

    // The same ifindex now holding another kind of netdev is not a rename.
    Replayer c = bond_setup(1);
    LinkSpec other;
    other.ifindex = 3;
    other.name = "eth1";
    other.kind = "dummy";
    c.feed(build_link(other));
    ev = Model::diff(a.model, c.model);
    CHECK(brief(ev) == Strings{"bond-member-removed eth1 bond=bond0", "netdev-removed eth1",
                               "netdev-added eth1", "lag-member-count-changed bond0 2->1",
                               "address-removed bond0 198.18.0.1/24"});
}

TEST_CASE("model: from_netdevs round-trips a model's netdevs", "[netmon][model]") {
    Replayer r = bond_setup(4);
    LinkSpec v;
    v.ifindex = 6;
    v.name = "bond0.3027";
    v.kind = "vlan";
    v.vlan_id = 3027;
    v.link = 4;
    r.feed(build_link(v));
    r.feed(build_addr({20, 6, "198.19.0.1", 24, "", 0x80}));
    auto nd = r.model.netdevs();
    Model copy = Model::from_netdevs(nd);
    auto nd2 = copy.netdevs();
    REQUIRE(nd.size() == nd2.size());
    for (size_t i = 0; i < nd.size(); ++i) {
        CHECK(describe(nd[i]) == describe(nd2[i]));
    }
    CHECK(copy.lag_member_count(4) == 2);
    // A reader that lists members only in the bond still yields members.
    for (auto &n : nd) {
        n.master.clear();
    }
    CHECK(Model::from_netdevs(nd).netdev(2)->master == "bond0");
}

TEST_CASE("model: RDMA bindings from a snapshot's GID tables", "[netmon][model]") {
    roce::topo::Snapshot s;
    roce::topo::DeviceInfo d;
    d.name = "rxe_bond0";
    roce::topo::PortInfo p;
    p.port = 1;
    roce::topo::GidEntry g0;
    g0.index = 0;
    g0.netdev = "bond0";
    g0.netdev_ifindex = 4;
    roce::topo::GidEntry g1 = g0;
    g1.index = 1;
    roce::topo::GidEntry g2;
    g2.index = 2;
    g2.netdev = "bond0.3027";
    g2.netdev_ifindex = 6;
    roce::topo::GidEntry ib; // no netdev: InfiniBand
    ib.index = 3;
    p.gids = {g0, g1, g2, ib};
    d.ports = {p};
    s.devices = {d};
    auto b = bindings_from_snapshot(s);
    REQUIRE(b.size() == 2);
    CHECK(b[0] == RdmaBinding{"rxe_bond0", 1, "bond0", 4});
    CHECK(b[1] == RdmaBinding{"rxe_bond0", 1, "bond0.3027", 6});

    Model m;
    auto ev = m.set_rdma_bindings(b);
    CHECK(brief(ev) == Strings{"rdma-device-appeared rxe_bond0:1"});
    CHECK(ev[0].netdev == "bond0");
    ev = m.set_rdma_bindings({});
    CHECK(brief(ev) == Strings{"rdma-device-disappeared rxe_bond0:1"});
}

TEST_CASE("events: filters and the JSON line format", "[netmon][event]") {
    Event e;
    e.kind = EventKind::kAddressAdded;
    e.seq = 12;
    e.ifindex = 4;
    e.netdev = "bond0";
    e.address = {*roce::util::IpAddress::parse("198.18.0.1"), 24};
    CHECK(EventFilter::all().matches(e));
    EventFilter rdma;
    rdma.rdma_only = true;
    CHECK_FALSE(rdma.matches(e));
    e.rdma = {{"rxe_bond0", 1}};
    CHECK(rdma.matches(e));
    CHECK_FALSE(EventFilter::only({EventKind::kMtuChanged}).matches(e));
    CHECK(EventFilter::only({EventKind::kMtuChanged, EventKind::kAddressAdded}).matches(e));
    Event resync;
    resync.kind = EventKind::kResync;
    CHECK(rdma.matches(resync)); // global events pass the RDMA filter
    CHECK(to_json(e) ==
          "{\"seq\":12,\"event\":\"address-added\",\"ifindex\":4,\"netdev\":\"bond0\","
          "\"address\":\"198.18.0.1/24\",\"rdma\":[\"rxe_bond0:1\"]}");
    CHECK(to_string(e) == "#12 address-added bond0 198.18.0.1/24 [rxe_bond0:1]");
    for (unsigned k = 0; k < static_cast<unsigned>(EventKind::kCount_); ++k) {
        CHECK(std::string(to_string(static_cast<EventKind>(k))) != "?");
    }
}

TEST_CASE("recording: hex lines round-trip and malformed lines are rejected",
          "[netmon][recording]") {
    Bytes b = build_addr({20, 4, "198.18.0.1", 24, "", 0x80});
    std::string line = to_hex_line(b.data(), b.size());
    auto back = from_hex_line(line);
    REQUIRE(back.is_ok());
    CHECK(*back == b);
    CHECK_FALSE(from_hex_line("abc").is_ok());
    CHECK_FALSE(from_hex_line("zz").is_ok());
    Model m;
    auto ev = replay(m, {*back});
    REQUIRE(ev.is_ok());
    CHECK(ev->empty()); // an address on an unknown netdev waits for its link
    LinkSpec s;
    s.ifindex = 4;
    s.name = "bond0";
    Bytes l = build_link(s);
    ev = replay(m, {l});
    REQUIRE(ev.is_ok());
    CHECK(brief(*ev) == Strings{"netdev-added bond0", "address-added bond0 198.18.0.1/24"});
    CHECK((*ev)[1].seq == 2);
    Bytes cut(l.begin(), l.begin() + 20);
    CHECK_FALSE(replay(m, {cut}).is_ok());
}
