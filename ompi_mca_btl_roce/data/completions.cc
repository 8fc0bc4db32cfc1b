// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The completions of the data path, handled under the module lock, and the
// PML callbacks they defer, run without it: the PML may call back into the
// btl from them.
//
// A completion with an error means its path's QP went to the error state:
// the path is retired (its remaining work requests flush back here), sends
// are queued again - they keep their sequence numbers, so a copy the peer
// already has is dropped there - and RDMA operations are posted again on
// another path (data/rdma.cc). The path is reconnected in the background.
#include "data/data_path.h"

#include <cstring>

#include "opal/mca/btl/base/base.h"
#include "opal_btl_compat.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

void DataPath::on_completion(const ibv_wc &wc) {
    switch (wr_kind(wc.wr_id)) {
    case WrKind::kSrqRecv:
        handle_recv(wc);
        return;
    case WrKind::kSend:
        on_send_completion(wc);
        return;
    case WrKind::kRdma:
        on_rdma_completion(wc);
        return;
    case WrKind::kControl:
    case WrKind::kUdRecv: // the UD QP's are the host's
    case WrKind::kUdSend:
        return;
    }
}

// Accounts a completed work request to the QP it ran on. Returns the live
// path it belongs to, or nullptr when the QP was retired (then its count of
// flushing work requests goes down, and the QP is destroyed at zero).
Path *DataPath::account_completion(uint32_t qpn, Endpoint **ep_out) {
    --inflight_;
    if (retirement_.on_send_flushed(qpn)) {
        return nullptr;
    }
    auto it = by_qpn_.find(qpn);
    if (it == by_qpn_.end()) {
        return nullptr;
    }
    *ep_out = it->second.ep;
    Path &p = it->second.ep->paths_[it->second.path];
    ++p.tx.sq_free;
    --p.tx.outstanding;
    return &p;
}
std::string DataPath::wc_error(const ibv_wc &wc, const char *what) {
    return util::format("%s completion error on qpn 0x%x: %s (vendor error 0x%x)", what, wc.qp_num,
                        ibv_wc_status_str(wc.status), wc.vendor_err);
}
void DataPath::on_send_completion(const ibv_wc &wc) {
    Frag *f = wr_ptr<Frag>(wc.wr_id);
    if (dc_ != nullptr && dci_by_qpn_.count(wc.qp_num) != 0) {
        on_dc_send_completion(wc, f); // data/dc_send.cc
        return;
    }
    Endpoint &ep = *f->endpoint;
    Endpoint *owner = nullptr;
    Path *path = account_completion(wc.qp_num, &owner);
    if (wc.status == IBV_WC_SUCCESS) {
        if (path != nullptr) {
            ++path->tx.stats.messages;
        }
        if (f->has_seq) {
            (void)ep.completed_.accept(f->seq);
        }
        complete_frag(f, OPAL_SUCCESS);
        drain_pending(ep);
        return;
    }
    if (path != nullptr && wc.status != IBV_WC_WR_FLUSH_ERR) {
        host_.path_failed(ep, static_cast<size_t>(f->path), wc_error(wc, "send"));
    }
    if (f->control) {
        release_frag(f); // credits of a dead path die with it
    } else if (ep.state == EpState::kFailed) {
        complete_frag(f, OPAL_ERR_UNREACH);
    } else {
        // Not known to have arrived: send it again (same number) on a
        // surviving path, ahead of what is waiting.
        f->next = ep.pending_head_;
        ep.pending_head_ = f;
        if (ep.pending_tail_ == nullptr) {
            ep.pending_tail_ = f;
        }
        f->base.order = MCA_BTL_NO_ORDER;
        if (f->path >= 0 && static_cast<size_t>(f->path) < ep.paths_.size()) {
            ++ep.paths_[static_cast<size_t>(f->path)].tx.stats.retransmits;
        }
    }
    drain_pending(ep);
}
void DataPath::handle_recv(const ibv_wc &wc) {
    uint32_t idx = static_cast<uint32_t>(wr_index(wc.wr_id));
    if (wc.status != IBV_WC_SUCCESS) {
        // SRQ buffers come back flushed when the SRQ's QPs go to error; the
        // buffer is still ours.
        if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            log_.write(LogLevel::kWarn, wc_error(wc, "receive"));
        }
        (void)dev_.post_srq_recv(idx);
        return;
    }
    if (dc_ != nullptr && wc.qp_num == dc_->dct_number()) {
        handle_dc_recv(wc, idx); // data/dc_send.cc
        return;
    }
    uint8_t *buf = dev_.srq_buffer(idx);
    auto hdr = wire::parse_frag_header(buf, wc.byte_len);
    auto it = by_qpn_.find(wc.qp_num);
    if (it == by_qpn_.end() || !hdr) {
        warn_limited(
            hdr ? "fragment on unknown QP" : "malformed fragment",
            util::format("dropped a %u-byte fragment on qpn 0x%x: %s", wc.byte_len, wc.qp_num,
                         hdr ? "no endpoint uses that QP" : hdr.status().message().c_str()));
        (void)dev_.post_srq_recv(idx);
        return;
    }
    Endpoint &ep = *it->second.ep;
    bool live = !retirement_.retired(wc.qp_num);
    Path &path = ep.paths_[it->second.path];
    if (live) {
        host_.rc_message(ep, it->second.path); // the first message doubles as the RTU
        if (path.tx.credits.add(hdr->credits) != 0) {
            ++path.tx.stats.bad_credits; // more than the window: never trusted
        }
    }
    bool deliver = false;
    if (hdr->type == wire::FragType::kData || hdr->type == wire::FragType::kForward) {
        SeqWindow::Verdict v = ep.received_.accept(hdr->seq);
        deliver = v == SeqWindow::Verdict::kNew;
        if (v == SeqWindow::Verdict::kTooFar) {
            warn_limited("fragment beyond the window of " + ep.label,
                         util::format("dropped fragment %u from %s: beyond the window (next "
                                      "expected %u)",
                                      hdr->seq, ep.label.c_str(), ep.received_.next_expected()));
        }
    }
    if (!deliver) {
        // Credit-only messages and copies of what a failover resent.
        (void)dev_.post_srq_recv(idx);
        if (live) {
            path.tx.credits.owe();
        }
        drain_pending(ep);
        return;
    }
    path.tx.stats.bytes_received += wc.byte_len - wire::kFragHeaderSize;
    ++path.tx.stats.messages_received;
    Deferred &d = deferred_.emplace_back();
    d.kind = Deferred::Kind::kRecv;
    d.ep = &ep;
    d.path = live ? static_cast<int>(it->second.path) : -1;
    d.buf_index = idx;
    d.tag = hdr->tag;
    d.data = buf + wire::kFragHeaderSize;
    d.len = wc.byte_len - wire::kFragHeaderSize;
    d.forwarded = hdr->type == wire::FragType::kForward;
    if (hdr->credits != 0) {
        drain_pending(ep);
    }
}
void DataPath::complete_frag(Frag *f, int status) {
    bool owned = f->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    // The send is over and its number spent. A descriptor its caller owns
    // may be sent again (5.0's btl/base am_rdma refills it from this
    // callback): that is a new message and gets a new number; with the old
    // one the receiver would drop it as a duplicate.
    f->has_seq = false;
    if (f->base.des_cbfunc != nullptr) {
        Deferred &d = deferred_.emplace_back();
        d.kind = Deferred::Kind::kSendDone;
        d.ep = f->endpoint;
        d.frag = f;
        d.status = status;
    } else if (owned) {
        release_frag(f);
    }
}
void DataPath::warn_limited(const std::string &key, const std::string &line) {
    warn_.warn(log_, key, clock_(), line);
}
// The receive buffers of fragments the PML has seen go back to the SRQ as
// one list (one doorbell), and only then are their credits owed to the
// senders: a credit always stands for a posted buffer. Lock held.
void DataPath::repost(const Reposted *done, size_t n) {
    util::Status s;
    if (n == 1) {
        s = dev_.post_srq_recv(done[0].buf_index);
    } else {
        uint32_t idx[Device::kSrqPostBatch];
        for (size_t i = 0; i < n; ++i) {
            idx[i] = done[i].buf_index;
        }
        s = dev_.post_srq_recvs(idx, n);
    }
    if (!s) {
        warn_limited("SRQ repost", s.message()); // those buffers are lost to the SRQ
    }
    for (size_t i = 0; i < n; ++i) {
        Endpoint &ep = *done[i].ep;
        size_t path = static_cast<size_t>(done[i].path);
        if (done[i].path >= 0 && path < ep.paths_.size() &&
            ep.paths_[path].state == PathState::kUp) {
            ep.paths_[path].tx.credits.owe();
            maybe_send_credits(ep, path);
        }
    }
}
void DataPath::run_deferred(std::vector<Deferred> &todo) {
    Reposted done[Device::kSrqPostBatch];
    size_t ndone = 0;
    for (Deferred &d : todo) {
        switch (d.kind) {
        case Deferred::Kind::kRecv: {
            mca_btl_base_segment_t seg;
            seg.seg_addr.pval = d.data;
            seg.seg_len = d.len;
            const mca_btl_active_message_callback_t *reg =
                mca_btl_base_active_message_trigger + d.tag;
            if (d.forwarded) {
                host_.forwarded(*d.ep, d.data, d.len); // another rail's send (data/forward.cc)
            } else if (reg->cbfunc != nullptr) {
                compat::deliver(btl_, d.ep->as_opal(), d.tag, &seg, 1, reg);
            } else {
                OPAL_THREAD_LOCK(&lock_);
                warn_limited("unregistered tag",
                             util::format("dropped a fragment for tag %u from %s: nobody "
                                          "registered it",
                                          d.tag, d.ep->label.c_str()));
                OPAL_THREAD_UNLOCK(&lock_);
            }
            done[ndone++] = Reposted{d.ep, d.path, d.buf_index};
            if (ndone == Device::kSrqPostBatch) {
                OPAL_THREAD_LOCK(&lock_);
                repost(done, ndone);
                OPAL_THREAD_UNLOCK(&lock_);
                ndone = 0;
            }
            break;
        }
        case Deferred::Kind::kSendDone: {
            Frag *f = d.frag;
            f->base.des_cbfunc(btl_, d.ep->as_opal(), &f->base, d.status);
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
                op->cbfunc(btl_, d.ep->as_opal(), op->local_address, op->local_handle,
                           op->cbcontext, op->cbdata, d.status);
            }
            OPAL_THREAD_LOCK(&lock_);
            rdma_ops_.put(op);
            OPAL_THREAD_UNLOCK(&lock_);
            break;
        }
        case Deferred::Kind::kError:
            if (error_cb_ != nullptr) {
                error_cb_(btl_, MCA_BTL_ERROR_FLAGS_FATAL, d.ep->proc(),
                          const_cast<char *>(d.text.c_str()));
            }
            break;
        }
    }
    todo.clear();
    if (ndone != 0 || todo.capacity() != 0) {
        OPAL_THREAD_LOCK(&lock_);
        if (ndone != 0) {
            repost(done, ndone);
        }
        if (todo.capacity() != 0) {
            spare_.push_back(std::move(todo)); // allocates only past the 4 reserved
        }
        OPAL_THREAD_UNLOCK(&lock_);
    }
}
} // namespace roce::btl
