// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The Monitor without root: polling fallback, netlink refused by seccomp,
// verbs async events through a fake VerbsApi whose async fd is a pipe,
// RDMA device directory watch, subscriptions and the event queue, and a
// read-only netlink start in the test's own namespace.
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "catch.h"
#include "netmon/event_queue.h"
#include "netmon/monitor.h"
#include "netmon_test_util.h"

using namespace roce;
using namespace roce::netmon;
using namespace roce::netmon::test;
using namespace std::chrono_literals;

namespace {

// ------------------------------------------------------------ fake verbs --
// Two devices; each opened context's async fd is the read end of a pipe the
// test writes struct ibv_async_event records into, exactly what
// get_async_event then returns (EAGAIN when empty: the fd is non-blocking).
struct FakeDev {
    ibv_device dev{};
    std::string name;
    int pipe_fd[2] = {-1, -1};
    ibv_context ctx{};
    bool open = false;
};
FakeDev g_dev[2];
ibv_device *g_list[3];
std::atomic<int> g_acks{0};
std::atomic<int> g_closes{0};

FakeDev *find(ibv_device *d) {
    for (auto &f : g_dev) {
        if (&f.dev == d) {
            return &f;
        }
    }
    return nullptr;
}

verbs::VerbsApi fake_verbs() {
    verbs::VerbsApi api{};
    api.get_device_list = [](int *n) {
        *n = 2;
        g_list[0] = &g_dev[0].dev;
        g_list[1] = &g_dev[1].dev;
        g_list[2] = nullptr;
        return g_list;
    };
    api.free_device_list = [](ibv_device **) {};
    api.get_device_name = [](ibv_device *d) { return find(d)->name.c_str(); };
    api.open_device = [](ibv_device *d) {
        FakeDev *f = find(d);
        f->ctx = ibv_context{};
        f->ctx.device = d;
        f->ctx.async_fd = f->pipe_fd[0];
        f->open = true;
        return &f->ctx;
    };
    api.close_device = [](ibv_context *c) {
        for (auto &f : g_dev) {
            if (&f.ctx == c) {
                f.open = false;
            }
        }
        ++g_closes;
        return 0;
    };
    api.get_async_event = [](ibv_context *c, ibv_async_event *e) {
        ssize_t n = read(c->async_fd, e, sizeof(*e));
        if (n == static_cast<ssize_t>(sizeof(*e))) {
            return 0;
        }
        if (n >= 0) {
            errno = EIO;
        }
        return -1;
    };
    api.ack_async_event = [](ibv_async_event *) { ++g_acks; };
    return api;
}

void setup_fake_devices() {
    for (int i = 0; i < 2; ++i) {
        FakeDev &f = g_dev[i];
        for (int fd : f.pipe_fd) {
            if (fd >= 0) {
                close(fd);
            }
        }
        f = FakeDev{};
        f.name = i == 0 ? "rxe_bond0" : "mlx5_1";
        REQUIRE(pipe2(f.pipe_fd, O_CLOEXEC) == 0);
    }
    g_acks = 0;
    g_closes = 0;
}

void post(int dev, ibv_event_type t, int port) {
    ibv_async_event e{};
    e.event_type = t;
    e.element.port_num = port;
    REQUIRE(write(g_dev[dev].pipe_fd[1], &e, sizeof(e)) == static_cast<ssize_t>(sizeof(e)));
}

// ---------------------------------------------------------- snapshots ------
topo::NetdevInfo nd(int ifindex, const std::string &name, int mtu = 1500) {
    topo::NetdevInfo n;
    n.ifindex = ifindex;
    n.name = name;
    n.mtu = mtu;
    n.admin_up = true;
    n.carrier = true;
    n.operstate = topo::OperState::kUp;
    return n;
}

struct ScriptedPoll {
    std::mutex mu;
    topo::Snapshot snap;
    std::atomic<int> calls{0};
    std::function<util::Result<topo::Snapshot>()> fn() {
        return [this]() -> util::Result<topo::Snapshot> {
            ++calls;
            std::lock_guard<std::mutex> g(mu);
            return snap;
        };
    }
    void set(std::vector<topo::NetdevInfo> n) {
        std::lock_guard<std::mutex> g(mu);
        snap.netdevs = std::move(n);
    }
};

// Installs, on the calling thread only, a seccomp filter that makes
// socket(AF_NETLINK, ...) fail with EPERM, as in a sandbox without netlink.
bool deny_netlink_on_this_thread() {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(f) / sizeof(f[0])), f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

int count(const std::vector<Event> &ev, EventKind k) {
    int n = 0;
    for (const auto &e : ev) {
        n += e.kind == k;
    }
    return n;
}

} // namespace

TEST_CASE("monitor: netlink refused by the sandbox -> warning and polling fallback",
          "[netmon][monitor]") {
    LockedCapture log;
    ScriptedPoll poll;
    poll.set({nd(1, "lo", 65536), nd(2, "eth0")});
    Collector col;
    util::Status started;
    MonitorMode mode = MonitorMode::kStopped;
    MonitorOptions opt;
    opt.log = &log;
    opt.fallback_poll = poll.fn();
    opt.fallback_interval = 20ms;
#if defined(__x86_64__)
    // Is seccomp usable here? (Not under valgrind, which cannot run filters.)
    bool seccomp = false;
    std::thread probe([&] { seccomp = deny_netlink_on_this_thread(); });
    probe.join();
#else
    bool seccomp = false;
#endif
    if (!seccomp) {
        WARN("seccomp filters unavailable here: netlink is switched off by option instead");
        opt.use_netlink = false;
    }
    Monitor mon(opt);
    auto sub = mon.subscribe(EventFilter::all(), col.callback());
    // The filter stays on that thread (and the monitor thread it creates);
    // the test thread itself keeps netlink.
    std::thread t([&] {
        if (seccomp && !deny_netlink_on_this_thread()) {
            return;
        }
        started = mon.start();
        mode = mon.mode();
    });
    t.join();
    REQUIRE(started.is_ok());
    CHECK(mode == MonitorMode::kPolling);
    INFO(log.all());
    if (seccomp) {
        CHECK(log.contains("warning: netmon: rtnetlink is unavailable"));
        CHECK(log.contains("Operation not permitted"));
    }
    CHECK(log.contains("polling the netdev snapshot every 20 ms"));
    CHECK(mon.snapshot().source == "netmon:poll");
    CHECK(mon.snapshot().netdevs.size() == 2);

    uint64_t gen = mon.generation();
    poll.set({nd(1, "lo", 65536), nd(2, "eth0", 9000), nd(3, "eth1")});
    REQUIRE(col.wait_for(EventKind::kNetdevAdded, "eth1"));
    auto ev = col.events();
    REQUIRE(ev.size() == 2); // the initial poll is the baseline, not events
    CHECK(ev[0].kind == EventKind::kMtuChanged);
    CHECK(ev[0].old_value == 1500);
    CHECK(ev[0].new_value == 9000);
    CHECK(ev[1].seq == ev[0].seq + 1);
    // Bumped once the batch has been delivered.
    CHECK(eventually([&] { return mon.generation() > gen; }));
    int calls = poll.calls;
    std::this_thread::sleep_for(200ms);
    CHECK(poll.calls - calls >= 2); // a low, steady rate: about 10 in 200 ms
    CHECK(poll.calls - calls <= 11);
    // The loop wakes for the polls and nothing else (no spinning near a deadline).
    auto st = mon.stats();
    CHECK(st.wakeups <= st.polls + 1);
    mon.stop();
    CHECK(mon.mode() == MonitorMode::kStopped);
    CHECK(mon.thread_tid() == 0);
    calls = poll.calls;
    std::this_thread::sleep_for(60ms);
    CHECK(poll.calls == calls);
}

TEST_CASE("monitor: no netlink and no fallback warns that changes go unseen", "[netmon][monitor]") {
    LockedCapture log;
    MonitorOptions opt;
    opt.log = &log;
    opt.use_netlink = false;
    Monitor mon(opt);
    REQUIRE(mon.start().is_ok());
    CHECK(mon.mode() == MonitorMode::kBlind);
    CHECK(log.contains("will NOT be seen"));
    CHECK_FALSE(mon.start().is_ok()); // already started
    mon.stop();
    mon.stop(); // idempotent
}

TEST_CASE("monitor: verbs async events join the stream and refresh the RDMA bindings",
          "[netmon][monitor][verbs]") {
    setup_fake_devices();
    verbs::VerbsApi api = fake_verbs();
    LockedCapture log;
    std::atomic<int> source_calls{0};
    std::atomic<bool> vlan_gid{false};
    MonitorOptions opt;
    opt.log = &log;
    opt.use_netlink = false;
    opt.verbs = &api;
    opt.verbs_devices = {"rxe_bond0"}; // mlx5_1 is not watched
    opt.rdma_dev_dir = "";
    opt.rdma_source = [&]() -> util::Result<std::vector<RdmaBinding>> {
        ++source_calls;
        std::vector<RdmaBinding> b{{"rxe_bond0", 1, "bond0", 4}};
        if (vlan_gid) {
            b.push_back({"rxe_bond0", 1, "bond0.3027", 6});
        }
        return b;
    };
    Collector col;
    {
        Monitor mon(opt);
        auto sub = mon.subscribe(EventFilter::all(), col.callback());
        REQUIRE(mon.start().is_ok());
        CHECK(g_dev[0].open);
        CHECK_FALSE(g_dev[1].open);
        CHECK(source_calls == 1);
        CHECK(mon.rdma_bindings().size() == 1);

        // An address on the VLAN gave it a GID: the device reports GID_CHANGE.
        vlan_gid = true;
        post(0, IBV_EVENT_GID_CHANGE, 1);
        REQUIRE(col.wait_for(EventKind::kRdmaNetdevsChanged, ""));
        auto ev = col.events();
        REQUIRE(ev.size() == 2);
        CHECK(ev[0].kind == EventKind::kVerbsAsync);
        CHECK(ev[0].rdma_device == "rxe_bond0");
        CHECK(ev[0].rdma_port == 1);
        CHECK(ev[0].verbs_event == IBV_EVENT_GID_CHANGE);
        CHECK(ev[0].verbs_event_name == "GID_CHANGE");
        CHECK(ev[1].rdma_device == "rxe_bond0");
        CHECK(source_calls == 2);
        CHECK(mon.rdma_bindings().size() == 2);

        // Two events in one wakeup: one refresh; a port going down.
        post(0, IBV_EVENT_PORT_ERR, 1);
        post(0, IBV_EVENT_PORT_ACTIVE, 1);
        REQUIRE(col.wait([](const auto &v) { return v.size() >= 4; }));
        ev = col.events();
        CHECK(ev[2].verbs_event_name == "PORT_ERR");
        CHECK(ev[3].verbs_event_name == "PORT_ACTIVE");
        CHECK(g_acks == 3);

        // The device dies: reported once, then its fd is no longer polled.
        post(0, IBV_EVENT_DEVICE_FATAL, 0);
        REQUIRE(col.wait_for(EventKind::kVerbsAsync, "", 4));
        post(0, IBV_EVENT_GID_CHANGE, 1);
        std::this_thread::sleep_for(50ms);
        ev = col.events();
        CHECK(count(ev, EventKind::kVerbsAsync) == 4);
        CHECK(ev.back().verbs_event_name == "DEVICE_FATAL");
        CHECK(g_acks == 4);
        mon.stop();
        CHECK(g_closes == 1);
    }
    CHECK(g_closes == 1); // closed exactly once, by stop()
}

TEST_CASE("monitor: RDMA device directory changes trigger a binding refresh", "[netmon][monitor]") {
    char tmpl[] = "/tmp/netmon-devdir-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    std::string base = tmpl;
    std::string dir = base + "/infiniband"; // does not exist yet
    std::atomic<int> calls{0};
    std::atomic<int> devices{0};
    MonitorOptions opt;
    opt.use_netlink = false;
    opt.rdma_dev_dir = dir;
    opt.rdma_source = [&]() -> util::Result<std::vector<RdmaBinding>> {
        ++calls;
        std::vector<RdmaBinding> b;
        for (int i = 0; i < devices; ++i) {
            b.push_back({"rxe" + std::to_string(i), 1, "eth" + std::to_string(i), i + 2});
        }
        return b;
    };
    Collector col;
    Monitor mon(opt);
    auto sub = mon.subscribe(
        EventFilter::only({EventKind::kRdmaDeviceAppeared, EventKind::kRdmaDeviceDisappeared}),
        col.callback());
    REQUIRE(mon.start().is_ok());
    CHECK(calls == 1);
    // rdma_rxe loaded: /dev/infiniband appears, then uverbs0 in it.
    devices = 1;
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    REQUIRE(col.wait_for(EventKind::kRdmaDeviceAppeared, "eth0"));
    int fd = open((dir + "/uverbs1").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    devices = 2;
    fd = open((dir + "/uverbs2").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(col.wait_for(EventKind::kRdmaDeviceAppeared, "eth1"));
    devices = 0;
    unlink((dir + "/uverbs1").c_str());
    REQUIRE(col.wait([](const auto &v) { return v.size() == 4; }));
    auto ev = col.events();
    CHECK(ev[2].kind == EventKind::kRdmaDeviceDisappeared);
    CHECK(ev[3].kind == EventKind::kRdmaDeviceDisappeared);
    mon.stop();
    unlink((dir + "/uverbs2").c_str());
    rmdir(dir.c_str());
    rmdir(base.c_str());
}

TEST_CASE("monitor: subscriptions can end inside their callback and outlive the monitor",
          "[netmon][monitor]") {
    ScriptedPoll poll;
    poll.set({nd(1, "lo")});
    MonitorOptions opt;
    opt.use_netlink = false;
    opt.fallback_poll = poll.fn();
    opt.fallback_interval = 5ms;
    auto mon = std::make_unique<Monitor>(opt);
    std::atomic<int> once{0};
    Subscription self;
    self = mon->subscribe(EventFilter::all(), [&](const Event &) {
        ++once;
        self.unsubscribe(); // from inside: takes effect now, no deadlock
    });
    Collector col;
    auto keep = mon->subscribe(EventFilter::only({EventKind::kMtuChanged}), col.callback());
    REQUIRE(mon->start().is_ok());
    for (int mtu = 1400; mtu < 1405; ++mtu) {
        poll.set({nd(1, "lo", mtu)});
        REQUIRE(col.wait([mtu](const auto &v) { return !v.empty() && v.back().new_value == mtu; }));
    }
    CHECK(once == 1);
    CHECK_FALSE(self.active());
    // Unsubscribing from another thread waits for a running callback.
    keep.unsubscribe();
    size_t n = col.size();
    poll.set({nd(1, "lo", 1500)});
    std::this_thread::sleep_for(50ms);
    CHECK(col.size() == n);
    auto late = mon->subscribe(EventFilter::all(), [](const Event &) {});
    mon.reset(); // the monitor goes first
    late.unsubscribe();
    CHECK_FALSE(late.active());
}

TEST_CASE("event queue: changed() is free, drain() takes all, overflow asks for a resync",
          "[netmon][queue]") {
    ScriptedPoll poll;
    poll.set({nd(1, "lo")});
    MonitorOptions opt;
    opt.use_netlink = false;
    opt.fallback_poll = poll.fn();
    opt.fallback_interval = 5ms;
    Monitor mon(opt);
    EventQueue q(3);
    q.attach(mon, EventFilter::only({EventKind::kNetdevAdded}));
    REQUIRE(mon.start().is_ok());
    CHECK_FALSE(q.changed());
    std::vector<Event> out;
    CHECK(q.drain(&out) == 0);
    poll.set({nd(1, "lo"), nd(2, "a")});
    REQUIRE(eventually([&] { return q.changed(); }));
    CHECK(q.drain(&out) == 1);
    CHECK(out[0].netdev == "a");
    CHECK_FALSE(q.changed());
    // Five more while the consumer is away: only three fit.
    poll.set({nd(1, "lo"), nd(2, "a"), nd(3, "b"), nd(4, "c"), nd(5, "d"), nd(6, "e"), nd(7, "f")});
    REQUIRE(eventually([&] { return q.dropped() == 2; }));
    out.clear();
    CHECK(q.drain(&out) == 4);
    CHECK(out[0].kind == EventKind::kResync);
    CHECK(out[1].netdev == "d");
    CHECK(out[3].netdev == "f");
    mon.stop();
}

TEST_CASE("monitor: netlink start in this namespace (read-only), clean stop", "[netmon][monitor]") {
    LockedCapture log;
    MonitorOptions opt;
    opt.log = &log;
    opt.rdma_dev_dir = "";
    Monitor mon(opt);
    REQUIRE(mon.start().is_ok());
    INFO(log.all());
    REQUIRE(mon.mode() == MonitorMode::kNetlink);
    auto snap = mon.snapshot();
    CHECK(snap.source == "netmon:netlink");
    bool lo = false;
    for (const auto &n : snap.netdevs) {
        lo = lo || (n.name == "lo" && n.mtu > 0);
    }
    CHECK(lo);
    CHECK(mon.stats().rcvbuf > 0);
    REQUIRE(eventually([&] { return mon.thread_tid() != 0; }));
    mon.stop();
    CHECK(mon.thread_tid() == 0);
    CHECK(mon.mode() == MonitorMode::kStopped);
}

TEST_CASE("monitor: stop then start again; requests from other threads at any time",
          "[netmon][monitor]") {
    ScriptedPoll poll;
    poll.set({nd(1, "lo")});
    std::atomic<int> refreshes{0};
    MonitorOptions opt;
    opt.use_netlink = false;
    opt.fallback_poll = poll.fn();
    opt.fallback_interval = 5ms;
    opt.rdma_dev_dir = "";
    opt.rdma_source = [&]() -> util::Result<std::vector<RdmaBinding>> {
        ++refreshes;
        return std::vector<RdmaBinding>{};
    };
    Monitor mon(opt);
    Collector col;
    auto sub = mon.subscribe(EventFilter::only({EventKind::kMtuChanged}), col.callback());
    mon.request_rdma_refresh(); // before start: harmless
    std::atomic<bool> done{false};
    std::thread poker([&] {
        while (!done) {
            mon.request_rdma_refresh();
            std::this_thread::sleep_for(1ms);
        }
    });
    for (int round = 0; round < 3; ++round) {
        REQUIRE(mon.start().is_ok());
        REQUIRE(mon.mode() == MonitorMode::kPolling);
        poll.set({nd(1, "lo", 1400 + round)});
        REQUIRE(col.wait(
            [round](const auto &v) { return !v.empty() && v.back().new_value == 1400 + round; }));
        int before = refreshes;
        REQUIRE(eventually([&] { return refreshes > before; }));
        mon.stop();
        CHECK(mon.mode() == MonitorMode::kStopped);
    }
    done = true;
    poker.join();
    CHECK(col.size() == 3);
}
