// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The completion side of the data path. progress() polls the one CQ of the
// port, updates state under the module lock, and then - without the lock -
// hands received fragments and completions to the PML, which may call back
// into the BTL from those callbacks.
#include "btl_roce_module.h"

#include <cstring>

#include "opal/mca/btl/base/base.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

namespace {
constexpr int kPollBatch = 16;
} // namespace

int Module::progress() {
    ++progress_calls_;
    ibv_wc wc[kPollBatch];
    int n = dev_->api().poll_cq(dev_->cq(), kPollBatch, wc);
    // The idle path: one poll, two reads, no lock, no clock.
    if (n <= 0 && connecting_ == 0 && deferred_.empty()) {
        return 0;
    }
    std::vector<Deferred> todo;
    OPAL_THREAD_LOCK(&lock_);
    for (int i = 0; i < n; ++i) {
        handle_wc(wc[i]);
    }
    if (connecting_ != 0 && (n > 0 || (progress_calls_ & 15) == 0)) {
        run_timers(now_seconds());
    }
    todo.clear();
    todo.swap(deferred_);
    OPAL_THREAD_UNLOCK(&lock_);
    run_deferred(todo);
    return n > 0 ? n : 0;
}

void Module::handle_wc(const ibv_wc &wc) {
    switch (wr_kind(wc.wr_id)) {
    case WrKind::kSrqRecv:
        handle_recv(wc);
        return;
    case WrKind::kUdRecv: {
        uint32_t idx = static_cast<uint32_t>(wr_index(wc.wr_id));
        if (wc.status == IBV_WC_SUCCESS && wc.byte_len > Device::kGrhSize) {
            handle_cm(dev_->ud_buffer(idx) + Device::kGrhSize, wc.byte_len - Device::kGrhSize);
        }
        util::Status s = dev_->post_ud_recv(idx);
        if (!s) {
            log_.write(LogLevel::kWarn, s.message());
        }
        return;
    }
    case WrKind::kUdSend:
        dev_->ud_send_done(static_cast<uint32_t>(wr_index(wc.wr_id)));
        return;
    case WrKind::kSend: {
        Frag *f = wr_ptr<Frag>(wc.wr_id);
        Endpoint *ep = f->endpoint;
        ++ep->sq_free_;
        --inflight_;
        int status = wc.status == IBV_WC_SUCCESS ? OPAL_SUCCESS : OPAL_ERROR;
        if (wc.status != IBV_WC_SUCCESS) {
            fail_endpoint(*ep, util::format("send completion error: %s (vendor error 0x%x)",
                                            ibv_wc_status_str(wc.status), wc.vendor_err));
        }
        complete_frag(f, status);
        drain_pending(*ep);
        return;
    }
    case WrKind::kRdma: {
        RdmaOp *op = wr_ptr<RdmaOp>(wc.wr_id);
        Endpoint *ep = op->ep;
        ++ep->sq_free_;
        --ep->rdma_outstanding_;
        --inflight_;
        Deferred d;
        d.kind = Deferred::Kind::kRdmaDone;
        d.ep = ep;
        d.op = op;
        d.status = wc.status == IBV_WC_SUCCESS ? OPAL_SUCCESS : OPAL_ERROR;
        deferred_.push_back(std::move(d));
        if (wc.status != IBV_WC_SUCCESS) {
            fail_endpoint(*ep, util::format("RDMA completion error: %s (vendor error 0x%x, "
                                            "qpn 0x%x, wr_id 0x%llx)",
                                            ibv_wc_status_str(wc.status), wc.vendor_err,
                                            wc.qp_num,
                                            static_cast<unsigned long long>(wc.wr_id)));
        }
        drain_pending(*ep);
        return;
    }
    case WrKind::kControl:
        return;
    }
}

void Module::handle_recv(const ibv_wc &wc) {
    uint32_t idx = static_cast<uint32_t>(wr_index(wc.wr_id));
    if (wc.status != IBV_WC_SUCCESS) {
        // Flushed receives (a QP went to error) come back here; the SRQ
        // buffer itself is still ours, so post it again.
        if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            log_.write(LogLevel::kWarn, util::format("receive completion error: %s",
                                                     ibv_wc_status_str(wc.status)));
        }
        (void)dev_->post_srq_recv(idx);
        return;
    }
    auto it = by_qpn_.find(wc.qp_num);
    uint8_t *buf = dev_->srq_buffer(idx);
    auto hdr = wire::parse_frag_header(buf, wc.byte_len);
    if (it == by_qpn_.end() || !hdr) {
        log_.write(LogLevel::kWarn,
                   util::format("dropped a %u-byte fragment on qpn 0x%x: %s", wc.byte_len,
                                wc.qp_num,
                                hdr ? "no endpoint uses that QP" : hdr.status().message().c_str()));
        (void)dev_->post_srq_recv(idx);
        return;
    }
    Endpoint &ep = *it->second;
    if (ep.state_ == EpState::kAwaitRtu) {
        mark_connected(ep); // the first message doubles as the RTU
    }
    ep.credits_.add(hdr->credits);
    if (hdr->type == wire::FragType::kCredit) {
        (void)dev_->post_srq_recv(idx);
        ep.credits_.owe();
        drain_pending(ep);
        return;
    }
    Deferred d;
        d.kind = Deferred::Kind::kRecv;
    d.ep = &ep;
    d.buf_index = idx;
    d.tag = hdr->tag;
    d.data = buf + wire::kFragHeaderSize;
    d.len = wc.byte_len - wire::kFragHeaderSize;
    deferred_.push_back(std::move(d));
    if (hdr->credits != 0) {
        drain_pending(ep);
    }
}

void Module::complete_frag(Frag *f, int status) {
    bool owned = f->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    if (f->base.des_cbfunc != nullptr) {
        Deferred d;
        d.kind = Deferred::Kind::kSendDone;
        d.ep = f->endpoint;
        d.frag = f;
        d.status = status;
        deferred_.push_back(std::move(d));
    } else if (owned) {
        release_frag(f);
    }
}

void Module::fail_endpoint(Endpoint &ep, const std::string &why) {
    if (ep.state_ == EpState::kFailed) {
        return;
    }
    ep.state_ = EpState::kFailed;
    ep.failure_ = why;
    log_.write(LogLevel::kError,
               util::format("%s:%d: connection to %s failed: %s", plan_.device.c_str(),
                            plan_.port, ep.label().c_str(), why.c_str()));
    while (ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        ep.pending_head_ = f->next;
        complete_frag(f, OPAL_ERR_UNREACH);
    }
    ep.pending_tail_ = nullptr;
    Deferred d;
        d.kind = Deferred::Kind::kError;
    d.ep = &ep;
    d.text = util::format("roce %s:%d: %s", plan_.device.c_str(), plan_.port, why.c_str());
    deferred_.push_back(std::move(d));
}

void Module::run_deferred(std::vector<Deferred> &todo) {
    for (Deferred &d : todo) {
        switch (d.kind) {
        case Deferred::Kind::kRecv: {
            mca_btl_base_segment_t seg;
            seg.seg_addr.pval = d.data;
            seg.seg_len = d.len;
            mca_btl_base_descriptor_t des{};
            des.des_segments = &seg;
            des.des_segment_count = 1;
            const mca_btl_active_message_callback_t *reg =
                mca_btl_base_active_message_trigger + d.tag;
            if (reg->cbfunc != nullptr) {
                reg->cbfunc(base(), d.tag, &des, reg->cbdata);
            } else {
                log_.write(LogLevel::kWarn,
                           util::format("dropped a fragment for tag %u: nobody registered it",
                                        d.tag));
            }
            OPAL_THREAD_LOCK(&lock_);
            (void)dev_->post_srq_recv(d.buf_index);
            d.ep->credits_.owe();
            maybe_send_credits(*d.ep);
            OPAL_THREAD_UNLOCK(&lock_);
            break;
        }
        case Deferred::Kind::kSendDone: {
            Frag *f = d.frag;
            f->base.des_cbfunc(base(), d.ep->as_opal(), &f->base, d.status);
            if (f->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
                OPAL_THREAD_LOCK(&lock_);
                release_frag(f);
                OPAL_THREAD_UNLOCK(&lock_);
            }
            break;
        }
        case Deferred::Kind::kRdmaDone: {
            RdmaOp *op = d.op;
            if (op->copy_result && d.status == OPAL_SUCCESS) {
                std::memcpy(op->local_address, &op->result, sizeof(op->result));
            }
            if (op->cbfunc != nullptr) {
                op->cbfunc(base(), d.ep->as_opal(), op->local_address, op->local_handle,
                           op->cbcontext, op->cbdata, d.status);
            }
            OPAL_THREAD_LOCK(&lock_);
            put_rdma_op(op);
            OPAL_THREAD_UNLOCK(&lock_);
            break;
        }
        case Deferred::Kind::kError:
            if (error_cb_ != nullptr) {
                error_cb_(base(), MCA_BTL_ERROR_FLAGS_FATAL, d.ep->proc(),
                          const_cast<char *>(d.text.c_str()));
            }
            break;
        }
    }
    todo.clear();
}

} // namespace roce::btl
