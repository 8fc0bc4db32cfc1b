// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The send side of the data path: descriptors, packing, posting with
// credits, and the queue of sends waiting for a connection or credits.
#include "btl_roce_module.h"

#include <sys/uio.h>

#include <cstring>

#include "opal/datatype/opal_convertor.h"

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

namespace {
// Contiguous data at least this large is sent from the user's buffer
// (registered through the cache) instead of being copied.
constexpr size_t kInplaceMin = 4096;
} // namespace

mca_btl_base_descriptor_t *Module::alloc(Endpoint *ep, uint8_t order, size_t size,
                                         uint32_t flags) {
    if (size > c_.super.btl_max_send_size) {
        return nullptr;
    }
    OPAL_THREAD_LOCK(&lock_);
    Frag *f = dev_->frags().get();
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

void Module::release_frag(Frag *f) {
    if (f->inplace_reg != nullptr) {
        (void)deregister_mem(static_cast<mca_btl_base_registration_handle_t *>(f->inplace_reg));
        f->inplace_reg = nullptr;
    }
    dev_->frags().put(f);
}

int Module::free_des(mca_btl_base_descriptor_t *des) {
    OPAL_THREAD_LOCK(&lock_);
    release_frag(reinterpret_cast<Frag *>(des));
    OPAL_THREAD_UNLOCK(&lock_);
    return OPAL_SUCCESS;
}

mca_btl_base_descriptor_t *Module::prepare_src(Endpoint *ep, opal_convertor_t *conv,
                                               uint8_t order, size_t reserve, size_t *size,
                                               uint32_t flags) {
    size_t room = c_.super.btl_max_send_size;
    if (reserve > room) {
        return nullptr;
    }
    size_t max_data = *size;
    if (max_data > room - reserve) {
        max_data = room - reserve;
    }
    OPAL_THREAD_LOCK(&lock_);
    Frag *f = dev_->frags().get();
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
        auto *h = register_mem(cur, max_data, MCA_BTL_REG_FLAG_LOCAL_WRITE);
        if (h != nullptr) {
            iovec iov{nullptr, max_data};
            uint32_t n = 1;
            if (opal_convertor_pack(conv, &iov, &n, &max_data) < 0) {
                (void)deregister_mem(h);
                free_des(&f->base);
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
        free_des(&f->base);
        return nullptr;
    }
    f->segments[0].seg_len = reserve + max_data;
    *size = max_data;
    return &f->base;
}

void Module::queue_pending(Endpoint &ep, Frag *f) {
    f->next = nullptr;
    if (ep.pending_tail_ != nullptr) {
        ep.pending_tail_->next = f;
    } else {
        ep.pending_head_ = f;
    }
    ep.pending_tail_ = f;
}

// Posts one frag (header + segments) on ep's QP. Needs a data credit (or the
// control reserve for credit-only frags), a send-queue slot and CQ room;
// returns OPAL_ERR_OUT_OF_RESOURCE without side effects when one is missing.
int Module::post_frag(Endpoint &ep, Frag *f) {
    bool control = f->tag == 0 && f->segments[0].seg_len == 0 && !f->inplace;
    if (ep.sq_free_ == 0 || inflight_ >= max_inflight_) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (!(control ? ep.credits_.take_for_control() : ep.credits_.take_for_data())) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    wire::FragHeader h;
    h.tag = f->tag;
    h.type = control ? wire::FragType::kCredit : wire::FragType::kData;
    h.credits = ep.credits_.take_owed();
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
    if (nsge == 1 && sge[0].length <= dev_->max_inline()) {
        wr.send_flags |= IBV_SEND_INLINE;
    }
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(dev_->api().post_send(ep.qp_->get(), &wr, &bad), errno);
    if (rc != 0) {
        ep.credits_.untake();
        ep.credits_.owe(h.credits);
        log_.write(LogLevel::kWarn, util::Status::from_errno(rc, "ibv_post_send(RC) to " +
                                                                    ep.label())
                                        .message());
        return OPAL_ERROR;
    }
    --ep.sq_free_;
    ++inflight_;
    return OPAL_SUCCESS;
}

void Module::drain_pending(Endpoint &ep) {
    while (ep.state_ == EpState::kConnected && ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        int rc = post_frag(ep, f);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE) {
            break; // a completion or returned credits will call us again
        }
        ep.pending_head_ = f->next;
        if (ep.pending_head_ == nullptr) {
            ep.pending_tail_ = nullptr;
        }
        if (rc != OPAL_SUCCESS) {
            complete_frag(f, rc);
        }
    }
    maybe_send_credits(ep);
}

void Module::maybe_send_credits(Endpoint &ep) {
    if (ep.state_ != EpState::kConnected || !ep.credits_.credit_message_due() ||
        ep.pending_head_ != nullptr) {
        return; // pending data will carry the credits
    }
    Frag *f = dev_->frags().get();
    if (f == nullptr) {
        return;
    }
    f->endpoint = &ep;
    f->tag = 0;
    f->segments[0].seg_len = 0;
    f->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    if (post_frag(ep, f) != OPAL_SUCCESS) {
        dev_->frags().put(f);
    }
}

int Module::send(Endpoint *ep, mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag) {
    Frag *f = reinterpret_cast<Frag *>(des);
    f->tag = tag;
    f->endpoint = ep;
    OPAL_THREAD_LOCK(&lock_);
    int rc = OPAL_SUCCESS;
    if (ep->state_ == EpState::kFailed) {
        rc = OPAL_ERR_UNREACH;
    } else if (ep->state_ == EpState::kConnected && ep->pending_head_ == nullptr) {
        rc = post_frag(*ep, f);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE) {
            queue_pending(*ep, f);
            rc = OPAL_SUCCESS;
        }
    } else {
        queue_pending(*ep, f);
        start_connect(*ep);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return rc;
}

int Module::sendi(Endpoint *ep, opal_convertor_t *conv, void *header, size_t header_size,
                  size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                  mca_btl_base_descriptor_t **descriptor) {
    size_t total = header_size + payload_size;
    if (descriptor != nullptr) {
        *descriptor = nullptr;
    }
    if (total > c_.super.btl_max_send_size) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    OPAL_THREAD_LOCK(&lock_);
    if (ep->state_ != EpState::kConnected || ep->pending_head_ != nullptr) {
        if (ep->state_ == EpState::kClosed) {
            start_connect(*ep);
        }
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE; // the PML falls back to alloc + send
    }
    // Check every resource before packing: once packed, the PML's convertor
    // has moved on and the data could not be packed again.
    bool can_post = ep->sq_free_ > 0 && inflight_ < max_inflight_ &&
                    ep->credits_.available() > ep->credits_.reserve();
    Frag *f = can_post ? dev_->frags().get() : nullptr;
    if (f == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    uint8_t *p = f->buf + wire::kFragHeaderSize;
    std::memcpy(p, header, header_size);
    if (payload_size > 0) {
        iovec iov{p + header_size, payload_size};
        uint32_t n = 1;
        size_t max_data = payload_size;
        if (opal_convertor_pack(conv, &iov, &n, &max_data) < 0 || max_data != payload_size) {
            dev_->frags().put(f);
            OPAL_THREAD_UNLOCK(&lock_);
            return OPAL_ERROR;
        }
    }
    f->endpoint = ep;
    f->tag = tag;
    f->segments[0].seg_len = total;
    f->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    f->base.order = order;
    int rc = post_frag(*ep, f);
    if (rc != OPAL_SUCCESS) {
        // Only a hard posting error gets here (resources were checked). The
        // data is packed: hand the descriptor back so the PML resets its
        // convertor and sends it through the normal path.
        if (descriptor != nullptr) {
            f->base.des_flags = flags;
            *descriptor = &f->base;
        } else {
            dev_->frags().put(f);
        }
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return rc == OPAL_SUCCESS ? OPAL_SUCCESS : OPAL_ERR_OUT_OF_RESOURCE;
}

} // namespace roce::btl
