// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// RDMA reads and writes and the 64-bit atomics to a DC peer (issue 19):
// posted through the peer's DCI (data/dc_send.cc says why one per peer),
// with its address handle, DCT number and key; no connection.
//
// A read or write larger than rdma_chunk goes in chunks (at most 64, 4 KiB
// aligned, as on RC), posted while the DCI has room; the rest wait on the
// endpoint's retry queue and go as earlier work completes. There is one DCI
// per peer, so nothing is striped.
//
// Errors, as for sends: the DCI goes to ERR, what followed flushes, and
// the DCI is recovered once drained. A flushed operation never started and
// is posted again. One that got the error itself: a read or write is posted
// again once and fails (OPAL_ERR_UNREACH, and the endpoint fails) at its
// second error; an atomic fails at once (OPAL_ERROR: it may have executed,
// so it is not repeated - as on RC).
#include "data/data_path.h"

#include <algorithm>

#include "util/strings.h"

namespace roce::btl {

using util::Status;

namespace {
constexpr size_t kMaxDcRdmaChunks = 64;

qp::DcWork::Op dc_op(ibv_wr_opcode op) {
    switch (op) {
    case IBV_WR_RDMA_READ:
        return qp::DcWork::Op::kRead;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        return qp::DcWork::Op::kCmpSwap;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return qp::DcWork::Op::kFetchAdd;
    default:
        return qp::DcWork::Op::kWrite;
    }
}
} // namespace

Status DataPath::dc_post_rdma(Endpoint &ep, RdmaOp *op) {
    const size_t i = ep.dc_.dci;
    const DciState &d = dcis_[i];
    if (d.broken || d.outstanding >= dc_->dci_depth() || inflight_ >= max_inflight_) {
        return retry_later();
    }
    ibv_sge sge = op->sge;
    qp::DcWork w;
    w.op = dc_op(op->opcode);
    w.wr_id = make_wr_id(op, WrKind::kRdma);
    w.flags = IBV_SEND_SIGNALED;
    w.sge = &sge;
    w.num_sge = sge.length > 0 ? 1 : 0;
    w.rkey = op->rkey;
    w.remote_addr = op->remote_address;
    w.compare_add = op->compare_add;
    w.swap = op->swap;
    w.ah = ep.dc_.ah;
    w.dctn = ep.dc_.dctn;
    w.dc_key = ep.dc_.key;
    Status s = dc_->dci(i).post(&w, 1);
    if (!s) {
        if (s.sys_errno() != ENOMEM) {
            warn_limited("DCI post", "RDMA to " + ep.label + ": " + s.message());
            dcis_[i].broken = true;
            dc_maybe_recover(i);
        }
        return retry_later();
    }
    ++dcis_[i].outstanding;
    ++inflight_;
    op->path = -1;
    return Status::ok();
}

Status DataPath::dc_start_rdma(Endpoint &ep, RdmaOp *op, size_t size) {
    const bool data = op->opcode == IBV_WR_RDMA_READ || op->opcode == IBV_WR_RDMA_WRITE;
    if (!data || size <= cfg_.rdma_chunk) {
        return dc_post_rdma(ep, op);
    }
    size_t n = std::min((size + cfg_.rdma_chunk - 1) / cfg_.rdma_chunk, kMaxDcRdmaChunks);
    std::vector<RdmaOp *> parts;
    if (!cut_rdma(ep, op, size, n, parts)) {
        return retry_later();
    }
    // In order onto the retry queue (behind what waits there), then posted
    // while the DCI has room.
    RdmaOp **tail = &ep.rdma_retry_;
    while (*tail != nullptr) {
        tail = &(*tail)->next_retry;
    }
    for (RdmaOp *part : parts) {
        part->next_retry = nullptr;
        *tail = part;
        tail = &part->next_retry;
    }
    dc_retry_rdma(ep);
    return Status::ok();
}

void DataPath::dc_retry_rdma(Endpoint &ep) {
    while (!dc_closing_ && ep.rdma_retry_ != nullptr && ep.state != EpState::kFailed) {
        RdmaOp *op = ep.rdma_retry_;
        if (!dc_post_rdma(ep, op)) {
            return; // a completion or the DCI's recovery calls us again
        }
        ep.rdma_retry_ = op->next_retry;
        op->next_retry = nullptr;
    }
}

void DataPath::on_dc_rdma_completion(const ibv_wc &wc, RdmaOp *op) {
    Endpoint &ep = *op->ep;
    --inflight_;
    const size_t i = dci_by_qpn_.at(wc.qp_num);
    if (dcis_[i].outstanding > 0) {
        --dcis_[i].outstanding;
    }
    if (wc.status == IBV_WC_SUCCESS) {
        ++dc_stats_.rdma;
        rdma_done(op, OPAL_SUCCESS);
        dc_retry_rdma(ep);
        dc_drain(ep);
        return;
    }
    dcis_[i].broken = true;
    const bool atomic =
        op->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || op->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        ++dc_stats_.errors;
        ++op->dc_errors;
        warn_limited("DCI error " + ep.label, wc_error(wc, "DC RDMA") + " to " + ep.label);
    }
    if (ep.state == EpState::kFailed || dc_closing_) {
        rdma_done(op, OPAL_ERR_UNREACH); // finalize: not posted again
    } else if (atomic && wc.status != IBV_WC_WR_FLUSH_ERR) {
        ++dc_stats_.rdma_failed;
        log_.write(util::LogLevel::kError,
                   util::format("atomic operation to %s failed on its DCI (%s): it may or may "
                                "not have been applied, so it is not repeated",
                                ep.label.c_str(), ibv_wc_status_str(wc.status)));
        rdma_done(op, OPAL_ERROR);
    } else if (op->dc_errors > 1) {
        ++dc_stats_.rdma_failed;
        rdma_done(op, OPAL_ERR_UNREACH);
        ep.state = EpState::kFailed;
        fail_endpoint(ep, util::format("DC RDMA to %s failed twice (%s): a wrong DC access key "
                                       "or an unreachable peer",
                                       ep.label.c_str(), ibv_wc_status_str(wc.status)));
    } else {
        // Never started, or a read or write that may run again: ahead of
        // what waits.
        op->next_retry = ep.rdma_retry_;
        ep.rdma_retry_ = op;
    }
    dc_maybe_recover(i);
}

} // namespace roce::btl
