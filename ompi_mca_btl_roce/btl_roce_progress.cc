// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The completion side of the data path. progress() polls the one CQ of the
// port, updates state under the module lock, and then - without the lock -
// hands received fragments and completions to the PML, which may call back
// into the BTL from those callbacks.
//
// A completion with an error means its path's QP went to the error state:
// the path is retired (its remaining work requests flush back here), sends
// are queued again - they keep their sequence numbers, so a copy the peer
// already has is dropped there - and RDMA operations are posted again on
// another path. The path is reconnected in the background.
#include "btl_roce_module.h"

#include <cstring>

#include "opal/mca/btl/base/base.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;


int Module::progress() {
    ++progress_calls_;
    ibv_wc wc[kPollBatch];
    int n = dev_->api().poll_cq(dev_->cq(), kPollBatch, wc);
    // The idle path: one poll, two reads, no lock, no clock.
    bool net = netq_ && netq_->changed();
    if (n <= 0 && !cm_->busy() && deferred_.empty() && !ud_suspect_ && !net &&
        readdress_at_ == 0 && retirement_->empty()) {
        return 0;
    }
    std::vector<Deferred> todo;
    OPAL_THREAD_LOCK(&lock_);
    for (int i = 0; i < n; ++i) {
        handle_wc(wc[i]);
    }
    if (!retirement_->empty()) {
        reap_retired(n);
    }
    if (ud_suspect_) {
        check_ud();
    }
    if (net) {
        on_net_events();
    }
    if (readdress_at_ > 0 && clock() >= readdress_at_) {
        readdress();
    }
    if (cm_->busy() && (n > 0 || (progress_calls_ & 15) == 0)) {
        cm_->run_timers(clock());
    }
    todo.swap(deferred_);
    std::vector<uint64_t> lookups;
    lookups.swap(lookups_);
    OPAL_THREAD_UNLOCK(&lock_);
    if (!lookups.empty()) {
        resolve_lookups(lookups);
    }
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
        if (wc.status != IBV_WC_SUCCESS) {
            // Flushed: the UD QP is in the error state (or this is a
            // leftover of an incarnation already recovered, which reposted
            // every buffer): never repost here.
            ud_suspect_ = true;
            return;
        }
        if (wc.byte_len > Device::kGrhSize) {
            const uint8_t *grh = dev_->ud_buffer(idx);
            handle_cm(grh, grh + Device::kGrhSize, wc.byte_len - Device::kGrhSize);
        }
        util::Status s = dev_->post_ud_recv(idx);
        if (!s) {
            log_.write(LogLevel::kWarn, s.message());
            ud_suspect_ = true;
        }
        return;
    }
    case WrKind::kUdSend:
        dev_->ud_send_done(static_cast<uint32_t>(wr_index(wc.wr_id)));
        if (wc.status != IBV_WC_SUCCESS) {
            log_.write(LogLevel::kInfo, wc_error(wc, "UD send"));
            ud_suspect_ = true;
        }
        return;
    case WrKind::kSend:
        on_send_completion(wc);
        return;
    case WrKind::kRdma:
        on_rdma_completion(wc);
        return;
    case WrKind::kControl:
        return;
    }
}

// The UD QP had a failed completion. rxe moves a QP to the error state
// when the netdev refuses a packet (an active-backup bond between losing its
// active member and promoting the other): the connection manager would be
// deaf from then on. Bring it back with the same number; the handshakes'
// retransmission timers resend what was lost.
void Module::check_ud() {
    double now = clock();
    if (now < ud_retry_at_) {
        return;
    }
    ud_suspect_ = false;
    ibv_qp_state st = dev_->ud_state();
    if (st != IBV_QPS_ERR && st != IBV_QPS_SQE) {
        return; // a leftover completion of an incarnation already recovered
    }
    util::Status s = dev_->recover_ud();
    if (!s) {
        log_.write(LogLevel::kWarn, s.to_string() + "; trying again in 1 s");
        ud_suspect_ = true;
        ud_retry_at_ = now + 1.0;
        return;
    }
    // The address handles may name a GID slot that no longer holds our
    // address (the usual reason a datagram could not be sent): make them
    // again, through preflight, on the next handshake message.
    for (auto &ep : endpoints_) {
        ep->ah_.reset();
    }
    log_.write(LogLevel::kInfo,
               util::format("%s: UD QP 0x%x was in the error state; recovered (%u so far)",
                            dev_->name().c_str(), dev_->ud_qp()->qp_num, dev_->ud_recoveries()));
}

// Accounts a completed work request to the QP it ran on. Returns the live
// path it belongs to, or nullptr when the QP was retired (then its count of
// flushing work requests goes down, and the QP is destroyed at zero).
Path *Module::account_completion(uint32_t qpn, Endpoint **ep_out) {
    --inflight_;
    if (retirement_->on_send_flushed(qpn)) {
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

std::string Module::wc_error(const ibv_wc &wc, const char *what) const {
    return util::format("%s completion error on qpn 0x%x: %s (vendor error 0x%x)", what,
                        wc.qp_num, ibv_wc_status_str(wc.status), wc.vendor_err);
}

void Module::on_send_completion(const ibv_wc &wc) {
    Frag *f = wr_ptr<Frag>(wc.wr_id);
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
        path_failed(ep, static_cast<size_t>(f->path), wc_error(wc, "send"));
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

void Module::handle_recv(const ibv_wc &wc) {
    uint32_t idx = static_cast<uint32_t>(wr_index(wc.wr_id));
    if (wc.status != IBV_WC_SUCCESS) {
        // SRQ buffers come back flushed when the SRQ's QPs go to error; the
        // buffer is still ours.
        if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            log_.write(LogLevel::kWarn, wc_error(wc, "receive"));
        }
        (void)dev_->post_srq_recv(idx);
        return;
    }
    uint8_t *buf = dev_->srq_buffer(idx);
    auto hdr = wire::parse_frag_header(buf, wc.byte_len);
    auto it = by_qpn_.find(wc.qp_num);
    if (it == by_qpn_.end() || !hdr) {
        warn_limited(hdr ? "fragment on unknown QP" : "malformed fragment",
                     util::format("dropped a %u-byte fragment on qpn 0x%x: %s", wc.byte_len,
                                  wc.qp_num,
                                  hdr ? "no endpoint uses that QP"
                                      : hdr.status().message().c_str()));
        (void)dev_->post_srq_recv(idx);
        return;
    }
    Endpoint &ep = *it->second.ep;
    bool live = !retirement_->retired(wc.qp_num);
    Path &path = ep.paths_[it->second.path];
    if (live) {
        cm_->on_rc_message(ep, it->second.path); // the first message doubles as the RTU
        if (path.tx.credits.add(hdr->credits) != 0) {
            ++path.tx.stats.bad_credits; // more than the window: never trusted
        }
    }
    bool deliver = false;
    if (hdr->type == wire::FragType::kData) {
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
        (void)dev_->post_srq_recv(idx);
        if (live) {
            path.tx.credits.owe();
        }
        drain_pending(ep);
        return;
    }
    path.tx.stats.bytes_received += wc.byte_len - wire::kFragHeaderSize;
    ++path.tx.stats.messages_received;
    Deferred d;
    d.kind = Deferred::Kind::kRecv;
    d.ep = &ep;
    d.path = live ? static_cast<int>(it->second.path) : -1;
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

void Module::retire_qp(Peer &peer, size_t i) {
    Path &p = ep_of(peer).paths_[i];
    // The QPs go to the error state (their work requests flush back) and
    // are destroyed by the Retirement once nothing of them can still reach
    // the CQ; their by_qpn_ entries stay until then, so receives already
    // completed on them are still delivered.
    double now = clock();
    if (p.loop_peer) {
        retirement_->retire(std::move(p.loop_peer), 0, now);
    }
    if (p.qp) {
        retirement_->retire(std::move(p.qp), p.tx.outstanding, now);
    }
    p.tx.outstanding = 0;
    p.tx.sq_free = 0;
}

void Module::warn_limited(const std::string &key, const std::string &line) {
    warn_.warn(log_, key, clock(), line);
}

void Module::reap_retired(int polled) {
    ibv_async_event e{};
    while (dev_->next_async_event(&e)) {
        if (!retirement_->on_async_event(e)) {
            log_.write(LogLevel::kDebug, util::format("%s: async event %s", dev_->name().c_str(),
                                                      ibv_event_type_str(e.event_type)));
        }
    }
    for (uint32_t qpn : retirement_->reap(polled, kPollBatch, clock())) {
        by_qpn_.erase(qpn);
    }
}

void Module::retire_all() {
    for (auto &ep : endpoints_) {
        for (size_t i = 0; i < ep->paths_.size(); ++i) {
            retire_qp(*ep, i);
        }
    }
    // A bounded drain: the completions still coming are accounted (sends)
    // or dropped (receives nobody reads any more), events are fed, until
    // every QP has finished its sequence or a second has passed.
    auto round = [this]() {
        ibv_wc wc[kPollBatch];
        int n = 0;
        do {
            n = dev_->api().poll_cq(dev_->cq(), kPollBatch, wc);
            for (int k = 0; k < n; ++k) {
                WrKind kind = wr_kind(wc[k].wr_id);
                if (kind == WrKind::kSend || kind == WrKind::kRdma) {
                    (void)retirement_->on_send_flushed(wc[k].qp_num);
                }
            }
        } while (n == kPollBatch);
        ibv_async_event e{};
        while (dev_->next_async_event(&e)) {
            (void)retirement_->on_async_event(e);
        }
        return n >= 0;
    };
    for (uint32_t qpn : retirement_->destroy_all(round, 1.0, env_.clock)) {
        by_qpn_.erase(qpn);
    }
}

void Module::peer_failed(Peer &peer, const std::string &why) {
    Endpoint &ep = ep_of(peer);
    report("connection failed",
               util::format("%s:%d: connection to %s failed: %s", plan_.device.c_str(), plan_.port,
                            ep.label.c_str(), why.c_str()));
    while (ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        ep.pending_head_ = f->next;
        complete_frag(f, OPAL_ERR_UNREACH);
    }
    ep.pending_tail_ = nullptr;
    while (ep.rdma_retry_ != nullptr) {
        RdmaOp *op = ep.rdma_retry_;
        ep.rdma_retry_ = op->next_retry;
        rdma_done(op, OPAL_ERR_UNREACH);
    }
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
            bool taken = reg->cbfunc != nullptr;
            if (taken) {
                reg->cbfunc(base(), d.tag, &des, reg->cbdata);
            }
            OPAL_THREAD_LOCK(&lock_);
            if (!taken) {
                warn_limited("unregistered tag",
                             util::format("dropped a fragment for tag %u from %s: nobody "
                                          "registered it",
                                          d.tag, d.ep->label.c_str()));
            }
            (void)dev_->post_srq_recv(d.buf_index);
            if (d.path >= 0 && d.ep->paths_[static_cast<size_t>(d.path)].state == PathState::kUp) {
                d.ep->paths_[static_cast<size_t>(d.path)].tx.credits.owe();
                maybe_send_credits(*d.ep, static_cast<size_t>(d.path));
            }
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
            rdma_ops_.put(op);
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
