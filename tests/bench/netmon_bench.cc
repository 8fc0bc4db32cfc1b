// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// netmon_bench: what the bond/netlink monitor costs (not a timed test; run
// by hand as root, numbers go to docs/perf/netmon.md).
//   1. kernel-change-to-callback latency: N MTU changes and N link down/up
//      flips on a veth in a private network namespace, each made with one
//      ioctl; latency = callback time - time just before the ioctl.
//   2. idle cost: the monitor thread's wakeups while nothing changes, from
//      its own loop counter and from /proc/self/task/<tid>/status
//      (voluntary + involuntary context switches) and schedstat.
//   3. the progress-path check: ns per Monitor::generation() call.
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "netmon/monitor.h"
#include "util/log.h"

using namespace roce;
using Clock = std::chrono::steady_clock;

namespace {

struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    netmon::EventKind kind{};
    int value = 0;
    bool hit = false;
    Clock::time_point when{};

    void arm(netmon::EventKind k, int v) {
        std::lock_guard<std::mutex> g(mu);
        kind = k;
        value = v;
        hit = false;
    }
    void on_event(const netmon::Event &e) {
        auto now = Clock::now();
        std::lock_guard<std::mutex> g(mu);
        if (hit || e.netdev != "v0" || e.kind != kind) {
            return;
        }
        if (kind == netmon::EventKind::kMtuChanged && e.new_value != value) {
            return;
        }
        hit = true;
        when = now;
        cv.notify_all();
    }
    bool wait(Clock::time_point *t) {
        std::unique_lock<std::mutex> lk(mu);
        if (!cv.wait_for(lk, std::chrono::seconds(5), [this] { return hit; })) {
            return false;
        }
        *t = when;
        return true;
    }
};

struct Summary {
    double median_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
    size_t n = 0;
};

Summary summarize(std::vector<double> v) {
    Summary s;
    if (v.empty()) {
        return s;
    }
    std::sort(v.begin(), v.end());
    s.n = v.size();
    s.median_us = v[v.size() / 2];
    s.p99_us = v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * 0.99))];
    s.max_us = v.back();
    double sum = 0;
    for (double x : v) {
        sum += x;
    }
    s.mean_us = sum / static_cast<double>(v.size());
    return s;
}

long proc_field(pid_t tid, const char *key) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
    std::string line;
    size_t klen = std::strlen(key);
    while (std::getline(f, line)) {
        if (line.compare(0, klen, key) == 0) {
            return std::atol(line.c_str() + klen + 1);
        }
    }
    return -1;
}

long schedstat_runs(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/schedstat");
    long long run_ns = 0, wait_ns = 0, slices = -1;
    f >> run_ns >> wait_ns >> slices;
    return static_cast<long>(slices);
}

int sh(const std::string &cmd) {
    return std::system(cmd.c_str());
}

bool set_mtu(int fd, int mtu) {
    ifreq r{};
    std::strncpy(r.ifr_name, "v0", IFNAMSIZ - 1);
    r.ifr_mtu = mtu;
    return ioctl(fd, SIOCSIFMTU, &r) == 0;
}

bool set_up(int fd, bool up) {
    ifreq r{};
    std::strncpy(r.ifr_name, "v0", IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &r) != 0) {
        return false;
    }
    r.ifr_flags = static_cast<short>(up ? (r.ifr_flags | IFF_UP) : (r.ifr_flags & ~IFF_UP));
    return ioctl(fd, SIOCSIFFLAGS, &r) == 0;
}

} // namespace

int main(int argc, char **argv) {
    int changes = 1000;
    int idle_s = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--changes" && i + 1 < argc) {
            changes = std::atoi(argv[++i]);
        } else if (a == "--idle" && i + 1 < argc) {
            idle_s = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: netmon_bench [--changes N] [--idle SECONDS]\n");
            return 2;
        }
    }
    if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "netmon_bench: needs root to make a private network namespace (%s)\n",
                     std::strerror(errno));
        return 1;
    }
    std::ofstream("/proc/sys/net/ipv6/conf/default/addr_gen_mode") << "1\n";
    if (sh("ip link add v0 type veth peer name v1 && ip link set v1 up && ip link set v0 up") !=
        0) {
        return 1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    util::StderrSink log(util::LogLevel::kWarn, "netmon_bench: ");
    netmon::MonitorOptions opt;
    opt.log = &log;
    opt.rdma_dev_dir = "";
    netmon::Monitor mon(opt);
    Waiter w;
    auto sub =
        mon.subscribe(netmon::EventFilter::all(), [&w](const netmon::Event &e) { w.on_event(e); });
    if (!mon.start().is_ok() || mon.mode() != netmon::MonitorMode::kNetlink) {
        std::fprintf(stderr, "netmon_bench: the monitor did not start on netlink\n");
        return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // let link-up settle

    std::vector<double> mtu_us;
    std::vector<double> down_us;
    std::vector<double> up_us;
    int lost = 0;
    for (int i = 0; i < changes; ++i) {
        int mtu = 1400 + (i % 2) * 100;
        w.arm(netmon::EventKind::kMtuChanged, mtu);
        auto t0 = Clock::now();
        if (!set_mtu(fd, mtu)) {
            std::perror("SIOCSIFMTU");
            return 1;
        }
        Clock::time_point t1;
        if (w.wait(&t1)) {
            mtu_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        } else {
            ++lost;
        }
    }
    for (int i = 0; i < changes; ++i) {
        bool up = i % 2 == 1;
        w.arm(up ? netmon::EventKind::kLinkUp : netmon::EventKind::kLinkDown, 0);
        auto t0 = Clock::now();
        if (!set_up(fd, up)) {
            std::perror("SIOCSIFFLAGS");
            return 1;
        }
        Clock::time_point t1;
        if (w.wait(&t1)) {
            (up ? up_us : down_us)
                .push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        } else {
            ++lost;
        }
    }
    if (changes % 2 == 1) {
        set_up(fd, true);
    }

    // Idle: nothing changes in this namespace from here on.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    pid_t tid = mon.thread_tid();
    auto s0 = mon.stats();
    long vol0 = proc_field(tid, "voluntary_ctxt_switches");
    long inv0 = proc_field(tid, "nonvoluntary_ctxt_switches");
    long runs0 = schedstat_runs(tid);
    auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(idle_s));
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    auto s1 = mon.stats();
    long vol1 = proc_field(tid, "voluntary_ctxt_switches");
    long inv1 = proc_field(tid, "nonvoluntary_ctxt_switches");
    long runs1 = schedstat_runs(tid);

    // The progress-path check the btl would make.
    const long kLoads = 100000000;
    uint64_t sink = 0;
    auto g0 = Clock::now();
    for (long i = 0; i < kLoads; ++i) {
        sink += mon.generation();
    }
    double gen_ns = std::chrono::duration<double, std::nano>(Clock::now() - g0).count() / kLoads;

    auto m = summarize(mtu_us);
    auto d = summarize(down_us);
    auto u = summarize(up_us);
    std::printf("netmon_bench: %d changes per kind, veth in a private netns, %u CPUs\n", changes,
                std::thread::hardware_concurrency());
    std::printf("%-28s %8s %10s %10s %10s %10s\n", "kernel change -> callback", "n", "median us",
                "p99 us", "max us", "mean us");
    auto row = [](const char *name, const Summary &s) {
        std::printf("%-28s %8zu %10.1f %10.1f %10.1f %10.1f\n", name, s.n, s.median_us, s.p99_us,
                    s.max_us, s.mean_us);
    };
    row("MTU (SIOCSIFMTU)", m);
    row("link down (SIOCSIFFLAGS)", d);
    row("link up (SIOCSIFFLAGS)", u);
    std::printf("lost (no callback within 5 s): %d\n", lost);
    std::printf("idle %.1f s: monitor loop wakeups %llu (%.3f/s), voluntary ctx switches %ld, "
                "involuntary %ld, schedstat timeslices %ld\n",
                secs, static_cast<unsigned long long>(s1.wakeups - s0.wakeups),
                static_cast<double>(s1.wakeups - s0.wakeups) / secs, vol1 - vol0, inv1 - inv0,
                runs1 - runs0);
    std::printf("generation() on the progress path: %.2f ns per call (checksum %llu)\n", gen_ns,
                static_cast<unsigned long long>(sink & 1));
    std::printf(
        "{\"changes\":%d,\"mtu_median_us\":%.1f,\"mtu_p99_us\":%.1f,\"down_median_us\":%.1f,"
        "\"down_p99_us\":%.1f,\"up_median_us\":%.1f,\"up_p99_us\":%.1f,\"lost\":%d,"
        "\"idle_s\":%.1f,\"idle_wakeups\":%llu,\"idle_ctx_switches\":%ld,"
        "\"generation_ns\":%.2f}\n",
        changes, m.median_us, m.p99_us, d.median_us, d.p99_us, u.median_us, u.p99_us, lost, secs,
        static_cast<unsigned long long>(s1.wakeups - s0.wakeups), (vol1 - vol0) + (inv1 - inv0),
        gen_ns);
    mon.stop();
    close(fd);
    return lost == 0 ? 0 : 1;
}
