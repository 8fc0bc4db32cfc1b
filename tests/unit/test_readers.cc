// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The snapshot readers: sysfs with a root, captured directories, live
// (rdma-core through a VerbsApi) - and that all three agree.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "topo/fs.h"
#include "topo/ip_json.h"
#include "topo/live_reader.h"
#include "topo/readers.h"
#include "topo/sysfs_reader.h"

using namespace roce;
using roce::testing::fixture;
using roce::testing::fixture_dir;
using roce::testing::TempDir;
using topo::GidType;

namespace {

std::array<uint8_t, 16> gid_of(const char *text) {
    auto a = util::IpAddress::parse(text);
    REQUIRE(a.has_value());
    return a->to_gid();
}

/// The netdev half of a fixture the way the sysfs-root reader gets it:
/// structure from FIXTURE/sys/class/net, addresses from its ip-addr.json.
topo::NetdevReader fixture_sysfs_netdevs(const std::string &dir) {
    return [dir]() -> util::Result<std::vector<topo::NetdevInfo>> {
        std::vector<std::string> warnings;
        auto nd =
            topo::read_netdevs_sysfs(topo::fs::Tree(dir, topo::fs::Links::kRefuse), &warnings);
        if (!nd) {
            return nd.status();
        }
        auto text = topo::fs::read_text(dir + "/ip-addr.json");
        if (!text) {
            return text.status();
        }
        auto addrs = topo::parse_ip_addr_json(*text, "ip-addr.json");
        if (!addrs) {
            return addrs.status();
        }
        topo::attach_addresses(nd.value(), *addrs);
        return nd;
    };
}

const char *const kFixtures[] = {"mlx5_lag", "mlx5_lag_readdressed", "mlx5_ipv6_only",
                                 "mlx4_two_ports", "rxe_bond"};

} // namespace

TEST_CASE("sysfs text formats: GIDs, GID types, port states, VLAN config", "[topo][sysfs]") {
    auto g = topo::parse_sysfs_gid("fe80:0000:0000:0000:ba59:9fff:fe10:002a");
    REQUIRE(g.has_value());
    CHECK(topo::gid_to_string(*g) == "fe80::ba59:9fff:fe10:2a");
    CHECK(topo::format_sysfs_gid(*g) == "fe80:0000:0000:0000:ba59:9fff:fe10:002a");
    auto mapped = topo::parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c612:000b\n");
    REQUIRE(mapped.has_value());
    CHECK(topo::gid_to_string(*mapped) == "::ffff:198.18.0.11");
    CHECK_FALSE(topo::parse_sysfs_gid("fe80::1"));
    CHECK_FALSE(topo::parse_sysfs_gid("fe80:0000:0000:0000:ba59:9fff:fe10:00zz"));
    CHECK_FALSE(topo::parse_sysfs_gid("fe80-0000:0000:0000:ba59:9fff:fe10:002a"));

    using topo::LinkLayer;
    CHECK(topo::parse_sysfs_gid_type("RoCE v2\n", LinkLayer::kEthernet) == GidType::kRoceV2);
    CHECK(topo::parse_sysfs_gid_type("IB/RoCE v1", LinkLayer::kEthernet) == GidType::kRoceV1);
    CHECK(topo::parse_sysfs_gid_type("IB/RoCE v1", LinkLayer::kInfiniBand) == GidType::kIB);
    CHECK_FALSE(topo::parse_sysfs_gid_type("RoCE v3", LinkLayer::kEthernet));

    CHECK(topo::parse_sysfs_port_state("4: ACTIVE") == topo::PortState::kActive);
    CHECK(topo::parse_sysfs_port_state("1: DOWN") == topo::PortState::kDown);
    CHECK(topo::parse_sysfs_port_state("garbage") == topo::PortState::kUnknown);

    auto vlans = topo::parse_proc_vlan_config(
        "VLAN Dev name    | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n"
        "bond0.3027      | 3027  | bond0\nbroken | x | y\n");
    REQUIRE(vlans.size() == 1);
    CHECK(vlans[0].first == "bond0.3027");
    CHECK(vlans[0].second == 3027);
}

TEST_CASE("capture reader: the two-member mlx5 LAG fixture", "[topo][capture]") {
    const topo::Snapshot &s = fixture("mlx5_lag");
    CHECK(s.source == "capture:" + fixture_dir("mlx5_lag"));
    CHECK(s.warnings.empty());
    REQUIRE(s.devices.size() == 1);
    const topo::DeviceInfo &d = s.devices[0];
    CHECK(d.name == "mlx5_bond_0");
    CHECK(d.phys_port_cnt == 1);
    REQUIRE(d.ports.size() == 1);
    const topo::PortInfo &p = d.ports[0];
    CHECK(p.state == topo::PortState::kActive);
    CHECK(p.link_layer == topo::LinkLayer::kEthernet);
    CHECK(p.active_mtu == 0); // not in sysfs
    CHECK(p.gid_tbl_len == 255);
    CHECK(p.pkey_tbl_len == 1);
    CHECK(p.pkeys == std::vector<uint16_t>{0xffff});
    REQUIRE(p.gids.size() == 8);
    for (int i = 0; i < 8; ++i) {
        CHECK(p.gids[static_cast<size_t>(i)].index == i);
        CHECK(p.gids[static_cast<size_t>(i)].type == (i % 2 ? GidType::kRoceV2 : GidType::kRoceV1));
    }
    CHECK(p.gids[5].gid == gid_of("198.19.0.11"));
    CHECK(p.gids[5].netdev == "bond0.3027");
    CHECK(p.gids[5].netdev_ifindex == 6);
    CHECK(p.gids[3].netdev == "bond0");
    CHECK(topo::gid_to_string(p.gids[7].gid) == "fe80::ba59:9fff:fe10:2a");

    const topo::NetdevInfo *bond = s.find_netdev("bond0");
    REQUIRE(bond != nullptr);
    REQUIRE(bond->bond.has_value());
    CHECK(bond->kind == "bond");
    CHECK(bond->bond->mode == topo::BondMode::k8023ad);
    CHECK(bond->bond->slaves == std::vector<std::string>{"ens1f0np0", "ens1f1np1"});
    CHECK(bond->bond->ad_num_ports == 2);
    CHECK(bond->bond->xmit_hash_policy == "layer3+4");
    CHECK(bond->mtu == 9000);
    REQUIRE(bond->addresses.size() == 2);
    CHECK(bond->addresses[0].subnet().to_string() == "198.18.0.0/24");
    const topo::NetdevInfo *vlan = s.find_netdev("bond0.3027");
    REQUIRE(vlan != nullptr);
    CHECK(vlan->kind == "vlan");
    CHECK(vlan->vlan_id == 3027);
    CHECK(vlan->parent == "bond0");
    CHECK(vlan->mtu == 1500);
    CHECK(s.find_netdev("ens1f1np1")->master == "bond0");
}

TEST_CASE("capture reader: the re-addressed LAG has empty slots in the middle",
          "[topo][capture]") {
    const topo::PortInfo &p = fixture("mlx5_lag_readdressed").devices[0].ports[0];
    std::vector<int> indexes;
    for (const auto &g : p.gids) {
        indexes.push_back(g.index);
    }
    CHECK(indexes == std::vector<int>{0, 1, 4, 5, 6, 7, 8, 9});
    CHECK(p.find_gid(3) == nullptr);
    REQUIRE(p.find_gid(9) != nullptr);
    CHECK(p.find_gid(9)->gid == gid_of("198.18.0.21"));
    CHECK(p.find_gid(9)->netdev == "bond0");
}

TEST_CASE("readers agree: sysfs root, capture directory and live rdma-core", "[topo][agree]") {
    for (const char *name : kFixtures) {
        INFO("fixture " << name);
        const topo::Snapshot &capture = fixture(name);
        auto sysfs = topo::read_sysfs(fixture_dir(name), fixture_sysfs_netdevs(fixture_dir(name)));
        REQUIRE(sysfs.is_ok());
        CHECK(sysfs->source == "sysfs:" + fixture_dir(name));
        // Netdevs from sys/class/net + proc/net/vlan vs from `ip -j -d link`.
        CHECK(testing::dump(*sysfs) == testing::dump(capture));

        testing::FakeVerbs fake(capture);
        topo::NetdevReader same_netdevs = [&]() -> util::Result<std::vector<topo::NetdevInfo>> {
            return capture.netdevs;
        };
        auto live = topo::read_live(fake.api(), same_netdevs);
        REQUIRE(live.is_ok());
        CHECK(live->warnings.empty());
        // GIDs through ibv_query_gid_table, names resolved from ifindexes.
        CHECK(testing::dump(*live, false) == testing::dump(capture, false));
        for (const auto &d : live->devices) {
            for (const auto &p : d.ports) {
                CHECK(p.active_mtu > 0); // what sysfs cannot show, verbs can
            }
        }
    }
}

TEST_CASE("live reader: GID fallback, LAG ports, broken devices", "[topo][live]") {
    const topo::Snapshot &lag = fixture("mlx5_lag");
    testing::FakeVerbs fake(lag);
    fake.device("mlx5_bond_0").num_lag_ports = 2;
    fake.fail(testing::Call::kQueryGidTable, EOPNOTSUPP, 0, -1);
    std::vector<std::string> warnings;
    auto devs = topo::read_rdma_verbs(fake.api(), &warnings);
    REQUIRE(devs.is_ok());
    REQUIRE(devs->size() == 1);
    CHECK((*devs)[0].num_lag_ports == 2);
    CHECK((*devs)[0].ports[0].active_mtu == 4096); // bond0 MTU 9000
    CHECK((*devs)[0].ports[0].gids.size() == 8);
    // The per-slot fallback asked every slot of the 255-entry table.
    CHECK(fake.calls(testing::Call::kQueryGidEx) == 255);
    CHECK(warnings.empty());

    testing::FakeVerbs rxe(fixture("rxe_bond"));
    auto r = topo::read_rdma_verbs(rxe.api(), nullptr);
    REQUIRE(r.is_ok());
    CHECK((*r)[0].num_lag_ports == 0); // not mlx5: mlx5dv is not asked
    CHECK(rxe.calls(testing::Call::kMlx5dvQueryDevice) == 0);

    testing::FakeVerbs broken(lag);
    broken.fail(testing::Call::kOpenDevice, EACCES);
    warnings.clear();
    auto b = topo::read_rdma_verbs(broken.api(), &warnings);
    REQUIRE(b.is_ok());
    CHECK(b->empty());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "ibv_open_device(mlx5_bond_0) failed: Permission denied (13); device left out");

    testing::FakeVerbs none;
    auto n = topo::read_rdma_verbs(none.api(), nullptr);
    REQUIRE(n.is_ok());
    CHECK(n->empty());
}

TEST_CASE("live reader on this machine: rdma-core and the host's netdevs", "[topo][live]") {
    auto snap = topo::read_live(verbs::real_verbs(), topo::live_netdev_reader());
    REQUIRE(snap.is_ok());
    CHECK(snap->source == "live");
    const topo::NetdevInfo *lo = snap->find_netdev("lo");
    REQUIRE(lo != nullptr);
    CHECK(lo->ifindex > 0);
    CHECK(lo->mtu > 0);
    auto addrs = topo::read_addresses_getifaddrs();
    REQUIRE(addrs.is_ok());
    CHECK_FALSE(addrs->empty());
}

TEST_CASE("capture reader: unreadable or malformed captures fail clearly", "[topo][capture]") {
    using util::Code;
    auto missing = topo::read_capture("/nonexistent/capture");
    REQUIRE_FALSE(missing.is_ok());
    CHECK(missing.status().code() == Code::kNotFound);
    CHECK(missing.status().message() ==
          "capture directory /nonexistent/capture does not exist or is not a directory");

    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    auto write = [&](const std::string &rel, const std::string &text) {
        testing::write_file(t.path() + "/" + rel, text);
    };
    SECTION("no ip-link.json") {
        REQUIRE(::unlink((t.path() + "/ip-link.json").c_str()) == 0);
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == Code::kNotFound);
        CHECK(r.status().message().find("is not a roce-doctor capture: " + t.path() +
                                        "/ip-link.json is missing") != std::string::npos);
    }
    SECTION("truncated JSON") {
        write("ip-link.json", "[{\"ifindex\": 1,");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == Code::kInvalidArgument);
        CHECK(r.status().message() == t.path() + "/ip-link.json: malformed JSON at byte 15: "
                                                 "expected a member name in double quotes "
                                                 "(found end of input)");
    }
    SECTION("JSON of the wrong shape") {
        write("ip-addr.json", "{\"ifname\": \"lo\"}");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message() == t.path() + "/ip-addr.json: expected a JSON array (the "
                                                 "output of `ip -j addr show`)");
    }
    SECTION("a link without a name") {
        write("ip-link.json", "[{\"ifindex\": 3, \"mtu\": 1500}]");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message().find("entry 0 has no \"ifname\" or \"ifindex\"") !=
              std::string::npos);
    }
    SECTION("an address with a bad prefix") {
        write("ip-addr.json",
              "[{\"ifname\": \"bond0\", \"addr_info\": [{\"local\": \"198.18.0.11\", "
              "\"prefixlen\": 40}]}]");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message() ==
              t.path() + "/ip-addr.json: bond0 has a malformed address '198.18.0.11/40'");
    }
    const std::string port = "/sys/class/infiniband/mlx5_bond_0/ports/1";
    SECTION("a GID that is not a GID") {
        write(port.substr(1) + "/gids/3", "fe80::1\n");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == Code::kInvalidArgument);
        CHECK(r.status().message() ==
              "capture " + t.path() + ": RDMA device mlx5_bond_0 port 1: " + t.path() + port +
                  "/gids/3: 'fe80::1' is not a GID (expected 8 groups of 4 hex digits separated "
                  "by ':')");
    }
    SECTION("a pkey out of range") {
        write(port.substr(1) + "/pkeys/0", "0x1ffff\n");
        auto r = topo::read_capture(t.path());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message().find("/pkeys/0: '0x1ffff' is not a pkey") != std::string::npos);
    }
    SECTION("a populated GID whose type cannot be read is skipped with a warning") {
        REQUIRE(::unlink((t.path() + port + "/gid_attrs/types/5").c_str()) == 0);
        auto r = topo::read_capture(t.path());
        REQUIRE(r.is_ok());
        CHECK(r->devices[0].ports[0].find_gid(5) == nullptr);
        CHECK(r->devices[0].ports[0].gids.size() == 7);
        REQUIRE(r->warnings.size() == 1);
        CHECK(r->warnings[0] == "open " + t.path() + port +
                                    "/gid_attrs/types/5 failed: No such file or directory (2); "
                                    "gid[5] ::ffff:198.19.0.11 skipped because its type is "
                                    "unknown");
    }
}

TEST_CASE("sysfs reader: real sysfs symlinks and a capture's link files read alike",
          "[topo][sysfs]") {
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    const std::string net = t.path() + "/sys/class/net/";
    for (const char *rel : {"ens1f0np0/master", "ens1f1np1/master", "bond0.3027/lower_bond0"}) {
        REQUIRE(::unlink((net + rel).c_str()) == 0);
        REQUIRE(::symlink("../bond0", (net + rel).c_str()) == 0);
    }
    // Both policies read the link form: readlinkat names the target without
    // following it.
    using topo::fs::Links;
    using topo::fs::Tree;
    auto with_links = topo::read_netdevs_sysfs(Tree(t.path(), Links::kRefuse), nullptr);
    auto with_files =
        topo::read_netdevs_sysfs(Tree(fixture_dir("mlx5_lag"), Links::kRefuse), nullptr);
    auto followed = topo::read_netdevs_sysfs(Tree(t.path(), Links::kFollow), nullptr);
    REQUIRE(with_links.is_ok());
    REQUIRE(with_files.is_ok());
    REQUIRE(followed.is_ok());
    topo::Snapshot a, b, c;
    a.netdevs = *with_links;
    b.netdevs = *with_files;
    c.netdevs = *followed;
    CHECK(testing::dump(a) == testing::dump(b));
    CHECK(testing::dump(c) == testing::dump(b));
    CHECK(a.find_netdev("ens1f0np0")->master == "bond0");
    CHECK(a.find_netdev("bond0.3027")->parent == "bond0");
    const Tree tree(t.path(), Links::kRefuse);
    auto link = tree.link_name("sys/class/net/ens1f0np0/master");
    REQUIRE(link.is_ok());
    CHECK(*link == "bond0");
    auto missing = tree.link_name("sys/class/net/lo/master");
    REQUIRE_FALSE(missing.is_ok());
    CHECK(missing.status().message() ==
          "lstat " + net + "lo/master failed: No such file or directory (2)");
}

TEST_CASE("sysfs reader: overlay kinds from DEVTYPE, stacked devices from lower_*",
          "[topo][sysfs]") {
    // What sysfs shows (checked in a network namespace on Linux 6.1): a
    // VXLAN's uevent says DEVTYPE=vxlan, a bridge's DEVTYPE=bridge (and
    // Geneve's DEVTYPE=geneve); a macvlan has no DEVTYPE, only a lower_*
    // link to the device it sits on, and no `device` link (no hardware).
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    const std::string net = t.path() + "/sys/class/net/";
    auto add = [&](const std::string &name, int ifindex, const std::string &uevent) {
        REQUIRE(::mkdir((net + name).c_str(), 0755) == 0);
        testing::write_file(net + name + "/ifindex", std::to_string(ifindex) + "\n");
        testing::write_file(net + name + "/mtu", "1450\n");
        testing::write_file(net + name + "/operstate", "up\n");
        testing::write_file(net + name + "/uevent", uevent);
    };
    add("vxlan100", 20, "DEVTYPE=vxlan\nINTERFACE=vxlan100\nIFINDEX=20\n");
    add("br0", 21, "DEVTYPE=bridge\nINTERFACE=br0\nIFINDEX=21\n");
    add("mv0", 22, "INTERFACE=mv0\nIFINDEX=22\n");
    testing::write_file(net + "mv0/lower_bond0", "../bond0\n");
    using topo::fs::Links;
    using topo::fs::Tree;
    auto got = topo::read_netdevs_sysfs(Tree(t.path(), Links::kRefuse), nullptr);
    REQUIRE(got.is_ok());
    topo::Snapshot s;
    s.netdevs = *got;
    REQUIRE(s.find_netdev("vxlan100") != nullptr);
    CHECK(s.find_netdev("vxlan100")->kind == "vxlan");
    CHECK(s.find_netdev("vxlan100")->parent.empty());
    CHECK(s.find_netdev("br0")->kind == "bridge");
    CHECK(s.find_netdev("mv0")->kind.empty());
    CHECK(s.find_netdev("mv0")->parent == "bond0");
    // A physical netdev (no lower_*) keeps no parent; the VLAN keeps its own.
    CHECK(s.find_netdev("ens1f0np0")->parent.empty());
    CHECK(s.find_netdev("bond0.3027")->parent == "bond0");
}

TEST_CASE("ip -j -d link: ipvlan, macvtap and ipvtap sit on their link", "[topo][ip]") {
    auto got = topo::parse_ip_link_json(
        R"([{"ifindex":7,"ifname":"ipv0","link":"bond0","mtu":1500,"operstate":"UP",
             "linkinfo":{"info_kind":"ipvlan"}},
            {"ifindex":8,"ifname":"vx0","mtu":1450,"operstate":"UP",
             "linkinfo":{"info_kind":"vxlan"}}])",
        "test");
    REQUIRE(got.is_ok());
    REQUIRE(got->size() == 2);
    CHECK((*got)[0].kind == "ipvlan");
    CHECK((*got)[0].parent == "bond0");
    CHECK((*got)[1].kind == "vxlan");
    CHECK((*got)[1].parent.empty());
}
