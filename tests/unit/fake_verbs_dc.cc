// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// FakeVerbs: mlx5 DC. Creating DCIs and DCTs (mlx5dv_create_qp), the
// extended work-request API a DCI is posted with (ibv_wr_post(3) plus
// mlx5dv_wr_set_dc_addr), and DC traffic in wire mode (run_dc).
//
// Where the behaviour comes from:
//  - creation: rdma-core providers/mlx5/verbs.c (mlx5dv_create_qp: EOPNOTSUPP
//    without mlx5 dv ops, i.e. on any other provider; create_qp: a DC QP must
//    be IBV_QPT_DRIVER, DCT with send ops is EINVAL; create_dct: only the PD
//    comp_mask bit) and providers/mlx5/qp.c (mlx5_qp_fill_wr_pfns: a DCI takes
//    the RC send opcodes, anything else EOPNOTSUPP); the kernel's mlx5_ib
//    (check_qp_type: IB_QPT_DRIVER without the HCA's dct capability is
//    refused - EOPNOTSUPP here, FakeDevice::dc; create_driver_qp: a DCI with
//    receive capacities is EINVAL; a DCT needs an SRQ). The DCT number is its
//    qp_num, and the access key is fixed at creation (dct_access_key).
//  - posting: the batch of providers/mlx5/qp.c - builders and setters record,
//    errors are kept (mqp->err) and returned by wr_complete, which then posts
//    nothing (rolls back); a send queue overflow is ENOMEM, an SGE list
//    beyond max_send_sge EINVAL, inline data beyond max_inline_data ENOMEM.
//    Stricter than the hardware, as the fake's post_send is: a work request
//    missing its DC address or its data, and a batch posted outside RTS/ERR,
//    fail wr_complete with EINVAL (rdma-core would ring the doorbell with a
//    malformed or unexecutable WQE).
//  - the wrong key: the responder checks the DC access key of each request
//    against its DCT's; a mismatch is not answered - the DCT drops it and
//    counts it (dc_access_key_violation_count in the DCT context, UCX's
//    src/uct/ib/mlx5/dv/ib_mlx5_ifc.h; MLNX_OFED's experimental verbs raised
//    IBV_EXP_EVENT_DCT_KEY_VIOLATION for it, upstream rdma-core has no event
//    type for it, so nothing reaches ibv_get_async_event). An initiator whose
//    request is never answered retries until its retry count is spent and
//    completes with IBV_WC_RETRY_EXC_ERR (syndrome 0x15 "Transport retry
//    count exceeded", what UCX reports for DCIs whose target does not
//    answer: openucx/ucx issues 6000, 3679), and the DCI goes to ERR. This
//    is inferred, not observed on hardware: contrib's DC script checks it.
//  - the DCI state machine is the QP one (fake_verbs_qp.cc): an error
//    completion takes it to ERR, work in flight flushes, and only
//    RESET -> INIT -> RTR -> RTS makes it usable again. A DCT does not go to
//    ERR because one initiator misbehaved (fake_verbs_wire.cc, to_error).
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "fake_verbs_state.h"

namespace roce::testing {

/// What a DCI or DCT has beyond an ordinary fake QP.
struct FakeDcQp {
    bool dct = false;
    uint64_t dct_key = 0;        ///< DCT: its access key
    uint64_t key_violations = 0; ///< DCT: requests dropped for a wrong key
    bool has_ex = false;         ///< DCI created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
    uint32_t max_send_wr = 0, max_send_sge = 0, max_inline_data = 0;
    /// mlx5dv_qp_ex_from_ibv_qp_ex's answer; `ex` leads back to the QP.
    struct Dv {
        mlx5dv_qp_ex dv;
        ibv_qp_ex *ex;
    } dv{};
    // The batch between wr_start and wr_complete.
    bool open = false;
    int err = 0;
    struct Building {
        PostedWr wr;
        bool addressed = false; ///< mlx5dv_wr_set_dc_addr
        bool data = false;      ///< wr_set_sge / _list / _inline_data
    };
    std::vector<Building> batch;
};

namespace {

FakeVerbs::State &st(FakeVerbs &f) {
    return f.state();
}

FakeVerbs &owner_of(ibv_qp_ex *ex) {
    return *FakeOps::owner(ex->qp_base.context);
}

FakeDcQp &dc_of(ibv_qp_ex *ex) {
    return *st(owner_of(ex)).dc.at(&ex->qp_base);
}

/// The work request the setters apply to; nullptr (and the batch's error)
/// when there is none.
FakeDcQp::Building *current(FakeDcQp &d) {
    if (!d.open || d.batch.empty()) {
        d.err = d.err != 0 ? d.err : EINVAL;
        return nullptr;
    }
    return &d.batch.back();
}

void build(ibv_qp_ex *ex, ibv_wr_opcode op, uint32_t rkey, uint64_t addr) {
    FakeDcQp &d = dc_of(ex);
    if (!d.open) {
        d.err = d.err != 0 ? d.err : EINVAL; // a builder outside wr_start/wr_complete
        return;
    }
    FakeDcQp::Building b;
    b.wr.qp_num = ex->qp_base.qp_num;
    b.wr.wr_id = ex->wr_id;
    b.wr.send_flags = ex->wr_flags;
    b.wr.opcode = op;
    b.wr.rkey = rkey;
    b.wr.remote_addr = addr;
    d.batch.push_back(std::move(b));
}

/// The DCI's `wr` enters the send queue as post_send does (fake_verbs_qp.cc).
void post_one(FakeVerbs &f, FakeQpObj &q, const PostedWr &wr) {
    FakeCqObj &cq = *st(f).cqs.at(q.qp.send_cq);
    ibv_wc_opcode op = fake_wc_opcode(wr.opcode);
    bool signaled = q.sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED);
    if (q.fail_next_send) {
        ibv_wc wc = fake_wc(q, wr.wr_id, q.next_status, op, 0);
        wc.vendor_err = q.next_vendor_err;
        cq.wcs.push_back(wc);
        q.fail_next_send = false;
        q.qp.state = IBV_QPS_ERR;
        fake_enter_error(f, q);
    } else if (q.qp.state == IBV_QPS_ERR) {
        cq.wcs.push_back(fake_wc(q, wr.wr_id, IBV_WC_WR_FLUSH_ERR, op, 0));
    } else if (st(f).wire || !st(f).auto_complete) {
        q.sq.push_back(wr);
    } else if (signaled) {
        cq.wcs.push_back(fake_wc(q, wr.wr_id, IBV_WC_SUCCESS, op, wr.length));
    }
}

bool has_gid(const FakePort &port, const uint8_t *gid) {
    for (const auto &[index, g] : port.gids) {
        if (std::memcmp(g.gid.data(), gid, 16) == 0) {
            return true;
        }
    }
    return false;
}

} // namespace

// ---- creation --------------------------------------------------------------

ibv_qp *FakeOps::mlx5dv_create_qp(ibv_context *ctx, ibv_qp_init_attr_ex *attr,
                                  mlx5dv_qp_init_attr *dv) {
    FakeVerbs &f = *owner(ctx);
    auto fail = [](int err) -> ibv_qp * {
        errno = err;
        return nullptr;
    };
    if (int err = enter(f, Call::kMlx5dvCreateQp)) {
        return fail(err);
    }
    const FakeDevice &dev = device_of(ctx);
    if (!dev.mlx5) {
        return fail(EOPNOTSUPP); // no mlx5 dv ops on this context
    }
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
        return fail(EINVAL);
    }
    ibv_qp_init_attr init{};
    init.qp_context = attr->qp_context;
    init.send_cq = attr->send_cq;
    init.recv_cq = attr->recv_cq;
    init.srq = attr->srq;
    init.cap = attr->cap;
    init.sq_sig_all = attr->sq_sig_all;
    init.qp_type = attr->qp_type;
    bool dc = dv != nullptr && (dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC);
    if (!dc) {
        switch (attr->qp_type) {
        case IBV_QPT_RC:
            return make_qp(f, attr->pd, init, FakeQpKind::kRC);
        case IBV_QPT_UD:
            return make_qp(f, attr->pd, init, FakeQpKind::kUD);
        default:
            return fail(attr->qp_type == IBV_QPT_DRIVER ? EINVAL : EOPNOTSUPP);
        }
    }
    const bool dct = dv->dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT;
    const bool dci = dv->dc_init_attr.dc_type == MLX5DV_DCTYPE_DCI;
    const bool send_ops = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if (attr->qp_type != IBV_QPT_DRIVER || (!dct && !dci)) {
        return fail(EINVAL);
    }
    if (dct && (send_ops || (attr->comp_mask & ~static_cast<uint32_t>(IBV_QP_INIT_ATTR_PD)))) {
        return fail(EINVAL); // create_dct takes the PD bit only; a DCT sends nothing
    }
    if (dci && send_ops) {
        constexpr uint64_t kDciOps =
            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_SEND_WITH_IMM |
            IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW;
        if (attr->send_ops_flags & ~kDciOps) {
            return fail(EOPNOTSUPP);
        }
    }
    if (!dev.dc) {
        return fail(EOPNOTSUPP); // the kernel: IB_QPT_DRIVER without the dct capability
    }
    if (dct && attr->srq == nullptr) {
        return fail(EINVAL);
    }
    if (dci && (attr->cap.max_recv_wr != 0 || attr->cap.max_recv_sge != 0)) {
        return fail(EINVAL); // a DCI has no receive queue
    }
    ibv_qp *qp = make_qp(f, attr->pd, init, dct ? FakeQpKind::kDCT : FakeQpKind::kDCI);
    if (qp == nullptr) {
        return nullptr;
    }
    auto d = std::make_shared<FakeDcQp>();
    d->dct = dct;
    d->dct_key = dct ? dv->dc_init_attr.dct_access_key : 0;
    d->has_ex = dci && send_ops;
    d->max_send_wr = attr->cap.max_send_wr;
    d->max_send_sge = attr->cap.max_send_sge;
    d->max_inline_data = attr->cap.max_inline_data;
    FakeQpObj &q = *st(f).qps.at(qp);
    d->dv.ex = &q.ex;
    d->dv.dv.wr_set_dc_addr = &FakeDcOps::wr_set_dc_addr;
    if (d->has_ex) {
        // The same entries as the table, so rdma-core's inline ibv_wr_*()
        // wrappers work on a fake QP too.
        ibv_qp_ex &ex = q.ex;
        ex.comp_mask = 0;
        ex.wr_start = &FakeDcOps::wr_start;
        ex.wr_complete = &FakeDcOps::wr_complete;
        ex.wr_abort = &FakeDcOps::wr_abort;
        ex.wr_send = &FakeDcOps::wr_send;
        ex.wr_send_imm = &FakeDcOps::wr_send_imm;
        ex.wr_rdma_write = &FakeDcOps::wr_rdma_write;
        ex.wr_rdma_read = &FakeDcOps::wr_rdma_read;
        ex.wr_atomic_cmp_swp = &FakeDcOps::wr_atomic_cmp_swp;
        ex.wr_atomic_fetch_add = &FakeDcOps::wr_atomic_fetch_add;
        ex.wr_set_sge = &FakeDcOps::wr_set_sge;
        ex.wr_set_sge_list = &FakeDcOps::wr_set_sge_list;
        ex.wr_set_inline_data = &FakeDcOps::wr_set_inline_data;
    }
    st(f).dc[qp] = std::move(d);
    return qp;
}

void fake_forget_dc(FakeVerbs &f, const ibv_qp *qp) {
    st(f).dc.erase(qp);
}

// ---- the extended work-request API -------------------------------------------

ibv_qp_ex *FakeDcOps::qp_to_qp_ex(ibv_qp *qp) {
    FakeVerbs &f = *FakeOps::owner(qp->context);
    auto it = st(f).dc.find(qp);
    return it != st(f).dc.end() && it->second->has_ex ? &st(f).qps.at(qp)->ex : nullptr;
}

mlx5dv_qp_ex *FakeDcOps::mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex *ex) {
    // rdma-core's answer is undefined for anything but an mlx5 QP with send
    // ops; the fake answers nullptr there.
    FakeVerbs &f = owner_of(ex);
    auto it = st(f).dc.find(&ex->qp_base);
    return it != st(f).dc.end() && it->second->has_ex ? &it->second->dv.dv : nullptr;
}

void FakeDcOps::wr_start(ibv_qp_ex *ex) {
    FakeDcQp &d = dc_of(ex);
    if (d.open) {
        d.err = d.err != 0 ? d.err : EINVAL; // rdma-core would deadlock on the SQ lock
        return;
    }
    d.open = true;
    d.err = 0;
    d.batch.clear();
}

void FakeDcOps::wr_abort(ibv_qp_ex *ex) {
    FakeDcQp &d = dc_of(ex);
    d.open = false;
    d.err = 0;
    d.batch.clear();
}

int FakeDcOps::wr_complete(ibv_qp_ex *ex) {
    FakeVerbs &f = owner_of(ex);
    FakeDcQp &d = dc_of(ex);
    FakeQpObj &q = *st(f).qps.at(&ex->qp_base);
    int err = FakeOps::enter(f, Call::kWrComplete);
    if (err == 0) {
        err = !d.open ? EINVAL : d.err;
    }
    for (size_t i = 0; err == 0 && i < d.batch.size(); ++i) {
        if (!d.batch[i].addressed || !d.batch[i].data) {
            err = EINVAL; // an unfinished WQE (see the top of this file)
        }
    }
    if (err == 0 && q.qp.state != IBV_QPS_RTS && q.qp.state != IBV_QPS_ERR) {
        err = EINVAL;
    }
    if (err == 0 && d.max_send_wr > 0 && q.sq.size() + d.batch.size() > d.max_send_wr) {
        err = ENOMEM; // mlx5_wq_overflow
    }
    std::vector<FakeDcQp::Building> batch;
    batch.swap(d.batch);
    d.open = false;
    d.err = 0;
    if (err != 0) {
        return err; // rolled back: nothing of the batch was posted
    }
    for (const auto &b : batch) {
        f.sends_.push_back(b.wr);
        post_one(f, q, b.wr);
    }
    return 0;
}

void FakeDcOps::wr_send(ibv_qp_ex *ex) {
    build(ex, IBV_WR_SEND, 0, 0);
}

void FakeDcOps::wr_send_imm(ibv_qp_ex *ex, __be32 imm) {
    build(ex, IBV_WR_SEND_WITH_IMM, 0, 0);
    if (FakeDcQp::Building *b = current(dc_of(ex))) {
        b->wr.imm_data = imm;
    }
}

void FakeDcOps::wr_rdma_write(ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) {
    build(ex, IBV_WR_RDMA_WRITE, rkey, addr);
}

void FakeDcOps::wr_rdma_read(ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) {
    build(ex, IBV_WR_RDMA_READ, rkey, addr);
}

void FakeDcOps::wr_atomic_cmp_swp(ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t compare,
                                  uint64_t swap) {
    build(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr);
    if (FakeDcQp::Building *b = current(dc_of(ex))) {
        b->wr.compare_add = compare;
        b->wr.swap = swap;
    }
}

void FakeDcOps::wr_atomic_fetch_add(ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t add) {
    build(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr);
    if (FakeDcQp::Building *b = current(dc_of(ex))) {
        b->wr.compare_add = add;
    }
}

void FakeDcOps::wr_set_sge(ibv_qp_ex *ex, uint32_t lkey, uint64_t addr, uint32_t length) {
    ibv_sge sge{addr, length, lkey};
    wr_set_sge_list(ex, 1, &sge);
}

void FakeDcOps::wr_set_sge_list(ibv_qp_ex *ex, size_t n, const ibv_sge *sg) {
    FakeDcQp &d = dc_of(ex);
    FakeDcQp::Building *b = current(d);
    if (b == nullptr) {
        return;
    }
    if (n > d.max_send_sge) {
        d.err = d.err != 0 ? d.err : EINVAL;
        return;
    }
    b->wr.sge.assign(sg, sg + n);
    b->wr.length = 0;
    for (const auto &s : b->wr.sge) {
        b->wr.length += s.length;
    }
    b->data = true;
}

void FakeDcOps::wr_set_inline_data(ibv_qp_ex *ex, void *addr, size_t length) {
    FakeDcQp &d = dc_of(ex);
    FakeDcQp::Building *b = current(d);
    if (b == nullptr) {
        return;
    }
    if (length > d.max_inline_data) {
        d.err = d.err != 0 ? d.err : ENOMEM;
        return;
    }
    // Copied now, as rdma-core does: the buffer may be reused at once.
    const auto *p = static_cast<const uint8_t *>(addr);
    b->wr.inline_data.assign(p, p + length);
    b->wr.sge = {ibv_sge{reinterpret_cast<uint64_t>(addr), static_cast<uint32_t>(length), 0}};
    b->wr.length = static_cast<uint32_t>(length);
    b->wr.send_flags |= IBV_SEND_INLINE;
    b->data = true;
}

void FakeDcOps::wr_set_dc_addr(mlx5dv_qp_ex *dv, ibv_ah *ah, uint32_t dctn, uint64_t key) {
    // Dv is standard-layout with the mlx5dv_qp_ex first: the pointer is the Dv's.
    auto *holder = reinterpret_cast<FakeDcQp::Dv *>(dv);
    FakeDcQp &d = dc_of(holder->ex);
    FakeDcQp::Building *b = current(d);
    if (b == nullptr) {
        return;
    }
    b->wr.ah = ah;
    b->wr.remote_qpn = dctn;
    b->wr.dc_key = key;
    b->addressed = ah != nullptr;
    if (ah == nullptr) {
        d.err = d.err != 0 ? d.err : EINVAL;
    }
}

// ---- DC on the wire ------------------------------------------------------------

size_t FakeVerbs::run_dc() {
    size_t executed = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (auto &[key, qp] : st_->qps) {
            FakeQpObj &q = *qp;
            if (q.kind != FakeQpKind::kDCI || q.qp.state != IBV_QPS_RTS) {
                continue;
            }
            while (!q.sq.empty()) {
                const PostedWr &wr = q.sq.front();
                ibv_qp *target = find_qp(wr.remote_qpn);
                FakeQpObj *r = target != nullptr ? st_->qps.at(target).get() : nullptr;
                auto ah = st_->ahs.find(wr.ah);
                bool answers = r != nullptr && r->kind == FakeQpKind::kDCT &&
                               r->qp.state == IBV_QPS_RTR && ah != st_->ahs.end() &&
                               has_gid(FakeOps::device_of(r->qp.context)
                                           .ports.at(static_cast<size_t>(r->attr.port_num) - 1),
                                       ah->second->attr.grh.dgid.raw);
                if (answers && st_->dc.at(target)->dct_key != wr.dc_key) {
                    ++st_->dc.at(target)->key_violations; // dropped, unanswered
                    answers = false;
                }
                if (!answers) {
                    fake_fail_front(*this, q, IBV_WC_RETRY_EXC_ERR);
                    ++executed;
                    moved = true;
                    break;
                }
                FakeStep s = fake_execute(*this, q, *r);
                if (s == FakeStep::kWait) {
                    break;
                }
                ++executed;
                moved = true;
                if (s == FakeStep::kFailed) {
                    break;
                }
            }
        }
    }
    return executed;
}

uint64_t FakeVerbs::dct_key_violations(const ibv_qp *dct) const {
    auto it = st_->dc.find(dct);
    return it != st_->dc.end() && it->second->dct ? it->second->key_violations : 0;
}

static_assert(std::is_standard_layout<FakeDcQp::Dv>::value,
              "wr_set_dc_addr finds the Dv from its first member");

} // namespace roce::testing
