// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// FakeVerbs models the hardware: the QP state machine and attribute masks,
// the kernel's errno for bad attributes, posted work requests, scripted
// completions and failures.
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <tuple>
#include <vector>

#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "verbs/handles.h"

using namespace roce;
using roce::testing::Call;
using roce::testing::FakeVerbs;

namespace {

/// A device opened through the fake, with a PD and a CQ (RAII, in order).
struct Env {
    explicit Env(const char *fixture_name, const char *device = nullptr)
        : fake(testing::fixture(fixture_name)) {
        const verbs::VerbsApi &api = fake.api();
        int n = 0;
        verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
        REQUIRE(n >= 1);
        ibv_device *dev = list[0];
        for (int i = 0; i < n && device; ++i) {
            if (std::strcmp(api.get_device_name(list[i]), device) == 0) {
                dev = list[i];
            }
        }
        ctx = verbs::Context(api.open_device(dev), verbs::ContextDeleter{&api});
        REQUIRE(ctx);
        pd = verbs::Pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
        cq = verbs::Cq(api.create_cq(ctx.get(), 16, nullptr, nullptr, 0), verbs::CqDeleter{&api});
        REQUIRE(pd);
        REQUIRE(cq);
    }
    verbs::Qp qp(ibv_qp_type type, ibv_srq *srq = nullptr, uint32_t max_inline = 0) {
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.srq = srq;
        init.qp_type = type;
        init.cap = {4, 4, 1, 1, max_inline};
        return verbs::Qp(fake.api().create_qp(pd.get(), &init), verbs::QpDeleter{&fake.api()});
    }
    int modify(ibv_qp *qp, ibv_qp_attr a, int mask) {
        return verbs::normalize_rc(fake.api().modify_qp(qp, &a, mask), errno);
    }
    FakeVerbs fake;
    verbs::Context ctx{nullptr, verbs::ContextDeleter{}};
    verbs::Pd pd{nullptr, verbs::PdDeleter{}};
    verbs::Cq cq{nullptr, verbs::CqDeleter{}};
};

ibv_qp_attr ud_init(int port = 1, int pkey_index = 0, uint32_t qkey = 0x1ee7a330) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = static_cast<uint8_t>(port);
    a.pkey_index = static_cast<uint16_t>(pkey_index);
    a.qkey = qkey;
    return a;
}
constexpr int kUdInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
constexpr int kRcInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRcRtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRcRts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

ibv_qp_attr rc_rtr(const topo::Snapshot &s, int sgid, uint32_t dqpn) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dqpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid);
    a.ah_attr.grh.hop_limit = 64;
    std::memcpy(a.ah_attr.grh.dgid.raw, s.devices[0].ports[0].gids[3].gid.data(), 16);
    return a;
}

ibv_qp_attr rc_rts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return a;
}

} // namespace

TEST_CASE("FakeVerbs: a UD QP goes RESET->INIT->RTR->RTS with the kernel's masks",
          "[fake][qp]") {
    Env e("mlx5_lag");
    auto qp = e.qp(IBV_QPT_UD);
    REQUIRE(qp);
    CHECK(qp->state == IBV_QPS_RESET);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == EINVAL); // RESET->RTR is no transition
    CHECK(e.fake.last_modify_reason() == "RESET -> RTR is not a legal transition");
    CHECK(e.modify(qp.get(), ud_init(), kUdInit & ~IBV_QP_QKEY) == EINVAL);
    CHECK(e.fake.last_modify_reason() ==
          "RESET -> INIT: attribute mask 0x31, required 0x71, optional 0x0");
    CHECK(e.modify(qp.get(), ud_init(), kUdInit | IBV_QP_ACCESS_FLAGS) == EINVAL);
    CHECK(e.modify(qp.get(), ud_init(), kUdInit) == 0);
    CHECK(e.fake.qp_state(qp.get()) == IBV_QPS_INIT);
    CHECK(e.fake.qp_attr(qp.get()).qkey == 0x1ee7a330u);
    a.qp_state = IBV_QPS_RTR;
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE | IBV_QP_AV) == EINVAL); // UD RTR takes no AV
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == 0);
    a.qp_state = IBV_QPS_RTS;
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == EINVAL); // SQ_PSN required
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
    CHECK(qp->state == IBV_QPS_RTS);
    a.qp_state = IBV_QPS_RESET;
    CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == 0);
    CHECK(e.fake.qp_attr(qp.get()).qkey == 0u); // RESET forgets the attributes
}

TEST_CASE("FakeVerbs: an RC QP needs the address vector, and DC lives on mlx5 only",
          "[fake][qp]") {
    Env e("mlx5_lag");
    const topo::Snapshot &s = testing::fixture("mlx5_lag");
    auto qp = e.qp(IBV_QPT_RC);
    ibv_qp_attr init{};
    init.qp_state = IBV_QPS_INIT;
    init.port_num = 1;
    init.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    CHECK(e.modify(qp.get(), init, kRcInit | IBV_QP_QKEY) == EINVAL); // RC takes no qkey
    CHECK(e.modify(qp.get(), init, kRcInit) == 0);
    CHECK(e.modify(qp.get(), rc_rtr(s, 3, qp->qp_num), kRcRtr & ~IBV_QP_MIN_RNR_TIMER) == EINVAL);
    CHECK(e.modify(qp.get(), rc_rtr(s, 3, qp->qp_num), kRcRtr) == 0);
    CHECK(e.modify(qp.get(), rc_rts(), kRcRts) == 0);
    CHECK(qp->state == IBV_QPS_RTS);

    // DC through mlx5dv: a DCT stops at RTR; a DCI goes on to RTS.
    ibv_qp_init_attr_ex ex{};
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = e.pd.get();
    ex.send_cq = e.cq.get();
    ex.recv_cq = e.cq.get();
    ex.qp_type = IBV_QPT_DRIVER;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
    verbs::Qp dci(e.fake.api().mlx5dv_create_qp(e.ctx.get(), &ex, &dv),
                  verbs::QpDeleter{&e.fake.api()});
    REQUIRE(dci);
    CHECK(dci->qp_type == IBV_QPT_DRIVER);
    CHECK(e.modify(dci.get(), init, kRcInit) == EINVAL); // DCI INIT takes no access flags
    CHECK(e.modify(dci.get(), init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == 0);
    ibv_qp_attr rtr{};
    rtr.qp_state = IBV_QPS_RTR;
    rtr.path_mtu = IBV_MTU_1024;
    CHECK(e.modify(dci.get(), rtr, IBV_QP_STATE | IBV_QP_PATH_MTU) == 0);
    CHECK(e.modify(dci.get(), rc_rts(), kRcRts) == 0);

    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
    errno = 0;
    CHECK(e.fake.api().mlx5dv_create_qp(e.ctx.get(), &ex, &dv) == nullptr); // DCT needs an SRQ
    CHECK(errno == EINVAL);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    verbs::Srq srq(e.fake.api().create_srq(e.pd.get(), &sa), verbs::SrqDeleter{&e.fake.api()});
    ex.srq = srq.get();
    verbs::Qp dct(e.fake.api().mlx5dv_create_qp(e.ctx.get(), &ex, &dv),
                  verbs::QpDeleter{&e.fake.api()});
    REQUIRE(dct);
    CHECK(e.modify(dct.get(), init, kRcInit) == 0);
    CHECK(e.modify(dct.get(), rc_rtr(s, 3, 0),
                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER) == 0);
    CHECK(e.modify(dct.get(), rc_rts(), kRcRts) == EINVAL); // a DCT has no RTS

    Env rxe("rxe_bond");
    errno = 0;
    CHECK(rxe.fake.api().mlx5dv_create_qp(rxe.ctx.get(), &ex, &dv) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK_FALSE(rxe.fake.api().mlx5dv_is_supported(rxe.ctx->device));
    CHECK(e.fake.api().mlx5dv_is_supported(e.ctx->device));
}

TEST_CASE("FakeVerbs: the kernel's errno for bad attributes, in the kernel's order",
          "[fake][errno]") {
    Env e("mlx5_lag");
    const topo::Snapshot &s = testing::fixture("mlx5_lag");
    auto qp = e.qp(IBV_QPT_UD);
    // Port beyond the one-port LAG device: EINVAL, checked before the qkey.
    CHECK(e.modify(qp.get(), ud_init(2, 0, 0x80000001u), kUdInit) == EINVAL);
    CHECK(e.fake.last_modify_reason() == "port_num 2 is not a port of mlx5_bond_0 (it has 1)");
    // Controlled qkey without CAP_NET_RAW: EPERM; allowed when privileged.
    CHECK(e.modify(qp.get(), ud_init(1, 0, 0x80000001u), kUdInit) == EPERM);
    // pkey index beyond the one-entry table: mlx5 says EINVAL.
    CHECK(e.modify(qp.get(), ud_init(1, 1), kUdInit) == EINVAL);
    CHECK(e.fake.last_modify_reason() == "pkey_index 1 is beyond the pkey table (size 1)");
    CHECK(qp->state == IBV_QPS_RESET);
    e.fake.set_privileged(true);
    CHECK(e.modify(qp.get(), ud_init(1, 0, 0x80000001u), kUdInit) == 0);

    // rxe does not check the pkey index (measured on Linux 6.1).
    Env rxe("rxe_bond");
    auto rq = rxe.qp(IBV_QPT_UD);
    CHECK(rxe.modify(rq.get(), ud_init(1, 64), kUdInit) == 0);

    // RC INIT->RTR: the address vector's sgid index.
    auto rc = e.qp(IBV_QPT_RC);
    ibv_qp_attr init{};
    init.qp_state = IBV_QPS_INIT;
    init.port_num = 1;
    REQUIRE(e.modify(rc.get(), init, kRcInit) == 0);
    CHECK(e.modify(rc.get(), rc_rtr(s, 9, 1), kRcRtr) == ENODATA); // empty slot
    CHECK(e.fake.last_modify_reason() == "sgid_index 9 is an empty GID slot");
    CHECK(e.modify(rc.get(), rc_rtr(s, 255, 1), kRcRtr) == ENODATA); // beyond the table
    CHECK(e.fake.last_modify_reason() == "sgid_index 255 is beyond the GID table");
    ibv_qp_attr no_grh = rc_rtr(s, 3, 1);
    no_grh.ah_attr.is_global = 0;
    CHECK(e.modify(rc.get(), no_grh, kRcRtr) == EINVAL);
    ibv_qp_attr bad_mtu = rc_rtr(s, 3, 1);
    bad_mtu.path_mtu = static_cast<ibv_mtu>(6);
    CHECK(e.modify(rc.get(), bad_mtu, kRcRtr) == EINVAL);
    ibv_qp_attr av_port = rc_rtr(s, 3, 1);
    av_port.ah_attr.port_num = 2;
    CHECK(e.modify(rc.get(), av_port, kRcRtr) == EINVAL);
    e.fake.set_unreachable(s.devices[0].ports[0].gids[3].gid);
    CHECK(e.modify(rc.get(), rc_rtr(s, 3, 1), kRcRtr) == ETIMEDOUT);
    CHECK(rc->state == IBV_QPS_INIT); // nothing applied by failed calls
}

TEST_CASE("FakeVerbs: posted work requests, completions and error completions",
          "[fake][datapath]") {
    Env e("mlx5_lag");
    const verbs::VerbsApi &api = e.fake.api();
    auto qp = e.qp(IBV_QPT_UD);
    char buf[64] = {};
    verbs::Mr mr(api.reg_mr(e.pd.get(), buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&api});
    REQUIRE(mr);
    CHECK(api.reg_mr(e.pd.get(), buf, 8, IBV_ACCESS_REMOTE_WRITE) == nullptr); // needs LOCAL_WRITE
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 32, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    CHECK(api.post_send(qp.get(), &wr, &bad) == EINVAL); // not in RTS
    CHECK(bad == &wr);

    ibv_recv_wr rwr{};
    rwr.wr_id = 11;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr *rbad = nullptr;
    CHECK(api.post_recv(qp.get(), &rwr, &rbad) == EINVAL); // RESET
    REQUIRE(e.modify(qp.get(), ud_init(), kUdInit) == 0);
    CHECK(api.post_recv(qp.get(), &rwr, &rbad) == 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    REQUIRE(e.modify(qp.get(), a, IBV_QP_STATE) == 0);
    a.qp_state = IBV_QPS_RTS;
    REQUIRE(e.modify(qp.get(), a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);

    CHECK(api.post_send(qp.get(), &wr, &bad) == EINVAL); // UD send without an AH
    ibv_ah_attr ah_attr{};
    ah_attr.is_global = 1;
    ah_attr.port_num = 1;
    ah_attr.grh.sgid_index = 3;
    verbs::Ah ah(api.create_ah(e.pd.get(), &ah_attr), verbs::AhDeleter{&api});
    REQUIRE(ah);
    ah_attr.grh.sgid_index = 8;
    errno = 0;
    CHECK(api.create_ah(e.pd.get(), &ah_attr) == nullptr);
    CHECK(errno == ENODATA);
    wr.wr.ud.ah = ah.get();
    wr.wr.ud.remote_qpn = 0x99;
    wr.wr.ud.remote_qkey = 0x1ee7a330;
    ibv_send_wr second = wr;
    second.wr_id = 8;
    second.send_flags = 0; // unsignaled: recorded, no completion
    wr.next = &second;
    CHECK(api.post_send(qp.get(), &wr, &bad) == 0);
    REQUIRE(e.fake.sends().size() == 2);
    CHECK(e.fake.sends()[0].wr_id == 7);
    CHECK(e.fake.sends()[0].remote_qpn == 0x99u);
    CHECK(e.fake.sends()[0].sge.at(0).length == 32u);
    CHECK(e.fake.sends()[1].send_flags == 0u);
    ibv_wc wc[4];
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 1);
    CHECK(wc[0].wr_id == 7);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_SEND);
    CHECK(wc[0].byte_len == 32u);

    CHECK(e.fake.deliver_recv(qp.get(), 24, 0x42));
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 1);
    CHECK(wc[0].wr_id == 11);
    CHECK(wc[0].opcode == IBV_WC_RECV);
    CHECK(wc[0].src_qp == 0x42u);
    CHECK((wc[0].wc_flags & IBV_WC_GRH) != 0);
    CHECK_FALSE(e.fake.deliver_recv(qp.get(), 24)); // nothing posted any more

    // A scripted error completion moves the QP to ERR; later sends flush.
    CHECK(api.post_recv(qp.get(), &rwr, &rbad) == 0);
    e.fake.fail_next_send(qp.get(), IBV_WC_RETRY_EXC_ERR, 0x81);
    wr.next = nullptr;
    CHECK(api.post_send(qp.get(), &wr, &bad) == 0);
    CHECK(e.fake.qp_state(qp.get()) == IBV_QPS_ERR);
    CHECK(api.post_send(qp.get(), &wr, &bad) == 0);
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 3);
    CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
    CHECK(wc[0].vendor_err == 0x81u);
    CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR); // the posted receive
    CHECK(wc[1].wr_id == 11);
    CHECK(wc[2].status == IBV_WC_WR_FLUSH_ERR); // the send after the error
    ibv_wc pushed{};
    pushed.wr_id = 99;
    pushed.status = IBV_WC_REM_ACCESS_ERR;
    e.fake.push_completion(e.cq.get(), pushed);
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 1);
    CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
}

TEST_CASE("FakeVerbs: receives through an SRQ", "[fake][datapath]") {
    Env e("rxe_bond");
    const verbs::VerbsApi &api = e.fake.api();
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 8;
    sa.attr.max_sge = 1;
    verbs::Srq srq(api.create_srq(e.pd.get(), &sa), verbs::SrqDeleter{&api});
    REQUIRE(srq);
    auto qp = e.qp(IBV_QPT_RC, srq.get());
    REQUIRE(qp);
    ibv_recv_wr rwr{};
    rwr.wr_id = 5;
    ibv_recv_wr *bad = nullptr;
    CHECK(api.post_recv(qp.get(), &rwr, &bad) == EINVAL); // a QP with an SRQ takes none
    CHECK(api.post_srq_recv(srq.get(), &rwr, &bad) == 0);
    CHECK(api.destroy_srq(srq.get()) == EBUSY); // the QP still uses it
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    REQUIRE(e.modify(qp.get(), a, kRcInit) == 0);
    REQUIRE(e.modify(qp.get(), rc_rtr(testing::fixture("rxe_bond"), 1, qp->qp_num), kRcRtr) == 0);
    CHECK(e.fake.deliver_recv(qp.get(), 100));
    ibv_wc wc{};
    REQUIRE(api.poll_cq(e.cq.get(), 1, &wc) == 1);
    CHECK(wc.wr_id == 5);
    CHECK(wc.byte_len == 100u);
}

TEST_CASE("FakeVerbs: any call fails on demand; objects in use are EBUSY", "[fake][script]") {
    auto live = [](FakeVerbs &f) { return f.live_objects(); };
    {
        Env e("mlx5_lag");
        const verbs::VerbsApi &api = e.fake.api();
        auto qp = e.qp(IBV_QPT_UD);
        e.fake.fail(Call::kModifyQp, EIO, 1, 2); // the 2nd and 3rd calls fail
        CHECK(e.modify(qp.get(), ud_init(), kUdInit) == 0);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == EIO);
        CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == EIO);
        CHECK(e.fake.last_modify_reason() == "scripted failure");
        CHECK(e.modify(qp.get(), a, IBV_QP_STATE) == 0);
        CHECK(e.fake.calls(Call::kModifyQp) == 4);

        e.fake.fail(Call::kCreateQp, ENOMEM, 0, -1); // forever
        CHECK_FALSE(e.qp(IBV_QPT_RC));
        CHECK_FALSE(e.qp(IBV_QPT_RC));
        CHECK(errno == ENOMEM);

        CHECK(api.destroy_cq(e.cq.get()) == EBUSY);
        CHECK(api.dealloc_pd(e.pd.get()) == EBUSY);
        e.fake.fail(Call::kQueryPort, EIO);
        ibv_port_attr pa{};
        CHECK(api.query_port(e.ctx.get(), 1, &pa) == EIO);
        CHECK(api.query_port(e.ctx.get(), 1, &pa) == 0);
        CHECK(pa.gid_tbl_len == 255);
        CHECK(api.query_port(e.ctx.get(), 2, &pa) == EINVAL);

        ibv_async_event ev{};
        CHECK(api.get_async_event(e.ctx.get(), &ev) == -1); // none queued
        CHECK(errno == EAGAIN);
        ev.event_type = IBV_EVENT_GID_CHANGE;
        ev.element.port_num = 1;
        e.fake.push_async_event(e.ctx.get(), ev);
        ibv_async_event got{};
        CHECK(api.get_async_event(e.ctx.get(), &got) == 0);
        CHECK(got.event_type == IBV_EVENT_GID_CHANGE);
        CHECK(live(e.fake) == 4); // context, PD, CQ, QP
        qp.reset();
        e.cq.reset();
        e.pd.reset();
        e.ctx.reset();
        CHECK(live(e.fake) == 0); // every deleter really destroyed its object
    }
}

namespace {

/// An RC QP on `srq` (or none) driven to RTS through the fake.
verbs::Qp rc_in_rts(Env &e, const char *fixture_name, ibv_srq *srq) {
    auto qp = e.qp(IBV_QPT_RC, srq);
    REQUIRE(qp);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    REQUIRE(e.modify(qp.get(), a, kRcInit) == 0);
    REQUIRE(e.modify(qp.get(), rc_rtr(testing::fixture(fixture_name), 1, qp->qp_num), kRcRtr) == 0);
    REQUIRE(e.modify(qp.get(), rc_rts(), kRcRts) == 0);
    return qp;
}

verbs::Srq make_srq(Env &e, uint32_t posted) {
    const verbs::VerbsApi &api = e.fake.api();
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    verbs::Srq srq(api.create_srq(e.pd.get(), &sa), verbs::SrqDeleter{&api});
    REQUIRE(srq);
    for (uint32_t i = 0; i < posted; ++i) {
        ibv_recv_wr rwr{};
        rwr.wr_id = 100 + i;
        ibv_recv_wr *bad = nullptr;
        REQUIRE(api.post_srq_recv(srq.get(), &rwr, &bad) == 0);
    }
    return srq;
}

bool async_fd_readable(ibv_context *ctx) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

} // namespace

TEST_CASE("FakeVerbs: an SRQ QP entering ERR raises Last WQE Reached on mlx5, not on rxe",
          "[fake][teardown]") {
    SECTION("mlx5: one event per entry into ERR, for SRQ QPs only, readable on the async fd") {
        Env e("mlx5_lag");
        const verbs::VerbsApi &api = e.fake.api();
        auto srq = make_srq(e, 2);
        auto with_srq = rc_in_rts(e, "mlx5_lag", srq.get());
        auto without = rc_in_rts(e, "mlx5_lag", nullptr);
        ibv_async_event ev{};
        CHECK_FALSE(async_fd_readable(e.ctx.get()));
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        REQUIRE(e.modify(without.get(), err, IBV_QP_STATE) == 0);
        CHECK(api.get_async_event(e.ctx.get(), &ev) == -1); // no SRQ: no event
        REQUIRE(e.modify(with_srq.get(), err, IBV_QP_STATE) == 0);
        CHECK(async_fd_readable(e.ctx.get()));
        REQUIRE(api.get_async_event(e.ctx.get(), &ev) == 0);
        CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
        CHECK(ev.element.qp == with_srq.get());
        CHECK_FALSE(async_fd_readable(e.ctx.get()));
        REQUIRE(e.modify(with_srq.get(), err, IBV_QP_STATE) == 0); // ERR -> ERR: no new one
        CHECK(api.get_async_event(e.ctx.get(), &ev) == -1);
        CHECK(errno == EAGAIN);

        // An error completion moves the QP to ERR as well.
        auto failing = rc_in_rts(e, "mlx5_lag", srq.get());
        e.fake.fail_next_send(failing.get(), IBV_WC_RETRY_EXC_ERR);
        ibv_send_wr wr{};
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr *bad = nullptr;
        REQUIRE(api.post_send(failing.get(), &wr, &bad) == 0);
        REQUIRE(api.get_async_event(e.ctx.get(), &ev) == 0);
        CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
        CHECK(ev.element.qp == failing.get());
    }
    SECTION("rxe (Linux 6.1): never") {
        Env e("rxe_bond");
        const verbs::VerbsApi &api = e.fake.api();
        auto srq = make_srq(e, 2);
        auto qp = rc_in_rts(e, "rxe_bond", srq.get());
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        REQUIRE(e.modify(qp.get(), err, IBV_QP_STATE) == 0);
        ibv_async_event ev{};
        CHECK(api.get_async_event(e.ctx.get(), &ev) == -1);
        CHECK(errno == EAGAIN);
    }
}

TEST_CASE("FakeVerbs: destroy_qp removes the QP's completions on mlx5, not on rxe",
          "[fake][teardown]") {
    auto run = [](const char *fixture_name) {
        Env e(fixture_name);
        const verbs::VerbsApi &api = e.fake.api();
        auto srq = make_srq(e, 2);
        auto a = rc_in_rts(e, fixture_name, srq.get());
        auto b = rc_in_rts(e, fixture_name, srq.get());
        REQUIRE(e.fake.deliver_recv(a.get(), 64)); // takes SRQ receive 100
        REQUIRE(e.fake.deliver_recv(b.get(), 32)); // takes 101
        ibv_wc send_done{};
        send_done.qp_num = a->qp_num;
        send_done.opcode = IBV_WC_SEND;
        e.fake.push_completion(e.cq.get(), send_done);
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        REQUIRE(e.modify(a.get(), err, IBV_QP_STATE) == 0); // queues LAST_WQE (mlx5)
        REQUIRE(e.fake.cq_depth(e.cq.get()) == 3);
        uint32_t a_num = a->qp_num;
        a.reset();
        ibv_async_event ev{};
        CHECK(api.get_async_event(e.ctx.get(), &ev) == -1); // dropped with the QP
        std::vector<ibv_wc> left(4);
        int n = api.poll_cq(e.cq.get(), 4, left.data());
        left.resize(static_cast<size_t>(n > 0 ? n : 0));
        // mlx5 gave receive 100 back to the SRQ: the next message takes it.
        bool again = e.fake.deliver_recv(b.get(), 16);
        ibv_wc next{};
        uint64_t next_wr = again && api.poll_cq(e.cq.get(), 1, &next) == 1 ? next.wr_id : 0;
        return std::make_tuple(left, a_num, next_wr);
    };
    SECTION("mlx5") {
        auto [left, a_num, next_wr] = run("mlx5_lag");
        REQUIRE(left.size() == 1); // only b's receive is left
        CHECK(left[0].qp_num != a_num);
        CHECK(left[0].wr_id == 101);
        CHECK(next_wr == 100);
    }
    SECTION("rxe") {
        auto [left, a_num, next_wr] = run("rxe_bond");
        REQUIRE(left.size() == 3); // rxe's CQ is the user's ring: nothing removed
        CHECK(left[0].qp_num == a_num);
        CHECK(left[0].wr_id == 100);
        CHECK(next_wr == 0); // 100 was consumed, 101 too: the SRQ is empty
    }
}

TEST_CASE("FakeVerbs: teardown in the wrong order is visible to a test", "[fake][teardown]") {
    verbs::note_destroy_failure(0);
    Env e("mlx5_lag");
    const verbs::VerbsApi &api = e.fake.api();
    int flags = fcntl(e.ctx->async_fd, F_GETFL);
    REQUIRE(flags >= 0); // a real fd, as rdma-core's
    CHECK((flags & O_NONBLOCK) == 0);
    REQUIRE(fcntl(e.ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0);

    // Buffers deregistered while receives still point into them.
    char buf[256] = {};
    verbs::Mr mr(api.reg_mr(e.pd.get(), buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&api});
    auto srq = make_srq(e, 0);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    REQUIRE(api.post_srq_recv(srq.get(), &rwr, &bad) == 0);
    mr.reset();
    CHECK(e.fake.busy_deregs() == 1);
    srq.reset();

    // The context closed while its children live: EBUSY, and they stay.
    auto qp = e.qp(IBV_QPT_RC);
    REQUIRE(qp);
    CHECK(api.close_device(e.ctx.get()) == EBUSY);
    e.cq.reset(); // EBUSY too: the QP still completes into it
    CHECK(verbs::last_destroy_errno() == EBUSY);
    qp.reset();
    CHECK(e.fake.live_objects() == 3); // context, PD and the CQ the deleter gave up on
    verbs::note_destroy_failure(0);
    e.pd.reset();
    e.ctx.reset();
    CHECK(verbs::last_destroy_errno() == EBUSY); // the CQ still holds the context
    CHECK(e.fake.live_objects() == 2);
}

TEST_CASE("FakeVerbs: sends in flight complete on request, or flush when the QP enters ERR",
          "[fake][datapath][teardown]") {
    Env e("mlx5_lag");
    const verbs::VerbsApi &api = e.fake.api();
    e.fake.set_auto_complete_sends(false);
    auto qp = rc_in_rts(e, "mlx5_lag", nullptr);
    char buf[16] = {};
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 16, 0};
    ibv_send_wr wr[3] = {};
    for (int i = 0; i < 3; ++i) {
        wr[i].wr_id = 20 + static_cast<uint64_t>(i);
        wr[i].sg_list = &sge;
        wr[i].num_sge = 1;
        wr[i].opcode = i == 2 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
        wr[i].send_flags = i == 1 ? 0 : IBV_SEND_SIGNALED; // the middle one unsignaled
        wr[i].next = i < 2 ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr *bad = nullptr;
    REQUIRE(api.post_send(qp.get(), wr, &bad) == 0);
    CHECK(e.fake.cq_depth(e.cq.get()) == 0); // in flight
    CHECK(e.fake.complete_sends(qp.get(), 1) == 1);
    ibv_wc wc[4];
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 1);
    CHECK(wc[0].wr_id == 20);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].byte_len == 16u);
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    REQUIRE(e.modify(qp.get(), err, IBV_QP_STATE) == 0);
    REQUIRE(api.poll_cq(e.cq.get(), 4, wc) == 2); // both flush, signaled or not
    CHECK(wc[0].wr_id == 21);
    CHECK(wc[0].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wc[1].wr_id == 22);
    CHECK(wc[1].opcode == IBV_WC_RDMA_WRITE);
    CHECK(e.fake.complete_sends(qp.get(), 5) == 0);
}

TEST_CASE("verbs handles: a failed destroy is logged with the verb, the errno and the object",
          "[fake][handles]") {
    Env env("rxe_bond");
    const verbs::VerbsApi &api = env.fake.api();
    util::CaptureSink log;
    {
        verbs::Cq cq(api.create_cq(env.ctx.get(), 8, nullptr, nullptr, 0),
                     verbs::CqDeleter{&api, &log});
        REQUIRE(cq);
        env.fake.fail(Call::kDestroyCq, EBUSY);
    } // the deleter runs here, and fails
    CHECK(verbs::last_destroy_errno() == EBUSY);
    REQUIRE(log.lines().size() == 1);
    CHECK(log.lines()[0].level == util::LogLevel::kWarn);
    CHECK(log.lines()[0].text.find("ibv_destroy_cq(CQ of ") == 0);
    CHECK(log.contains("failed: Device or resource busy (16)"));
    // Without a sink the failure is only recorded, as before.
    {
        verbs::Cq cq(api.create_cq(env.ctx.get(), 8, nullptr, nullptr, 0), verbs::CqDeleter{&api});
        env.fake.fail(Call::kDestroyCq, EIO);
    }
    CHECK(verbs::last_destroy_errno() == EIO);
    CHECK(log.lines().size() == 1);
}

namespace {

/// Two RC QPs of one FakeVerbs connected to each other (RTS), each with a
/// receive queue of its own.
struct RcPair {
    explicit RcPair(Env &env, uint32_t max_inline = 0) : e(env) {
        a = e.qp(IBV_QPT_RC, nullptr, max_inline);
        b = e.qp(IBV_QPT_RC, nullptr, max_inline);
        REQUIRE((a && b));
        connect(a.get(), b->qp_num);
        connect(b.get(), a->qp_num);
    }
    void connect(ibv_qp *qp, uint32_t dest) {
        ibv_qp_attr i{};
        i.qp_state = IBV_QPS_INIT;
        i.port_num = 1;
        i.qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
            IBV_ACCESS_REMOTE_ATOMIC;
        REQUIRE(e.modify(qp, i, kRcInit) == 0);
        REQUIRE(e.modify(qp, rc_rtr(testing::fixture("mlx5_lag"), 1, dest), kRcRtr) == 0);
        REQUIRE(e.modify(qp, rc_rts(), kRcRts) == 0);
    }
    int post(ibv_qp *qp, ibv_wr_opcode op, uint64_t wr_id, void *local, uint32_t len,
             uint32_t lkey, uint64_t remote = 0, uint32_t rkey = 0, unsigned int flags = 0) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(local), len, lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = IBV_SEND_SIGNALED | flags;
        if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
            wr.wr.atomic.remote_addr = remote;
            wr.wr.atomic.rkey = rkey;
            wr.wr.atomic.compare_add = 5;
        } else {
            wr.wr.rdma.remote_addr = remote;
            wr.wr.rdma.rkey = rkey;
        }
        ibv_send_wr *bad = nullptr;
        return e.fake.api().post_send(qp, &wr, &bad);
    }
    void post_recv(ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, lkey};
        ibv_recv_wr rwr{};
        rwr.wr_id = wr_id;
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        REQUIRE(e.fake.api().post_recv(qp, &rwr, &bad) == 0);
    }
    std::vector<ibv_wc> poll() {
        ibv_wc wc[16];
        int n = e.fake.api().poll_cq(e.cq.get(), 16, wc);
        return std::vector<ibv_wc>(wc, wc + std::max(n, 0));
    }
    Env &e;
    verbs::Qp a{nullptr, verbs::QpDeleter{}}, b{nullptr, verbs::QpDeleter{}};
};

} // namespace

TEST_CASE("FakeVerbs wire: an RC send reaches the connected QP's receive, in order; with no "
          "receive posted it waits (RNR, retried forever)",
          "[fake][wire]") {
    Env e("mlx5_lag");
    e.fake.set_wire(true);
    RcPair p(e);
    char out[8] = "hello", in[16] = {};
    verbs::Mr mr(e.fake.api().reg_mr(e.pd.get(), in, sizeof(in), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&e.fake.api()});
    REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 1, out, 5, 0) == 0);
    CHECK(e.fake.run_rc() == 0); // nothing posted at b: receiver not ready
    CHECK(p.poll().empty());
    p.post_recv(p.b.get(), 9, in, sizeof(in), mr->lkey);
    CHECK(e.fake.run_rc() == 1);
    auto wcs = p.poll();
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].wr_id == 9); // b's receive
    CHECK(wcs[0].opcode == IBV_WC_RECV);
    CHECK(wcs[0].byte_len == 5u);
    CHECK(wcs[0].qp_num == p.b->qp_num);
    CHECK(wcs[0].src_qp == p.a->qp_num);
    CHECK(std::string(in, 5) == "hello");
    CHECK(wcs[1].wr_id == 1); // a's send
    CHECK(wcs[1].status == IBV_WC_SUCCESS);
}

TEST_CASE("FakeVerbs wire: inline sends are copied at post, need no lkey, and are bounded by "
          "the QP's max_inline_data with the provider's errno",
          "[fake][wire]") {
    Env e("mlx5_lag");
    e.fake.set_wire(true);
    // Asking for more inline data than the device has fails the create.
    ibv_qp_init_attr big{};
    big.send_cq = big.recv_cq = e.cq.get();
    big.qp_type = IBV_QPT_RC;
    big.cap = {4, 4, 1, 1, 401};
    errno = 0;
    CHECK(e.fake.api().create_qp(e.pd.get(), &big) == nullptr);
    CHECK(errno == EINVAL);

    RcPair p(e, 64);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    REQUIRE(e.fake.api().query_qp(p.a.get(), &qa, IBV_QP_CAP, &qi) == 0);
    CHECK(qi.cap.max_inline_data == 64u);
    CHECK(qa.cap.max_inline_data == 64u);

    char in[128] = {};
    verbs::Mr mr(e.fake.api().reg_mr(e.pd.get(), in, sizeof(in), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&e.fake.api()});
    p.post_recv(p.b.get(), 9, in, sizeof(in), mr->lkey);
    char out[65];
    std::memset(out, 'a', sizeof(out));
    // 64 bytes inline from unregistered memory (lkey 0), the buffer
    // overwritten at once: the peer gets what was there at post time.
    REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 1, out, 64, 0, 0, 0, IBV_SEND_INLINE) == 0);
    std::memset(out, 'z', sizeof(out));
    CHECK(e.fake.run_rc() == 1);
    auto wcs = p.poll();
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].byte_len == 64u);
    CHECK(std::string(in, 64) == std::string(64, 'a'));
    CHECK(wcs[1].status == IBV_WC_SUCCESS);

    // One byte more: refused at post (mlx5: ENOMEM), nothing sent, the QP
    // still usable.
    const size_t sent = e.fake.sends().size();
    CHECK(p.post(p.a.get(), IBV_WR_SEND, 2, out, 65, 0, 0, 0, IBV_SEND_INLINE) == ENOMEM);
    CHECK(e.fake.sends().size() == sent);
    CHECK(e.fake.qp_state(p.a.get()) == IBV_QPS_RTS);
    // rxe answers EINVAL; and a read or atomic has nothing to carry inline.
    e.fake.device(e.fake.api().get_device_name(e.ctx->device)).mlx5 = false;
    CHECK(p.post(p.a.get(), IBV_WR_SEND, 3, out, 65, 0, 0, 0, IBV_SEND_INLINE) == EINVAL);
    CHECK(p.post(p.a.get(), IBV_WR_RDMA_READ, 4, in, 8, mr->lkey, 0x1000, 1, IBV_SEND_INLINE) ==
          EINVAL);
    CHECK(e.fake.sends().size() == sent);
    CHECK(p.post(p.a.get(), IBV_WR_SEND, 5, out, 64, 0, 0, 0, IBV_SEND_INLINE) == 0);
}

TEST_CASE("FakeVerbs wire: RDMA write, read and atomics against registered memory; a bad rkey "
          "is a remote access error that puts both QPs in ERR",
          "[fake][wire]") {
    Env e("mlx5_lag");
    e.fake.set_wire(true);
    RcPair p(e);
    const verbs::VerbsApi &api = e.fake.api();
    uint64_t target[4] = {100, 0, 0, 0}, local[4] = {7, 8, 9, 0};
    const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC;
    verbs::Mr tmr(api.reg_mr(e.pd.get(), target, sizeof(target), all), verbs::MrDeleter{&api});
    verbs::Mr ro(api.reg_mr(e.pd.get(), &target[3], 8, IBV_ACCESS_REMOTE_READ),
                 verbs::MrDeleter{&api});
    auto remote = [&](int i) { return reinterpret_cast<uint64_t>(&target[i]); };
    REQUIRE(p.post(p.a.get(), IBV_WR_RDMA_WRITE, 1, &local[0], 16, 0, remote(1), tmr->rkey) == 0);
    REQUIRE(p.post(p.a.get(), IBV_WR_RDMA_READ, 2, &local[3], 8, 0, remote(0), tmr->rkey) == 0);
    REQUIRE(p.post(p.a.get(), IBV_WR_ATOMIC_FETCH_AND_ADD, 3, &local[2], 8, 0, remote(0),
                   tmr->rkey) == 0);
    CHECK(e.fake.run_rc() == 3);
    CHECK(target[1] == 7);
    CHECK(target[2] == 8);
    CHECK(local[3] == 100);  // read
    CHECK(local[2] == 100);  // the old value of the fetch-and-add
    CHECK(target[0] == 105); // +5
    auto wcs = p.poll();
    REQUIRE(wcs.size() == 3);
    for (const auto &wc : wcs) {
        CHECK(wc.status == IBV_WC_SUCCESS);
    }
    // Writing where only remote reads are allowed: a remote access error.
    REQUIRE(p.post(p.a.get(), IBV_WR_RDMA_WRITE, 4, &local[0], 8, 0, remote(3), ro->rkey) == 0);
    REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 5, &local[0], 8, 0) == 0);
    CHECK(e.fake.run_rc() == 1);
    wcs = p.poll();
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].wr_id == 4);
    CHECK(wcs[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(wcs[1].wr_id == 5);
    CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(e.fake.qp_state(p.a.get()) == IBV_QPS_ERR);
    CHECK(e.fake.qp_state(p.b.get()) == IBV_QPS_ERR);
    CHECK(target[3] == 0);
}

TEST_CASE("FakeVerbs wire: a responder that does not answer is retry exceeded; a broken link "
          "may lose the ACKs of what arrived",
          "[fake][wire]") {
    Env e("mlx5_lag");
    e.fake.set_wire(true);
    char buf[8] = "abc", in[3][8] = {};
    verbs::Mr mr(e.fake.api().reg_mr(e.pd.get(), in, sizeof(in), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&e.fake.api()});
    {
        RcPair p(e);
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        REQUIRE(e.modify(p.b.get(), err, IBV_QP_STATE) == 0);
        (void)p.poll();
        REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 1, buf, 3, 0) == 0);
        REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 2, buf, 3, 0) == 0);
        CHECK(e.fake.run_rc() == 1);
        auto wcs = p.poll();
        REQUIRE(wcs.size() == 2);
        CHECK(wcs[0].status == IBV_WC_RETRY_EXC_ERR);
        CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
        CHECK(e.fake.qp_state(p.a.get()) == IBV_QPS_ERR);
    }
    RcPair p(e);
    for (int i = 0; i < 3; ++i) {
        p.post_recv(p.b.get(), 10 + static_cast<uint64_t>(i), in[i], 8, mr->lkey);
        REQUIRE(p.post(p.a.get(), IBV_WR_SEND, 1 + static_cast<uint64_t>(i), buf, 3, 0) == 0);
    }
    e.fake.break_qp(p.a.get(), IBV_WC_RETRY_EXC_ERR, 2);
    auto wcs = p.poll();
    // b has the first two; a sees the first fail and the rest flush; b's
    // third receive stays posted.
    REQUIRE(wcs.size() == 5);
    CHECK(wcs[0].wr_id == 10);
    CHECK(wcs[0].status == IBV_WC_SUCCESS);
    CHECK(wcs[1].wr_id == 11);
    CHECK(wcs[1].status == IBV_WC_SUCCESS);
    CHECK(wcs[2].wr_id == 1);
    CHECK(wcs[2].status == IBV_WC_RETRY_EXC_ERR);
    CHECK(wcs[3].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wcs[4].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(e.fake.qp_state(p.b.get()) == IBV_QPS_RTS);
}

TEST_CASE("FakeVerbs wire: UD datagrams wait on the wire; delivered with the GRH a RoCE v2 "
          "device writes, dropped on a wrong qkey or with no receive posted",
          "[fake][wire]") {
    Env e("mlx5_lag");
    e.fake.set_wire(true);
    const verbs::VerbsApi &api = e.fake.api();
    auto to_rts = [&](ibv_qp *qp) {
        REQUIRE(e.modify(qp, ud_init(), kUdInit) == 0);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        REQUIRE(e.modify(qp, a, IBV_QP_STATE) == 0);
        a.qp_state = IBV_QPS_RTS;
        REQUIRE(e.modify(qp, a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
    };
    auto tx = e.qp(IBV_QPT_UD), rx = e.qp(IBV_QPT_UD);
    to_rts(tx.get());
    to_rts(rx.get());
    uint8_t in[128] = {};
    char out[6] = "hello";
    verbs::Mr mr(api.reg_mr(e.pd.get(), in, sizeof(in), IBV_ACCESS_LOCAL_WRITE),
                 verbs::MrDeleter{&api});
    ibv_ah_attr ah_attr{};
    ah_attr.is_global = 1;
    ah_attr.port_num = 1;
    ah_attr.grh.sgid_index = 3; // an IPv4-mapped RoCE v2 GID of the fixture
    const topo::Snapshot &s = testing::fixture("mlx5_lag");
    const topo::GidEntry *slot3 = nullptr;
    for (const auto &g : s.devices[0].ports[0].gids) {
        slot3 = g.index == 3 ? &g : slot3;
    }
    REQUIRE(slot3);
    std::memcpy(ah_attr.grh.dgid.raw, slot3->gid.data(), 16);
    verbs::Ah ah(api.create_ah(e.pd.get(), &ah_attr), verbs::AhDeleter{&api});
    REQUIRE(ah);
    auto send = [&](uint32_t qkey) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(out), 5, 0};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.wr.ud.ah = ah.get();
        wr.wr.ud.remote_qpn = rx->qp_num;
        wr.wr.ud.remote_qkey = qkey;
        ibv_send_wr *bad = nullptr;
        REQUIRE(api.post_send(tx.get(), &wr, &bad) == 0);
    };
    send(0x1ee7a330);
    send(0x1234);
    REQUIRE(e.fake.datagrams().size() == 2);
    CHECK_FALSE(e.fake.deliver_datagram(e.fake.datagrams()[0])); // no receive posted
    ibv_sge rsge{reinterpret_cast<uintptr_t>(in), sizeof(in), mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 5;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr *rbad = nullptr;
    REQUIRE(api.post_recv(rx.get(), &rwr, &rbad) == 0);
    CHECK_FALSE(e.fake.deliver_datagram(e.fake.datagrams()[1])); // wrong qkey
    testing::FakeVerbs::Datagram elsewhere = e.fake.datagrams()[0];
    elsewhere.dgid[15] ^= 0x55; // an address no port here has
    CHECK_FALSE(e.fake.deliver_datagram(elsewhere));
    REQUIRE(e.fake.deliver_datagram(e.fake.datagrams()[0]));
    ibv_wc wc{};
    REQUIRE(api.poll_cq(e.cq.get(), 1, &wc) == 1);
    CHECK(wc.wr_id == 5);
    CHECK(wc.byte_len == 40u + 5u);
    CHECK((wc.wc_flags & IBV_WC_GRH) != 0);
    CHECK(wc.src_qp == tx->qp_num);
    CHECK(in[20] == 0x45); // IPv4 header in the GRH's last 20 bytes
    CHECK(std::memcmp(in + 32, slot3->gid.data() + 12, 4) == 0); // the source address
    uint32_t sum = 0; // a valid header sums to 0xffff
    for (int i = 20; i < 40; i += 2) {
        sum += static_cast<uint32_t>(in[i] << 8 | in[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    CHECK(sum == 0xffff);
    CHECK(std::string(reinterpret_cast<char *>(in) + 40, 5) == "hello");
}
