// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Sends over DC (issue 19) and the fragments our DC target receives.
//
// A peer that published a DC target, as we did, is reached without a
// connection: each send names its DCT (address handle, number, key) and
// goes through the DCI the peer hashes to, so that one peer's sends execute
// in the order they were posted. Fragments carry the FragHeader (seq, no
// credits) and end with a wire::DcSender trailer naming us: the receiver
// has no QP per peer to tell senders apart, so it looks the trailer up in
// its DC peers and refuses (and counts) what names none.
//
// Flow control. There are no per-peer credits on DC (a credit message would
// need a connection to come back on): as UCX's DC does, the receiver's SRQ
// absorbs the bursts and a send finding no receive posted is retried by the
// hardware (rnr_retry, 7 = forever by default); what bounds a sender is its
// DCI's send queue (DcResources::dci_depth work requests in flight per DCI;
// beyond it sends wait in the endpoint's queue), the CQ room shared with RC
// (inflight_), and the endpoint's sequence window (seq_span).
//
// Errors. An error completion moves the DCI to ERR; what was in flight
// behind it flushes back here. The DCI is recovered (RESET -> RTS, same
// number) once nothing of it is outstanding. Flushed sends go back to the
// head of their endpoint's queue in their order, keeping their numbers.
// The send whose completion was the error is put back likewise the first
// time; a second error completion fails it (OPAL_ERR_UNREACH to its
// callback, once) and fails the endpoint: DC cannot tell a wrong access key
// from a transient loss (both are a retry-exceeded at the initiator), and a
// send given up leaves a hole in the receiver's window, so the peer is
// reported and not tried again - no retry loop. A transient error (one
// error completion) loses nothing: the receiver drops the copies it
// already has by their numbers.
#include "data/data_path.h"

#include <cstring>

#include "btl_roce_log.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Status;

void DataPath::set_dc(DcResources *dc, uint64_t self_name) {
    dc_ = dc;
    dc_name_ = self_name;
    dcis_.assign(dc != nullptr ? dc->dcis() : 0, DciState{});
    dci_by_qpn_.clear();
    for (size_t i = 0; i < dcis_.size(); ++i) {
        dci_by_qpn_[dc->dci(i).number()] = i;
    }
}

void DataPath::add_dc_peer(Endpoint &ep, ibv_ah *ah) {
    // A 64-bit mix of the name and the port (splitmix64's finaliser), so
    // that consecutive ranks spread over the pool.
    uint64_t h = ep.name ^ (static_cast<uint64_t>(ep.port_index) << 48);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    DcRoute r;
    r.ah = ah;
    r.dctn = ep.peer_port().dct_number;
    r.key = ep.peer_port().dc_key;
    r.dci = static_cast<uint32_t>(h % dcis_.size());
    ep.set_dc_route(r);
    dc_peers_[ep.name] = &ep;
    release_dc_held(ep.name);
}

void DataPath::release_dc_held(uint64_t name) {
    std::vector<Held> mine;
    size_t keep = 0;
    for (Held &h : dc_held_) {
        if (h.name == name) {
            mine.push_back(h);
        } else {
            dc_held_[keep++] = h;
        }
    }
    dc_held_.resize(keep);
    for (const Held &h : mine) {
        handle_dc_recv(h.wc, static_cast<uint32_t>(wr_index(h.wc.wr_id)));
    }
}

bool DataPath::dc_can_post(const Endpoint &ep) const {
    const DciState &d = dcis_[ep.dc_.dci];
    return !d.broken && d.outstanding < dc_->dci_depth() && inflight_ < max_inflight_ &&
           ep.next_seq_ - ep.completed_.next_expected() < cfg_.seq_span;
}

Status DataPath::dc_post(Endpoint &ep, Frag *f) {
    const DciState &d = dcis_[ep.dc_.dci];
    if (d.broken || d.outstanding >= dc_->dci_depth() || inflight_ >= max_inflight_) {
        return retry_later();
    }
    if (!f->has_seq) {
        // Numbered once; one put back after an error keeps its number.
        if (ep.next_seq_ - ep.completed_.next_expected() >= cfg_.seq_span) {
            return retry_later();
        }
        f->seq = ep.next_seq_++;
        f->has_seq = true;
    }
    wire::FragHeader h;
    h.tag = f->tag;
    h.type = wire::FragType::kData;
    h.credits = 0;
    h.seq = f->seq;
    wire::encode(h, f->buf);
    // The trailer goes right after what the slot holds: header and payload
    // (copied), or header and the PML's header (in place). The slot has
    // room: btl_max_send_size leaves kForwardHeaderSize >= kDcSenderSize.
    const size_t first = wire::kFragHeaderSize + f->segments[0].seg_len;
    uint8_t *trailer = f->buf + first;
    wire::encode(wire::DcSender{dc_name_, dc_port_}, trailer);
    ibv_sge sge[3];
    size_t n = 0;
    if (!f->inplace) {
        sge[n++] = ibv_sge{reinterpret_cast<uint64_t>(f->buf),
                           static_cast<uint32_t>(first + wire::kDcSenderSize), f->lkey};
    } else {
        sge[n++] =
            ibv_sge{reinterpret_cast<uint64_t>(f->buf), static_cast<uint32_t>(first), f->lkey};
        sge[n++] = ibv_sge{reinterpret_cast<uint64_t>(f->segments[1].seg_addr.pval),
                           static_cast<uint32_t>(f->segments[1].seg_len), f->inplace_lkey};
        sge[n++] = ibv_sge{reinterpret_cast<uint64_t>(trailer),
                           static_cast<uint32_t>(wire::kDcSenderSize), f->lkey};
    }
    qp::DcWork w;
    w.op = qp::DcWork::Op::kSend;
    w.wr_id = make_wr_id(f, WrKind::kSend);
    w.flags = IBV_SEND_SIGNALED;
    w.sge = sge;
    w.num_sge = n;
    w.ah = ep.dc_.ah;
    w.dctn = ep.dc_.dctn;
    w.dc_key = ep.dc_.key;
    const size_t i = ep.dc_.dci;
    Status s = dc_->dci(i).post(&w, 1);
    if (!s) {
        if (s.sys_errno() != ENOMEM) {
            // The DCI refuses work (not in RTS): bring it back first.
            warn_limited("DCI post", "send to " + ep.label + ": " + s.message());
            dcis_[i].broken = true;
            dc_maybe_recover(i);
        }
        return retry_later();
    }
    ++dcis_[i].outstanding;
    ++inflight_;
    f->path = -1;
    return Status::ok();
}

void DataPath::dc_drain(Endpoint &ep) {
    while (!dc_closing_ && ep.state != EpState::kFailed && ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        Status s = dc_post(ep, f);
        if (s.code() == Code::kResourceExhausted) {
            break; // a completion or a recovered DCI calls us again
        }
        ep.pending_head_ = f->next;
        if (ep.pending_head_ == nullptr) {
            ep.pending_tail_ = nullptr;
        }
        if (ep.dc_requeued_ == f) {
            ep.dc_requeued_ = nullptr;
        }
        if (!s) {
            complete_frag(f, to_opal(s));
        }
    }
}

// Puts `f` back ahead of the sends that never went, after those put back
// before it: flushes arrive in posting order, so the order is kept.
void DataPath::dc_requeue(Endpoint &ep, Frag *f) {
    Frag *after = ep.dc_requeued_;
    if (after == nullptr) {
        f->next = ep.pending_head_;
        ep.pending_head_ = f;
    } else {
        f->next = after->next;
        after->next = f;
    }
    if (ep.pending_tail_ == nullptr || ep.pending_tail_ == after) {
        ep.pending_tail_ = f;
    }
    ep.dc_requeued_ = f;
    ++dc_stats_.requeued;
}

void DataPath::on_dc_send_completion(const ibv_wc &wc, Frag *f) {
    Endpoint &ep = *f->endpoint;
    --inflight_;
    auto it = dci_by_qpn_.find(wc.qp_num);
    size_t i = it != dci_by_qpn_.end() ? it->second : ep.dc_.dci;
    if (dcis_[i].outstanding > 0) {
        --dcis_[i].outstanding;
    }
    if (wc.status == IBV_WC_SUCCESS) {
        ++dc_stats_.sends;
        (void)ep.completed_.accept(f->seq);
        complete_frag(f, OPAL_SUCCESS);
        dc_retry_rdma(ep);
        dc_drain(ep);
        return;
    }
    dcis_[i].broken = true;
    if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        ++dc_stats_.errors;
        ++f->dc_errors;
        warn_limited("DCI error " + ep.label,
                     wc_error(wc, "DC send") + " to " + ep.label +
                         (f->dc_errors > 1 ? ": failed twice, the peer is given up"
                                           : ": the DCI is recovered and the send posted again"));
    }
    if (ep.state == EpState::kFailed || dc_closing_) {
        complete_frag(f, OPAL_ERR_UNREACH); // finalize: not posted again
    } else if (f->dc_errors > 1) {
        ++dc_stats_.failed;
        (void)ep.completed_.accept(f->seq);
        complete_frag(f, OPAL_ERR_UNREACH);
        ep.state = EpState::kFailed;
        ep.dc_requeued_ = nullptr; // fail_endpoint completes what it pointed into
        fail_endpoint(ep, util::format("DC sends to %s failed twice (%s): a wrong DC access key "
                                       "or an unreachable peer",
                                       ep.label.c_str(), ibv_wc_status_str(wc.status)));
    } else {
        dc_requeue(ep, f);
    }
    dc_maybe_recover(i);
}

void DataPath::dc_maybe_recover(size_t i) {
    DciState &d = dcis_[i];
    if (!d.broken || d.outstanding > 0 || dc_closing_) {
        return;
    }
    Status s = dc_->recover(i);
    if (!s) {
        // Stays broken: its peers' sends wait. The next error or post tries
        // again; the line says why.
        warn_limited("DCI recovery", "DCI " + std::to_string(i) + ": " + s.message());
        return;
    }
    d.broken = false;
    ++dc_stats_.recoveries;
    // Only peers with an Endpoint can have had work on it.
    for (const auto &ep : endpoints_) {
        if (ep->dc() && ep->dc_.dci == i) {
            ep->dc_requeued_ = nullptr;
            dc_retry_rdma(*ep);
            dc_drain(*ep);
        }
    }
}

void DataPath::handle_dc_recv(const ibv_wc &wc, uint32_t idx) {
    uint8_t *buf = dev_.srq_buffer(idx);
    const size_t len = wc.byte_len;
    auto hdr = wire::parse_frag_header(buf, len);
    util::Result<wire::DcSender> who =
        len >= wire::kFragHeaderSize + wire::kDcSenderSize
            ? wire::parse_dc_sender(buf + len - wire::kDcSenderSize, wire::kDcSenderSize)
            : util::Result<wire::DcSender>(Status(
                  Code::kProtocol, util::format("%zu bytes: shorter than a header and the DC "
                                                "sender trailer",
                                                len)));
    std::string why;
    if (!hdr) {
        why = hdr.status().message();
    } else if (!who) {
        why = who.status().message();
    } else if (hdr->type != wire::FragType::kData || hdr->credits != 0) {
        why = util::format("type %u with %u credits (DC carries data fragments only, no credits)",
                           static_cast<unsigned>(hdr->type), hdr->credits);
    }
    if (!why.empty()) {
        ++dc_stats_.refused_malformed;
        warn_limited(
            "malformed DC fragment",
            util::format("refused a %zu-byte fragment on our DC target: %s", len, why.c_str()));
        (void)dev_.post_srq_recv(idx);
        return;
    }
    auto it = dc_peers_.find(who->name);
    if (it == dc_peers_.end() && dc_held_.size() < kMaxDcHeld &&
        host_.dc_unknown_sender(who->name)) {
        // Maybe a process of our job that Open MPI has not added here yet:
        // kept, buffer and all, until it is (add_dc_peer) or the lookup
        // fails (then refused below, as anyone unknown).
        dc_held_.push_back(Held{who->name, wc});
        ++dc_stats_.held;
        return;
    }
    if (it == dc_peers_.end() || it->second->port_index != who->port) {
        ++dc_stats_.refused_unknown;
        warn_limited("DC fragment from an unknown sender",
                     util::format("refused a %zu-byte fragment on our DC target naming process "
                                  "0x%llx port %u: not a peer of ours over DC",
                                  len, static_cast<unsigned long long>(who->name), who->port));
        (void)dev_.post_srq_recv(idx);
        return;
    }
    Endpoint &ep = *it->second;
    SeqWindow::Verdict v = ep.received_.accept(hdr->seq);
    if (v != SeqWindow::Verdict::kNew) {
        ++dc_stats_.duplicates;
        if (v == SeqWindow::Verdict::kTooFar) {
            warn_limited("fragment beyond the window of " + ep.label,
                         util::format("dropped DC fragment %u from %s: beyond the window (next "
                                      "expected %u)",
                                      hdr->seq, ep.label.c_str(), ep.received_.next_expected()));
        }
        (void)dev_.post_srq_recv(idx);
        return;
    }
    ++dc_stats_.received;
    Deferred &d = deferred_.emplace_back();
    d.kind = Deferred::Kind::kRecv;
    d.ep = &ep;
    d.path = -1; // no credits to return on DC
    d.buf_index = idx;
    d.tag = hdr->tag;
    d.data = buf + wire::kFragHeaderSize;
    d.len = len - wire::kFragHeaderSize - wire::kDcSenderSize;
}

} // namespace roce::btl
