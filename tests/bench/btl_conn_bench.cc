// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// btl_conn_bench: what connecting one process to N peers costs through the
// btl itself - btl roce's Module, its ConnectionManager and Device, driven
// through the C function table and progress as Open MPI drives them - over
// FakeVerbs in wire mode on the synthetic server of synthetic_machine.h
// (8 ports, 256 GIDs each, bonds and VLANs). Not a timed test: it measures
// and prints; docs/perf/connection.md has the results and how to read them.
//
// Process 0 (the measured one) adds N peers (add_procs) and sends each one
// 16 bytes: a lazy connect per peer (REQ/REP/RTU over UD, one RC QP per LAG
// member on each side, INIT/RTR/RTS preflighted, an address handle), then
// the data. Half-way (after N/2 peers are connected) the device's GID table
// changes, as a GID_CHANGE event reports it. Process 0's view of the machine:
//   before: a full machine read (topo::read_live) per QP transition, address
//           handle, add_procs and revalidation: the btl at 668a22a;
//   after:  the process's topo::SnapshotCache, fed by the monitor (here: the
//           benchmark's invalidation at the GID change).
// The peers read a shared monitored cache in both modes: only process 0 is
// measured. Columns: wall time, process 0's machine reads and single-device
// re-reads, QP transitions and address handles (both ends), heap growth
// per connected peer (both ends of a connection live in this process, and
// FakeVerbs' own per-QP state is included). Counts are exact; wall time
// depends on the machine's load.
//
// usage: btl_conn_bench [--peers N,N,...] [--mode before|after|both]
// (BTL_CONN_BENCH_DEBUG=1 in the environment prints the modules' debug lines.)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "alloc_count.h"
#include "conn_args.h"
#include "btl_roce_module.h"
#include "direct_registry.h"
#include "fake_verbs.h"
#include "opal/mca/btl/base/base.h"
#include "opal_btl_compat.h"
#include "synthetic_machine.h"
#include "topo/readers.h"
#include "topo/snapshot_cache.h"

using namespace roce;

namespace {

constexpr mca_btl_base_tag_t kTag = 0x42;
uint64_t g_received = 0;

void on_recv(mca_btl_base_module_t *, mca_btl_base_tag_t, const roce::compat::RecvDesc *) {
    ++g_received;
}

/// Drops the modules' log lines but counts errors and warnings.
class CountingSink final : public util::LogSink {
public:
    bool enabled(util::LogLevel level) const noexcept override {
        return level <= util::LogLevel::kWarn || debug_;
    }
    void write(util::LogLevel level, std::string_view line) noexcept override {
        if (debug_ && level > util::LogLevel::kWarn) {
            std::fprintf(stderr, "  %.*s\n", static_cast<int>(line.size()), line.data());
            return;
        }
        if (level <= util::LogLevel::kWarn && shown_++ < 5) {
            std::fprintf(stderr, "btl_conn_bench: %s: %.*s\n", util::level_name(level),
                         static_cast<int>(line.size()), line.data());
        }
        ++problems;
    }
    size_t problems = 0;

private:
    size_t shown_ = 0;
    bool debug_ = std::getenv("BTL_CONN_BENCH_DEBUG") != nullptr;
};

struct Proc {
    uint64_t name = 0;
    opal_proc_t proc{};
    std::unique_ptr<btl::Module> module;
    std::vector<mca_btl_base_endpoint_t *> eps;
    mca_btl_base_module_t *btl() const { return module->base(); }
};

struct Result {
    double seconds = 0;
    uint64_t machine_reads = 0, device_reads = 0;
    int transitions = 0, ahs = 0;
    uint64_t allocs = 0;
    int64_t live_bytes = 0;
    size_t problems = 0;
    bool connected = false;
};

/// N+1 modules on one fake server, process 0 measured.
class Bench final : public btl::PeerDirectory {
public:
    Bench(int peers, bool cached) : fake_(machine()), cached_(cached) {
        fake_.set_wire(true); // the UD and RC queues reach each other
        topo::NetdevReader netdevs = []() -> util::Result<std::vector<topo::NetdevInfo>> {
            return machine().netdevs;
        };
        topo::CacheSources shared;
        shared.netdevs = netdevs;
        shared.machine = [this, netdevs] { return topo::read_live(fake_.api(), netdevs); };
        shared.device = topo::verbs_device_reader(fake_.api());
        peer_cache_ = std::make_unique<topo::SnapshotCache>(shared);
        peer_cache_->set_monitored(true);
        topo::CacheSources own = shared;
        own.machine = [this, netdevs] {
            ++own_reads_;
            return topo::read_live(fake_.api(), netdevs);
        };
        own_cache_ = std::make_unique<topo::SnapshotCache>(own);
        own_cache_->set_monitored(true);
        own_read_ = own.machine;

        auto view = peer_cache_->current();
        if (!view) {
            die(view.status().message());
        }
        std::vector<std::string> skipped;
        auto plans = btl::plan_ports(view->snapshot, select::Options{}, false, &skipped);
        if (plans.empty()) {
            die("no port planned on the synthetic machine");
        }
        plan_ = plans.front(); // mlx5_bond_0 port 1, a 2-port LAG

        cfg_.device.srq_size = 32;
        cfg_.device.recv_slot = 256;
        cfg_.device.send_frags = 16;
        cfg_.device.sq_depth = 16;
        cfg_.device.ud_bufs = 16;
        btl::btl_defaults(cfg_.btl, nullptr);
        cfg_.btl.btl_max_send_size = 256 - btl::wire::kFragHeaderSize;
        cfg_.btl.btl_eager_limit = cfg_.btl.btl_max_send_size;
        cfg_.credits_per_peer = 8;
        cfg_.credit_threshold = 2;
        mca_btl_base_active_message_trigger[kTag].cbfunc = roce::compat::recv_cb<on_recv>;
        for (int i = 0; i <= peers; ++i) {
            add_proc(i, static_cast<uint32_t>(peers + 1));
        }
    }

    ~Bench() override {
        for (auto &p : procs_) {
            p->module.reset();
        }
    }

    Result run() {
        Result r;
        const size_t n = procs_.size() - 1;
        const uint64_t reads0 = own_reads_;
        const uint64_t dev0 = own_cache_->stats().device_reads;
        const int modify0 = fake_.calls(testing::Call::kModifyQp);
        const int ah0 = fake_.calls(testing::Call::kCreateAh);
        const uint64_t allocs0 = bench::allocations();
        const int64_t live0 = bench::live_bytes();
        const auto t0 = std::chrono::steady_clock::now();

        add_procs();
        g_received = 0;
        r.connected = send_to(1, n / 2 + 1);
        // A GID_CHANGE half-way: the monitor marks the device in the cache.
        own_cache_->invalidate_device(plan_.device);
        r.connected = r.connected && send_to(n / 2 + 1, n + 1);

        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.allocs = bench::allocations() - allocs0;
        r.live_bytes = bench::live_bytes() - live0;
        r.machine_reads = own_reads_ - reads0;
        r.device_reads = own_cache_->stats().device_reads - dev0;
        r.transitions = fake_.calls(testing::Call::kModifyQp) - modify0;
        r.ahs = fake_.calls(testing::Call::kCreateAh) - ah0;
        r.problems = log_.problems;
        return r;
    }

    // PeerDirectory: the modex as every process published it.
    util::Result<btl::wire::ModexAddress> address(opal_proc_t *proc) override {
        auto it = index_.find(proc);
        if (it == index_.end()) {
            return util::Status(util::Code::kNotFound, "not in the modex");
        }
        return modex_[it->second];
    }
    opal_proc_t *proc_for(uint64_t name) override {
        auto it = by_name_.find(name);
        return it == by_name_.end() ? nullptr : &procs_[it->second]->proc;
    }

private:
    static const topo::Snapshot &machine() {
        static const topo::Snapshot m = bench::synthetic_machine();
        return m;
    }
    [[noreturn]] static void die(const std::string &why) {
        std::fprintf(stderr, "btl_conn_bench: %s\n", why.c_str());
        std::exit(1);
    }

    void add_proc(int i, uint32_t job_size) {
        auto p = std::make_unique<Proc>();
        p->name = (uint64_t{0x77} << 32) | static_cast<uint32_t>(i);
        p->proc.proc_name.jobid = 0x77;
        p->proc.proc_name.vpid = static_cast<opal_vpid_t>(i);
        compat::set_proc_hostname(&p->proc, "bench");
        btl::ModuleEnv env;
        env.verbs = &fake_.api();
        if (i != 0) {
            env.snapshots = qp::cache_snapshot_source(*peer_cache_, plan_.device);
        } else if (cached_) {
            env.snapshots = qp::cache_snapshot_source(*own_cache_, plan_.device);
        } else {
            env.snapshots = qp::shared_snapshot_source(own_read_);
        }
        uint64_t token = 0x5eed0000ull + static_cast<uint64_t>(i) * 0x1111 + 1;
        env.who = {p->name, token, job_size};
        env.peers = this;
        env.registry = [](btl::Device &dev) -> util::Result<std::unique_ptr<btl::MemoryRegistry>> {
            return std::unique_ptr<btl::MemoryRegistry>(
                std::make_unique<testing::DirectRegistry>(dev));
        };
        env.clock = [this] { return now_ += 1e-6; };
        env.finalized = [](mca_btl_base_module_t *) { return OPAL_SUCCESS; };
        auto m = btl::Module::create(plan_, cfg_, std::move(env), log_);
        if (!m) {
            die("Module::create: " + m.status().to_string());
        }
        p->module = std::move(m.value());
        p->module->set_port_index(0);
        btl::wire::ModexAddress a;
        a.token = token;
        a.ports.push_back(p->module->advert());
        index_[&p->proc] = procs_.size();
        by_name_[p->name] = procs_.size();
        ud_owner_[a.ports.front().ud_qpn] = procs_.size();
        modex_.push_back(a);
        procs_.push_back(std::move(p));
    }

    // Process 0 adds everyone; each peer adds process 0.
    void add_procs() {
        std::vector<opal_proc_t *> all;
        for (auto &p : procs_) {
            all.push_back(&p->proc);
        }
        Proc &c = *procs_[0];
        c.eps.assign(all.size(), nullptr);
        if (c.btl()->btl_add_procs(c.btl(), all.size(), all.data(), c.eps.data(), nullptr) !=
            OPAL_SUCCESS) {
            die("add_procs of process 0 failed");
        }
        for (size_t i = 1; i < procs_.size(); ++i) {
            Proc &p = *procs_[i];
            p.eps.assign(1, nullptr);
            opal_proc_t *center = &c.proc;
            if (p.btl()->btl_add_procs(p.btl(), 1, &center, p.eps.data(), nullptr) !=
                OPAL_SUCCESS) {
                die("add_procs of a peer failed");
            }
        }
    }

    // 16 bytes from process 0 to each of [first, last); true once all arrived.
    bool send_to(size_t first, size_t last) {
        Proc &c = *procs_[0];
        const uint64_t want = g_received + (last - first);
        for (size_t j = first; j < last; ++j) {
            mca_btl_base_descriptor_t *d = nullptr;
            // Fragments of unconnected peers wait in the btl; when none is
            // free, progress until connections complete some.
            for (int tries = 0; d == nullptr && tries < 20000; ++tries) {
                d = c.btl()->btl_alloc(c.btl(), c.eps[j], MCA_BTL_NO_ORDER, 16,
                                       MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
                if (d == nullptr) {
                    round();
                }
            }
            if (d == nullptr) {
                die("btl_alloc gave no descriptor");
            }
            std::memset(d->des_segments[0].seg_addr.pval, 0x5a, 16);
            d->des_cbfunc = nullptr;
            // Not connected yet: the btl queues the fragment and connects.
            int rc = c.btl()->btl_send(c.btl(), c.eps[j], d, kTag);
            if (rc < 0) {
                die("btl_send failed: " + std::to_string(rc));
            }
        }
        for (int k = 0; k < 20000 && g_received < want; ++k) {
            round();
        }
        return g_received >= want;
    }

    // The fabric moves: RC work executes, each datagram is delivered and its
    // receiver progressed, then every module progresses; 1 ms passes.
    void round() {
        fake_.run_rc();
        while (!fake_.datagrams().empty()) {
            testing::FakeVerbs::Datagram d = fake_.datagrams().front();
            fake_.datagrams().pop_front();
            (void)fake_.deliver_datagram(d);
            auto it = ud_owner_.find(d.dst_qpn);
            if (it != ud_owner_.end()) {
                procs_[it->second]->module->progress();
            }
        }
        for (auto &p : procs_) {
            p->module->progress();
        }
        now_ += 0.001;
    }

    testing::FakeVerbs fake_;
    bool cached_;
    std::unique_ptr<topo::SnapshotCache> peer_cache_; ///< the peers' (not measured)
    std::unique_ptr<topo::SnapshotCache> own_cache_;  ///< process 0's, "after"
    topo::MachineReader own_read_;                    ///< process 0's machine reads
    uint64_t own_reads_ = 0;
    btl::PortPlan plan_;
    btl::ModuleConfig cfg_;
    CountingSink log_;
    double now_ = 1000.0;
    std::vector<std::unique_ptr<Proc>> procs_;
    std::map<opal_proc_t *, size_t> index_;
    std::map<uint64_t, size_t> by_name_;
    std::map<uint32_t, size_t> ud_owner_;
    std::vector<btl::wire::ModexAddress> modex_;
};

} // namespace

int main(int argc, char **argv) {
    auto args = bench::parse_conn_args("btl_conn_bench", argc, argv);
    if (!args) {
        return 2;
    }
    std::printf("# %-7s %6s %9s %9s %8s %8s %12s %10s %12s %12s\n", "mode", "peers", "seconds",
                "us/peer", "machine", "device", "transitions", "ahs", "allocs/peer",
                "bytes/peer");
    int failed = 0;
    for (int n : args->peers) {
        for (bool cached : {false, true}) {
            if ((cached && !args->after) || (!cached && !args->before)) {
                continue;
            }
            Result r;
            {
                Bench b(n, cached);
                r = b.run();
            }
            const char *m = cached ? "after" : "before";
            std::printf("# %-7s %6d %9.3f %9.1f %8llu %8llu %12d %10d %12.0f %12.0f%s\n", m, n,
                        r.seconds, 1e6 * r.seconds / n, (unsigned long long)r.machine_reads,
                        (unsigned long long)r.device_reads, r.transitions, r.ahs,
                        double(r.allocs) / n, double(r.live_bytes) / n,
                        r.connected ? "" : "  NOT CONNECTED");
            std::printf("btl_conn_bench,%s,%d,seconds,%.6f\n", m, n, r.seconds);
            std::printf("btl_conn_bench,%s,%d,machine_reads,%llu\n", m, n,
                        (unsigned long long)r.machine_reads);
            std::printf("btl_conn_bench,%s,%d,device_reads,%llu\n", m, n,
                        (unsigned long long)r.device_reads);
            std::printf("btl_conn_bench,%s,%d,transitions,%d\n", m, n, r.transitions);
            std::printf("btl_conn_bench,%s,%d,live_bytes_per_peer,%.1f\n", m, n,
                        double(r.live_bytes) / n);
            std::fflush(stdout);
            failed += r.connected && r.problems == 0 ? 0 : 1;
        }
    }
    return failed == 0 ? 0 : 1;
}
