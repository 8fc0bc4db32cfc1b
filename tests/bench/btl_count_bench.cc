// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// btl_count_bench: instructions per message through btl roce's send and
// receive paths, driven over FakeVerbs in one process, and the floor of the
// bare verbs calls through the same fake verbs table. For
// contrib/bench/count-instructions (docs/perf/instructions.md); a benchmark,
// not a test.
//
// usage: btl_count_bench PATH REGION N
//   PATH   send   btl_alloc(24 B) + memcpy + btl_send: the PML's eager way
//          sendi  btl_sendi(24 B header, no payload): the PML's inline way
//          floor  bare verbs on two RC QPs of the same FakeVerbs (the
//                 receiver's on an SRQ, as the btl's): ibv_post_send of
//                 24 B (signaled, inline), ibv_poll_cq and ibv_post_srq_recv
//   REGION which calls of each message are counted:
//          post   the sender's calls (PATH send: alloc + memcpy + send;
//                 sendi: sendi; floor: post_send)
//          recv   the receiver's (btl: one progress call, which polls the
//                 CQ, checks the fragment, runs the PML's callback, reposts
//                 the receive buffer and, every few messages, returns
//                 credits; floor: poll_cq of the receive + post_srq_recv)
//          done   the sender's completion handling (btl: one progress
//                 call, which reaps the send completion and the returned
//                 credits; floor: poll_cq of the send completion)
//   N      messages counted
//
// Two btl Modules ("processes" 0 and 1) over FakeVerbs in wire mode (the
// rxe_bond fixture: one rxe port under a two-member bond, so two RC paths;
// ModuleConfig's defaults, the generic btl parameters at btl_defaults):
// process 0 sends 24-byte fragments to process 1, one at a time; between
// the steps the fake carries the RC work (FakeVerbs::run_rc, not counted).
// Run under `valgrind --tool=callgrind --collect-atstart=no`: collection is
// switched on around the REGION's calls only (callgrind client requests),
// so setup, connection, the fake's wire and the loop count nothing.
// Connection and 200 uncounted messages come first; the driver takes
// (I(2N) - I(N)) / N. The counted calls include the fake's own verbs
// (post_send, poll_cq, post_srq_recv record and move work requests, at a
// cost far above a real provider's): the floor pays the same, so the
// difference btl - floor is what the btl adds.
#include <infiniband/verbs.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "callgrind_toggle.h"

#include "btl_roce_module.h"
#include "direct_registry.h"
#include "fake_verbs.h"
#include "opal/mca/btl/base/base.h"
#include "opal_cxx_compat.h"
#include "topo/readers.h"
#include "topo/snapshot_cache.h"
#include "verbs/handles.h"

using namespace roce;

namespace {

constexpr mca_btl_base_tag_t kTag = 0x42;
constexpr size_t kBytes = 24; // a PML match header (16 B) and 8 B of data
constexpr const char *kFixture = "rxe_bond";
uint64_t g_received = 0;

void on_recv(mca_btl_base_module_t *, mca_btl_base_tag_t, mca_btl_base_descriptor_t *des, void *) {
    g_received += des->des_segments[0].seg_len == kBytes ? 1 : 0;
}

[[noreturn]] void die(const std::string &why) {
    std::fprintf(stderr, "btl_count_bench: %s\n", why.c_str());
    std::exit(1);
}

/// The captured machine of tests/fixtures/rxe_bond (tests/unit's fixture()
/// reads the same, but reports through Catch).
const topo::Snapshot &fixture() {
    static const topo::Snapshot s = [] {
        auto snap = topo::read_capture(std::string(ROCE_FIXTURES) + "/" + kFixture);
        if (!snap) {
            die(std::string("fixture ") + kFixture + ": " + snap.status().to_string());
        }
        return std::move(snap.value());
    }();
    return s;
}

enum class Region { kPost, kRecv, kDone };

/// Counts what `f` executes when `on` (callgrind collects only in between).
template <typename F>
inline void counted(bool on, F &&f) {
    if (on) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    f();
    if (on) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

/// Prints the modules' errors and warnings, drops the rest.
class CountingSink final : public util::LogSink {
public:
    bool enabled(util::LogLevel level) const noexcept override {
        return level <= util::LogLevel::kWarn;
    }
    void write(util::LogLevel level, std::string_view line) noexcept override {
        if (level > util::LogLevel::kWarn) {
            return;
        }
        std::fprintf(stderr, "btl_count_bench: %s: %.*s\n", util::level_name(level),
                     static_cast<int>(line.size()), line.data());
    }
};

struct Proc {
    uint64_t name = 0;
    opal_proc_t proc{};
    std::unique_ptr<btl::Module> module;
    std::vector<mca_btl_base_endpoint_t *> eps;
    mca_btl_base_module_t *btl() const { return module->base(); }
};

/// Two Modules over one FakeVerbs in wire mode; 0 sends to 1.
class BtlPair final : public btl::PeerDirectory {
public:
    BtlPair() : fake_(fixture()) {
        fake_.set_wire(true);
        topo::CacheSources src;
        src.netdevs = []() -> util::Result<std::vector<topo::NetdevInfo>> {
            return fixture().netdevs;
        };
        src.machine = [this, netdevs = src.netdevs] {
            return topo::read_live(fake_.api(), netdevs);
        };
        src.device = topo::verbs_device_reader(fake_.api());
        cache_ = std::make_unique<topo::SnapshotCache>(std::move(src));
        cache_->set_monitored(true);
        auto view = cache_->current();
        if (!view) {
            die(view.status().message());
        }
        std::vector<std::string> skipped;
        auto plans = btl::plan_ports(view->snapshot, select::Options{}, false, &skipped);
        if (plans.empty()) {
            die("no port planned on the fixture");
        }
        plan_ = plans.front();
        btl::btl_defaults(cfg_.btl, nullptr);
        mca_btl_base_active_message_trigger[kTag].cbfunc = on_recv;
        for (int i = 0; i < 2; ++i) {
            add_proc(i);
        }
        std::vector<opal_proc_t *> all{&procs_[0]->proc, &procs_[1]->proc};
        for (auto &p : procs_) {
            p->eps.assign(2, nullptr);
            if (p->btl()->btl_add_procs(p->btl(), 2, all.data(), p->eps.data(), nullptr) !=
                OPAL_SUCCESS) {
                die("add_procs failed");
            }
        }
    }
    ~BtlPair() override {
        // The modules' bounded drain of retired QPs must see time pass (1 s
        // bound): 0.1 s per clock read, as tests/unit/btl_fabric does.
        tick_ = 0.1;
        for (auto &p : procs_) {
            p->module.reset();
        }
    }

    /// One message from 0 to 1, then the fabric carries it and each side
    /// progresses; when `on`, callgrind counts the steps of region `r`.
    void message(bool sendi, bool on, Region r) {
        Proc &a = *procs_[0];
        mca_btl_base_module_t *b = a.btl();
        mca_btl_base_endpoint_t *ep = a.eps[1];
        uint8_t data[kBytes];
        std::memset(data, 0x5a, sizeof(data));
        int rc = OPAL_SUCCESS;
        counted(on && r == Region::kPost, [&] {
            if (sendi) {
                rc = b->btl_sendi(b, ep, nullptr, data, kBytes, 0, MCA_BTL_NO_ORDER,
                                  MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, kTag, nullptr);
            } else {
                mca_btl_base_descriptor_t *d =
                    b->btl_alloc(b, ep, MCA_BTL_NO_ORDER, kBytes, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
                if (d == nullptr) {
                    rc = OPAL_ERR_OUT_OF_RESOURCE;
                    return;
                }
                std::memcpy(d->des_segments[0].seg_addr.pval, data, kBytes);
                d->des_cbfunc = nullptr;
                rc = b->btl_send(b, ep, d, kTag);
            }
        });
        if (rc < 0) {
            die("send: " + std::to_string(rc) + " (not connected, or out of resources?)");
        }
        fake_.run_rc();
        counted(on && r == Region::kRecv, [&] { procs_[1]->module->progress(); });
        fake_.run_rc(); // credits returned, if any
        counted(on && r == Region::kDone, [&] { procs_[0]->module->progress(); });
    }

    /// Connects 0 to 1 with a first message (queued in the btl while the
    /// connection is set up over UD).
    void connect() {
        Proc &a = *procs_[0];
        mca_btl_base_descriptor_t *d = a.btl()->btl_alloc(a.btl(), a.eps[1], MCA_BTL_NO_ORDER,
                                                          kBytes, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        if (d == nullptr) {
            die("btl_alloc gave no descriptor");
        }
        std::memset(d->des_segments[0].seg_addr.pval, 0x5a, kBytes);
        d->des_cbfunc = nullptr;
        if (a.btl()->btl_send(a.btl(), a.eps[1], d, kTag) < 0) {
            die("the first btl_send failed");
        }
        for (int k = 0; k < 20000 && g_received == 0; ++k) {
            round();
        }
        if (g_received == 0) {
            die("not connected");
        }
        for (int k = 0; k < 20; ++k) {
            round();
        }
    }

    // PeerDirectory: the modex as every process published it.
    util::Result<btl::wire::ModexAddress> address(opal_proc_t *proc) override {
        for (size_t i = 0; i < procs_.size(); ++i) {
            if (&procs_[i]->proc == proc) {
                return modex_[i];
            }
        }
        return util::Status(util::Code::kNotFound, "not in the modex");
    }
    opal_proc_t *proc_for(uint64_t name) override {
        for (auto &p : procs_) {
            if (p->name == name) {
                return &p->proc;
            }
        }
        return nullptr;
    }

private:
    void add_proc(int i) {
        auto p = std::make_unique<Proc>();
        p->name = (uint64_t{0x77} << 32) | static_cast<uint32_t>(i);
        p->proc.proc_name.jobid = 0x77;
        p->proc.proc_name.vpid = static_cast<opal_vpid_t>(i);
        compat::set_proc_hostname(&p->proc, "bench");
        btl::ModuleEnv env;
        env.verbs = &fake_.api();
        env.snapshots = qp::cache_snapshot_source(*cache_, plan_.device);
        uint64_t token = 0x5eed0000ull + static_cast<uint64_t>(i) * 0x1111 + 1;
        env.who = {p->name, token, 2};
        env.peers = this;
        env.registry = [](btl::Device &dev) -> util::Result<std::unique_ptr<btl::MemoryRegistry>> {
            return std::unique_ptr<btl::MemoryRegistry>(
                std::make_unique<testing::DirectRegistry>(dev));
        };
        env.clock = [this] { return now_ += tick_; };
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
        ud_owner_[a.ports.front().ud_qpn] = procs_.size();
        modex_.push_back(a);
        procs_.push_back(std::move(p));
    }

    // The fabric moves: RC work executes, each datagram is delivered and its
    // receiver progressed, then both modules progress; 1 ms passes.
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
    std::unique_ptr<topo::SnapshotCache> cache_;
    btl::PortPlan plan_;
    btl::ModuleConfig cfg_;
    CountingSink log_;
    double now_ = 1000.0;
    double tick_ = 1e-6;
    std::vector<std::unique_ptr<Proc>> procs_;
    std::map<uint32_t, size_t> ud_owner_;
    std::vector<btl::wire::ModexAddress> modex_;
};

/// The floor: two RC QPs of one FakeVerbs, each "process" with its own
/// context, PD and CQ, the receiver's QP on an SRQ; what the btl's data path
/// cannot do without. The same fixture and verbs table as BtlPair.
class VerbsPair {
public:
    VerbsPair() : fake_(fixture()) {
        fake_.set_wire(true);
        const verbs::VerbsApi &api = fake_.api();
        int n = 0;
        verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
        if (n < 1) {
            die("no fake device");
        }
        for (Side *s : {&tx_, &rx_}) {
            s->ctx = verbs::Context(api.open_device(list[0]), verbs::ContextDeleter{&api});
            if (!s->ctx) {
                die("open_device");
            }
            s->pd = verbs::Pd(api.alloc_pd(s->ctx.get()), verbs::PdDeleter{&api});
            s->cq = verbs::Cq(api.create_cq(s->ctx.get(), 256, nullptr, nullptr, 0),
                              verbs::CqDeleter{&api});
            s->mr = verbs::Mr(
                api.reg_mr(s->pd.get(), s->buf.data(), s->buf.size(), IBV_ACCESS_LOCAL_WRITE),
                verbs::MrDeleter{&api});
            if (!s->pd || !s->cq || !s->mr) {
                die("pd/cq/mr");
            }
        }
        ibv_srq_init_attr sa{};
        sa.attr.max_wr = 64;
        sa.attr.max_sge = 1;
        srq_ = verbs::Srq(api.create_srq(rx_.pd.get(), &sa), verbs::SrqDeleter{&api});
        if (!srq_) {
            die("create_srq");
        }
        tx_.qp = make_qp(tx_, nullptr);
        rx_.qp = make_qp(rx_, srq_.get());
        connect(tx_.qp.get(), rx_.qp->qp_num);
        connect(rx_.qp.get(), tx_.qp->qp_num);
        for (uint32_t i = 0; i < kSlots; ++i) {
            post_srq(i);
        }
    }
    ~VerbsPair() {
        tx_.qp.reset();
        rx_.qp.reset();
        srq_.reset();
    }

    void message(bool on, Region r) {
        const verbs::VerbsApi &api = fake_.api();
        int rc = 0;
        counted(on && r == Region::kPost, [&] {
            ibv_sge sge{reinterpret_cast<uintptr_t>(tx_.buf.data()), kBytes, tx_.mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = ++seq_;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
            ibv_send_wr *bad = nullptr;
            rc = api.post_send(tx_.qp.get(), &wr, &bad);
        });
        if (rc != 0) {
            die("post_send: " + std::to_string(rc));
        }
        fake_.run_rc();
        int got = 0;
        counted(on && r == Region::kRecv, [&] {
            ibv_wc wc[16];
            got = api.poll_cq(rx_.cq.get(), 16, wc);
            for (int i = 0; i < got; ++i) {
                post_srq(static_cast<uint32_t>(wc[i].wr_id));
            }
        });
        int done = 0;
        counted(on && r == Region::kDone, [&] {
            ibv_wc wc[16];
            done = api.poll_cq(tx_.cq.get(), 16, wc);
        });
        if (got != 1 || done != 1) {
            die("the bare pair lost a message");
        }
    }

private:
    static constexpr uint32_t kSlots = 32;
    struct Side {
        verbs::Context ctx{nullptr, verbs::ContextDeleter{}};
        verbs::Pd pd{nullptr, verbs::PdDeleter{}};
        verbs::Cq cq{nullptr, verbs::CqDeleter{}};
        verbs::Qp qp{nullptr, verbs::QpDeleter{}};
        std::vector<uint8_t> buf = std::vector<uint8_t>(kSlots * 64);
        verbs::Mr mr{nullptr, verbs::MrDeleter{}};
    };

    verbs::Qp make_qp(Side &s, ibv_srq *srq) {
        ibv_qp_init_attr init{};
        init.send_cq = s.cq.get();
        init.recv_cq = s.cq.get();
        init.srq = srq;
        init.qp_type = IBV_QPT_RC;
        init.cap = {64, srq ? 0u : 64u, 1, 1, 64};
        verbs::Qp qp(fake_.api().create_qp(s.pd.get(), &init), verbs::QpDeleter{&fake_.api()});
        if (!qp) {
            die("create_qp");
        }
        return qp;
    }

    void modify(ibv_qp *qp, ibv_qp_attr a, int mask) {
        if (verbs::normalize_rc(fake_.api().modify_qp(qp, &a, mask), errno) != 0) {
            die("modify_qp: " + fake_.last_modify_reason());
        }
    }

    void connect(ibv_qp *qp, uint32_t dest) {
        const topo::Snapshot &s = fixture();
        const auto &port = s.devices.at(0).ports.at(0);
        if (port.gids.empty()) {
            die("no GID on the fixture's first port");
        }
        const topo::GidEntry &gid = port.gids.front(); // populated slots only
        ibv_qp_attr i{};
        i.qp_state = IBV_QPS_INIT;
        i.port_num = static_cast<uint8_t>(port.port);
        i.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
        modify(qp, i, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        ibv_qp_attr r{};
        r.qp_state = IBV_QPS_RTR;
        r.path_mtu = IBV_MTU_1024;
        r.dest_qp_num = dest;
        r.max_dest_rd_atomic = 1;
        r.min_rnr_timer = 12;
        r.ah_attr.is_global = 1;
        r.ah_attr.port_num = static_cast<uint8_t>(port.port);
        r.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid.index);
        r.ah_attr.grh.hop_limit = 64;
        std::memcpy(r.ah_attr.grh.dgid.raw, gid.gid.data(), 16);
        modify(qp, r,
               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        ibv_qp_attr t{};
        t.qp_state = IBV_QPS_RTS;
        t.timeout = 14;
        t.retry_cnt = 7;
        t.rnr_retry = 7;
        t.max_rd_atomic = 1;
        modify(qp, t,
               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                   IBV_QP_MAX_QP_RD_ATOMIC);
    }

    void post_srq(uint32_t slot) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(rx_.buf.data() + (slot % kSlots) * 64), 64,
                    rx_.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = slot;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        if (fake_.api().post_srq_recv(srq_.get(), &wr, &bad) != 0) {
            die("post_srq_recv");
        }
    }

    testing::FakeVerbs fake_;
    Side tx_, rx_;
    verbs::Srq srq_{nullptr, verbs::SrqDeleter{}};
    uint64_t seq_ = 0;
};

constexpr int kWarmup = 200;

} // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: btl_count_bench send|sendi|floor post|recv|done N\n");
        return 2;
    }
    const std::string path = argv[1], region = argv[2];
    const long n = std::atol(argv[3]);
    Region r = Region::kPost;
    if (region == "recv") {
        r = Region::kRecv;
    } else if (region == "done") {
        r = Region::kDone;
    } else if (region != "post") {
        std::fprintf(stderr, "btl_count_bench: REGION is post, recv or done\n");
        return 2;
    }
    if (path == "floor") {
        VerbsPair v;
        for (long i = 0; i < kWarmup + n; ++i) {
            v.message(i >= kWarmup, r);
        }
    } else if (path == "send" || path == "sendi") {
        BtlPair p;
        p.connect();
        const uint64_t before = g_received;
        for (long i = 0; i < kWarmup + n; ++i) {
            p.message(path == "sendi", i >= kWarmup, r);
        }
        if (g_received - before != static_cast<uint64_t>(kWarmup + n)) {
            die("sent " + std::to_string(kWarmup + n) + ", received " +
                std::to_string(g_received - before));
        }
    } else {
        std::fprintf(stderr, "btl_count_bench: PATH is send, sendi or floor\n");
        return 2;
    }
    std::printf("# btl_count_bench %s %s %ld: done%s\n", path.c_str(), region.c_str(), n,
                RUNNING_ON_VALGRIND ? "" : " (not under valgrind: nothing counted)");
    return 0;
}
