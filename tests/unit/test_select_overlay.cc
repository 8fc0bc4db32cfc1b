// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Issue 16's selection rules over GID tables modelled on public reports:
//  - the port's own netdev (or a VLAN directly on it) before an overlay or
//    other software device carrying the same address, whatever the indices
//    (openucx/ucx#9484: b3.vxlan.30100 at [2,3] with bond1's own address,
//    bond1 at [4,5]; NVIDIA/nccl#1587: a pod's macvlan-only, sparse table);
//  - unique-local IPv6 is routable (uccl-project/uccl#803: bnxt_re Thor-2
//    with only fe80 and fd93:: ULA GIDs fell back to GID 0 and every
//    operation failed with retry-exceeded).
// Each case asserts the chosen index and the explanation's lines.
#include <functional>

#include "catch.h"
#include "select/netdev_role.h"
#include "select/options.h"
#include "select/selection.h"

using namespace roce;
using select::Options;
using topo::GidType;

namespace {

struct Nd {
    const char *name;
    const char *kind;    ///< "" physical
    const char *parent;  ///< lower device or ""
    const char *address; ///< "198.18.0.11/24" or ""
};

struct G {
    int index;
    const char *address;
    GidType type;
    const char *netdev;
};

topo::Snapshot table(const std::vector<Nd> &netdevs, const std::vector<G> &gids) {
    topo::Snapshot s;
    s.source = "test";
    topo::DeviceInfo d;
    d.name = "mlx5_bond_0";
    d.phys_port_cnt = 1;
    topo::PortInfo p;
    p.port = 1;
    p.state = topo::PortState::kActive;
    p.link_layer = topo::LinkLayer::kEthernet;
    p.gid_tbl_len = 16;
    p.pkey_tbl_len = 1;
    p.pkeys = {0xffff};
    for (const auto &g : gids) {
        topo::GidEntry e;
        e.index = g.index;
        e.gid = util::IpAddress::parse(g.address)->to_gid();
        e.type = g.type;
        e.netdev = g.netdev;
        p.gids.push_back(e);
    }
    d.ports.push_back(p);
    s.devices.push_back(d);
    int ifindex = 2;
    for (const auto &n : netdevs) {
        topo::NetdevInfo i;
        i.name = n.name;
        i.ifindex = ifindex++;
        i.kind = n.kind;
        i.parent = n.parent;
        i.mtu = 1500;
        i.operstate = topo::OperState::kUp;
        if (i.kind == "vlan") {
            i.vlan_id = 3027;
        }
        std::string a = n.address;
        if (!a.empty()) {
            auto sn = *util::Subnet::parse(a);
            i.addresses.push_back(
                {*util::IpAddress::parse(a.substr(0, a.find('/'))), sn.prefix_len});
        }
        s.netdevs.push_back(i);
    }
    return s;
}

constexpr GidType v1 = GidType::kRoceV1;
constexpr GidType v2 = GidType::kRoceV2;
const char *const kLl = "fe80::ac0:ebff:fe79:391a";

struct Case {
    const char *what;
    topo::Snapshot snap;
    std::function<void(Options &)> configure; ///< may be empty
    const char *peer;                         ///< nullptr: no peer
    int want_index;
    std::vector<std::string> want; ///< each must appear in the explanation
};

void check(const Case &c) {
    INFO(c.what);
    Options o;
    if (c.configure) {
        c.configure(o);
    }
    std::optional<select::Peer> peer;
    if (c.peer != nullptr) {
        peer = *select::parse_peer(c.peer);
    }
    const topo::DeviceInfo &d = c.snap.devices[0];
    select::PortChoice pc =
        select::select_port(c.snap, d, d.ports[0], o, peer ? &*peer : nullptr, false);
    INFO("explanation: " << pc.explanation());
    INFO("error: " << pc.error);
    REQUIRE(pc.ok());
    CHECK(pc.selection->gid_index == c.want_index);
    for (const auto &w : c.want) {
        CHECK_THAT(pc.explanation(), contains_text(w));
    }
}

/// openucx/ucx#9484: a VXLAN with bond1's address listed before bond1.
topo::Snapshot ucx_vxlan() {
    return table({{"bond1", "bond", "", "30.153.10.175/24"},
                  {"b3.vxlan.30100", "vxlan", "", "30.153.10.175/24"}},
                 {{0, kLl, v1, "bond1"},
                  {1, kLl, v2, "bond1"},
                  {2, "30.153.10.175", v1, "b3.vxlan.30100"},
                  {3, "30.153.10.175", v2, "b3.vxlan.30100"},
                  {4, "30.153.10.175", v1, "bond1"},
                  {5, "30.153.10.175", v2, "bond1"}});
}

/// The same shape with `kind` (and its parent) in place of the VXLAN.
topo::Snapshot overlay_on_bond0(const char *name, const char *kind, const char *parent) {
    return table({{"bond0", "bond", "", "198.18.0.11/24"}, {name, kind, parent, "198.18.0.11/24"}},
                 {{0, kLl, v1, "bond0"},
                  {1, kLl, v2, "bond0"},
                  {2, "198.18.0.11", v1, name},
                  {3, "198.18.0.11", v2, name},
                  {4, "198.18.0.11", v1, "bond0"},
                  {5, "198.18.0.11", v2, "bond0"}});
}

} // namespace

TEST_CASE("overlay: the port's own netdev before an overlay with the same address",
          "[select][overlay]") {
    const std::string vxlan_lost = "gid[3] on b3.vxlan.30100 (a VXLAN overlay: the NIC does not "
                                   "encapsulate RoCE) lost to gid[5] on bond1, the port's own "
                                   "netdev";
    const std::vector<Case> cases = {
        {"ucx#9484 without a peer",
         ucx_vxlan(),
         {},
         nullptr,
         5,
         {vxlan_lost,
          "decided by: the port's own netdev or a VLAN on it before other devices (gid[3] on "
          "b3.vxlan.30100 ranked next)",
          "gid[3]: on b3.vxlan.30100 (a VXLAN overlay: the NIC does not encapsulate RoCE), "
          "below gid[5] on bond1"}},
        {"ucx#9484 with a peer both reach",
         ucx_vxlan(),
         {},
         "30.153.10.176",
         5,
         {vxlan_lost, "reaches peer 30.153.10.176 (in 30.153.10.0/24)"}},
        {"Geneve",
         overlay_on_bond0("genev_sys_6081", "geneve", ""),
         {},
         "198.18.0.12",
         5,
         {"gid[3] on genev_sys_6081 (a Geneve overlay: the NIC does not encapsulate RoCE) lost "
          "to gid[5] on bond0, the port's own netdev"}},
        {"macvlan on the bond",
         overlay_on_bond0("mv0", "macvlan", "bond0"),
         {},
         nullptr,
         5,
         {"gid[3] on mv0 (a macvlan on bond0: RoCE does not pass through the software device) "
          "lost to gid[5] on bond0, the port's own netdev"}},
        {"ipvlan on the bond",
         overlay_on_bond0("ipv0", "ipvlan", "bond0"),
         {},
         nullptr,
         5,
         {"gid[3] on ipv0 (an ipvlan on bond0: RoCE does not pass through the software device) "
          "lost to gid[5] on bond0"}},
        {"a stacked device sysfs cannot name",
         overlay_on_bond0("mv1", "", "bond0"),
         {},
         nullptr,
         5,
         {"gid[3] on mv1 (a software device on bond0 (sysfs does not say which kind): RoCE does "
          "not pass through it) lost to gid[5] on bond0"}},
        {"a bridge",
         overlay_on_bond0("br0", "bridge", ""),
         {},
         nullptr,
         5,
         {"gid[3] on br0 (a bridge: RoCE does not pass through the software bridge) lost to "
          "gid[5] on bond0, the port's own netdev"}},
        {"a bond that does not back this port",
         overlay_on_bond0("bond1", "bond", ""),
         {},
         nullptr,
         5,
         {"gid[3] on bond1 (a bond that does not back this port (its netdev is bond0)) lost to "
          "gid[5] on bond0"}},
        {"a team device",
         overlay_on_bond0("team0", "team", ""),
         {},
         nullptr,
         5,
         {"gid[3] on team0 (a team device: the NIC offloads RoCE for bonds only) lost to gid[5] "
          "on bond0"}},
    };
    for (const auto &c : cases) {
        check(c);
    }
}

TEST_CASE("overlay: a VLAN directly on the port's netdev wins like the netdev itself",
          "[select][overlay]") {
    // The VXLAN holds the VLAN's address, listed first.
    topo::Snapshot s = table({{"bond0", "bond", "", "198.18.0.11/24"},
                              {"bond0.3027", "vlan", "bond0", "198.19.0.11/24"},
                              {"vxlan100", "vxlan", "", "198.19.0.11/24"},
                              {"vl7", "vlan", "vxlan100", "198.19.0.11/24"}},
                             {{0, kLl, v1, "bond0"},
                              {1, kLl, v2, "bond0"},
                              {2, "198.19.0.11", v2, "vxlan100"},
                              {3, "198.19.0.11", v2, "vl7"},
                              {4, "198.19.0.11", v2, "bond0.3027"},
                              {5, "198.18.0.11", v2, "bond0"}});
    const std::vector<Case> cases = {
        {"peer on the VLAN's subnet",
         s,
         {},
         "198.19.0.12",
         4,
         {"gid[2] on vxlan100 (a VXLAN overlay: the NIC does not encapsulate RoCE) lost to "
          "gid[4] on bond0.3027, a VLAN on bond0, the port's own netdev",
          "gid[3] on vl7 (a VLAN on vxlan100, not directly on bond0, the port's own netdev) "
          "lost to gid[4] on bond0.3027"}},
        // Without a peer the VLAN and the bond tie as before, and the lower
        // index decides between them: the overlays rank below both.
        {"no peer: VLAN and bond tie, overlays below",
         s,
         {},
         nullptr,
         4,
         {"tie: gid[5] (bond0) ranks the same", "gid[2] on vxlan100 (a VXLAN overlay"}},
    };
    for (const auto &c : cases) {
        check(c);
    }
}

TEST_CASE("overlay: include, exclude and the GID override still decide", "[select][overlay]") {
    const std::vector<Case> cases = {
        {"if_include names the overlay: only its GIDs are candidates",
         ucx_vxlan(),
         [](Options &o) { o.include = *select::parse_rules("x", "b3.vxlan.30100"); },
         nullptr,
         3,
         {"decided by: RoCE v2 before v1 (gid[2] on b3.vxlan.30100 ranked next)",
          "gid[4], gid[5]: netdev bond1 is not in btl_roce_if_include (b3.vxlan.30100)"}},
        {"if_exclude the bond: the overlay is what is left",
         ucx_vxlan(),
         [](Options &o) { o.exclude = *select::parse_rules("x", "bond1"); },
         nullptr,
         3,
         {"decided by: RoCE v2 before v1 (gid[2] on b3.vxlan.30100 ranked next)",
          "netdev bond1 is excluded by btl_roce_if_exclude entry 'bond1'"}},
        {"if_include a subnet both share: the bond still wins",
         ucx_vxlan(),
         [](Options &o) { o.include = *select::parse_rules("x", "30.153.10.0/24"); },
         nullptr,
         5,
         {"lost to gid[5] on bond1, the port's own netdev"}},
        {"gid_index on the overlay: used, with a note",
         ucx_vxlan(),
         [](Options &o) { o.gid_index = 3; },
         nullptr,
         3,
         {"decided by: btl_roce_gid_index = 3, set explicitly (the automatic ranking was not "
          "used)",
          "note: b3.vxlan.30100 is a VXLAN overlay: the NIC does not encapsulate RoCE; used "
          "because btl_roce_gid_index = 3 was set explicitly"}},
    };
    for (const auto &c : cases) {
        check(c);
    }
}

TEST_CASE("overlay: without a default GID in slot 0 only known overlay kinds are demoted",
          "[select][overlay]") {
    // NVIDIA/nccl#1587: a pod sees only its macvlan's slots, from 6 on.
    topo::Snapshot pod = table({{"net1", "macvlan", "", "11.0.4.1/24"}},
                               {{6, "11.0.4.1", v1, "net1"},
                                {7, "11.0.4.1", v2, "net1"},
                                {8, "fe80::e4ea:71ff:feb9:4970", v1, "net1"},
                                {9, "fe80::e4ea:71ff:feb9:4970", v2, "net1"}});
    CHECK(select::port_netdev(pod.devices[0].ports[0]).empty());
    // The VXLAN table with slots 0 and 1 gone: the kind alone decides.
    topo::Snapshot no_default = ucx_vxlan();
    auto &g = no_default.devices[0].ports[0].gids;
    g.erase(g.begin(), g.begin() + 2);
    const std::vector<Case> cases = {
        {"the pod's macvlan is all there is",
         pod,
         {},
         nullptr,
         7,
         {"decided by: RoCE v2 before v1 (gid[6] on net1 ranked next)"}},
        {"no slot 0: the VXLAN kind still loses",
         no_default,
         {},
         nullptr,
         5,
         {"gid[3] on b3.vxlan.30100 (a VXLAN overlay: the NIC does not encapsulate RoCE) lost to "
          "gid[5] on bond1"}},
    };
    for (const auto &c : cases) {
        check(c);
    }
}

TEST_CASE("netdev_role: the port's netdev from slot 0, and who counts as its own",
          "[select][overlay]") {
    topo::Snapshot s = ucx_vxlan();
    const topo::PortInfo &p = s.devices[0].ports[0];
    CHECK(select::port_netdev(p) == "bond1");
    CHECK(select::netdev_role(s, "bond1", "bond1").own);
    CHECK_FALSE(select::netdev_role(s, "bond1", "b3.vxlan.30100").own);
    CHECK(select::netdev_role(s, "bond1", "").own);         // no netdev: not judged
    CHECK(select::netdev_role(s, "bond1", "missing0").own); // not in the view: not judged
    // Slot 0 holding a routable address is not the default GID.
    topo::Snapshot t = table({}, {{0, "198.18.0.11", v2, "eth0"}});
    CHECK(select::port_netdev(t.devices[0].ports[0]).empty());
}

TEST_CASE("netdev_role: the ranking's allocation-free verdict agrees with the explained one",
          "[select][overlay]") {
    struct Kind {
        const char *kind;
        const char *parent;
    };
    const Kind kinds[] = {{"bond", ""},       {"vlan", "bond0"},   {"vlan", "eth9"},
                          {"vxlan", ""},      {"geneve", ""},      {"macvlan", "bond0"},
                          {"macvtap", "bond0"}, {"ipvlan", "bond0"}, {"ipvtap", "bond0"},
                          {"bridge", ""},     {"team", ""},        {"", "bond0"},
                          {"", ""},           {"dummy", ""}};
    for (const Kind &k : kinds) {
        topo::Snapshot s = overlay_on_bond0("x0", k.kind, k.parent);
        for (const char *own : {"bond0", ""}) {
            for (const char *nd : {"x0", "bond0", "", "missing0"}) {
                CAPTURE(k.kind, k.parent, own, nd);
                CHECK(select::carries_port_roce(s, own, nd) ==
                      select::netdev_role(s, own, nd).own);
            }
        }
    }
}

TEST_CASE("IPv6-only: unique-local is routable, link-local stays the last resort",
          "[select][ipv6]") {
    // uccl-project/uccl#803: bnxt_re (Thor-2) with link-local and ULA only.
    topo::Snapshot bnxt = table({{"ens3f0np0", "", "", "fd93:16d3:59b6:2d::11/64"}},
                                {{0, "fe80::5e6f:69ff:fe2a:4b10", v1, "ens3f0np0"},
                                 {1, "fe80::5e6f:69ff:fe2a:4b10", v2, "ens3f0np0"},
                                 {2, "fd93:16d3:59b6:2d::11", v1, "ens3f0np0"},
                                 {3, "fd93:16d3:59b6:2d::11", v2, "ens3f0np0"}});
    topo::Snapshot v2_only = table(
        {{"ens3f0np0", "", "", "fd00:1::11/64"}},
        {{0, "fe80::5e6f:69ff:fe2a:4b10", v2, "ens3f0np0"}, {1, "fd00:1::11", v2, "ens3f0np0"}});
    topo::Snapshot ula_and_global = table({{"ens3f0np0", "", "", "fd00:1::11/64"}},
                                          {{0, "fe80::5e6f:69ff:fe2a:4b10", v2, "ens3f0np0"},
                                           {1, "fd00:1::11", v2, "ens3f0np0"},
                                           {2, "2001:db8:1::11", v2, "ens3f0np0"}});
    const std::vector<Case> cases = {
        {"bnxt_re: the RoCE v2 ULA entry, never GID 0",
         bnxt,
         {},
         nullptr,
         3,
         {"no usable IPv4-mapped GID: using unique-local IPv6 (fc00::/7, routed within the "
          "site)",
          "decided by: RoCE v2 before v1 (gid[2] on ens3f0np0 ranked next)",
          "gid[0], gid[1]: link-local, a last resort"}},
        {"bnxt_re with a ULA peer",
         bnxt,
         {},
         "fd93:16d3:59b6:2d::12",
         3,
         {"reaches peer fd93:16d3:59b6:2d::12 (in fd93:16d3:59b6:2d::/64)"}},
        {"v2 only: the ULA above link-local",
         v2_only,
         {},
         nullptr,
         1,
         {"decided by: unique-local IPv6 is routable, link-local only as a last resort (gid[0] "
          "on ens3f0np0 ranked next)"}},
        {"ULA ranks with global IPv6: the lower index",
         ula_and_global,
         {},
         nullptr,
         1,
         {"tie: gid[2] (ens3f0np0) ranks the same"}},
        {"address_family ipv6 keeps the ULA",
         bnxt,
         [](Options &o) { o.address_family = select::AddressFamily::kIPv6; },
         nullptr,
         3,
         {}},
        {"include the ULA subnet",
         bnxt,
         [](Options &o) { o.include = *select::parse_rules("x", "fd93:16d3:59b6:2d::/64"); },
         nullptr,
         3,
         {}},
        {"gid_index 1 (link-local) is still honoured when asked for",
         bnxt,
         [](Options &o) { o.gid_index = 1; },
         nullptr,
         1,
         {"decided by: btl_roce_gid_index = 1, set explicitly"}},
    };
    for (const auto &c : cases) {
        check(c);
    }
}
