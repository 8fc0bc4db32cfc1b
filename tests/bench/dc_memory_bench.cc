// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// dc_memory_bench: memory per process against the number of peers, RC
// against DC (issue 19), at 64, 1,024, 16,384 and 65,536 peers, 64 ranks
// to a node (so 1, 16, 256 and 1,024 remote nodes).
//
// Two columns per transport:
//   computed  from the sizes the code allocates: sizeof of the per-peer
//             structures (btl::Endpoint and its two sequence windows for
//             RC; nothing for a DC peer that is not used: its handle is its
//             proc's address, tagged), the mlx5 send-queue and address-
//             handle sizes of common/qp/memory_model (RC: one QP per path,
//             2 paths per peer on a two-port LAG; DC: the DCI pool, an
//             address handle and its addressing per remote node), and the
//             per-process buffers the Device registers;
//   measured  one btl Module over FakeVerbs (tests/unit/dc_memory_rig.h)
//             to which add_procs adds that many fake peers: the heap growth
//             of add_procs counted by alloc_count (every operator new),
//             plus the buffers FakeVerbs saw registered (ibv_reg_mr), plus
//             - RC only - the QPs of connected paths from the model (65,536
//             connections are not driven over the fake; their heap per
//             path is btl_conn_bench's subject).
// Per-process fixed: the receive (SRQ) and send buffers, the UD buffers,
// the RDMA operation slab (all registered), the CQ (64-byte CQEs) and, for
// DC, the DCIs' send queues. Per peer: RC an Endpoint at add_procs and two
// QPs with their send queues once connected; DC nothing at add_procs but
// an address handle per remote node; a DC peer that is used (sent to, or
// heard from) gets an Endpoint then - without QPs - which the last column
// counts for every peer (a job whose every rank talks to every other).
// usage: dc_memory_bench [--peers N,N,...]  (default 64,1024,16384,65536)
// Exit status 1 when DC is not flat (DC(65,536)/DC(1,024) above 1.10).
// The harness checks its steps with Catch assertions, so the benchmark runs
// as the one test case of a Catch session (Catch2 compiled into this file).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Catch2 2's implementation, without its main, is compiled here (the
// session below); Catch2 3's is CATCH2_LIBS.
#ifndef ROCE_CATCH2_V3
#define CATCH_CONFIG_RUNNER
#endif
#include "catch.h"

#include "alloc_count.h"
#include "btl_roce_module.h"
#include "dc_memory_rig.h"
#include "qp/memory_model.h"

using namespace roce;

namespace {

constexpr size_t kPerNode = 64;
constexpr uint32_t kPaths = 2; // mlx5_lag: one RC path per LAG member
// A DC destination's entries besides the address handle: its verbs::Ah in
// the Connector's vector and its GID in the map that finds it (a tree node:
// the 16-byte GID, the index, three pointers and the colour).
constexpr uint64_t kDestEntry = sizeof(verbs::Ah) + 16 + 4 + 3 * sizeof(void *) + sizeof(int);

struct Row {
    size_t peers = 0;
    uint64_t fixed = 0;    ///< per-process: registered buffers, CQ, DCI send queues
    uint64_t computed = 0; ///< fixed + per peer from the sizes
    uint64_t measured = 0; ///< fixed + add_procs' heap growth (+ RC's QPs from the model)
    uint64_t all_used = 0; ///< DC: computed, with an Endpoint for every peer
    int64_t heap = 0;      ///< add_procs' heap growth
    size_t dests = 0;      ///< DC: address handles (remote GIDs)
    size_t reached = 0;
};

uint64_t sq_bytes_rc(const btl::DeviceConfig &d) {
    return qp::mlx5_sq_bytes(false, true, d.sq_depth, 2, d.max_inline);
}

uint64_t seq_windows() {
    btl::ModuleConfig c;
    return 2 * ((c.seq_span + 63) / 64) * 8; // two SeqWindow bitmaps
}

Row run(bool dc, size_t peers) {
    Row r;
    r.peers = peers;
    testing::DcMemoryRig rig(dc, peers, kPerNode);
    btl::Module &m = rig.module();
    const btl::DeviceConfig &d = m.device().config();
    const uint64_t cq = static_cast<uint64_t>(m.device().cq()->cqe) * 64;
    r.fixed = rig.fabric().fake.registered_bytes() + cq;
    uint64_t dci_sq = 0;
    if (dc) {
        const btl::DcResources &res = *m.dc();
        dci_sq = res.dcis() * qp::mlx5_sq_bytes(true, false, res.dci_depth(), 3, 0);
        r.fixed += dci_sq;
    }
    int64_t before = bench::live_bytes();
    r.reached = rig.add_all();
    r.heap = bench::live_bytes() - before;
    const uint64_t nodes = peers / kPerNode + 1;
    if (dc) {
        r.dests = m.dc_dests();
        r.computed = r.fixed + nodes * (qp::mlx5_ah_bytes() + kDestEntry);
        r.measured = r.fixed + static_cast<uint64_t>(r.heap);
        r.all_used = r.computed + peers * (sizeof(btl::Endpoint) + seq_windows());
    } else {
        const uint64_t qps =
            peers * kPaths * (sq_bytes_rc(d) + sizeof(btl::Path) + sizeof(qp::QueuePair));
        r.computed = r.fixed + peers * (sizeof(btl::Endpoint) + seq_windows()) + qps;
        r.measured = r.fixed + static_cast<uint64_t>(r.heap) + qps;
    }
    return r;
}

double mib(uint64_t b) {
    return static_cast<double>(b) / (1024.0 * 1024.0);
}

std::vector<size_t> parse_peers(int argc, char **argv) {
    std::vector<size_t> out = {64, 1024, 16384, 65536};
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--peers") == 0) {
            out.clear();
            std::string s = argv[i + 1];
            size_t pos = 0;
            while (pos < s.size()) {
                size_t comma = s.find(',', pos);
                out.push_back(std::strtoul(s.substr(pos, comma - pos).c_str(), nullptr, 10));
                pos = comma == std::string::npos ? s.size() : comma + 1;
            }
        }
    }
    return out;
}

std::vector<size_t> g_sizes;
int g_code = 0;

int run_bench(const std::vector<size_t> &sizes) {
    std::vector<Row> rc, dc;
    for (size_t n : sizes) {
        rc.push_back(run(false, n));
        dc.push_back(run(true, n));
    }
    std::printf("# dc_memory_bench: memory per process (one port), %zu ranks per node\n", kPerNode);
    std::printf("# per-process fixed: RC %.2f MiB (registered buffers %s, CQ), DC %.2f MiB "
                "(the same + %zu DCI send queues)\n",
                mib(rc[0].fixed), "SRQ/send/UD/RDMA-op slabs", mib(dc[0].fixed),
                static_cast<size_t>(btl::kDefaultDcis));
    std::printf("# per peer: RC sizeof(Endpoint) %zu + windows %llu at add_procs, %u paths x "
                "(SQ %llu + path %zu) connected; DC nothing at add_procs, an AH (%llu) and "
                "its entries (%llu) per remote node, an Endpoint once used\n",
                sizeof(btl::Endpoint), static_cast<unsigned long long>(seq_windows()), kPaths,
                static_cast<unsigned long long>(sq_bytes_rc(btl::DeviceConfig{})),
                sizeof(btl::Path) + sizeof(qp::QueuePair),
                static_cast<unsigned long long>(qp::mlx5_ah_bytes()),
                static_cast<unsigned long long>(kDestEntry));
    std::printf("# %8s %14s %14s %14s %14s %12s %8s %14s\n", "peers", "RC computed", "RC measured",
                "DC computed", "DC measured", "DC heap/peer", "DC AHs", "DC all used");
    for (size_t k = 0; k < sizes.size(); ++k) {
        std::printf("# %8zu %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB %10.1f B %8zu %10.2f "
                    "MiB\n",
                    sizes[k], mib(rc[k].computed), mib(rc[k].measured), mib(dc[k].computed),
                    mib(dc[k].measured),
                    static_cast<double>(dc[k].heap) / static_cast<double>(sizes[k]), dc[k].dests,
                    mib(dc[k].all_used));
        std::printf("dc_memory_bench,%zu,rc_computed_bytes,%llu\n", sizes[k],
                    static_cast<unsigned long long>(rc[k].computed));
        std::printf("dc_memory_bench,%zu,rc_measured_bytes,%llu\n", sizes[k],
                    static_cast<unsigned long long>(rc[k].measured));
        std::printf("dc_memory_bench,%zu,dc_computed_bytes,%llu\n", sizes[k],
                    static_cast<unsigned long long>(dc[k].computed));
        std::printf("dc_memory_bench,%zu,dc_measured_bytes,%llu\n", sizes[k],
                    static_cast<unsigned long long>(dc[k].measured));
        std::printf("dc_memory_bench,%zu,dc_all_used_bytes,%llu\n", sizes[k],
                    static_cast<unsigned long long>(dc[k].all_used));
        if (rc[k].reached != sizes[k] || dc[k].reached != sizes[k]) {
            std::printf("# WARNING: only %zu (RC) / %zu (DC) of %zu peers reached\n", rc[k].reached,
                        dc[k].reached, sizes[k]);
        }
    }
    int rc_code = 0;
    for (size_t a = 0; a < sizes.size(); ++a) {
        for (size_t b = 0; b < sizes.size(); ++b) {
            if (sizes[a] != 1024 || sizes[b] != 65536) {
                continue;
            }
            double computed =
                static_cast<double>(dc[b].computed) / static_cast<double>(dc[a].computed);
            double measured =
                static_cast<double>(dc[b].measured) / static_cast<double>(dc[a].measured);
            bool flat = computed <= 1.10 && measured <= 1.10;
            std::printf("# DC(65,536)/DC(1,024): computed %.3f, measured %.3f: %s (target: within "
                        "10%%)\n",
                        computed, measured, flat ? "FLAT" : "NOT FLAT");
            std::printf("dc_memory_bench,65536/1024,dc_ratio_computed,%.4f\n", computed);
            std::printf("dc_memory_bench,65536/1024,dc_ratio_measured,%.4f\n", measured);
            rc_code = flat ? 0 : 1;
        }
    }
    return rc_code;
}

} // namespace

TEST_CASE("dc_memory_bench") {
    g_code = run_bench(g_sizes);
}

int main(int argc, char **argv) {
    g_sizes = parse_peers(argc, argv);
    Catch::Session session;
    char *only[] = {argv[0], nullptr};
    int failed = session.run(1, only);
    return failed != 0 ? failed : g_code;
}
