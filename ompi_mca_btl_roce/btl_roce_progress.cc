// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module's progress: polls the one CQ of the port and, under the module
// lock, gives the data path its completions (data/completions.cc) and the
// connection manager its datagrams and timers, recovers the UD QP, reaps
// retired QPs and follows network events; then - without the lock - runs
// the PML callbacks the data path deferred. Also the retirement of QPs (the
// connection side of a failed path) and of all of them at finalize.
#include "btl_roce_module.h"

#include <cstring>

#include "opal/mca/btl/base/base.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

int Module::progress() {
    // One thread polls and handles at a time. Polled outside the lock, a
    // completion of a retired QP could be handled after another thread's
    // progress found the CQ empty and destroyed that QP: dropped as a
    // fragment on an unknown QP, though its sender already had the ACK.
    // Under MPI_THREAD_MULTIPLE a thread that finds the lock taken leaves
    // (the holder is progressing); without threads the lock costs nothing.
    if (OPAL_THREAD_TRYLOCK(&lock_) != 0) {
        return 0;
    }
    ++progress_calls_;
    ibv_wc wc[kPollBatch];
    int n = dev_->api().poll_cq(dev_->cq(), kPollBatch, wc);
    // The idle path: one poll, a few reads, no clock.
    bool net = netq_ && netq_->changed();
    if (n <= 0 && !cm_->busy() && dp_->nothing_deferred() && !ud_suspect_ && !net &&
        readdress_at_ == 0 && retirement_->empty()) {
        OPAL_THREAD_UNLOCK(&lock_);
        return 0;
    }
    std::vector<DataPath::Deferred> todo;
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
    dp_->take_deferred(todo);
    std::vector<uint64_t> lookups;
    lookups.swap(lookups_);
    OPAL_THREAD_UNLOCK(&lock_);
    if (!lookups.empty()) {
        resolve_lookups(lookups);
    }
    dp_->run_deferred(todo);
    return n > 0 ? n : 0;
}

void Module::handle_wc(const ibv_wc &wc) {
    switch (wr_kind(wc.wr_id)) {
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
            log_.write(LogLevel::kInfo, DataPath::wc_error(wc, "UD send"));
            ud_suspect_ = true;
        }
        return;
    default:
        dp_->on_completion(wc); // sends, RDMA, SRQ receives
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

void Module::retire_qp(Peer &peer, size_t i) {
    Path &p = ep_of(peer).paths_[i];
    // The QPs go to the error state (their work requests flush back) and
    // are destroyed by the Retirement once nothing of them can still reach
    // the CQ; their QPN table entries stay until then, so receives already
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

void Module::reap_retired(int polled) {
    ibv_async_event e{};
    while (dev_->next_async_event(&e)) {
        if (!retirement_->on_async_event(e)) {
            log_.write(LogLevel::kDebug, util::format("%s: async event %s", dev_->name().c_str(),
                                                      ibv_event_type_str(e.event_type)));
        }
    }
    for (uint32_t qpn : retirement_->reap(polled, kPollBatch, clock())) {
        dp_->unmap_qp(qpn);
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
        dp_->unmap_qp(qpn);
    }
}

void Module::peer_failed(Peer &peer, const std::string &why) {
    Endpoint &ep = ep_of(peer);
    report("connection failed",
           util::format("%s:%d: connection to %s failed: %s", plan_.device.c_str(), plan_.port,
                        ep.label.c_str(), why.c_str()));
    dp_->fail_endpoint(
        ep, util::format("roce %s:%d: %s", plan_.device.c_str(), plan_.port, why.c_str()));
}

} // namespace roce::btl
