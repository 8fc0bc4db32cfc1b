// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// DC (mlx5 Dynamically Connected transport) over FakeVerbs: the capability
// query, DcTarget/DcInitiator creation and transitions, traffic between two
// "processes" (contexts of one FakeVerbs in wire mode), the wrong key, DCI
// error recovery, the posting API's errors, preflight and diagnostics of DC
// transitions, and a device without DC.
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "qp/check.h"
#include "qp/dc.h"
#include "topo/readers.h"
#include "util/log.h"
#include "verbs/dc_support.h"
#include "verbs/handles.h"

using namespace roce;
using qp::DcInitiator;
using qp::DcTarget;
using qp::DcWork;
using roce::testing::Call;
using roce::testing::FakeVerbs;
using roce::testing::fixture;

namespace {

constexpr uint64_t kKey = 0x5eed5eed12345678ull;

/// One "process": its own context on a device of the shared FakeVerbs, a
/// PD, a CQ, an SRQ with receives posted and a registered buffer.
struct Proc {
    Proc(FakeVerbs &f, const std::string &device) : fake(f) {
        const verbs::VerbsApi &api = f.api();
        int n = 0;
        verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
        for (int i = 0; i < n; ++i) {
            if (device == api.get_device_name(list[i])) {
                ctx = verbs::Context(api.open_device(list[i]), verbs::ContextDeleter{&api});
            }
        }
        REQUIRE(ctx);
        pd = verbs::Pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
        cq = verbs::Cq(api.create_cq(ctx.get(), 64, nullptr, nullptr, 0), verbs::CqDeleter{&api});
        ibv_srq_init_attr sa{};
        sa.attr.max_wr = 16;
        sa.attr.max_sge = 1;
        srq = verbs::Srq(api.create_srq(pd.get(), &sa), verbs::SrqDeleter{&api});
        REQUIRE(srq);
        mem.assign(4096, 0);
        int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
        mr =
            verbs::Mr(api.reg_mr(pd.get(), mem.data(), mem.size(), access), verbs::MrDeleter{&api});
        REQUIRE(mr);
    }
    /// Posts a receive of 256 bytes at mem[offset] on the SRQ.
    void post_recv(size_t offset, uint64_t wr_id) {
        ibv_sge sge{reinterpret_cast<uint64_t>(mem.data() + offset), 256, mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        REQUIRE(fake.api().post_srq_recv(srq.get(), &wr, &bad) == 0);
    }
    std::vector<ibv_wc> poll() {
        std::vector<ibv_wc> out(64);
        int n = fake.api().poll_cq(cq.get(), 64, out.data());
        out.resize(static_cast<size_t>(n < 0 ? 0 : n));
        return out;
    }
    ibv_sge sge(size_t offset, uint32_t len) const {
        return ibv_sge{reinterpret_cast<uint64_t>(mem.data() + offset), len, mr->lkey};
    }
    uint64_t addr(size_t offset) const { return reinterpret_cast<uint64_t>(mem.data() + offset); }

    FakeVerbs &fake;
    verbs::Context ctx{nullptr, verbs::ContextDeleter{}};
    verbs::Pd pd{nullptr, verbs::PdDeleter{}};
    verbs::Cq cq{nullptr, verbs::CqDeleter{}};
    verbs::Srq srq{nullptr, verbs::SrqDeleter{}};
    std::vector<uint8_t> mem;
    verbs::Mr mr{nullptr, verbs::MrDeleter{}};
};

/// Snapshots read live through the fake (so changing the fake changes them).
qp::SharedSnapshotSource live(FakeVerbs &f, const char *fixture_name) {
    return qp::shared_snapshot_source([&f, fixture_name]() -> util::Result<topo::Snapshot> {
        const topo::Snapshot &cap = fixture(fixture_name);
        return topo::read_live(f.api(), [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> {
            return cap.netdevs;
        });
    });
}

/// Two processes on mlx5_bond_0 (mlx5_lag): A initiates, B is the target.
struct Pair {
    Pair() : fake(fixture("mlx5_lag")), a(fake, "mlx5_bond_0"), b(fake, "mlx5_bond_0") {
        fake.set_wire(true);
    }
    DcTarget target(uint64_t key = kKey, const qp::QpParams &params = qp::dct_params()) {
        auto t = DcTarget::create(fake.api(), b.ctx.get(), b.pd.get(), b.cq.get(), b.srq.get(), key,
                                  sel, live(fake, "mlx5_lag"), false, &log);
        REQUIRE(t.is_ok());
        REQUIRE(t->activate(params).is_ok());
        return std::move(t.value());
    }
    DcInitiator initiator(qp::DciCaps caps = {}) {
        auto i = DcInitiator::create(fake.api(), a.ctx.get(), a.pd.get(), a.cq.get(), caps, sel,
                                     live(fake, "mlx5_lag"), false, &log);
        REQUIRE(i.is_ok());
        REQUIRE(i->activate().is_ok());
        return std::move(i.value());
    }
    /// A's address handle to B's GID (the selection's, both on one port).
    verbs::Ah ah() {
        ibv_ah_attr attr = qp::build_ah_attr(sel, sel.gid, qp::QpParams{});
        verbs::Ah h(fake.api().create_ah(a.pd.get(), &attr), verbs::AhDeleter{&fake.api()});
        REQUIRE(h);
        return h;
    }
    FakeVerbs fake;
    util::CaptureSink log;
    select::Selection sel = testing::lag_selection(3);
    Proc a, b;
};

DcWork work(DcWork::Op op, uint64_t wr_id, const ibv_sge *sge, ibv_ah *ah, const DcTarget &t) {
    DcWork w;
    w.op = op;
    w.wr_id = wr_id;
    w.flags = IBV_SEND_SIGNALED;
    w.sge = sge;
    w.num_sge = sge != nullptr ? 1 : 0;
    w.ah = ah;
    w.dctn = t.number();
    w.dc_key = t.access_key();
    return w;
}

} // namespace

TEST_CASE("DC: the capability query answers as rdma-core lets one ask", "[dc][caps]") {
    FakeVerbs mlx5(fixture("mlx5_lag"));
    Proc p(mlx5, "mlx5_bond_0");
    verbs::DcSupport yes = verbs::query_dc_support(mlx5.api(), p.ctx.get(), "mlx5_bond_0");
    CHECK(yes.supported);
    CHECK(yes.reason == "mlx5_bond_0: DC supported (a DC target could be created; DC ODP caps "
                        "0x0)");
    CHECK(mlx5.calls(Call::kMlx5dvCreateQp) == 1); // the probe
    size_t live_before = mlx5.live_objects();
    CHECK(live_before == 5); // Proc's own: the probe's PD, CQ, SRQ and DCT are gone again

    // mlx5 whose firmware has the dct capability off.
    mlx5.device("mlx5_bond_0").dc = false;
    verbs::DcSupport off = verbs::query_dc_support(mlx5.api(), p.ctx.get(), "mlx5_bond_0");
    CHECK_FALSE(off.supported);
    CHECK_THAT(off.reason, contains_text("mlx5dv_create_qp(DCT) failed: Operation not supported "
                                         "(95); DC not used (the device or its firmware lacks "
                                         "the dct capability)"));
    CHECK(mlx5.live_objects() == live_before);

    mlx5.device("mlx5_bond_0").dc = true;
    mlx5.fail(Call::kMlx5dvQueryDevice, EIO);
    verbs::DcSupport err = verbs::query_dc_support(mlx5.api(), p.ctx.get(), "mlx5_bond_0");
    CHECK_FALSE(err.supported);
    CHECK(err.reason == "mlx5_bond_0: mlx5dv_query_device failed: Input/output error (5); DC not "
                        "used");

    // rxe: not mlx5; the dv calls fail as rdma-core's do on another provider.
    FakeVerbs rxe(fixture("rxe_bond"));
    Proc r(rxe, "rxe_bond0");
    verbs::DcSupport no = verbs::query_dc_support(rxe.api(), r.ctx.get(), "rxe_bond0");
    CHECK_FALSE(no.supported);
    CHECK(no.reason == "rxe_bond0 is not an mlx5 device: DC needs mlx5 direct verbs");
    mlx5dv_context dv{};
    dv.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
    CHECK(rxe.api().mlx5dv_query_device(r.ctx.get(), &dv) == EOPNOTSUPP);
    CHECK(rxe.calls(Call::kMlx5dvCreateQp) == 0); // never probed
}

TEST_CASE("DC: DCT and DCI creation and transitions, preflighted", "[dc][fsm]") {
    Pair p;
    auto t = DcTarget::create(p.fake.api(), p.b.ctx.get(), p.b.pd.get(), p.b.cq.get(),
                              p.b.srq.get(), kKey, p.sel, live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(t.is_ok());
    uint32_t created_as = t->number();
    CHECK(t->qp().type() == qp::QpType::kDCT);
    CHECK(p.fake.api().qp_to_qp_ex(t->qp().get()) == nullptr); // a DCT sends nothing
    REQUIRE(t->activate().is_ok());
    CHECK(p.fake.qp_state(t->qp().get()) == IBV_QPS_RTR);
    CHECK(t->number() != created_as); // numbered by the firmware at RTR
    const ibv_qp_attr &ta = p.fake.qp_attr(t->qp().get());
    CHECK(ta.qp_access_flags == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
    CHECK(ta.min_rnr_timer == 12);
    CHECK(ta.ah_attr.grh.sgid_index == 3);
    CHECK(p.log.contains("ibv_modify_qp(DCT, RESET->INIT) on mlx5_bond_0:1 pkey_index 0 (0xffff) "
                         "gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0) mtu 4096 access "
                         "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC: ok"));
    CHECK(p.log.contains("ibv_modify_qp(DCT, INIT->RTR) on mlx5_bond_0:1 pkey_index 0 (0xffff) "
                         "gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0) mtu 4096 min_rnr_timer 12: "
                         "ok"));
    // A DCT stops at RTR: refused by preflight, and by the fake kernel.
    util::Status rts = t->qp().to_rts();
    CHECK(rts.code() == util::Code::kInvalidArgument);
    CHECK_THAT(t->qp().last_diagnostic(), contains_text("a DCT QP has no RTR->RTS transition"));
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    CHECK(p.fake.api().modify_qp(t->qp().get(), &err, IBV_QP_STATE) == EINVAL);

    DcInitiator i = p.initiator();
    CHECK(i.qp().type() == qp::QpType::kDCI);
    CHECK(p.fake.qp_state(i.qp().get()) == IBV_QPS_RTS);
    const ibv_qp_attr &ia = p.fake.qp_attr(i.qp().get());
    CHECK(ia.port_num == 1);
    CHECK(ia.ah_attr.grh.sgid_index == 3);
    CHECK(ia.path_mtu == IBV_MTU_4096);
    CHECK(ia.retry_cnt == 7);
    CHECK(p.fake.api().qp_to_qp_ex(i.qp().get()) != nullptr);

    // Refused before any verb: no SRQ, a key nobody drew.
    int creates = p.fake.calls(Call::kMlx5dvCreateQp);
    auto no_srq = DcTarget::create(p.fake.api(), p.b.ctx.get(), p.b.pd.get(), p.b.cq.get(), nullptr,
                                   kKey, p.sel, {}, false, nullptr);
    CHECK(no_srq.status().code() == util::Code::kInvalidArgument);
    auto zero = DcTarget::create(p.fake.api(), p.b.ctx.get(), p.b.pd.get(), p.b.cq.get(),
                                 p.b.srq.get(), 0, p.sel, {}, false, nullptr);
    CHECK(zero.status().code() == util::Code::kInvalidArgument);
    CHECK_THAT(zero.status().message(), contains_text("DC access key 0"));
    CHECK(p.fake.calls(Call::kMlx5dvCreateQp) == creates);

    // The fake kernel's creation rules.
    ibv_qp_init_attr_ex ex{};
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.pd = p.a.pd.get();
    ex.send_cq = p.a.cq.get();
    ex.recv_cq = p.a.cq.get();
    ex.srq = p.a.srq.get();
    ex.qp_type = IBV_QPT_DRIVER;
    ex.send_ops_flags = IBV_QP_EX_WITH_SEND;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
    errno = 0;
    CHECK(p.fake.api().mlx5dv_create_qp(p.a.ctx.get(), &ex, &dv) == nullptr);
    CHECK(errno == EINVAL); // a DCT with send ops
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
    ex.send_ops_flags = IBV_QP_EX_WITH_TSO;
    errno = 0;
    CHECK(p.fake.api().mlx5dv_create_qp(p.a.ctx.get(), &ex, &dv) == nullptr);
    CHECK(errno == EOPNOTSUPP); // not a DCI opcode
    ex.send_ops_flags = qp::kDciSendOps;
    ex.cap.max_recv_wr = 4;
    errno = 0;
    CHECK(p.fake.api().mlx5dv_create_qp(p.a.ctx.get(), &ex, &dv) == nullptr);
    CHECK(errno == EINVAL); // a DCI has no receive queue
}

TEST_CASE("DC: send, RDMA write, RDMA read and atomics between two processes", "[dc][wire]") {
    Pair p;
    DcTarget t = p.target();
    DcInitiator i = p.initiator();
    verbs::Ah ah = p.ah();
    p.b.post_recv(0, 0xb0);
    std::memcpy(p.a.mem.data() + 1024, "hello over DC", 14);
    std::memcpy(p.b.mem.data() + 2048, "target's data", 14);
    uint64_t counter = 40, word = 7;
    std::memcpy(p.b.mem.data() + 3072, &counter, 8);
    std::memcpy(p.b.mem.data() + 3080, &word, 8);

    ibv_sge send = p.a.sge(1024, 14);
    ibv_sge write = p.a.sge(1024, 14);
    ibv_sge read = p.a.sge(1536, 14);
    ibv_sge fetched = p.a.sge(3584, 8);
    ibv_sge swapped = p.a.sge(3592, 8);
    std::vector<DcWork> batch = {
        work(DcWork::Op::kSend, 1, &send, ah.get(), t),
        work(DcWork::Op::kWrite, 2, &write, ah.get(), t),
        work(DcWork::Op::kRead, 3, &read, ah.get(), t),
        work(DcWork::Op::kFetchAdd, 4, &fetched, ah.get(), t),
        work(DcWork::Op::kCmpSwap, 5, &swapped, ah.get(), t),
    };
    batch[1].rkey = p.b.mr->rkey;
    batch[1].remote_addr = p.b.addr(512);
    batch[2].rkey = p.b.mr->rkey;
    batch[2].remote_addr = p.b.addr(2048);
    batch[3].rkey = p.b.mr->rkey;
    batch[3].remote_addr = p.b.addr(3072);
    batch[3].compare_add = 2;
    batch[4].rkey = p.b.mr->rkey;
    batch[4].remote_addr = p.b.addr(3080);
    batch[4].compare_add = 7;
    batch[4].swap = 99;
    REQUIRE(i.post(batch.data(), batch.size()).is_ok());
    CHECK(p.a.poll().empty()); // in flight until the wire carries them
    CHECK(p.fake.run_dc() == 5);

    std::vector<ibv_wc> done = p.a.poll();
    REQUIRE(done.size() == 5);
    const ibv_wc_opcode ops[] = {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD,
                                 IBV_WC_COMP_SWAP};
    for (size_t k = 0; k < 5; ++k) {
        INFO("work request " << k + 1);
        CHECK(done[k].status == IBV_WC_SUCCESS);
        CHECK(done[k].wr_id == k + 1);
        CHECK(done[k].opcode == ops[k]);
        CHECK(done[k].qp_num == i.number());
    }
    std::vector<ibv_wc> got = p.b.poll();
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK(got[0].wr_id == 0xb0u);
    CHECK(got[0].byte_len == 14u);
    CHECK(got[0].qp_num == t.number());
    CHECK(std::memcmp(p.b.mem.data(), "hello over DC", 14) == 0);        // send
    CHECK(std::memcmp(p.b.mem.data() + 512, "hello over DC", 14) == 0);  // write
    CHECK(std::memcmp(p.a.mem.data() + 1536, "target's data", 14) == 0); // read
    uint64_t v = 0;
    std::memcpy(&v, p.b.mem.data() + 3072, 8);
    CHECK(v == 42u);
    std::memcpy(&v, p.a.mem.data() + 3584, 8);
    CHECK(v == 40u); // fetch-and-add returns the old value
    std::memcpy(&v, p.b.mem.data() + 3080, 8);
    CHECK(v == 99u);
    std::memcpy(&v, p.a.mem.data() + 3592, 8);
    CHECK(v == 7u);
    CHECK(p.fake.dct_key_violations(t.qp().get()) == 0);
}

TEST_CASE("DC: a wrong key is dropped by the target and times out at the initiator",
          "[dc][wire][key]") {
    Pair p;
    DcTarget t = p.target();
    DcInitiator i = p.initiator();
    verbs::Ah ah = p.ah();
    p.b.post_recv(0, 0xb0);
    ibv_sge send = p.a.sge(1024, 8);
    DcWork bad = work(DcWork::Op::kSend, 1, &send, ah.get(), t);
    bad.dc_key = kKey ^ 1;
    DcWork after = work(DcWork::Op::kSend, 2, &send, ah.get(), t);
    DcWork both[] = {bad, after};
    REQUIRE(i.post(both, 2).is_ok()); // the key is not checked at the initiator
    CHECK(p.fake.run_dc() == 1);

    std::vector<ibv_wc> done = p.a.poll();
    REQUIRE(done.size() == 2);
    CHECK(done[0].wr_id == 1u);
    CHECK(done[0].status == IBV_WC_RETRY_EXC_ERR);
    CHECK(done[1].wr_id == 2u);
    CHECK(done[1].status == IBV_WC_WR_FLUSH_ERR); // the DCI went to ERR
    CHECK(p.fake.qp_state(i.qp().get()) == IBV_QPS_ERR);
    // The target: nothing consumed, nothing completed, still serving, one
    // violation counted; no async event (upstream rdma-core has none for it).
    CHECK(p.b.poll().empty());
    CHECK(p.fake.qp_state(t.qp().get()) == IBV_QPS_RTR);
    CHECK(p.fake.dct_key_violations(t.qp().get()) == 1);
    ibv_async_event ev{};
    errno = 0;
    CHECK(p.fake.api().get_async_event(p.b.ctx.get(), &ev) == -1);
    CHECK(errno == EAGAIN);
}

TEST_CASE("DC: a DCI in error is reset and reused with its number", "[dc][wire][recover]") {
    Pair p;
    DcTarget t = p.target();
    DcInitiator i = p.initiator();
    verbs::Ah ah = p.ah();
    uint32_t number = i.number();
    ibv_sge send = p.a.sge(1024, 8);
    DcWork w = work(DcWork::Op::kSend, 1, &send, ah.get(), t);
    p.fake.fail_next_send(i.qp().get(), IBV_WC_RETRY_EXC_ERR);
    REQUIRE(i.post(&w, 1).is_ok());
    REQUIRE(p.a.poll().at(0).status == IBV_WC_RETRY_EXC_ERR);
    REQUIRE(p.fake.qp_state(i.qp().get()) == IBV_QPS_ERR);

    // In ERR it takes work and flushes it; it cannot skip the way back.
    w.wr_id = 2;
    REQUIRE(i.post(&w, 1).is_ok());
    std::vector<ibv_wc> flushed = p.a.poll();
    REQUIRE(flushed.size() == 1);
    CHECK(flushed[0].status == IBV_WC_WR_FLUSH_ERR);
    CHECK_FALSE(i.activate().is_ok()); // INIT from ERR: refused, the DCI is not in RESET

    REQUIRE(i.recover().is_ok());
    CHECK(p.fake.qp_state(i.qp().get()) == IBV_QPS_RTS);
    CHECK(i.number() == number);
    p.b.post_recv(0, 0xb1);
    w.wr_id = 3;
    REQUIRE(i.post(&w, 1).is_ok());
    CHECK(p.fake.run_dc() == 1);
    std::vector<ibv_wc> ok = p.a.poll();
    REQUIRE(ok.size() == 1);
    CHECK(ok[0].status == IBV_WC_SUCCESS);
    CHECK(ok[0].wr_id == 3u);
    CHECK(p.b.poll().size() == 1);

    // The wrong key's error is recovered the same way.
    w.dc_key = 0;
    w.wr_id = 4;
    REQUIRE(i.post(&w, 1).is_ok());
    p.fake.run_dc();
    CHECK(p.a.poll().at(0).status == IBV_WC_RETRY_EXC_ERR);
    REQUIRE(i.recover().is_ok());
    w.dc_key = kKey;
    w.wr_id = 5;
    p.b.post_recv(256, 0xb2);
    REQUIRE(i.post(&w, 1).is_ok());
    CHECK(p.fake.run_dc() == 1);
    CHECK(p.a.poll().at(0).status == IBV_WC_SUCCESS);
}

TEST_CASE("DC: posting errors are all-or-nothing and say why", "[dc][post]") {
    Pair p;
    DcTarget t = p.target();
    qp::DciCaps caps;
    caps.max_send_wr = 2;
    DcInitiator i = p.initiator(caps);
    verbs::Ah ah = p.ah();
    ibv_sge send = p.a.sge(1024, 8);
    DcWork w = work(DcWork::Op::kSend, 1, &send, ah.get(), t);
    DcWork three[] = {w, w, w};
    size_t sends = p.fake.sends().size();

    util::Status full = i.post(three, 3); // wire mode: they stay in flight
    CHECK(full.code() == util::Code::kResourceExhausted);
    CHECK(full.sys_errno() == ENOMEM);
    CHECK_THAT(full.message(), contains_text("the send queue is full"));
    CHECK(p.fake.sends().size() == sends); // nothing of the batch
    REQUIRE(i.post(three, 2).is_ok());
    CHECK(i.post(three, 1).sys_errno() == ENOMEM);
    CHECK(p.fake.sends().size() == sends + 2);

    DcWork no_ah = w;
    no_ah.ah = nullptr;
    CHECK(i.post(&no_ah, 1).code() == util::Code::kInvalidArgument);
    CHECK(i.post(&w, 0).code() == util::Code::kInvalidArgument);

    p.fake.fail(Call::kWrComplete, EIO);
    CHECK(i.post(&w, 1).sys_errno() == EIO);

    // A DCI not in RTS.
    auto fresh = DcInitiator::create(p.fake.api(), p.a.ctx.get(), p.a.pd.get(), p.a.cq.get(), {},
                                     p.sel, {}, false, nullptr);
    REQUIRE(fresh.is_ok());
    CHECK(fresh->post(&w, 1).sys_errno() == EINVAL);

    // A work request without its destination never reaches the wire.
    ibv_qp_ex *ex = p.fake.api().qp_to_qp_ex(i.qp().get());
    p.fake.api().wr_start(ex);
    p.fake.api().wr_send(ex);
    p.fake.api().wr_set_sge(ex, send.lkey, send.addr, send.length);
    CHECK(p.fake.api().wr_complete(ex) == EINVAL);
}

TEST_CASE("DC: preflight refuses a stale GID index before the call", "[dc][preflight]") {
    Pair p;
    auto make_dci = [&](const select::Selection &sel) {
        auto i = DcInitiator::create(p.fake.api(), p.a.ctx.get(), p.a.pd.get(), p.a.cq.get(), {},
                                     sel, live(p.fake, "mlx5_lag"), false, &p.log);
        REQUIRE(i.is_ok());
        return std::move(i.value());
    };

    // A GID index that went stale: the slot is empty now.
    select::Selection stale = p.sel;
    p.fake.device("mlx5_bond_0").ports[0].gids.erase(3);
    DcInitiator i = make_dci(stale);
    int modifies = p.fake.calls(Call::kModifyQp);
    util::Status st = i.activate();
    CHECK(st.code() == util::Code::kNotFound);
    CHECK(st.sys_errno() == ENODATA);
    CHECK(p.fake.calls(Call::kModifyQp) == modifies + 1); // INIT ran, RTR was refused
    CHECK(i.qp().state() == IBV_QPS_INIT);
    CHECK_THAT(st.message(), contains_text("ibv_modify_qp(DCI, INIT->RTR) on mlx5_bond_0:1 "
                                           "pkey_index 0 (0xffff) gid[3] (empty now; selected "
                                           "as ::ffff:198.18.0.11) mtu 4096 refused before the "
                                           "call: sgid_index: sgid_index 3 is an empty slot "
                                           "now"));
    CHECK_THAT(st.message(), contains_text("; fix: a stale GID index"));
    CHECK(p.log.contains(st.message()));
}

TEST_CASE("DC: preflight refuses an MTU above the port's, a down port and DC attributes",
          "[dc][preflight]") {
    Pair p;
    // MTU: the selection says 4096, the port runs 1024 now.
    p.fake.device("mlx5_bond_0").ports[0].active_mtu = IBV_MTU_1024;
    auto i = DcInitiator::create(p.fake.api(), p.a.ctx.get(), p.a.pd.get(), p.a.cq.get(), {}, p.sel,
                                 live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(i.is_ok());
    int modifies = p.fake.calls(Call::kModifyQp);
    util::Status st = i->activate();
    CHECK_FALSE(st.is_ok());
    CHECK(p.fake.calls(Call::kModifyQp) == modifies + 1);
    CHECK_THAT(st.message(), contains_text("path_mtu: path_mtu 4096 exceeds the active MTU 1024 "
                                           "of mlx5_bond_0:1"));
    CHECK_THAT(st.message(), contains_text("the kernel would accept it, but the QP would not "
                                           "work"));
    p.fake.device("mlx5_bond_0").ports[0].active_mtu = IBV_MTU_4096;

    // A down port: DC would fail every peer at once.
    p.fake.device("mlx5_bond_0").ports[0].state = IBV_PORT_DOWN;
    auto t = DcTarget::create(p.fake.api(), p.b.ctx.get(), p.b.pd.get(), p.b.cq.get(),
                              p.b.srq.get(), kKey, p.sel, live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(t.is_ok());
    st = t->activate();
    CHECK_FALSE(st.is_ok());
    CHECK_THAT(st.message(), contains_text("port_state: mlx5_bond_0:1 is DOWN: a DC target on "
                                           "it serves every peer, and none would be reached"));
    CHECK(p.fake.qp_state(t->qp().get()) == IBV_QPS_RESET);
    p.fake.device("mlx5_bond_0").ports[0].state = IBV_PORT_ACTIVE;

    // DC attributes: access bits a DCT does not take; a min_rnr_timer too wide.
    qp::QpParams odd = qp::dct_params();
    odd.access_flags |= IBV_ACCESS_MW_BIND;
    st = t->activate(odd);
    CHECK_THAT(st.message(), contains_text("qp_access_flags: access flags 0x1f carry bits 0x10 "
                                           "that a DC target does not take"));
    qp::QpParams wide = qp::dct_params();
    wide.min_rnr_timer = 40;
    REQUIRE(t->qp().to_init(wide).is_ok());
    st = t->qp().to_rtr(nullptr, wide);
    CHECK_THAT(st.message(), contains_text("min_rnr_timer: min_rnr_timer 40 does not fit the "
                                           "5-bit field: the device would use 8"));
    CHECK(p.fake.qp_state(t->qp().get()) == IBV_QPS_INIT);
}

TEST_CASE("DC: a transition the kernel still refuses gets the diagnostic paragraph",
          "[dc][diagnostic]") {
    Pair p;
    p.fake.device("mlx5_bond_0").dc_atomics = false;
    auto t = DcTarget::create(p.fake.api(), p.b.ctx.get(), p.b.pd.get(), p.b.cq.get(),
                              p.b.srq.get(), kKey, p.sel, live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(t.is_ok());
    util::Status st = t->activate();
    CHECK(st.code() == util::Code::kUnsupported);
    CHECK(st.sys_errno() == EOPNOTSUPP);
    CHECK(st.message() ==
          "ibv_modify_qp(DCT, RESET->INIT) on mlx5_bond_0:1 pkey_index 0 (0xffff) gid[3] "
          "::ffff:198.18.0.11 (RoCE v2, bond0) mtu 4096 access "
          "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC failed: Operation not supported "
          "(95); likely cause: the device has no atomics over DC: mlx5 refuses REMOTE_ATOMIC on "
          "a DC target (mlx5_ib_modify_dct); fix: activate the target without REMOTE_ATOMIC and "
          "keep atomics on RC");
    qp::QpParams no_atomics = qp::dct_params();
    no_atomics.access_flags &= ~IBV_ACCESS_REMOTE_ATOMIC;
    CHECK(t->activate(no_atomics).is_ok());

    // Any errno the kernel gives at RTR reads as one paragraph too.
    auto i = DcInitiator::create(p.fake.api(), p.a.ctx.get(), p.a.pd.get(), p.a.cq.get(), {}, p.sel,
                                 live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(i.is_ok());
    p.fake.fail(Call::kModifyQp, ENOMEM, 1);
    st = i->activate();
    CHECK(st.sys_errno() == ENOMEM);
    CHECK_THAT(st.message(), contains_text("ibv_modify_qp(DCI, INIT->RTR) on mlx5_bond_0:1 "
                                           "pkey_index 0 (0xffff) gid[3] ::ffff:198.18.0.11 "
                                           "(RoCE v2, bond0) mtu 4096 failed: Cannot allocate "
                                           "memory (12); likely cause: the device or the kernel "
                                           "ran out of resources"));
}

TEST_CASE("DC: a device without DC says so and creates nothing", "[dc][unsupported]") {
    FakeVerbs rxe(fixture("rxe_bond"));
    Proc r(rxe, "rxe_bond0");
    select::Selection sel;
    sel.device = "rxe_bond0";
    sel.port = 1;
    auto i = DcInitiator::create(rxe.api(), r.ctx.get(), r.pd.get(), r.cq.get(), {}, sel, {}, false,
                                 nullptr);
    CHECK(i.status().code() == util::Code::kUnsupported);
    CHECK(i.status().message() ==
          "mlx5dv_create_qp(DCI) on rxe_bond0 failed: Operation not supported (95); DC needs an "
          "mlx5 device with the dct capability (rxe and other providers have no DC)");
    auto t = DcTarget::create(rxe.api(), r.ctx.get(), r.pd.get(), r.cq.get(), r.srq.get(), kKey,
                              sel, {}, false, nullptr);
    CHECK(t.status().sys_errno() == EOPNOTSUPP);
    CHECK(rxe.live_objects() == 5); // context, PD, CQ, SRQ, MR: nothing of DC
}

TEST_CASE("DC: a remote access error fails the initiator, not the target", "[dc][wire]") {
    Pair p;
    DcTarget t = p.target();
    DcInitiator bad = p.initiator();
    DcInitiator good = p.initiator();
    verbs::Ah ah = p.ah();
    ibv_sge buf = p.a.sge(1024, 8);
    DcWork w = work(DcWork::Op::kWrite, 1, &buf, ah.get(), t);
    w.rkey = p.b.mr->rkey ^ 0xff; // not B's key
    w.remote_addr = p.b.addr(0);
    REQUIRE(bad.post(&w, 1).is_ok());
    CHECK(p.fake.run_dc() == 1);
    std::vector<ibv_wc> done = p.a.poll();
    REQUIRE(done.size() == 1);
    CHECK(done[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.fake.qp_state(bad.qp().get()) == IBV_QPS_ERR);
    CHECK(p.fake.qp_state(t.qp().get()) == IBV_QPS_RTR); // still serving the others
    w.rkey = p.b.mr->rkey;
    w.wr_id = 2;
    REQUIRE(good.post(&w, 1).is_ok());
    CHECK(p.fake.run_dc() == 1);
    done = p.a.poll();
    REQUIRE(done.size() == 1);
    CHECK(done[0].status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(p.b.mem.data(), p.a.mem.data() + 1024, 8) == 0);
}

TEST_CASE("DC: roce-doctor --check's DC part: transitions on mlx5, SKIP with the reason elsewhere",
          "[dc][check]") {
    auto fresh_of = [](FakeVerbs &f, const char *name) -> qp::SnapshotSource {
        return [&f, name]() -> util::Result<topo::Snapshot> {
            const topo::Snapshot &cap = fixture(name);
            return topo::read_live(
                f.api(),
                [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> { return cap.netdevs; });
        };
    };
    FakeVerbs mlx5(fixture("mlx5_lag"));
    select::Selection sel = testing::lag_selection(3);
    auto out =
        qp::check_dc_transitions(mlx5.api(), sel, fresh_of(mlx5, "mlx5_lag"), false, nullptr);
    REQUIRE(out.size() == 2);
    CHECK(out[0].type == qp::QpType::kDCT);
    CHECK(out[0].passed);
    CHECK_THAT(out[0].detail, contains_text("RESET->INIT->RTR ok (DCT 0x"));
    CHECK(out[1].type == qp::QpType::kDCI);
    CHECK(out[1].passed);
    CHECK_THAT(out[1].detail, contains_text("RESET->INIT->RTR->RTS ok (DCI 0x"));
    CHECK_FALSE(out[1].skipped);
    CHECK(mlx5.live_objects() == 0); // everything destroyed again

    // A refused transition is a failed outcome with the diagnostic.
    mlx5.device("mlx5_bond_0").ports[0].active_mtu = IBV_MTU_1024;
    out = qp::check_dc_transitions(mlx5.api(), sel, fresh_of(mlx5, "mlx5_lag"), false, nullptr);
    REQUIRE(out.size() == 2);
    CHECK_FALSE(out[0].passed);
    CHECK_THAT(out[0].detail, contains_text("ibv_modify_qp(DCT, INIT->RTR)"));
    CHECK_THAT(out[0].detail, contains_text("exceeds the active MTU 1024"));
    CHECK_FALSE(out[1].passed);
    CHECK(mlx5.live_objects() == 0);

    FakeVerbs rxe(fixture("rxe_bond"));
    select::Selection rsel;
    rsel.device = "rxe_bond0";
    rsel.port = 1;
    out = qp::check_dc_transitions(rxe.api(), rsel, {}, false, nullptr);
    REQUIRE(out.size() == 2);
    for (const auto &o : out) {
        CHECK(o.skipped);
        CHECK_FALSE(o.passed);
        CHECK(o.detail == "SKIP: rxe_bond0 is not an mlx5 device: DC needs mlx5 direct verbs");
    }
    CHECK(rxe.live_objects() == 0);
}

TEST_CASE("DC: one DCI addresses two targets in one batch, each by its number and key",
          "[dc][wire]") {
    Pair p;
    Proc c(p.fake, "mlx5_bond_0"); // a third process, target too
    DcTarget tb = p.target();
    auto made = DcTarget::create(p.fake.api(), c.ctx.get(), c.pd.get(), c.cq.get(), c.srq.get(),
                                 kKey + 1, p.sel, live(p.fake, "mlx5_lag"), false, &p.log);
    REQUIRE(made.is_ok());
    DcTarget tc = std::move(made.value());
    REQUIRE(tc.activate().is_ok());
    DcInitiator i = p.initiator();
    verbs::Ah ah = p.ah();
    p.b.post_recv(0, 0xb0);
    c.post_recv(0, 0xc0);
    std::memcpy(p.a.mem.data() + 1024, "to B", 4);
    std::memcpy(p.a.mem.data() + 1032, "to C", 4);
    ibv_sge to_b = p.a.sge(1024, 4);
    ibv_sge to_c = p.a.sge(1032, 4);
    DcWork both[] = {work(DcWork::Op::kSend, 1, &to_b, ah.get(), tb),
                     work(DcWork::Op::kSend, 2, &to_c, ah.get(), tc)};
    REQUIRE(i.post(both, 2).is_ok());
    CHECK(p.fake.run_dc() == 2);
    std::vector<ibv_wc> done = p.a.poll();
    REQUIRE(done.size() == 2);
    CHECK(done[0].status == IBV_WC_SUCCESS);
    CHECK(done[1].status == IBV_WC_SUCCESS);
    std::vector<ibv_wc> at_b = p.b.poll(), at_c = c.poll();
    REQUIRE(at_b.size() == 1);
    REQUIRE(at_c.size() == 1);
    CHECK(at_b[0].qp_num == tb.number());
    CHECK(at_c[0].qp_num == tc.number());
    CHECK(std::memcmp(p.b.mem.data(), "to B", 4) == 0);
    CHECK(std::memcmp(c.mem.data(), "to C", 4) == 0);
    // B's key does not open C.
    DcWork crossed = work(DcWork::Op::kSend, 3, &to_c, ah.get(), tc);
    crossed.dc_key = tb.access_key();
    c.post_recv(256, 0xc1);
    REQUIRE(i.post(&crossed, 1).is_ok());
    p.fake.run_dc();
    CHECK(p.a.poll().at(0).status == IBV_WC_RETRY_EXC_ERR);
    CHECK(p.fake.dct_key_violations(tc.qp().get()) == 1);
    CHECK(p.fake.dct_key_violations(tb.qp().get()) == 0);
    CHECK(c.poll().empty());
}
