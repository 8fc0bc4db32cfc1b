// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The Connector's share of progress: the UD QP's completions (datagrams to
// the connection manager), its recovery after a failed completion, the port
// going down and up, and the retired RC QPs, destroyed once nothing of them
// can reach the CQ - one by one while the job runs, all at once (bounded) at
// finalize.
#include "connector/connector.h"

#include "btl_roce_module.h"
#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

void Connector::on_ud_completion(const ibv_wc &wc) {
    if (wr_kind(wc.wr_id) == WrKind::kUdSend) {
        dev_.ud_send_done(static_cast<uint32_t>(wr_index(wc.wr_id)));
        if (wc.status != IBV_WC_SUCCESS) {
            log_.write(LogLevel::kInfo, DataPath::wc_error(wc, "UD send"));
            ud_suspect_ = true;
        }
        return;
    }
    uint32_t idx = static_cast<uint32_t>(wr_index(wc.wr_id));
    if (wc.status != IBV_WC_SUCCESS) {
        // Flushed: the UD QP is in the error state (or this is a leftover
        // of an incarnation already recovered, which reposted every
        // buffer): never repost here.
        ud_suspect_ = true;
        return;
    }
    if (wc.byte_len > Device::kGrhSize) {
        const uint8_t *grh = dev_.ud_buffer(idx);
        wire::Gid from{};
        bool known = wire::grh_source_gid(grh, &from);
        cm_->on_datagram(known ? &from : nullptr, grh + Device::kGrhSize,
                         wc.byte_len - Device::kGrhSize);
    }
    util::Status s = dev_.post_ud_recv(idx);
    if (!s) {
        log_.write(LogLevel::kWarn, s.message());
        ud_suspect_ = true;
    }
}

void Connector::after_poll(int polled) {
    if (!retirement_.empty()) {
        ibv_async_event e{};
        while (dev_.next_async_event(&e)) {
            if (!retirement_.on_async_event(e)) {
                log_.write(LogLevel::kDebug, util::format("%s: async event %s",
                                                          dev_.name().c_str(),
                                                          ibv_event_type_str(e.event_type)));
            }
        }
        for (uint32_t qpn : retirement_.reap(polled, kPollBatch, env_.clock())) {
            dp_.unmap_qp(qpn);
        }
    }
    if (ud_suspect_) {
        check_ud();
    }
}

// The UD QP had a failed completion. rxe moves a QP to the error state
// when the netdev refuses a packet (an active-backup bond between losing its
// active member and promoting the other): the connection manager would be
// deaf from then on. Bring it back with the same number; the handshakes'
// retransmission timers resend what was lost.
void Connector::check_ud() {
    double now = env_.clock();
    if (now < ud_retry_at_) {
        return;
    }
    ud_suspect_ = false;
    ibv_qp_state st = dev_.ud_state();
    if (st != IBV_QPS_ERR && st != IBV_QPS_SQE) {
        return; // a leftover completion of an incarnation already recovered
    }
    util::Status s = dev_.recover_ud();
    if (!s) {
        log_.write(LogLevel::kWarn, s.to_string() + "; trying again in 1 s");
        ud_suspect_ = true;
        ud_retry_at_ = now + 1.0;
        return;
    }
    // The address handles may name a GID slot that no longer holds our
    // address (the usual reason a datagram could not be sent): make them
    // again, through preflight, on the next handshake message.
    for (auto &ep : eps_.all) {
        ep->ah_.reset();
    }
    log_.write(LogLevel::kInfo,
               util::format("%s: UD QP 0x%x was in the error state; recovered (%u so far)",
                            dev_.name().c_str(), dev_.ud_qp()->qp_num, dev_.ud_recoveries()));
}

std::vector<Endpoint *> Connector::port_down(const std::string &why) {
    std::vector<Endpoint *> failed;
    for (auto &ep : eps_.all) {
        if (!ep->is_self() && reached_elsewhere(*ep) && cm_->port_down(*ep, why) > 0) {
            failed.push_back(ep.get());
        }
    }
    return failed;
}

void Connector::port_up() {
    for (auto &ep : eps_.all) {
        if (!ep->is_self()) {
            cm_->port_up(*ep);
        }
    }
}

size_t Connector::peer_port_down(Endpoint &ep, const std::string &why) {
    return ep.is_self() ? 0 : cm_->port_down(ep, why);
}

void Connector::retire_all() {
    for (auto &ep : eps_.all) {
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
            n = dev_.api().poll_cq(dev_.cq(), kPollBatch, wc);
            for (int k = 0; k < n; ++k) {
                WrKind kind = wr_kind(wc[k].wr_id);
                if (kind == WrKind::kSend || kind == WrKind::kRdma) {
                    (void)retirement_.on_send_flushed(wc[k].qp_num);
                }
            }
        } while (n == kPollBatch);
        ibv_async_event e{};
        while (dev_.next_async_event(&e)) {
            (void)retirement_.on_async_event(e);
        }
        return n >= 0;
    };
    for (uint32_t qpn : retirement_.destroy_all(round, 1.0, env_.clock)) {
        dp_.unmap_qp(qpn);
    }
}

} // namespace roce::btl
