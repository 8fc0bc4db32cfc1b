// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// conn_bench: what the addressing work of connecting to N peers costs, the
// way the btl does it at 668a22a (a full machine read, topo::read_live, for
// every QP transition, every address handle and every revalidation) against
// topo::SnapshotCache (one machine read, then nothing until an event says
// what to read again). Not a timed test: it measures and prints; results
// and how to read them: docs/perf/connection.md.
//
// The machine is synthetic and served by FakeVerbs (tests/unit): 8 RDMA
// devices mlx5_bond_0..7 with one RoCE port each, each port on an 802.3ad
// bond of two members with 63 VLANs, 256 GIDs per port (per netdev:
// link-local and IPv4, RoCE v1 and v2), 528 netdevs. Per peer, the work a
// connection does at the common/ layer, as the btl drives it:
//   select_path (the policy, on the held snapshot: no read in either mode),
//   ensure_ah (snapshot + preflight_ah + ibv_create_ah),
//   an RC QP: ibv_create_qp and 3 preflighted transitions (QueuePair),
//   revalidate (snapshot + "is the selection still valid").
// The btl itself is driven by btl_conn_bench; the netdev half of a read is
// an in-memory copy of the synthetic netdevs, so a real read_live (sysfs +
// getifaddrs) costs more than the "before" column shows. Counts are exact; wall time depends on
// the machine's load.
//
// usage: conn_bench [--peers N,N,...] [--mode before|after|both]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alloc_count.h"
#include "conn_args.h"
#include "fake_verbs.h"
#include "synthetic_machine.h"
#include "qp/preflight.h"
#include "qp/queue_pair.h"
#include "qp/transitions.h"
#include "select/path.h"
#include "topo/live_reader.h"
#include "topo/readers.h"
#include "topo/snapshot_cache.h"

using namespace roce;

namespace {

using bench::kVlans;
using bench::link_local;
using bench::synthetic_machine;
using bench::v4_gid;

/// Peer p: a RoCE v2 IPv4 address on one of bond0's 64 subnets (with its
/// prefix, as the modex carries it) and a link-local one.
select::PeerPort peer_of(int p) {
    select::PeerPort pp;
    pp.peer.name = "rank " + std::to_string(p);
    select::PeerAddress a;
    a.address = util::IpAddress::from_gid(v4_gid(10, 0, p % (kVlans + 1), 20 + p / (kVlans + 1)));
    a.prefix_len = 24;
    a.type = topo::GidType::kRoceV2;
    pp.peer.addresses.push_back(a);
    select::PeerAddress ll;
    ll.address = util::IpAddress::from_gid(link_local(100));
    ll.prefix_len = 64;
    ll.type = topo::GidType::kRoceV2;
    pp.peer.addresses.push_back(ll);
    pp.path_mtu = IBV_MTU_4096;
    return pp;
}

/// What a connected peer keeps: its path's one selection, the remote GID,
/// the address handle and the RC QP.
struct Connected {
    select::Selection selection;
    std::array<uint8_t, 16> remote{};
    verbs::Ah ah{nullptr, verbs::AhDeleter{}};
    std::unique_ptr<qp::QueuePair> qp;
};

struct Result {
    double seconds = 0;
    uint64_t machine_reads = 0, device_reads = 0, netdev_reads = 0, opens = 0;
    uint64_t allocs = 0;
    int64_t live_bytes = 0;
    int failures = 0;
};

/// Where each mode gets the snapshot for one check.
struct Mode {
    std::function<util::Result<std::shared_ptr<const topo::Snapshot>>()> snapshot;
    qp::SharedSnapshotSource qp_source;
};

Result connect_all(int peers, bool cached) {
    static const topo::Snapshot machine = synthetic_machine();
    testing::FakeVerbs fake(machine);
    const verbs::VerbsApi &api = fake.api();
    uint64_t full_reads = 0, netdev_reads = 0;
    topo::NetdevReader netdevs = [&]() -> util::Result<std::vector<topo::NetdevInfo>> {
        ++netdev_reads;
        return machine.netdevs;
    };
    topo::MachineReader read_machine = [&]() {
        ++full_reads;
        return topo::read_live(api, netdevs);
    };
    topo::CacheSources src;
    src.machine = read_machine;
    src.device = topo::verbs_device_reader(api);
    src.netdevs = netdevs;
    topo::SnapshotCache cache(src);
    cache.set_monitored(true); // the netlink monitor feeds it (netmon::feed_cache)
    const std::string device = "mlx5_bond_0";
    Mode mode;
    if (cached) {
        mode.snapshot = [&]() -> util::Result<std::shared_ptr<const topo::Snapshot>> {
            auto v = cache.view_for(device);
            if (!v) {
                return v.status();
            }
            return v->snapshot;
        };
        mode.qp_source = qp::cache_snapshot_source(cache, device);
    } else {
        mode.snapshot = [&]() -> util::Result<std::shared_ptr<const topo::Snapshot>> {
            auto s = read_machine();
            if (!s) {
                return s.status();
            }
            return std::make_shared<const topo::Snapshot>(std::move(s.value()));
        };
        mode.qp_source = qp::shared_snapshot_source(read_machine);
    }

    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    verbs::Context ctx(api.open_device(list[0]), verbs::ContextDeleter{&api});
    verbs::Pd pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
    verbs::Cq cq(api.create_cq(ctx.get(), 64, nullptr, nullptr, 0), verbs::CqDeleter{&api});
    // The port's plan: the snapshot the policy chooses from (held, as the
    // btl's PortPlan holds it). Taken before counting.
    auto held = mode.snapshot();
    if (!held) {
        std::fprintf(stderr, "conn_bench: %s\n", held.status().message().c_str());
        std::exit(1);
    }
    std::shared_ptr<const topo::Snapshot> plan = *held;
    select::Options options;
    std::vector<Connected> conns;
    conns.reserve(static_cast<size_t>(peers));

    Result r;
    uint64_t reads0 = full_reads, nd0 = netdev_reads;
    uint64_t dev0 = cache.stats().device_reads;
    int opens0 = fake.calls(testing::Call::kOpenDevice);
    uint64_t allocs0 = bench::allocations();
    int64_t live0 = bench::live_bytes();
    auto t0 = std::chrono::steady_clock::now();
    for (int p = 0; p < peers; ++p) {
        if (cached && p == peers / 2 && peers > 1) {
            // One GID_CHANGE half-way: the monitor's event marks the device.
            cache.invalidate_device(device);
        }
        Connected c;
        select::PathDecision d =
            select::select_path(*plan, {device, 1}, options, peer_of(p), false);
        if (!d.ok()) {
            ++r.failures;
            continue;
        }
        c.selection = *d.selection;
        c.remote = d.remote_gid;
        // ensure_ah
        ibv_ah_attr ah = qp::build_ah_attr(c.selection, c.remote, qp::QpParams{});
        auto snap = mode.snapshot();
        if (snap) {
            qp::PreflightResult pf = qp::preflight_ah(**snap, c.selection, ah);
            r.failures += pf.ok() ? 0 : 1;
        }
        c.ah = verbs::Ah(api.create_ah(pd.get(), &ah), verbs::AhDeleter{&api});
        // The RC QP and its three transitions.
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = IBV_QPT_RC;
        init.cap = {16, 16, 1, 1, 0};
        verbs::Qp raw(api.create_qp(pd.get(), &init), verbs::QpDeleter{&api});
        c.qp = std::make_unique<qp::QueuePair>(api, std::move(raw), qp::QpType::kRC, c.selection,
                                               mode.qp_source, false, nullptr);
        qp::RemoteEnd remote{c.remote, 0x100u + static_cast<uint32_t>(p), 0};
        bool ok =
            c.qp->to_init().is_ok() && c.qp->to_rtr(&remote).is_ok() && c.qp->to_rts().is_ok();
        r.failures += ok ? 0 : 1;
        // revalidate
        auto again = mode.snapshot();
        if (!again ||
            select::revalidate(c.selection, **again).validity != select::Validity::kUnchanged) {
            ++r.failures;
        }
        conns.push_back(std::move(c));
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.allocs = bench::allocations() - allocs0;
    r.live_bytes = bench::live_bytes() - live0;
    r.machine_reads = full_reads - reads0;
    r.netdev_reads = netdev_reads - nd0 - r.machine_reads; // those outside full reads
    r.device_reads = cache.stats().device_reads - dev0;
    r.opens = static_cast<uint64_t>(fake.calls(testing::Call::kOpenDevice) - opens0);
    return r;
}

} // namespace

int main(int argc, char **argv) {
    auto args = bench::parse_conn_args("conn_bench", argc, argv);
    if (!args) {
        return 2;
    }
    {
        int64_t before = bench::live_bytes();
        auto copy = std::make_shared<const topo::Snapshot>(synthetic_machine());
        std::printf("# one snapshot of the synthetic machine: %lld bytes, %zu devices, %zu "
                    "netdevs\n",
                    static_cast<long long>(bench::live_bytes() - before), copy->devices.size(),
                    copy->netdevs.size());
    }
    std::printf("# %-7s %6s %10s %10s %8s %8s %8s %12s %12s %14s %8s\n", "mode", "peers", "seconds",
                "us/peer", "machine", "device", "netdev", "dev opens", "allocs/peer", "bytes/peer",
                "failed");
    int failed = 0;
    for (int n : args->peers) {
        for (bool cached : {false, true}) {
            if ((cached && !args->after) || (!cached && !args->before)) {
                continue;
            }
            Result r = connect_all(n, cached);
            const char *m = cached ? "after" : "before";
            std::printf("# %-7s %6d %10.3f %10.1f %8llu %8llu %8llu %12llu %12.0f %14.0f %8d\n", m,
                        n, r.seconds, 1e6 * r.seconds / n, (unsigned long long)r.machine_reads,
                        (unsigned long long)r.device_reads, (unsigned long long)r.netdev_reads,
                        (unsigned long long)r.opens, double(r.allocs) / n, double(r.live_bytes) / n,
                        r.failures);
            std::printf("conn_bench,%s,%d,seconds,%.6f\n", m, n, r.seconds);
            std::printf("conn_bench,%s,%d,machine_reads,%llu\n", m, n,
                        (unsigned long long)r.machine_reads);
            std::printf("conn_bench,%s,%d,device_reads,%llu\n", m, n,
                        (unsigned long long)r.device_reads);
            std::printf("conn_bench,%s,%d,netdev_reads,%llu\n", m, n,
                        (unsigned long long)r.netdev_reads);
            std::printf("conn_bench,%s,%d,device_opens,%llu\n", m, n, (unsigned long long)r.opens);
            std::printf("conn_bench,%s,%d,allocs_per_peer,%.1f\n", m, n, double(r.allocs) / n);
            std::printf("conn_bench,%s,%d,live_bytes_per_peer,%.1f\n", m, n,
                        double(r.live_bytes) / n);
            std::fflush(stdout);
            failed += r.failures;
        }
    }
    return failed == 0 ? 0 : 1;
}
