// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// topo::SnapshotCache: one shared snapshot, read once, refreshed per device
// or netdev view on invalidation or age; counted through injected readers.
// And the per-device reader, and QueuePair preflighting from the cache.
#include <algorithm>
#include <atomic>
#include <thread>

#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "qp/queue_pair.h"
#include "topo/live_reader.h"
#include "topo/snapshot_cache.h"
#include "util/log.h"

using namespace roce;
using roce::testing::Call;
using roce::testing::fixture;
using roce::testing::lag_selection;

namespace {

/// Readers over a scripted machine (a fixture snapshot the test edits),
/// counting their calls.
struct Machine {
    explicit Machine(const char *fix) : now(fixture(fix)) {}

    topo::CacheSources sources(bool partial = true) {
        topo::CacheSources s;
        s.machine = [this]() -> util::Result<topo::Snapshot> {
            ++machine_reads;
            if (fail_machine) {
                return util::Status(util::Code::kUnavailable, "machine unreadable");
            }
            return now;
        };
        if (partial) {
            s.device = [this](const std::string &name,
                              std::vector<std::string> *) -> util::Result<topo::DeviceInfo> {
                ++device_reads;
                if (during_read) {
                    during_read();
                }
                if (fail_device != 0) {
                    return util::Status::from_errno(fail_device, "ibv_open_device(" + name + ")");
                }
                if (const topo::DeviceInfo *d = now.find_device(name)) {
                    topo::DeviceInfo copy = *d;
                    for (auto &p : copy.ports) {
                        for (auto &g : p.gids) {
                            g.netdev.clear(); // as the verbs reader: ifindex only
                        }
                    }
                    return copy;
                }
                return util::Status(util::Code::kNotFound, name + " is not present");
            };
            s.netdevs = [this]() -> util::Result<std::vector<topo::NetdevInfo>> {
                ++netdev_reads;
                return now.netdevs;
            };
        }
        s.clock = [this] { return clock; };
        return s;
    }

    topo::GidEntry &gid(int index) {
        for (auto &g : now.devices[0].ports[0].gids) {
            if (g.index == index) {
                return g;
            }
        }
        FAIL("no gid " << index);
        return now.devices[0].ports[0].gids[0];
    }

    topo::Snapshot now;
    int machine_reads = 0, device_reads = 0, netdev_reads = 0;
    bool fail_machine = false;
    int fail_device = 0;
    std::function<void()> during_read;
    double clock = 100.0;
};

std::shared_ptr<const topo::Snapshot> view(topo::SnapshotCache &c) {
    auto v = c.current();
    REQUIRE(v.is_ok());
    return v->snapshot;
}

} // namespace

TEST_CASE("snapshot cache: one machine read, then the same snapshot for every use",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    CHECK(cache.generation() == 0);
    CHECK(m.machine_reads == 0); // lazy: nothing is read before the first use
    auto first = view(cache);
    for (int i = 0; i < 1000; ++i) {
        auto v = cache.current();
        REQUIRE(v.is_ok());
        CHECK(v->snapshot == first);
        CHECK(v->generation == 1);
    }
    CHECK(m.machine_reads == 1);
    CHECK(m.device_reads == 0);
    CHECK(m.netdev_reads == 0);
    topo::CacheStats s = cache.stats();
    CHECK(s.machine_reads == 1);
    CHECK(s.generation == 1);
}

TEST_CASE("snapshot cache: a device invalidation re-reads that device once, per burst",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    auto before = view(cache);
    m.gid(3).index = 12; // the kernel moved our GID
    for (int i = 0; i < 5; ++i) {
        cache.invalidate_device("mlx5_bond_0"); // a burst of GID_CHANGE events
    }
    CHECK(m.device_reads == 0); // marking reads nothing
    auto after = view(cache);
    CHECK(m.device_reads == 1);
    CHECK(m.machine_reads == 1);
    CHECK(m.netdev_reads == 0);
    CHECK(cache.generation() == 2);
    CHECK(after != before);
    const topo::PortInfo &p = after->devices[0].ports[0];
    REQUIRE(p.find_gid(12) != nullptr);
    CHECK(p.find_gid(3) == nullptr);
    CHECK(p.find_gid(12)->netdev == "bond0"); // names linked from the netdevs held
    // A view taken earlier is immutable and still valid.
    CHECK(before->devices[0].ports[0].find_gid(3) != nullptr);
    view(cache);
    CHECK(m.device_reads == 1);
    CHECK(cache.generation() == 2);
}

TEST_CASE("snapshot cache: netdev invalidation re-reads the netdevs and renames GIDs",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    view(cache);
    for (auto &n : m.now.netdevs) {
        if (n.name == "bond0") {
            n.name = "bond7"; // renamed: same ifindex
            n.mtu = 1500;
        }
    }
    cache.invalidate_netdevs();
    auto after = view(cache);
    CHECK(m.netdev_reads == 1);
    CHECK(m.device_reads == 0);
    CHECK(m.machine_reads == 1);
    CHECK(after->find_netdev("bond7")->mtu == 1500);
    CHECK(after->devices[0].ports[0].find_gid(3)->netdev == "bond7");
    CHECK(cache.generation() == 2);
}

TEST_CASE("snapshot cache: invalidate_all and missing partial readers read the machine",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    view(cache);
    cache.invalidate_device("mlx5_bond_0");
    cache.invalidate_all();
    view(cache);
    CHECK(m.machine_reads == 2);
    CHECK(m.device_reads == 0);

    Machine full("mlx5_lag");
    topo::SnapshotCache only_machine(full.sources(false));
    view(only_machine);
    only_machine.invalidate_device("mlx5_bond_0");
    view(only_machine);
    only_machine.invalidate_netdevs();
    view(only_machine);
    CHECK(full.machine_reads == 3);
    CHECK(only_machine.generation() == 3);
}

TEST_CASE("snapshot cache: a vanished device leaves the snapshot; a new one joins it",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    view(cache);
    topo::DeviceInfo dev = m.now.devices[0];
    m.now.devices.clear();
    cache.invalidate_device("mlx5_bond_0");
    auto gone = view(cache);
    CHECK(gone->devices.empty());
    CHECK(cache.stats().read_errors == 0);
    dev.name = "mlx5_bond_1"; // the LAG re-registered the device
    m.now.devices.push_back(dev);
    cache.invalidate_device("mlx5_bond_1");
    auto back = view(cache);
    REQUIRE(back->find_device("mlx5_bond_1") != nullptr);
    CHECK(back->find_device("mlx5_bond_1")->ports[0].find_gid(3)->netdev == "bond0");
    CHECK(m.machine_reads == 1);
    CHECK(m.device_reads == 2);
}

TEST_CASE("snapshot cache: a failed read publishes nothing and is tried again", "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    m.fail_machine = true;
    auto v = cache.current();
    REQUIRE_FALSE(v.is_ok());
    CHECK_THAT(v.status().message(), contains_text("snapshot cache"));
    CHECK(cache.generation() == 0);
    m.fail_machine = false;
    auto first = view(cache);
    CHECK(cache.generation() == 1);

    m.fail_device = EIO;
    cache.invalidate_device("mlx5_bond_0");
    v = cache.current();
    REQUIRE_FALSE(v.is_ok());
    CHECK_THAT(v.status().message(), contains_text("re-reading mlx5_bond_0"));
    CHECK(cache.generation() == 1);
    CHECK(cache.stats().read_errors == 2);
    m.fail_device = 0;
    auto again = view(cache); // the mark stayed
    CHECK(m.device_reads == 2);
    CHECK(again != first);
    CHECK(cache.generation() == 2);
}

TEST_CASE("snapshot cache: an invalidation during a refresh is read by the next one",
          "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    view(cache);
    m.during_read = [&] {
        m.during_read = nullptr;
        cache.invalidate_device("mlx5_bond_0"); // an event while the reader runs
    };
    cache.invalidate_device("mlx5_bond_0");
    view(cache);
    CHECK(m.device_reads == 1);
    view(cache);
    CHECK(m.device_reads == 2);
    view(cache);
    CHECK(m.device_reads == 2);
    CHECK(cache.generation() == 3);
}

TEST_CASE("snapshot cache: unmonitored, a device ages; monitored, nothing does", "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::CacheOptions o;
    o.max_age_seconds = 1.0;
    topo::SnapshotCache cache(m.sources(), o);
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.machine_reads == 1);
    m.clock += 0.5;
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 0);
    CHECK(m.netdev_reads == 0);
    m.clock += 0.5; // 1 s old: this device and the netdevs, not the machine
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 1);
    CHECK(m.netdev_reads == 1);
    CHECK(m.machine_reads == 1);
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 1);

    cache.set_monitored(true);
    m.clock += 3600;
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 1);
    CHECK(m.netdev_reads == 1);
    CHECK(cache.generation() == 2);

    Machine z("mlx5_lag");
    topo::CacheOptions every;
    every.max_age_seconds = 0; // a read per call, of the device concerned only
    topo::SnapshotCache eager(z.sources(), every);
    for (int i = 0; i < 3; ++i) {
        REQUIRE(eager.view_for("mlx5_bond_0").is_ok());
    }
    CHECK(z.machine_reads == 1);
    CHECK(z.device_reads == 2);
    CHECK(z.netdev_reads == 2);
}

TEST_CASE("snapshot cache: a device's age counts from before its read", "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources()); // max_age 1 s, unmonitored
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    m.clock += 1.0;
    m.during_read = [&] { m.clock += 0.9; }; // a slow read: a change may land meanwhile
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 1);
    m.during_read = nullptr;
    m.clock += 0.1; // 1 s after the read began, 0.1 s after it ended
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    CHECK(m.device_reads == 2);
}

TEST_CASE("snapshot cache: a refresh between two invalidations reads only what each marked",
          "[topo][cache]") {
    // What an event thread invalidating the device, then the netdevs, can
    // meet: a view taken between the two re-reads the device alone, the next
    // one the netdevs alone; each publishes a generation.
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    REQUIRE(cache.current().is_ok());
    cache.invalidate_device("mlx5_bond_0");
    REQUIRE(cache.view_for("mlx5_bond_0").is_ok());
    cache.invalidate_netdevs();
    auto v = cache.view_for("mlx5_bond_0");
    REQUIRE(v.is_ok());
    topo::CacheStats s = cache.stats();
    CHECK(s.machine_reads == 1);
    CHECK(s.device_reads == 1);
    CHECK(s.netdev_reads == 1);
    CHECK(v->generation == 3);
}

TEST_CASE("snapshot cache: views and invalidations from several threads", "[topo][cache]") {
    Machine m("mlx5_lag");
    topo::SnapshotCache cache(m.sources());
    REQUIRE(cache.current().is_ok());
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread events([&] {
        for (int i = 0; i < 200; ++i) {
            cache.invalidate_device("mlx5_bond_0");
            cache.invalidate_netdevs();
        }
        stop = true;
    });
    std::vector<std::thread> users;
    for (int t = 0; t < 3; ++t) {
        users.emplace_back([&] {
            uint64_t last = 0;
            while (!stop) {
                auto v = cache.view_for("mlx5_bond_0");
                if (!v.is_ok() || v->generation < last || v->snapshot->devices.size() != 1) {
                    ++bad;
                }
                last = v.is_ok() ? v->generation : last;
            }
        });
    }
    events.join();
    for (auto &u : users) {
        u.join();
    }
    REQUIRE(cache.current().is_ok());
    CHECK(bad == 0);
    topo::CacheStats s = cache.stats();
    CHECK(s.machine_reads == 1);
    CHECK(s.device_reads <= 201);
    // Every refresh after the first picture re-read the device, the netdevs
    // or both (a refresh may fall between the two invalidations and find
    // only one of them marked), and each published one generation.
    const uint64_t refreshes = s.generation - 1;
    CHECK(refreshes >= std::max(s.device_reads, s.netdev_reads));
    CHECK(refreshes <= s.device_reads + s.netdev_reads);
}

TEST_CASE("read_rdma_device: one device through verbs, as read_rdma_verbs reads it",
          "[topo][cache][readers]") {
    testing::FakeVerbs fake(fixture("mlx4_two_ports"));
    std::vector<std::string> warnings;
    auto all = topo::read_rdma_verbs(fake.api(), &warnings);
    REQUIRE(all.is_ok());
    REQUIRE(all->size() == 1);
    int opens = fake.calls(Call::kOpenDevice);
    auto one = topo::read_rdma_device(fake.api(), "mlx4_0", &warnings);
    REQUIRE(one.is_ok());
    CHECK(fake.calls(Call::kOpenDevice) == opens + 1);
    CHECK(one->name == "mlx4_0");
    REQUIRE(one->ports.size() == 2);
    for (size_t p = 0; p < 2; ++p) {
        const auto &a = one->ports[p];
        const auto &b = (*all)[0].ports[p];
        CHECK(a.gids.size() == b.gids.size());
        CHECK(a.pkeys == b.pkeys);
        CHECK(a.active_mtu == b.active_mtu);
    }
    auto none = topo::read_rdma_device(fake.api(), "mlx4_9", &warnings);
    REQUIRE_FALSE(none.is_ok());
    CHECK(none.status().code() == util::Code::kNotFound);
    CHECK(warnings.empty());
}

TEST_CASE("QueuePair over the cache: every transition preflighted, no machine read per "
          "transition, a moved GID still followed",
          "[topo][cache][qp]") {
    testing::FakeVerbs fake(fixture("mlx5_lag"));
    const verbs::VerbsApi &api = fake.api();
    const topo::Snapshot &cap = fixture("mlx5_lag");
    int machine_reads = 0;
    topo::CacheSources src;
    src.machine = [&]() {
        ++machine_reads;
        return topo::read_live(
            api, [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> { return cap.netdevs; });
    };
    src.device = topo::verbs_device_reader(api);
    src.netdevs = [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> { return cap.netdevs; };
    topo::SnapshotCache cache(src);
    cache.set_monitored(true);

    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    REQUIRE(n == 1);
    verbs::Context ctx(api.open_device(list[0]), verbs::ContextDeleter{&api});
    verbs::Pd pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
    verbs::Cq cq(api.create_cq(ctx.get(), 8, nullptr, nullptr, 0), verbs::CqDeleter{&api});
    util::CaptureSink log;
    auto make = [&](const select::Selection &sel) {
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = IBV_QPT_RC;
        init.cap = {2, 2, 1, 1, 0};
        verbs::Qp raw(api.create_qp(pd.get(), &init), verbs::QpDeleter{&api});
        REQUIRE(raw);
        return qp::QueuePair(api, std::move(raw), qp::QpType::kRC, sel,
                             qp::cache_snapshot_source(cache, sel.device), false, &log);
    };
    select::Selection sel = lag_selection(3);
    qp::RemoteEnd peer{sel.gid, 0x123, 7};
    int opens = fake.calls(Call::kOpenDevice);
    for (int i = 0; i < 10; ++i) {
        qp::QueuePair q = make(sel);
        REQUIRE(q.to_init().is_ok());
        REQUIRE(q.to_rtr(&peer).is_ok());
        REQUIRE(q.to_rts().is_ok());
    }
    CHECK(machine_reads == 1);
    CHECK(fake.calls(Call::kOpenDevice) == opens + 1); // the one machine read
    CHECK(cache.generation() == 1);

    // The kernel moves our GID (an address change on the bond), the monitor
    // says so: preflight sees it at the next transition, from one device read.
    auto &gids = fake.device("mlx5_bond_0").ports[0].gids;
    gids[12] = gids.at(3);
    gids.erase(3);
    qp::QueuePair q = make(sel);
    REQUIRE(q.to_init().is_ok());
    cache.invalidate_device("mlx5_bond_0");
    REQUIRE(q.to_rtr(&peer).is_ok());
    CHECK(q.selection().gid_index == 12);
    CHECK(fake.qp_attr(q.get()).ah_attr.grh.sgid_index == 12);
    REQUIRE(q.last_corrections().size() == 1);
    CHECK(machine_reads == 1);
    CHECK(cache.stats().device_reads == 1);
    CHECK(cache.generation() == 2);

    // Gone altogether: refused before the kernel sees it, as with a fresh read.
    gids.erase(12);
    cache.invalidate_device("mlx5_bond_0");
    qp::QueuePair r = make(sel);
    REQUIRE(r.to_init().is_ok());
    util::Status st = r.to_rtr(&peer);
    CHECK_FALSE(st.is_ok());
    CHECK_THAT(r.last_diagnostic(), contains_text("sgid_index 3"));
    CHECK(machine_reads == 1);
}
