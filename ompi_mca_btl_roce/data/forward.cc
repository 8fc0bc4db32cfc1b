// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The data path's part of surviving a lost rail (issue 16): while a module's
// endpoint has no live path to its peer, its waiting sends are taken off its
// queue and carried by a sibling rail that still reaches the peer, each as
// one wire::kForward fragment of that rail (ForwardHeader + payload, copied
// into a slot there); the receiving process hands it to its own module of
// the origin rail, whose endpoint's window drops what it already has and
// delivers the rest once. Module (btl_roce_rails.cc) decides when and over
// which rail; docs/architecture.md, "Losing a rail", has the whole contract.
#include "data/data_path.h"

#include <cstring>

#include "opal/mca/btl/base/base.h"
#include "opal_btl_compat.h"

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Status;

void DataPath::take_for_forwarding(Endpoint &ep, size_t max, std::vector<Frag *> &out) {
    if (ep.state == EpState::kConnected || ep.state == EpState::kFailed) {
        return;
    }
    while (out.size() < max && ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        if (!f->has_seq) {
            // Numbered here as post_frag_on would: never beyond the window.
            if (ep.next_seq_ - ep.completed_.next_expected() >= cfg_.seq_span) {
                return;
            }
            f->seq = ep.next_seq_++;
            f->has_seq = true;
        }
        ep.pending_head_ = f->next;
        if (ep.pending_head_ == nullptr) {
            ep.pending_tail_ = nullptr;
        }
        f->next = nullptr;
        out.push_back(f);
    }
}

void DataPath::give_back(Endpoint &ep, const std::vector<Frag *> &frags, size_t from) {
    for (size_t k = frags.size(); k > from; --k) {
        Frag *f = frags[k - 1];
        f->next = ep.pending_head_;
        ep.pending_head_ = f;
        if (ep.pending_tail_ == nullptr) {
            ep.pending_tail_ = f;
        }
    }
}

void DataPath::forward_done(Frag *f, int status) {
    Endpoint &ep = *f->endpoint;
    if (status == OPAL_SUCCESS) {
        (void)ep.completed_.accept(f->seq);
        ++rail_stats_.rerouted_sends;
        rail_stats_.rerouted_bytes +=
            f->segments[0].seg_len + (f->inplace ? f->segments[1].seg_len : 0);
        complete_frag(f, OPAL_SUCCESS);
        return;
    }
    if (ep.state == EpState::kFailed) {
        complete_frag(f, OPAL_ERR_UNREACH);
        return;
    }
    // Not known to have arrived: it waits again, ahead of the rest (same
    // number), for our own path or another carrier.
    f->base.order = MCA_BTL_NO_ORDER;
    give_back(ep, std::vector<Frag *>{f}, 0);
    if (ep.state == EpState::kConnected) {
        drain_pending(ep);
    }
}

Status DataPath::send_forward(Endpoint &ep, const wire::ForwardHeader &hdr, const Frag *origin,
                              mca_btl_base_completion_fn_t cb, void *cbdata, void *context) {
    size_t first = origin != nullptr ? origin->segments[0].seg_len : 0;
    size_t second = origin != nullptr && origin->inplace ? origin->segments[1].seg_len : 0;
    size_t total = wire::kForwardHeaderSize + first + second;
    OPAL_THREAD_LOCK(&lock_);
    if (ep.state != EpState::kConnected) {
        OPAL_THREAD_UNLOCK(&lock_);
        return Status(Code::kUnavailable,
                      util::format("forwarding to %s: not connected", ep.label.c_str()));
    }
    Frag *f = dev_.frags().get();
    if (f == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return retry_later();
    }
    if (total > f->capacity) {
        dev_.frags().put(f);
        OPAL_THREAD_UNLOCK(&lock_);
        return Status(Code::kInvalidArgument,
                      util::format("forwarding %zu bytes to %s: a slot holds %u", total,
                                   ep.label.c_str(), f->capacity));
    }
    OPAL_THREAD_UNLOCK(&lock_);
    uint8_t *p = f->buf + wire::kFragHeaderSize;
    wire::ForwardHeader h = hdr;
    h.length = static_cast<uint32_t>(first + second);
    wire::encode(h, p);
    if (first > 0) {
        std::memcpy(p + wire::kForwardHeaderSize, origin->segments[0].seg_addr.pval, first);
    }
    if (second > 0) {
        std::memcpy(p + wire::kForwardHeaderSize + first, origin->segments[1].seg_addr.pval,
                    second);
    }
    f->endpoint = &ep;
    f->forward = true;
    f->segments[0].seg_len = total;
    f->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    f->base.des_cbfunc = cb;
    f->base.des_cbdata = cbdata;
    f->base.des_context = context;
    Status s = send(&ep, &f->base, 0);
    OPAL_THREAD_LOCK(&lock_);
    if (s && origin != nullptr) {
        ++rail_stats_.carried_sends;
        rail_stats_.carried_bytes += first + second;
    } else if (!s) {
        dev_.frags().put(f); // refused (the peer failed meanwhile): still ours
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return s;
}

SeqWindow::Verdict DataPath::accept_forwarded(Endpoint &ep, uint32_t seq) {
    SeqWindow::Verdict v = ep.received_.accept(seq);
    switch (v) {
    case SeqWindow::Verdict::kNew:
        ++rail_stats_.forwarded_received;
        break;
    case SeqWindow::Verdict::kDuplicate:
        ++rail_stats_.forwarded_duplicates;
        break;
    case SeqWindow::Verdict::kTooFar:
        ++rail_stats_.forwarded_refused;
        warn_limited("forwarded fragment beyond the window of " + ep.label,
                     util::format("dropped forwarded fragment %u from %s: beyond the window "
                                  "(next expected %u)",
                                  seq, ep.label.c_str(), ep.received_.next_expected()));
        break;
    }
    return v;
}

bool DataPath::deliver(Endpoint &ep, uint8_t tag, const uint8_t *data, size_t len) {
    const mca_btl_active_message_callback_t *reg = mca_btl_base_active_message_trigger + tag;
    if (reg->cbfunc == nullptr) {
        return false;
    }
    mca_btl_base_segment_t seg;
    seg.seg_addr.pval = const_cast<uint8_t *>(data);
    seg.seg_len = len;
    compat::deliver(btl_, ep.as_opal(), tag, &seg, 1, reg);
    return true;
}

} // namespace roce::btl
