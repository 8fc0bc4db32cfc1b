// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// netmon-watch: prints what the bond/netlink monitor sees, one JSON object
// per line, so shell tests (tests/vm/netmon_*.sh, run in a guest with the
// real bonding driver) can assert on it. Also dumps the model, records raw
// rtnetlink datagrams for replay fixtures and replays them.
#include <dirent.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <tuple>

#include "netmon/dump.h"
#include "netmon/monitor.h"
#include "netmon/recording.h"
#include "util/log.h"
#include "util/strings.h"
#include "verbs/verbs_api.h"

using namespace roce;

namespace {

const char kUsage[] =
    "usage: netmon-watch [options]\n"
    "  (default)          start the monitor and print events as JSON lines until\n"
    "                     SIGINT/SIGTERM, --duration or --count; the first line is\n"
    "                     {\"event\":\"ready\",...} once the initial dump is done\n"
    "  --dump             print the netdev model (one JSON object per netdev) and exit\n"
    "  --replay FILE      feed a recording through the model, print its events, exit\n"
    "  --record FILE      also write every rtnetlink datagram read to FILE (hex lines)\n"
    "  --duration SEC     stop after SEC seconds\n"
    "  --count N          stop after N events\n"
    "  --rdma-only        only events on netdevs with an RDMA port\n"
    "  --verbs            watch verbs async events of every RDMA device\n"
    "  --no-gids          do not read RDMA ports' netdevs from sysfs GID tables\n"
    "  --final-dump       print the model (as --dump does) when stopping\n"
    "  --rcvbuf BYTES     rtnetlink receive buffer (default 4 MiB)\n"
    "  -v                 debug log on stderr\n";

std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
        }
        o += c;
    }
    return o + "\"";
}

std::string netdev_json(const topo::NetdevInfo &n) {
    std::string s =
        util::format("{\"netdev\":%s,\"ifindex\":%d,\"kind\":%s,\"mtu\":%d,"
                     "\"operstate\":%s,\"carrier\":%s,\"admin_up\":%s,\"mac\":%s",
                     jstr(n.name).c_str(), n.ifindex, jstr(n.kind).c_str(), n.mtu,
                     jstr(topo::to_string(n.operstate)).c_str(), n.carrier ? "true" : "false",
                     n.admin_up ? "true" : "false", jstr(n.mac).c_str());
    if (!n.master.empty()) {
        s += ",\"master\":" + jstr(n.master);
    }
    if (!n.parent.empty()) {
        s += ",\"parent\":" + jstr(n.parent);
    }
    if (n.vlan_id >= 0) {
        s += util::format(",\"vlan_id\":%d", n.vlan_id);
    }
    if (n.bond) {
        const auto &b = *n.bond;
        std::vector<std::string> sl;
        for (const auto &x : b.slaves) {
            sl.push_back(jstr(x));
        }
        s += util::format(",\"bond\":{\"mode\":%s,\"slaves\":[%s],\"active_slave\":%s,"
                          "\"ad_num_ports\":%d,\"ad_aggregator_id\":%d,\"ad_partner_mac\":%s,"
                          "\"xmit_hash_policy\":%s,\"miimon\":%d}",
                          jstr(topo::to_string(b.mode)).c_str(), util::join(sl, ",").c_str(),
                          jstr(b.active_slave).c_str(), b.ad_num_ports, b.ad_aggregator_id,
                          jstr(b.ad_partner_mac).c_str(), jstr(b.xmit_hash_policy).c_str(),
                          b.miimon_ms);
    }
    if (n.bond_slave) {
        const auto &b = *n.bond_slave;
        s += util::format(
            ",\"bond_slave\":{\"state\":%s,\"mii_status\":%s,\"link_failure_count\":%d,"
            "\"ad_aggregator_id\":%d}",
            b.active ? "\"active\"" : "\"backup\"", jstr(topo::to_string(b.mii_status)).c_str(),
            b.link_failure_count, b.ad_aggregator_id);
    }
    std::vector<std::string> addrs;
    for (const auto &a : n.addresses) {
        addrs.push_back(jstr(a.address.to_string() + "/" + std::to_string(a.prefix_len)));
    }
    s += ",\"addresses\":[" + util::join(addrs, ",") + "]}";
    return s;
}

void print_model(const std::vector<topo::NetdevInfo> &netdevs) {
    for (const auto &n : netdevs) {
        std::printf("%s\n", netdev_json(n).c_str());
    }
    std::fflush(stdout);
}

std::vector<std::string> list_dir(const std::string &path) {
    std::vector<std::string> out;
    if (DIR *d = opendir(path.c_str())) {
        while (dirent *e = readdir(d)) {
            if (e->d_name[0] != '.') {
                out.push_back(e->d_name);
            }
        }
        closedir(d);
    }
    return out;
}

// The RDMA binding hook for this tool: the GID tables' netdev attributes as
// sysfs shows them (/sys/class/infiniband/DEV/ports/N/gid_attrs/ndevs/I; an
// empty slot reads as EINVAL). The project's own reader is common/topo's.
util::Result<std::vector<netmon::RdmaBinding>> sysfs_bindings(const std::string &root) {
    std::vector<netmon::RdmaBinding> out;
    for (const auto &dev : list_dir(root)) {
        for (const auto &port : list_dir(root + "/" + dev + "/ports")) {
            std::string dir = root + "/" + dev + "/ports/" + port + "/gid_attrs/ndevs";
            for (const auto &idx : list_dir(dir)) {
                std::ifstream f(dir + "/" + idx);
                std::string name;
                if (!std::getline(f, name) || name.empty()) {
                    continue;
                }
                out.push_back({dev, std::atoi(port.c_str()), name,
                               static_cast<int>(if_nametoindex(name.c_str()))});
            }
        }
    }
    auto key = [](const netmon::RdmaBinding &b) { return std::tie(b.device, b.port, b.netdev); };
    std::sort(out.begin(), out.end(),
              [&key](const auto &a, const auto &b) { return key(a) < key(b); });
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

int replay_file(const std::string &path) {
    auto rec = netmon::read_recording(path);
    if (!rec) {
        std::fprintf(stderr, "netmon-watch: %s\n", rec.status().to_string().c_str());
        return 1;
    }
    netmon::Model model;
    auto ev = netmon::replay(model, *rec);
    if (!ev) {
        std::fprintf(stderr, "netmon-watch: %s\n", ev.status().to_string().c_str());
        return 1;
    }
    for (const auto &e : *ev) {
        std::printf("%s\n", netmon::to_json(e).c_str());
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    bool dump = false;
    bool verbs = false;
    bool rdma_only = false;
    bool final_dump = false;
    bool verbose = false;
    bool gids = true;
    std::string record;
    std::string replay;
    double duration = 0;
    long count = 0;
    int rcvbuf = 4 << 20;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "netmon-watch: %s needs a value\n%s", a.c_str(), kUsage);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--dump") {
            dump = true;
        } else if (a == "--replay") {
            replay = next();
        } else if (a == "--record") {
            record = next();
        } else if (a == "--duration") {
            duration = std::atof(next().c_str());
        } else if (a == "--count") {
            count = std::atol(next().c_str());
        } else if (a == "--rdma-only") {
            rdma_only = true;
        } else if (a == "--verbs") {
            verbs = true;
        } else if (a == "--no-gids") {
            gids = false;
        } else if (a == "--final-dump") {
            final_dump = true;
        } else if (a == "--rcvbuf") {
            rcvbuf = std::atoi(next().c_str());
        } else if (a == "-v") {
            verbose = true;
        } else if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else {
            std::fprintf(stderr, "netmon-watch: unknown option %s\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (!replay.empty()) {
        return replay_file(replay);
    }
    if (dump) {
        auto m = netmon::dump_model();
        if (!m) {
            std::fprintf(stderr, "netmon-watch: %s\n", m.status().to_string().c_str());
            return 1;
        }
        print_model(m->netdevs());
        return 0;
    }

    // Signals are taken synchronously by this thread; block them before the
    // monitor thread exists so it inherits the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    util::StderrSink log(verbose ? util::LogLevel::kDebug : util::LogLevel::kWarn,
                         "netmon-watch: ");
    std::ofstream rec;
    std::mutex rec_mu;
    netmon::MonitorOptions opt;
    opt.log = &log;
    opt.rcvbuf_bytes = rcvbuf;
    if (verbs) {
        opt.verbs = &verbs::real_verbs();
    }
    const std::string ib = "/sys/class/infiniband";
    if (gids && access(ib.c_str(), F_OK) == 0) {
        opt.rdma_source = [ib] { return sysfs_bindings(ib); };
    }
    if (!record.empty()) {
        rec.open(record, std::ios::out | std::ios::trunc);
        if (!rec) {
            std::fprintf(stderr, "netmon-watch: cannot write %s\n", record.c_str());
            return 1;
        }
        opt.record = [&rec, &rec_mu](const uint8_t *d, size_t n) {
            std::lock_guard<std::mutex> g(rec_mu);
            rec << netmon::to_hex_line(d, n) << '\n';
            rec.flush();
        };
    }
    netmon::Monitor mon(opt);
    std::mutex out_mu;
    long seen = 0;
    netmon::EventFilter filter;
    filter.rdma_only = rdma_only;
    auto sub = mon.subscribe(filter, [&](const netmon::Event &e) {
        std::lock_guard<std::mutex> g(out_mu);
        std::printf("%s\n", netmon::to_json(e).c_str());
        std::fflush(stdout);
        if (count > 0 && ++seen == count) {
            kill(getpid(), SIGTERM);
        }
    });
    util::Status st = mon.start();
    if (!st) {
        std::fprintf(stderr, "netmon-watch: %s\n", st.to_string().c_str());
        return 1;
    }
    {
        std::lock_guard<std::mutex> g(out_mu);
        std::printf("{\"seq\":0,\"event\":\"ready\",\"mode\":\"%s\",\"netdevs\":%zu}\n",
                    netmon::to_string(mon.mode()), mon.snapshot().netdevs.size());
        std::fflush(stdout);
    }
    timespec ts{};
    timespec *tsp = nullptr;
    if (duration > 0) {
        ts.tv_sec = static_cast<time_t>(duration);
        ts.tv_nsec = static_cast<long>((duration - static_cast<double>(ts.tv_sec)) * 1e9);
        tsp = &ts;
    }
    while (sigtimedwait(&sigs, nullptr, tsp) < 0 && errno == EINTR) {
    }
    mon.stop();
    sub.unsubscribe();
    if (final_dump) {
        print_model(mon.snapshot().netdevs);
    }
    auto s = mon.stats();
    std::fprintf(
        stderr,
        "netmon-watch: %llu events, %llu messages, %llu overflows, %llu resyncs, %llu "
        "wakeups\n",
        static_cast<unsigned long long>(s.events), static_cast<unsigned long long>(s.messages),
        static_cast<unsigned long long>(s.overflows), static_cast<unsigned long long>(s.resyncs),
        static_cast<unsigned long long>(s.wakeups));
    return 0;
}
