// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The send side of the data path: descriptors, packing, posting with
// credits, the queue of sends waiting for a connection or credits, and the
// credit-only messages that return the peer's credits.
#include "data/data_path.h"

#include <sys/uio.h>

#include <cstring>

#include "opal/datatype/opal_convertor.h"

#include "btl_roce_log.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Status;

namespace {
// Contiguous data at least this large is sent from the user's buffer
// (registered through the cache) instead of being copied.
constexpr size_t kInplaceMin = 4096;
} // namespace

mca_btl_base_descriptor_t *DataPath::alloc(Endpoint *ep, uint8_t order, size_t size,
                                           uint32_t flags) {
    if (size > btl_->btl_max_send_size) {
        return nullptr;
    }
    OPAL_THREAD_LOCK(&lock_);
    Frag *f = dev_.frags().get();
    OPAL_THREAD_UNLOCK(&lock_);
    if (f == nullptr) {
        return nullptr; // the PML retries later
    }
    f->endpoint = ep;
    f->segments[0].seg_len = size;
    f->base.des_flags = flags;
    f->base.order = order;
    return &f->base;
}

void DataPath::release_frag(Frag *f) {
    if (f->inplace_reg != nullptr) {
        (void)host_.deregister_mem(
            static_cast<mca_btl_base_registration_handle_t *>(f->inplace_reg));
        f->inplace_reg = nullptr;
    }
    dev_.frags().put(f);
}

Status DataPath::free_des(mca_btl_base_descriptor_t *des) {
    OPAL_THREAD_LOCK(&lock_);
    release_frag(reinterpret_cast<Frag *>(des));
    OPAL_THREAD_UNLOCK(&lock_);
    return Status::ok();
}

mca_btl_base_descriptor_t *DataPath::prepare_src(Endpoint *ep, opal_convertor_t *conv,
                                                 uint8_t order, size_t reserve, size_t *size,
                                                 uint32_t flags) {
    size_t room = btl_->btl_max_send_size;
    if (reserve > room) {
        return nullptr;
    }
    size_t max_data = *size;
    if (max_data > room - reserve) {
        max_data = room - reserve;
    }
    OPAL_THREAD_LOCK(&lock_);
    Frag *f = dev_.frags().get();
    OPAL_THREAD_UNLOCK(&lock_);
    if (f == nullptr) {
        return nullptr;
    }
    f->endpoint = ep;
    f->base.des_flags = flags;
    f->base.order = order;
    uint8_t *payload = f->buf + wire::kFragHeaderSize;

    if (!opal_convertor_need_buffers(conv) && max_data >= kInplaceMin) {
        // Contiguous and large: send straight from the user's buffer.
        void *cur = nullptr;
        opal_convertor_get_current_pointer(conv, &cur);
        auto *h = host_.register_mem(cur, max_data, MCA_BTL_REG_FLAG_LOCAL_WRITE);
        if (h != nullptr) {
            iovec iov{nullptr, max_data};
            uint32_t n = 1;
            if (opal_convertor_pack(conv, &iov, &n, &max_data) < 0) {
                (void)host_.deregister_mem(h);
                (void)free_des(&f->base);
                return nullptr;
            }
            f->inplace = true;
            f->inplace_lkey = h->lkey;
            f->inplace_reg = h;
            f->segments[0].seg_len = reserve;
            f->segments[1].seg_addr.pval = iov.iov_base;
            f->segments[1].seg_len = max_data;
            f->base.des_segment_count = 2;
            *size = max_data;
            return &f->base;
        }
        // Not registrable (locked-memory limit): copy instead, below.
    }
    iovec iov{payload + reserve, max_data};
    uint32_t n = 1;
    if (opal_convertor_pack(conv, &iov, &n, &max_data) < 0) {
        (void)free_des(&f->base);
        return nullptr;
    }
    f->segments[0].seg_len = reserve + max_data;
    *size = max_data;
    return &f->base;
}

void DataPath::queue_pending(Endpoint &ep, Frag *f) {
    f->next = nullptr;
    if (ep.pending_tail_ != nullptr) {
        ep.pending_tail_->next = f;
    } else {
        ep.pending_head_ = f;
    }
    ep.pending_tail_ = f;
}

// The path for the next message: the one the caller asked for (`order`, a
// path index from an earlier descriptor), else the next up path in
// round-robin order that has a credit and a send-queue slot. -1 when none.
int DataPath::pick_path(Endpoint &ep, uint8_t order, bool control) const {
    auto usable = [&](const Path &p) {
        if (p.state != PathState::kUp || p.tx.sq_free == 0) {
            return false;
        }
        const CreditLedger &c = p.tx.credits;
        return control ? c.available() > 0 : c.available() > c.reserve();
    };
    size_t n = ep.paths_.size();
    if (order != MCA_BTL_NO_ORDER && order < n && usable(ep.paths_[order])) {
        return order;
    }
    for (size_t k = 0; k < n; ++k) {
        size_t i = (ep.next_path_ + k) % n;
        if (usable(ep.paths_[i])) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

// Posts one frag on a path of its choosing; retry_later() with no side
// effects when no path has a credit, a slot and CQ room, or when the
// fragment window of the endpoint is full.
Status DataPath::post_frag(Endpoint &ep, Frag *f) {
    if (inflight_ >= max_inflight_) {
        return retry_later();
    }
    int i = pick_path(ep, f->base.order, f->control);
    if (i < 0) {
        return retry_later();
    }
    Status s = post_frag_on(ep, static_cast<size_t>(i), f);
    if (s) {
        ep.next_path_ = static_cast<unsigned>(i + 1);
    }
    return s;
}

// retry_later() when the window or the path's credits are full, and when the
// post itself failed: the path is failed over (path_failed has the error) and
// the fragment goes out again on another.
Status DataPath::post_frag_on(Endpoint &ep, size_t i, Frag *f) {
    Path &path = ep.paths_[i];
    if (!f->control && !f->has_seq) {
        // Number it, unless that would put it beyond the receiver's window.
        if (ep.next_seq_ - ep.completed_.next_expected() >= cfg_.seq_span) {
            return retry_later();
        }
        f->seq = ep.next_seq_++;
        f->has_seq = true;
    }
    if (!(f->control ? path.tx.credits.take_for_control() : path.tx.credits.take_for_data())) {
        return retry_later();
    }
    wire::FragHeader h;
    h.tag = f->tag;
    h.type = f->control   ? wire::FragType::kCredit
             : f->forward ? wire::FragType::kForward
                          : wire::FragType::kData;
    h.credits = path.tx.credits.take_owed();
    h.seq = f->seq;
    wire::encode(h, f->buf);

    ibv_sge sge[2];
    sge[0].addr = reinterpret_cast<uint64_t>(f->buf);
    sge[0].length = static_cast<uint32_t>(wire::kFragHeaderSize + f->segments[0].seg_len);
    sge[0].lkey = f->lkey;
    int nsge = 1;
    if (f->inplace) {
        sge[1].addr = reinterpret_cast<uint64_t>(f->segments[1].seg_addr.pval);
        sge[1].length = static_cast<uint32_t>(f->segments[1].seg_len);
        sge[1].lkey = f->inplace_lkey;
        nsge = 2;
    }
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(f, WrKind::kSend);
    wr.sg_list = sge;
    wr.num_sge = nsge;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (nsge == 1 && sge[0].length <= dev_.max_inline()) {
        wr.send_flags |= IBV_SEND_INLINE;
    }
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(dev_.api().post_send(path.qp->get(), &wr, &bad), errno);
    if (rc != 0) {
        path.tx.credits.untake();
        path.tx.credits.owe(h.credits);
        host_.path_failed(ep, i, Status::from_errno(rc, "ibv_post_send(RC)").message());
        return retry_later(); // queued; resent on another path
    }
    --path.tx.sq_free;
    ++path.tx.outstanding;
    ++inflight_;
    f->path = static_cast<int>(i);
    f->base.order = static_cast<uint8_t>(i);
    path.tx.stats.bytes += f->segments[0].seg_len + (f->inplace ? f->segments[1].seg_len : 0);
    return Status::ok();
}

void DataPath::note_stall(Endpoint &ep) {
    for (auto &p : ep.paths_) {
        if (p.state == PathState::kUp && p.tx.sq_free > 0 &&
            p.tx.credits.available() <= p.tx.credits.reserve()) {
            ++p.tx.stats.credit_stalls;
            return;
        }
    }
}

void DataPath::drain_pending(Endpoint &ep) {
    while (ep.state == EpState::kConnected && ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        Status s = post_frag(ep, f);
        if (s.code() == Code::kResourceExhausted) {
            break; // a completion, returned credits or a path coming up calls us again
        }
        ep.pending_head_ = f->next;
        if (ep.pending_head_ == nullptr) {
            ep.pending_tail_ = nullptr;
        }
        if (!s) {
            complete_frag(f, to_opal(s));
        }
    }
    for (size_t i = 0; i < ep.paths_.size(); ++i) {
        maybe_send_credits(ep, i);
    }
}

void DataPath::maybe_send_credits(Endpoint &ep, size_t i) {
    Path &path = ep.paths_[i];
    if (path.state != PathState::kUp || !path.tx.credits.credit_message_due() ||
        inflight_ >= max_inflight_) {
        return;
    }
    // Pending data carries the credits only if it can go. When it waits for
    // credits itself - both ends filled their windows at once, as in a
    // bidirectional stream - a credit-only message (from the reserve) is what
    // unblocks the peer, whose data then brings our credits back.
    if (ep.pending_head_ != nullptr && path.tx.credits.available() > path.tx.credits.reserve()) {
        return;
    }
    Frag *f = dev_.frags().get();
    if (f == nullptr) {
        return;
    }
    f->endpoint = &ep;
    f->control = true;
    f->segments[0].seg_len = 0;
    f->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    if (!post_frag_on(ep, i, f)) {
        dev_.frags().put(f);
    }
}

Status DataPath::send(Endpoint *ep, mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag) {
    Frag *f = reinterpret_cast<Frag *>(des);
    f->tag = tag;
    f->endpoint = ep;
    OPAL_THREAD_LOCK(&lock_);
    Status s;
    if (ep->state == EpState::kFailed) {
        s = Status(Code::kUnavailable,
                   util::format("send to %s: the peer has failed", ep->label.c_str()));
    } else if (ep->dc()) {
        // No connection (data/dc_send.cc): posted now, or queued behind
        // what waits (a full DCI, a DCI being recovered).
        if (ep->pending_head_ != nullptr || dc_post(*ep, f).code() == Code::kResourceExhausted) {
            queue_pending(*ep, f);
        }
    } else if (ep->state == EpState::kConnected && ep->pending_head_ == nullptr) {
        s = post_frag(*ep, f);
        if (s.code() == Code::kResourceExhausted) {
            note_stall(*ep);
            queue_pending(*ep, f);
            s = Status::ok(); // accepted: it completes through des_cbfunc
        }
    } else {
        queue_pending(*ep, f);
        host_.start_connect(*ep);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return s;
}

Status DataPath::sendi(Endpoint *ep, opal_convertor_t *conv, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                       mca_btl_base_descriptor_t **descriptor) {
    size_t total = header_size + payload_size;
    if (descriptor != nullptr) {
        *descriptor = nullptr;
    }
    if (total > btl_->btl_max_send_size) {
        return retry_later();
    }
    OPAL_THREAD_LOCK(&lock_);
    const bool dc = ep->dc() && ep->state != EpState::kFailed;
    if (!dc && (ep->state != EpState::kConnected || ep->pending_head_ != nullptr)) {
        if (ep->state == EpState::kClosed) {
            host_.start_connect(*ep);
        }
        OPAL_THREAD_UNLOCK(&lock_);
        return retry_later(); // the PML falls back to alloc + send
    }
    // Check every resource before packing: once packed, the PML's convertor
    // has moved on and the data could not be packed again.
    bool can_post = dc ? ep->pending_head_ == nullptr && dc_can_post(*ep)
                       : inflight_ < max_inflight_ && pick_path(*ep, order, false) >= 0 &&
                             ep->next_seq_ - ep->completed_.next_expected() < cfg_.seq_span;
    Frag *f = can_post ? dev_.frags().get() : nullptr;
    if (f == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return retry_later();
    }
    uint8_t *p = f->buf + wire::kFragHeaderSize;
    std::memcpy(p, header, header_size);
    if (payload_size > 0) {
        iovec iov{p + header_size, payload_size};
        uint32_t n = 1;
        size_t max_data = payload_size;
        if (opal_convertor_pack(conv, &iov, &n, &max_data) < 0 || max_data != payload_size) {
            dev_.frags().put(f);
            OPAL_THREAD_UNLOCK(&lock_);
            return Status(Code::kInternal,
                          util::format("sendi to %s: the convertor packed %zu of %zu bytes",
                                       ep->label.c_str(), max_data, payload_size));
        }
    }
    f->endpoint = ep;
    f->tag = tag;
    f->segments[0].seg_len = total;
    f->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    f->base.order = order;
    Status s = dc ? dc_post(*ep, f) : post_frag(*ep, f);
    if (!s) {
        // Only a hard posting error gets here (resources were checked). The
        // data is packed: hand the descriptor back so the PML resets its
        // convertor and sends it through the normal path.
        if (descriptor != nullptr) {
            f->base.des_flags = flags;
            *descriptor = &f->base;
        } else {
            dev_.frags().put(f);
        }
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return s ? Status::ok() : retry_later();
}

} // namespace roce::btl
