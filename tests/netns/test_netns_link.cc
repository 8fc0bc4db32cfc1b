// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The monitor against the real kernel, in a private network namespace:
// addresses, link state, MTU, macvlan and VLAN stacking, bridge ports,
// start/stop hygiene.
#include <chrono>
#include <optional>
#include <thread>

#include "catch.h"
#include "netmon/dump.h"
#include "netmon/monitor.h"
#include "netmon_test_util.h"
#include "netns_util.h"

using namespace roce;
using namespace roce::netmon;
using namespace roce::netmon::netns;
using roce::netmon::test::Collector;
using roce::netmon::test::eventually;
using roce::netmon::test::LockedCapture;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

MonitorOptions options(util::LogSink *log) {
    MonitorOptions o;
    o.log = log;
    o.rdma_dev_dir = "";
    return o;
}

// A copy: the snapshot is a temporary.
std::optional<topo::NetdevInfo> find(const topo::Snapshot &s, const std::string &name) {
    const topo::NetdevInfo *n = s.find_netdev(name);
    return n != nullptr ? std::optional<topo::NetdevInfo>(*n) : std::nullopt;
}

} // namespace

TEST_CASE("netns: address add, replace and remove arrive in order with their attributes",
          "[netns]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link set v0 up && ip link set v1 up");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(
        EventFilter::only({EventKind::kAddressAdded, EventKind::kAddressRemoved}), col.callback());
    REQUIRE(mon.start().is_ok());
    REQUIRE(mon.mode() == MonitorMode::kNetlink);
    auto v0 = find(mon.snapshot(), "v0");
    REQUIRE(v0);
    int ifindex = v0->ifindex;

    sh("ip addr add 198.18.0.1/24 dev v0");
    // A replace of the same address (new lifetimes) is not a new address.
    sh("ip addr replace 198.18.0.1/24 dev v0 valid_lft 3600 preferred_lft 1800");
    sh("ip -6 addr add 2001:db8::1/64 dev v0 nodad");
    // The kernel announces a new IPv6 address from its DAD work item, even
    // with nodad: possibly after `ip` returned and after the next IPv4
    // change (seen under load). Wait for it so that the order checked below
    // is the order of the changes.
    REQUIRE(col.wait([](const auto &v) { return v.size() >= 2; }));
    // Same address, another prefix: IPv4 keeps both, they are two addresses.
    sh("ip addr add 198.18.0.1/16 dev v0");
    sh("ip addr del 198.18.0.1/24 dev v0");
    sh("ip -6 addr del 2001:db8::1/64 dev v0");
    REQUIRE(col.wait([](const auto &v) { return v.size() >= 5; }));
    std::this_thread::sleep_for(100ms); // nothing else may follow
    auto ev = col.events();
    CHECK(brief(ev) == Strings{"address-added v0 198.18.0.1/24", "address-added v0 2001:db8::1/64",
                               "address-added v0 198.18.0.1/16", "address-removed v0 198.18.0.1/24",
                               "address-removed v0 2001:db8::1/64"});
    for (size_t i = 0; i < ev.size(); ++i) {
        CHECK(ev[i].ifindex == ifindex);
        CHECK(ev[i].rdma.empty());
        if (i > 0) {
            CHECK(ev[i].seq > ev[i - 1].seq);
            CHECK(ev[i].observed >= ev[i - 1].observed);
        }
    }
    auto now = find(mon.snapshot(), "v0");
    REQUIRE(now);
    REQUIRE(now->addresses.size() == 1);
    CHECK(now->addresses[0].address.to_string() == "198.18.0.1");
    CHECK(now->addresses[0].prefix_len == 16);
    CHECK(mon.stats().overflows == 0);
    mon.stop();
}

TEST_CASE("netns: link down/up on a veth pair and an MTU change", "[netns]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link set v0 up && ip link set v1 up");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(
        EventFilter::only({EventKind::kLinkUp, EventKind::kLinkDown, EventKind::kMtuChanged}),
        col.callback());
    REQUIRE(mon.start().is_ok());
    // The links came up just before the monitor started: let the kernel's
    // (asynchronous) operstate updates arrive, then start from a clean slate.
    REQUIRE(eventually([&] {
        return is_usable(*find(mon.snapshot(), "v0")) && is_usable(*find(mon.snapshot(), "v1"));
    }));
    std::this_thread::sleep_for(50ms);
    col.clear();

    // v1 administratively down: v0 loses its carrier (operstate LOWERLAYERDOWN).
    sh("ip link set v1 down");
    REQUIRE(col.wait([](const auto &v) { return v.size() >= 2; }));
    auto ev = col.events();
    CHECK(brief(ev) == Strings{"link-down v1", "link-down v0"});
    auto v0 = find(mon.snapshot(), "v0");
    CHECK(v0->admin_up);
    CHECK_FALSE(v0->carrier);
    CHECK(v0->operstate == topo::OperState::kLowerLayerDown);
    CHECK_FALSE(find(mon.snapshot(), "v1")->admin_up);

    col.clear();
    sh("ip link set v1 up");
    REQUIRE(col.wait([](const auto &v) { return v.size() >= 2; }));
    ev = col.events();
    REQUIRE(ev.size() == 2);
    CHECK(only(ev, {EventKind::kLinkUp}).size() == 2);
    CHECK(((ev[0].netdev == "v1" && ev[1].netdev == "v0") ||
           (ev[0].netdev == "v0" && ev[1].netdev == "v1")));

    col.clear();
    sh("ip link set v0 mtu 1400");
    sh("ip link set v0 mtu 9000");
    REQUIRE(col.wait([](const auto &v) { return v.size() >= 2; }));
    std::this_thread::sleep_for(100ms);
    CHECK(brief(col.events()) == Strings{"mtu-changed v0 1500->1400", "mtu-changed v0 1400->9000"});
    CHECK(find(mon.snapshot(), "v0")->mtu == 9000);
    mon.stop();
}

TEST_CASE("netns: macvlan stacked on a veth follows its lower device", "[netns]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link set v0 up && ip link set v1 up");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());

    sh("ip link add m0 link v0 type macvlan mode bridge");
    REQUIRE(col.wait_for(EventKind::kNetdevAdded, "m0"));
    auto m0 = find(mon.snapshot(), "m0");
    REQUIRE(m0);
    CHECK(m0->kind == "macvlan");
    CHECK(m0->parent == "v0");
    CHECK(m0->vlan_id == -1);

    sh("ip link set m0 up");
    REQUIRE(col.wait_for(EventKind::kLinkUp, "m0"));
    sh("ip addr add 198.19.0.1/24 dev m0");
    REQUIRE(col.wait_for(EventKind::kAddressAdded, "m0"));
    sh("ip link set m0 mtu 1400");
    REQUIRE(col.wait_for(EventKind::kMtuChanged, "m0"));

    // The lower device goes down: both are down.
    size_t mark = col.size();
    sh("ip link set v0 down");
    REQUIRE(col.wait_for(EventKind::kLinkDown, "m0", mark));
    REQUIRE(col.wait_for(EventKind::kLinkDown, "v0", mark));
    CHECK(find(mon.snapshot(), "m0")->operstate == topo::OperState::kLowerLayerDown);

    // Deleting the lower device takes the macvlan and its address with it.
    mark = col.size();
    sh("ip link del v0");
    REQUIRE(col.wait_for(EventKind::kNetdevRemoved, "m0", mark));
    REQUIRE(col.wait_for(EventKind::kNetdevRemoved, "v0", mark));
    REQUIRE(col.wait_for(EventKind::kNetdevRemoved, "v1", mark));
    auto ev = col.events();
    ev.erase(ev.begin(), ev.begin() + static_cast<long>(mark));
    auto m0_ev = Strings{};
    for (const auto &s : brief(ev)) {
        if (s.find(" m0") != std::string::npos) {
            m0_ev.push_back(s);
        }
    }
    CHECK(m0_ev == Strings{"address-removed m0 198.19.0.1/24", "netdev-removed m0"});
    CHECK_FALSE(find(mon.snapshot(), "m0"));
    CHECK(mon.snapshot().netdevs.size() == 1); // lo
    mon.stop();
}

TEST_CASE("netns: a bridge port is a member of a non-bond master; leaving the bridge is not "
          "a deletion",
          "[netns]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link add br0 type bridge");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());
    sh("ip link set v1 master br0");
    REQUIRE(eventually([&] { return find(mon.snapshot(), "v1")->master == "br0"; }));
    sh("ip link set v1 nomaster"); // the bridge sends an AF_BRIDGE RTM_DELLINK
    REQUIRE(eventually([&] { return find(mon.snapshot(), "v1")->master.empty(); }));
    std::this_thread::sleep_for(50ms);
    CHECK(find(mon.snapshot(), "v1"));
    for (const auto &e : col.events()) {
        CHECK(e.kind != EventKind::kNetdevRemoved);
        CHECK(e.kind != EventKind::kBondMemberAdded);
        CHECK(e.kind != EventKind::kBondMemberRemoved);
    }
    mon.stop();
}

TEST_CASE("netns: a real 802.1Q VLAN on a veth", "[netns][vlan]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link set v0 up && ip link set v1 up");
    LockedCapture log;
    Monitor mon(options(&log));
    Collector col;
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    REQUIRE(mon.start().is_ok());
    sh("ip link add link v0 name v0.3027 type vlan id 3027");
    REQUIRE(col.wait_for(EventKind::kNetdevAdded, "v0.3027"));
    auto v = find(mon.snapshot(), "v0.3027");
    REQUIRE(v);
    CHECK(v->kind == "vlan");
    CHECK(v->vlan_id == 3027);
    CHECK(v->parent == "v0");
    sh("ip link set v0.3027 up");
    sh("ip addr add 198.19.0.1/24 dev v0.3027");
    REQUIRE(col.wait_for(EventKind::kAddressAdded, "v0.3027"));
    CHECK(col.wait_for(EventKind::kLinkUp, "v0.3027"));
    mon.stop();
}

TEST_CASE("netns: start/stop leaves no thread and no fd behind; the one-shot dump agrees",
          "[netns]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip addr add 198.18.0.1/24 dev v0");
    int fds = open_fd_count();
    int threads = thread_count();
    for (int i = 0; i < 50; ++i) {
        LockedCapture log;
        Monitor mon(options(&log));
        auto sub = mon.subscribe(EventFilter::all(), [](const Event &) {});
        REQUIRE(mon.start().is_ok());
        REQUIRE(mon.mode() == MonitorMode::kNetlink);
        if (i % 2 == 0) {
            mon.stop();
        } // odd rounds: the destructor stops it
    }
    CHECK(open_fd_count() == fds);
    CHECK(thread_count() == threads);

    Monitor mon(options(nullptr));
    REQUIRE(mon.start().is_ok());
    auto dump = dump_model();
    REQUIRE(dump.is_ok());
    auto a = mon.snapshot().netdevs;
    auto b = dump->netdevs();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        CHECK(describe(a[i]) == describe(b[i]));
    }
    mon.stop();
}
