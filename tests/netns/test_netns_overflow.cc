// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// A burst of thousands of address changes while the subscriber is slow and
// the socket buffer tiny: the kernel must report ENOBUFS, the monitor must
// resynchronise, and its model must end equal to a fresh dump.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "catch.h"
#include "netmon/dump.h"
#include "netmon/monitor.h"
#include "netmon_test_util.h"
#include "netns_util.h"

using namespace roce;
using namespace roce::netmon;
using namespace roce::netmon::netns;
using roce::netmon::test::LockedCapture;
using namespace std::chrono_literals;

namespace {

std::string model_text(const std::vector<topo::NetdevInfo> &v) {
    std::string s;
    for (const auto &n : v) {
        s += describe(n) + "\n";
    }
    return s;
}

// Writes an `ip -batch` file: `adds` /32 addresses on dev, then deletes the
// first `dels` of them.
std::string batch_file(const std::string &dev, int adds, int dels) {
    char path[] = "/tmp/netmon-burst-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream f(path);
    for (int i = 0; i < adds; ++i) {
        f << "addr add 10." << (i >> 16 & 255) << "." << (i >> 8 & 255) << "." << (i & 255)
          << "/32 dev " << dev << "\n";
    }
    for (int i = 0; i < dels; ++i) {
        f << "addr del 10." << (i >> 16 & 255) << "." << (i >> 8 & 255) << "." << (i & 255)
          << "/32 dev " << dev << "\n";
    }
    return path;
}

} // namespace

TEST_CASE("netns overflow: a burst against a slow subscriber ends in a resync and a correct "
          "model",
          "[netns][overflow]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    sh("ip link add v2 type veth peer name v3");
    LockedCapture log;
    MonitorOptions opt;
    opt.log = &log;
    opt.rdma_dev_dir = "";
    opt.rcvbuf_bytes = 1;     // the kernel rounds up to its minimum (a few KiB)
    opt.max_rcvbuf_bytes = 1; // and keep it there: every burst overruns
    Monitor mon(opt);
    std::atomic<int> resync_events{0};
    std::atomic<int> delivered{0};
    std::atomic<bool> hold{true};
    auto slow = mon.subscribe(EventFilter::all(), [&](const Event &e) {
        ++delivered;
        if (e.kind == EventKind::kResync) {
            ++resync_events;
        }
        // A consumer that first stalls the monitor thread for the whole
        // first burst (so the kernel must drop), then stays slow.
        while (hold) {
            std::this_thread::sleep_for(1ms);
        }
        std::this_thread::sleep_for(50us);
    });
    REQUIRE(mon.start().is_ok());
    int granted = mon.stats().rcvbuf;
    INFO("SO_RCVBUF granted: " << granted);
    CHECK(granted < 16384);

    std::string adds = batch_file("v0", 3000, 0);
    std::string dels = batch_file("v0", 0, 1500);
    sh("ip addr add 198.18.9.1/24 dev v0"); // the event the subscriber stalls on
    sh("ip -batch " + adds);
    hold = false;
    // The second burst meets a slow, not a stalled, consumer: overruns can
    // now also hit the resynchronisation itself.
    sh("ip -batch " + dels);
    sh("ip addr del 198.18.9.1/24 dev v0");
    sh("ip link set v2 mtu 1400 && ip link set v2 up && ip addr add 198.18.0.1/24 dev v2");
    unlink(adds.c_str());
    unlink(dels.c_str());

    // Quiet now: the model must converge to what a fresh dump says.
    std::string expect;
    bool equal = test::eventually(
        [&] {
            auto d = dump_model();
            if (!d.is_ok()) {
                return false;
            }
            expect = model_text(d->netdevs());
            return model_text(mon.snapshot().netdevs) == expect;
        },
        60s, 100ms);
    auto st = mon.stats();
    INFO(log.all());
    INFO("overflows " << st.overflows << ", resyncs " << st.resyncs << ", dump retries "
                      << st.dump_retries << ", messages " << st.messages << ", events "
                      << st.events);
    CHECK(equal);
    CHECK(st.overflows >= 1); // the kernel really reported ENOBUFS
    CHECK(st.resyncs >= 1);
    // Each resync is announced once (the last announcement may still be on
    // its way through the slow subscriber).
    CHECK(test::eventually([&] { return resync_events == static_cast<int>(mon.stats().resyncs); },
                           10s));
    CHECK(log.contains("rtnetlink overrun (ENOBUFS"));
    auto final_snap = mon.snapshot();
    auto v0 = final_snap.find_netdev("v0");
    REQUIRE(v0 != nullptr);
    CHECK(v0->addresses.size() == 1500);
    auto v2 = final_snap.find_netdev("v2");
    REQUIRE(v2 != nullptr);
    CHECK(v2->mtu == 1400);
    CHECK(v2->addresses.size() == 1);
    std::printf("overflow test: SO_RCVBUF %d, %llu ENOBUFS, %llu resyncs, %llu dump retries, "
                "%llu messages, %d events delivered\n",
                granted, static_cast<unsigned long long>(st.overflows),
                static_cast<unsigned long long>(st.resyncs),
                static_cast<unsigned long long>(st.dump_retries),
                static_cast<unsigned long long>(st.messages), delivered.load());
    mon.stop();
}

TEST_CASE("netns overflow: after an overrun the receive buffer grows up to its cap",
          "[netns][overflow]") {
    fresh_netns();
    sh("ip link add v0 type veth peer name v1");
    LockedCapture log;
    MonitorOptions opt;
    opt.log = &log;
    opt.rdma_dev_dir = "";
    opt.rcvbuf_bytes = 1;
    opt.max_rcvbuf_bytes = 1 << 20;
    Monitor mon(opt);
    std::atomic<bool> hold{true};
    auto stall = mon.subscribe(EventFilter::all(), [&](const Event &) {
        while (hold) {
            std::this_thread::sleep_for(1ms);
        }
    });
    REQUIRE(mon.start().is_ok());
    int before = mon.stats().rcvbuf;
    std::string file = batch_file("v0", 2000, 0);
    sh("ip -batch " + file);
    hold = false;
    unlink(file.c_str());
    bool resynced = test::eventually([&] { return mon.stats().resyncs >= 1; }, 30s);
    auto st = mon.stats();
    INFO(log.all());
    INFO("overflows " << st.overflows << ", resyncs " << st.resyncs << ", dump retries "
                      << st.dump_retries << ", messages " << st.messages << ", rcvbuf "
                      << st.rcvbuf);
    REQUIRE(resynced);
    int after = mon.stats().rcvbuf;
    CHECK(after > before);
    CHECK(after <= 2 * (1 << 20)); // SO_RCVBUF reads back doubled
    REQUIRE(test::eventually(
        [&] {
            auto snap = mon.snapshot();
            auto v0 = snap.find_netdev("v0");
            return v0 != nullptr && v0->addresses.size() == 2000;
        },
        30s));
    mon.stop();
}
