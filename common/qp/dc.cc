// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/dc.h"

#include <cerrno>
#include <cstring>

#include "util/strings.h"

namespace roce::qp {

using util::Code;
using util::Status;

const uint64_t kDciSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                             IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
                             IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

QpParams dct_params() {
    QpParams p;
    p.access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
    return p;
}

namespace {

Status create_failed(const char *what, const select::Selection &sel, int err) {
    std::string msg = util::format("mlx5dv_create_qp(%s) on %s failed: %s (%d)", what,
                                   sel.device.c_str(), std::strerror(err), err);
    if (err == EOPNOTSUPP) {
        msg += "; DC needs an mlx5 device with the dct capability (rxe and other providers "
               "have no DC)";
    }
    return Status(util::code_from_errno(err), msg, err);
}

ibv_qp_init_attr_ex base_attr(ibv_pd *pd, ibv_cq *cq) {
    ibv_qp_init_attr_ex ex{};
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ex.send_cq = cq;
    ex.recv_cq = cq;
    ex.qp_type = IBV_QPT_DRIVER;
    return ex;
}

} // namespace

// ---- DcTarget --------------------------------------------------------------------

util::Result<DcTarget> DcTarget::create(const verbs::VerbsApi &api, ibv_context *ctx, ibv_pd *pd,
                                        ibv_cq *cq, ibv_srq *srq, uint64_t access_key,
                                        select::Selection sel, SharedSnapshotSource snapshots,
                                        bool privileged, util::LogSink *log) {
    if (srq == nullptr) {
        return Status(Code::kInvalidArgument,
                      "DcTarget on " + sel.device + ": a DC target receives through an SRQ");
    }
    if (access_key == 0) {
        return Status(Code::kInvalidArgument,
                      "DcTarget on " + sel.device +
                          ": DC access key 0 - draw a random key and publish it to the peers");
    }
    ibv_qp_init_attr_ex ex = base_attr(pd, cq);
    ex.srq = srq;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
    dv.dc_init_attr.dct_access_key = access_key;
    errno = 0;
    verbs::Qp raw(api.mlx5dv_create_qp(ctx, &ex, &dv), verbs::QpDeleter{&api, log});
    if (!raw) {
        return create_failed("DCT", sel, errno != 0 ? errno : EIO);
    }
    QueuePair qp(api, std::move(raw), QpType::kDCT, std::move(sel), std::move(snapshots),
                 privileged, log);
    return DcTarget(std::move(qp), access_key);
}

Status DcTarget::activate(const QpParams &params) {
    Status st = qp_.to_init(params);
    if (st) {
        st = qp_.to_rtr(nullptr, params);
    }
    return st;
}

// ---- DcInitiator -------------------------------------------------------------------

util::Result<DcInitiator> DcInitiator::create(const verbs::VerbsApi &api, ibv_context *ctx,
                                              ibv_pd *pd, ibv_cq *cq, const DciCaps &caps,
                                              select::Selection sel, SharedSnapshotSource snapshots,
                                              bool privileged, util::LogSink *log) {
    ibv_qp_init_attr_ex ex = base_attr(pd, cq);
    ex.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.send_ops_flags = kDciSendOps;
    ex.cap.max_send_wr = caps.max_send_wr;
    ex.cap.max_send_sge = caps.max_send_sge;
    ex.cap.max_inline_data = caps.max_inline_data;
    ex.sq_sig_all = caps.sq_sig_all ? 1 : 0;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
    errno = 0;
    verbs::Qp raw(api.mlx5dv_create_qp(ctx, &ex, &dv), verbs::QpDeleter{&api, log});
    if (!raw) {
        return create_failed("DCI", sel, errno != 0 ? errno : EIO);
    }
    ibv_qp_ex *qpx = api.qp_to_qp_ex(raw.get());
    mlx5dv_qp_ex *mqp = qpx != nullptr ? api.mlx5dv_qp_ex_from_ibv_qp_ex(qpx) : nullptr;
    if (mqp == nullptr) {
        return Status(Code::kInternal,
                      util::format("DCI 0x%x on %s: rdma-core gave no extended QP although it "
                                   "was created with send ops",
                                   raw->qp_num, sel.device.c_str()));
    }
    QueuePair qp(api, std::move(raw), QpType::kDCI, std::move(sel), std::move(snapshots),
                 privileged, log);
    return DcInitiator(api, std::move(qp), qpx, mqp);
}

Status DcInitiator::activate(const QpParams &params) {
    // The AV carries the port and the GID the DCI sends from; its dgid is
    // set per work request (the address handle), so our own GID stands in.
    RemoteEnd self{qp_.selection().gid, 0, 0};
    Status st = qp_.to_init(params);
    if (st) {
        st = qp_.to_rtr(&self, params);
    }
    if (st) {
        st = qp_.to_rts(params);
    }
    return st;
}

Status DcInitiator::recover(const QpParams &params) {
    Status st = qp_.reset();
    if (!st) {
        return st;
    }
    return activate(params);
}

Status DcInitiator::post(const DcWork *works, size_t n) {
    if (n == 0) {
        return Status(Code::kInvalidArgument, "DcInitiator::post: no work requests");
    }
    for (size_t i = 0; i < n; ++i) {
        const DcWork &w = works[i];
        if (w.ah == nullptr || (w.num_sge > 0 && w.sge == nullptr)) {
            return Status(Code::kInvalidArgument,
                          util::format("DCI 0x%x on %s: work request %zu has no %s", number(),
                                       qp_.selection().device.c_str(), i,
                                       w.ah == nullptr ? "address handle" : "sge list"));
        }
    }
    api_->wr_start(ex_);
    for (size_t i = 0; i < n; ++i) {
        const DcWork &w = works[i];
        ex_->wr_id = w.wr_id;
        ex_->wr_flags = w.flags;
        switch (w.op) {
        case DcWork::Op::kSend:
            api_->wr_send(ex_);
            break;
        case DcWork::Op::kSendImm:
            api_->wr_send_imm(ex_, w.imm);
            break;
        case DcWork::Op::kWrite:
            api_->wr_rdma_write(ex_, w.rkey, w.remote_addr);
            break;
        case DcWork::Op::kRead:
            api_->wr_rdma_read(ex_, w.rkey, w.remote_addr);
            break;
        case DcWork::Op::kCmpSwap:
            api_->wr_atomic_cmp_swp(ex_, w.rkey, w.remote_addr, w.compare_add, w.swap);
            break;
        case DcWork::Op::kFetchAdd:
            api_->wr_atomic_fetch_add(ex_, w.rkey, w.remote_addr, w.compare_add);
            break;
        }
        // mlx5's DC WQE takes its setters in this order: address, then data.
        api_->mlx5dv_wr_set_dc_addr(dv_, w.ah, w.dctn, w.dc_key);
        api_->wr_set_sge_list(ex_, w.num_sge, w.sge);
    }
    int rc = verbs::normalize_rc(api_->wr_complete(ex_), errno);
    if (rc != 0) {
        return Status(util::code_from_errno(rc),
                      util::format("ibv_wr_complete(DCI 0x%x) on %s, %zu work request%s: %s (%d)%s",
                                   number(), qp_.selection().device.c_str(), n, n == 1 ? "" : "s",
                                   std::strerror(rc), rc,
                                   rc == ENOMEM ? "; the send queue is full: poll completions "
                                                  "first"
                                                : ""),
                      rc);
    }
    return Status::ok();
}

} // namespace roce::qp
