// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// netmon::invalidate: what each monitor event makes a SnapshotCache read
// again at its next use - counted through the cache's injected readers; and
// feed_cache over a running (polling, and blind) monitor.
#include <infiniband/verbs.h>

#include <chrono>
#include <mutex>

#include "catch.h"
#include "netmon/cache_feed.h"
#include "netmon_test_util.h"

using namespace roce;
using netmon::Event;
using netmon::EventKind;

namespace {

/// Two devices on two bonds; readers that count.
struct Counting {
    Counting() {
        for (const char *name : {"mlx5_bond_0", "mlx5_bond_1"}) {
            topo::DeviceInfo d;
            d.name = name;
            d.phys_port_cnt = 1;
            d.ports.push_back(topo::PortInfo{});
            d.ports[0].port = 1;
            machine.devices.push_back(d);
        }
        topo::CacheSources s;
        s.machine = [this]() -> util::Result<topo::Snapshot> {
            ++machine_reads;
            return machine;
        };
        s.device = [this](const std::string &name,
                          std::vector<std::string> *) -> util::Result<topo::DeviceInfo> {
            devices_read.push_back(name);
            return *machine.find_device(name);
        };
        s.netdevs = [this]() -> util::Result<std::vector<topo::NetdevInfo>> {
            ++netdev_reads;
            return machine.netdevs;
        };
        cache = std::make_unique<topo::SnapshotCache>(s);
        REQUIRE(cache->current().is_ok());
    }
    topo::Snapshot machine;
    int machine_reads = 0, netdev_reads = 0;
    std::vector<std::string> devices_read;
    std::unique_ptr<topo::SnapshotCache> cache;
};

Event event(EventKind k) {
    Event e;
    e.kind = k;
    return e;
}

Event verbs_event(ibv_event_type t, const char *dev) {
    Event e = event(EventKind::kVerbsAsync);
    e.verbs_event = t;
    e.rdma_device = dev;
    e.rdma_port = 1;
    return e;
}

Event on_bond(EventKind k, const char *netdev, std::vector<netmon::RdmaPortRef> rdma) {
    Event e = event(k);
    e.netdev = netdev;
    e.rdma = std::move(rdma);
    return e;
}

struct Case {
    const char *what;
    std::vector<Event> events;
    int machine_reads; ///< after the first
    int netdev_reads;
    std::vector<std::string> devices_read; ///< in name order
};

} // namespace

TEST_CASE("netmon::invalidate: each event marks what it may have changed, once per burst",
          "[netmon][cache]") {
    const netmon::RdmaPortRef b0{"mlx5_bond_0", 1};
    const netmon::RdmaPortRef b1{"mlx5_bond_1", 1};
    const std::vector<Case> cases = {
        {"GID_CHANGE: that device only",
         {verbs_event(IBV_EVENT_GID_CHANGE, "mlx5_bond_1")},
         0,
         0,
         {"mlx5_bond_1"}},
        {"a burst of GID_CHANGE and PORT_ERR: one read",
         {verbs_event(IBV_EVENT_GID_CHANGE, "mlx5_bond_0"),
          verbs_event(IBV_EVENT_GID_CHANGE, "mlx5_bond_0"),
          verbs_event(IBV_EVENT_PORT_ERR, "mlx5_bond_0")},
         0,
         0,
         {"mlx5_bond_0"}},
        {"a QP's async event reads nothing",
         {verbs_event(IBV_EVENT_QP_LAST_WQE_REACHED, "mlx5_bond_0"),
          verbs_event(IBV_EVENT_COMM_EST, "mlx5_bond_0")},
         0,
         0,
         {}},
        {"address replaced on a bond: the netdevs and the device under it",
         {on_bond(EventKind::kAddressRemoved, "bond0", {b0}),
          on_bond(EventKind::kAddressAdded, "bond0", {b0})},
         0,
         1,
         {"mlx5_bond_0"}},
        {"a member of one bond down, MTU of the other",
         {on_bond(EventKind::kBondMemberDown, "ens1f0np0", {b0}),
          on_bond(EventKind::kMtuChanged, "bond1", {b1})},
         0,
         1,
         {"mlx5_bond_0", "mlx5_bond_1"}},
        {"a netdev no RDMA port sits on: the netdevs only",
         {on_bond(EventKind::kLinkDown, "eth9", {})},
         0,
         1,
         {}},
        {"RDMA device appeared / its netdevs changed",
         {[] {
              Event e = event(EventKind::kRdmaDeviceAppeared);
              e.rdma_device = "mlx5_bond_1";
              return e;
          }(),
          [] {
              Event e = event(EventKind::kRdmaNetdevsChanged);
              e.rdma_device = "mlx5_bond_0";
              return e;
          }()},
         0,
         0,
         {"mlx5_bond_0", "mlx5_bond_1"}},
        {"resync: the whole machine, nothing partial",
         {verbs_event(IBV_EVENT_GID_CHANGE, "mlx5_bond_0"), event(EventKind::kResync)},
         1,
         0,
         {}},
    };
    for (const auto &c : cases) {
        INFO(c.what);
        Counting k;
        uint64_t gen = k.cache->generation();
        for (const auto &e : c.events) {
            netmon::invalidate(*k.cache, e);
        }
        CHECK(k.devices_read.empty()); // marking reads nothing
        REQUIRE(k.cache->current().is_ok());
        REQUIRE(k.cache->current().is_ok());
        CHECK(k.machine_reads - 1 == c.machine_reads);
        CHECK(k.netdev_reads == c.netdev_reads);
        CHECK(k.devices_read == c.devices_read);
        bool changed = c.machine_reads + c.netdev_reads + c.devices_read.size() > 0;
        CHECK(k.cache->generation() == gen + (changed ? 1 : 0));
    }
}

TEST_CASE("netmon::feed_cache: a polling monitor's events reach the cache; netdevs come from "
          "its model; a blind monitor leaves the cache ageing",
          "[netmon][cache]") {
    using namespace std::chrono_literals;
    std::mutex mu;
    std::vector<topo::NetdevInfo> kernel(1);
    kernel[0].name = "eth0";
    kernel[0].ifindex = 2;
    kernel[0].mtu = 1500;
    kernel[0].operstate = topo::OperState::kUp;
    netmon::MonitorOptions opt;
    opt.use_netlink = false;
    opt.fallback_interval = 20ms;
    opt.fallback_poll = [&]() -> util::Result<topo::Snapshot> {
        std::lock_guard<std::mutex> g(mu);
        topo::Snapshot s;
        s.netdevs = kernel;
        return s;
    };
    netmon::Monitor mon(opt);
    REQUIRE(mon.start().is_ok());
    REQUIRE(mon.mode() == netmon::MonitorMode::kPolling);

    int machine_reads = 0, device_reads = 0;
    topo::CacheSources src;
    src.netdevs = netmon::model_netdev_reader(mon);
    src.machine = [&]() -> util::Result<topo::Snapshot> {
        ++machine_reads;
        topo::Snapshot s;
        s.netdevs = *src.netdevs();
        return s;
    };
    src.device = [&](const std::string &name,
                     std::vector<std::string> *) -> util::Result<topo::DeviceInfo> {
        ++device_reads;
        return util::Status(util::Code::kNotFound, name + " is not present");
    };
    topo::CacheOptions every;
    every.max_age_seconds = 0; // unmonitored: a read at every view
    topo::SnapshotCache cache(src, every);
    REQUIRE(cache.current().is_ok());
    CHECK(machine_reads == 1);
    auto feed = netmon::feed_cache(mon, cache);
    netmon::test::Collector col; // after the feed: it sees each event once the feed has
    auto sub = mon.subscribe(netmon::EventFilter::all(), col.callback());
    auto v = cache.view_for("mlx5_bond_0");
    REQUIRE(v.is_ok());
    CHECK(machine_reads == 2); // read again in full: the cache predates the feed
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(device_reads == 0); // monitored: nothing ages
    {
        std::lock_guard<std::mutex> g(mu);
        kernel[0].mtu = 9000;
    }
    REQUIRE(col.wait_for(EventKind::kMtuChanged, "eth0"));
    auto after = cache.current();
    REQUIRE(after.is_ok());
    CHECK(after->snapshot->find_netdev("eth0")->mtu == 9000);
    CHECK(cache.stats().netdev_reads == 1);
    CHECK(machine_reads == 2);
    CHECK(device_reads == 0);
    mon.stop();

    netmon::MonitorOptions blind_opt;
    blind_opt.use_netlink = false;
    netmon::Monitor blind(blind_opt);
    REQUIRE(blind.start().is_ok());
    REQUIRE(blind.mode() == netmon::MonitorMode::kBlind);
    topo::SnapshotCache ageing(src, every);
    auto blind_feed = netmon::feed_cache(blind, ageing);
    REQUIRE(ageing.view_for("mlx5_bond_0").is_ok());
    REQUIRE(ageing.view_for("mlx5_bond_0").is_ok());
    CHECK(device_reads == 1); // not monitored: the device is read again at age 0
    blind.stop();
}
