// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The sender's half of a rendezvous after its header went out: the ACK
// (send FRAGs for [offset, offset + size), or nothing), the FIN of an RGET,
// FRAG scheduling over the endpoint's send btls (STREAM fragments for a
// streamed message, which needs no ACK), and control messages (ACK, FIN)
// that wait for a descriptor.
//
// FRAG scheduling follows ob1's counter idiom: send_schedule() increments
// sched_lock and only the thread that raised it from 0 schedules, looping
// while others asked meanwhile. Every entry point that may still use the
// request after a completion could have happened (the scheduler, each FRAG
// callback) holds a temporary reference, so the request outlives it.
#include "pml_roce_internal.h"

namespace roce::pml {
namespace {

void ctrl_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *,
               int status) {
    if (status != OPAL_SUCCESS) {
        fatal("a btl failed to deliver a control message (status %d)", status);
    }
}

// Sends one control message now; false when no descriptor is available.
bool ctrl_send_now(ompi_proc_t *proc, uint8_t tag, const void *hdr, std::size_t len) noexcept {
    mca_bml_base_endpoint_t *ep = mca_bml_base_get_endpoint(proc);
    if (ep == nullptr) {
        fatal("no btl reaches %s any more to send a %s", OPAL_NAME_PRINT(proc->super.proc_name),
              wire::kind_name(static_cast<uint8_t>(tag - wire::kTagBase)));
    }
    mca_bml_base_btl_t *bml = mca_bml_base_btl_array_get_next(&ep->btl_eager);
    mca_btl_base_module_t *btl = bml->btl;
    if (btl->btl_sendi != nullptr &&
        btl->btl_sendi(btl, bml->btl_endpoint, &g.empty_convertor, const_cast<void *>(hdr), len,
                       0, MCA_BTL_NO_ORDER,
                       MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, tag,
                       nullptr) == OPAL_SUCCESS) {
        return true;
    }
    mca_btl_base_descriptor_t *des =
        btl->btl_alloc(btl, bml->btl_endpoint, MCA_BTL_NO_ORDER, len,
                       MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (des == nullptr) {
        return false;
    }
    std::memcpy(des->des_segments[0].seg_addr.pval, hdr, len);
    des->des_cbfunc = ctrl_done;
    if (mca_bml_base_send(bml, des, tag) >= 0) {
        return true;
    }
    btl->btl_free(btl, des);
    return false;
}

void frag_sent(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *des,
               int status);

// Issues FRAGs until the range is covered, the in-flight limit is reached
// or the btls run out of descriptors (then the request waits in the pending
// queue). Called only by the thread owning sched_lock.
void schedule_once(SendRequest *r) noexcept {
    opal_convertor_t *conv = &r->base.req_base.req_convertor;
    const bool stream = (r->flags & kStream) != 0;
    const std::size_t hsize = stream ? sizeof(wire::StreamHdr) : sizeof(wire::FragHdr);
    while (r->sched_off < r->sched_end && r->inflight < g.pipeline_depth) {
        mca_bml_base_btl_t *bml = mca_bml_base_btl_array_get_next(&r->ep->btl_send);
        mca_btl_base_module_t *btl = bml->btl;
        uint64_t room = btl->btl_max_send_size > hsize ? btl->btl_max_send_size - hsize : 0;
        uint64_t left = r->sched_end - r->sched_off;
        size_t size = static_cast<size_t>(left < room ? left : room);
        if (size == 0) {
            fatal("btl %s has a max_send_size (%zu) too small for a FRAG",
                  btl->btl_component->btl_version.mca_component_name, btl->btl_max_send_size);
        }
        if (conv->bConverted != r->sched_off) {
            size_t pos = r->sched_off;
            opal_convertor_set_position(conv, &pos);
        }
        mca_btl_base_descriptor_t *des = nullptr;
        mca_bml_base_prepare_src(bml, conv, MCA_BTL_NO_ORDER, hsize, &size,
                                 MCA_BTL_DES_FLAGS_BTL_OWNERSHIP | MCA_BTL_DES_SEND_ALWAYS_CALLBACK |
                                     MCA_BTL_DES_FLAGS_SIGNAL,
                                 &des);
        if (des == nullptr || size == 0) {
            if (des != nullptr) {
                btl->btl_free(btl, des);
            }
            pend_send(r);
            return;
        }
        uint8_t tag;
        if (stream) {
            const mca_pml_base_request_t *b = &r->base.req_base;
            // want_stream() made sure the index fits a plain header.
            wire::StreamHdr h = wire::make_stream(
                static_cast<uint16_t>(header_ctx(r->pcomm, b->req_peer)), r->pcomm->my_rank,
                static_cast<uint32_t>(r->total), r->id, r->sched_off);
            std::memcpy(des->des_segments[0].seg_addr.pval, &h, sizeof h);
            tag = wire::tag_of(wire::Kind::kStream);
        } else {
            wire::FragHdr h = wire::make_frag(r->dst_req, r->sched_off);
            std::memcpy(des->des_segments[0].seg_addr.pval, &h, sizeof h);
            tag = wire::tag_of(wire::Kind::kFrag);
        }
        des->des_cbfunc = frag_sent;
        des->des_cbdata = r;
        add_fetch32(&r->inflight, 1);
        r->sched_off += size;
        if (mca_bml_base_send(bml, des, tag) < 0) {
            add_fetch32(&r->inflight, -1);
            r->sched_off -= size;
            btl->btl_free(btl, des);
            pend_send(r);
            return;
        }
    }
}

void frag_sent(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *des,
               int status) {
    auto *r = static_cast<SendRequest *>(des->des_cbdata);
    if (status != OPAL_SUCCESS) {
        fatal("btl %s failed to send a message fragment (status %d)",
              btl->btl_component->btl_version.mca_component_name, status);
    }
    add_fetch32(&r->refs, 1);
    // All FRAGs scheduled (sched_off was advanced before each send) and
    // this was the last one in flight: done. Exactly one callback sees it.
    if (add_fetch32(&r->inflight, -1) == 0 &&
        __atomic_load_n(&r->sched_off, __ATOMIC_ACQUIRE) == r->sched_end) {
        if (r->split != 0) {
            send_split_range_done(r); // one part of a split send (pml_roce_split.cc)
        } else {
            send_request_complete(r);
        }
    } else {
        send_schedule(r);
    }
    send_request_release(r);
}

// Claims the request an ACK or FIN names (rndv::AnswerTable): a copy of an
// answer already accepted is counted and dropped; ids never issued,
// requests not waiting for this answer and ranges outside the message are
// refused with a rate-limited error; otherwise the id is closed and the
// request returned.
SendRequest *claim(uint64_t id, const char *what, bool fin, uint64_t offset, uint64_t size,
                   bool split) noexcept {
    rndv::AnswerTable::Claim c;
    uint64_t total = 0;
    {
        Guard guard(&g.ids_lock);
        c = fin ? g.send_ids.claim_fin(id, size, split)
                : g.send_ids.claim_ack(id, offset, size, split);
        if (c.request != nullptr) {
            total = static_cast<SendRequest *>(c.request)->total;
        }
        if (c.outcome == rndv::Outcome::kAccepted && c.first_split) {
            // A split answer before the PUT: the put is owed all the same.
            add_fetch32(&static_cast<SendRequest *>(c.request)->parts, 1);
        }
    }
    switch (c.outcome) {
    case rndv::Outcome::kAccepted:
        return static_cast<SendRequest *>(c.request);
    case rndv::Outcome::kDuplicate:
        drop_duplicate(&g.counters.dup_answers, what, id, offset, size);
        return nullptr;
    case rndv::Outcome::kOutOfRange:
        if (should_log(&g.counters.bad_headers)) {
            report("refused message",
                   "error: refused a %s for request id 0x%016" PRIx64 ": it names bytes [%" PRIu64
                   ", %" PRIu64 ") of a %" PRIu64 "-byte message (%" PRIu64
                   " refused headers so far)",
                   what, id, fin ? 0 : offset, fin ? size : offset + size, total,
                   g.counters.bad_headers);
        }
        return nullptr;
    default:
        reject_id(what, id, c.outcome);
        return nullptr;
    }
}

void release_registration(SendRequest *r) noexcept {
    if (r->reg != nullptr) {
        mca_btl_base_module_t *btl = r->rdma_bml->btl;
        btl->btl_deregister_mem(btl, r->reg);
        r->reg = nullptr;
    }
}

} // namespace

void send_schedule(SendRequest *r) noexcept {
    if (add_fetch32(&r->sched_lock, 1) != 1) {
        return; // the owner will loop once more
    }
    add_fetch32(&r->refs, 1);
    do {
        schedule_once(r);
    } while (add_fetch32(&r->sched_lock, -1) > 0);
    send_request_release(r);
}

void send_ctrl(ompi_proc_t *proc, wire::Kind kind, const void *hdr, std::size_t len) noexcept {
    uint8_t tag = wire::tag_of(kind);
    if (ctrl_send_now(proc, tag, hdr, len)) {
        return;
    }
    auto *c = reinterpret_cast<Ctrl *>(opal_free_list_get(&g.ctrls));
    if (c == nullptr) {
        fatal("out of memory for a pending %s", wire::kind_name(static_cast<uint8_t>(kind)));
    }
    c->proc = proc;
    c->tag = tag;
    c->len = static_cast<uint16_t>(len);
    std::memcpy(&c->hdr, hdr, len);
    pending_add(&g.pending_ctrl, &c->super.super);
}

bool ctrl_retry(Ctrl *c) noexcept {
    if (!ctrl_send_now(c->proc, c->tag, &c->hdr, c->len)) {
        return false;
    }
    opal_free_list_return(&g.ctrls, &c->super);
    return true;
}

} // namespace roce::pml

using namespace roce::pml;

extern "C" {

void mca_pml_roce_cb_ack(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des) {
    wire::AckHdr h;
    Pieces rest;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1) {
        const mca_btl_base_segment_t &s = des->des_segments[0];
        if (pieces_of(des, s.seg_len < sizeof h ? s.seg_len : sizeof h, rest)) {
            d = wire::decode_ack(s.seg_addr.pval, s.seg_len, rest.total, h);
        }
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    const bool split = h.common.flags == wire::kAckSplit;
    SendRequest *r = claim(h.src_req, "ACK", false, h.offset, h.size, split);
    if (r == nullptr) {
        return;
    }
    if (static_cast<SendProto>(r->proto) == SendProto::kWaitFin) {
        ++g.counters.rget_fallbacks; // the receiver could not get the data
    }
    if (split) {
        // The rest of the receiver's own part, next to the put (which may
        // still use the registration): the answer part ends with it.
        send_split_range(r, h.dst_req, h.offset, h.offset + h.size);
        return;
    }
    release_registration(r);
    if (h.size == 0) {
        send_request_complete(r);
        return;
    }
    ++g.counters.pipeline;
    r->dst_req = h.dst_req;
    r->sched_off = h.offset;
    r->sched_end = h.offset + h.size;
    ensure_convertor(r);
    r->proto = static_cast<uint8_t>(SendProto::kPipeline);
    send_schedule(r);
}

void mca_pml_roce_cb_fin(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des) {
    wire::FinHdr h;
    Pieces rest;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1) {
        const mca_btl_base_segment_t &s = des->des_segments[0];
        if (pieces_of(des, s.seg_len < sizeof h ? s.seg_len : sizeof h, rest)) {
            d = wire::decode_fin(s.seg_addr.pval, s.seg_len, rest.total, h);
        }
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    const bool split = h.common.flags == wire::kFinSplit;
    SendRequest *r = claim(h.src_req, "FIN", true, 0, h.size, split);
    if (r == nullptr) {
        return;
    }
    if (split) {
        send_part_done(r); // the put (pml_roce_split.cc) is the other part
        return;
    }
    release_registration(r);
    send_request_complete(r);
}

} // extern "C"
