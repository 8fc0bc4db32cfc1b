// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The DCIs drained at finalize (issue 19). The DCIs are destroyed before
// the DCT, the address handles and the Device (data/dc_resources.h); what
// they still carry must finish first, or its callbacks would never run and
// its fragments and operations would leak. So: sends and RDMA that never
// reached a DCI complete in error at once; what is on a DCI gets a bounded
// time to complete as it would; then each DCI still busy goes to ERR, so
// the rest flushes back and completes in error - every operation exactly
// once, nothing reposted, no DCI recovered. Completions of other work on
// the shared CQ are handled as progress would, except receives: nobody
// reads them any more (the PML is finalizing), so their buffers stay.
#include "data/data_path.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

namespace {
constexpr int kPollBatch = 16;
} // namespace

uint32_t DataPath::dci_work() const {
    uint32_t n = 0;
    for (const DciState &d : dcis_) {
        n += d.outstanding;
    }
    return n;
}

void DataPath::close_dc(double limit_s) {
    if (dc_ == nullptr) {
        return;
    }
    OPAL_THREAD_LOCK(&lock_);
    dc_closing_ = true; // from now on nothing is posted on a DCI, none is recovered
    for (const auto &ep : endpoints_) {
        if (!ep->dc()) {
            continue;
        }
        ep->dc_requeued_ = nullptr;
        while (ep->pending_head_ != nullptr) {
            Frag *f = ep->pending_head_;
            ep->pending_head_ = f->next;
            complete_frag(f, OPAL_ERR_UNREACH);
        }
        ep->pending_tail_ = nullptr;
        while (ep->rdma_retry_ != nullptr) {
            RdmaOp *op = ep->rdma_retry_;
            ep->rdma_retry_ = op->next_retry;
            rdma_done(op, OPAL_ERR_UNREACH);
        }
    }
    double until = clock_() + limit_s;
    bool flushed = false;
    while (dci_work() > 0) {
        if (clock_() >= until) {
            if (flushed) {
                break; // a DCI that never flushed: reported below
            }
            // Time is up: what is left is flushed back, in error.
            for (size_t i = 0; i < dcis_.size(); ++i) {
                if (dcis_[i].outstanding > 0) {
                    util::Status s = dc_->dci(i).qp().to_error();
                    if (!s) {
                        log_.write(LogLevel::kWarn,
                                   "finalize: DCI " + std::to_string(i) + ": " + s.message());
                    }
                }
            }
            flushed = true;
            until = clock_() + limit_s;
        }
        ibv_wc wc[kPollBatch];
        int n = dev_.api().poll_cq(dev_.cq(), kPollBatch, wc);
        for (int k = 0; k < n; ++k) {
            WrKind kind = wr_kind(wc[k].wr_id);
            if (kind == WrKind::kSrqRecv || kind == WrKind::kUdRecv || kind == WrKind::kUdSend) {
                continue; // see above: nobody reads them now
            }
            on_completion(wc[k]);
        }
    }
    if (dci_work() > 0) {
        log_.write(LogLevel::kWarn,
                   util::format("finalize: %u DC work requests never completed nor flushed; "
                                "their DCIs are destroyed with them",
                                dci_work()));
    }
    OPAL_THREAD_UNLOCK(&lock_);
}

} // namespace roce::btl
