// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The send side: MPI_Send/Isend/Send_init and the choice of protocol.
//   eager     <= min(pml_roce_eager_limit, btl eager limit) - 16 bytes, not
//             synchronous: one MATCH fragment; through btl_sendi from a stack
//             buffer up to kInlineMax bytes (no request at all), else copied
//             into a btl descriptor. The send is complete once copied.
//   stream    up to pml_roce_stream_limit bytes over a network btl, not
//             synchronous: RNDV (flag kRndvStream) with the first bytes, then
//             the rest in STREAM fragments at once; no answer. The send is
//             complete once the fragments are out (pml_roce_pipeline.cc).
//   rndv      synchronous sends that fit in one fragment, and the fallback for
//             large ones: RNDV with the first bytes; the receiver ACKs after
//             the match, asking for the rest in FRAGs (pml_roce_pipeline.cc).
//   rget      large contiguous data over a btl with RDMA get: the buffer is
//             registered (if the btl needs it) and its address and handle go
//             in an RGET; the receiver gets the data and sends FIN.
// The sequence number is taken once per message, before the protocol is
// chosen; messages may leave in another order (a header waiting for a
// descriptor), which the receiver's matcher undoes.
#include "pml_roce_internal.h"

#include "ompi/mca/pml/base/pml_base_bsend.h"
#include "opal/runtime/opal_progress.h"

namespace roce::pml {

void ensure_convertor(SendRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    if (r->flags & kConvReady) {
        return;
    }
    opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &b->req_datatype->super,
                                             b->req_count, b->req_addr, 0, &b->req_convertor);
    r->flags |= kConvReady;
}

namespace {

void noop_completion(mca_btl_base_module_t *, mca_btl_base_endpoint_t *,
                     mca_btl_base_descriptor_t *, int) {}

enum class Eager { kSent, kTooBig, kBusy };

inline uint16_t next_seq(PmlComm *pc, int dst) noexcept {
    uint32_t *p = &pc->send_seq[dst];
    if (!must_lock()) {
        return static_cast<uint16_t>((*p)++);
    }
    return static_cast<uint16_t>(__atomic_fetch_add(p, 1, __ATOMIC_RELAXED));
}

// Bytes of EXT header before a match-type header carrying `ctx`
// (header_ctx()); always 0 under 4.1.
inline std::size_t ext_bytes(uint32_t ctx) noexcept {
    return roce::compat::kExtendedIds && OPAL_UNLIKELY(ctx == kNeedExt) ? sizeof(wire::ExtHdr) : 0;
}

// The btl tag of a match-type message of `kind`, behind `ext` EXT bytes.
inline uint8_t match_tag(wire::Kind kind, std::size_t ext) noexcept {
    return wire::tag_of(ext != 0 ? wire::Kind::kExt : kind);
}

// Eager send of contiguous bytes to rank `dst` without a request; the
// caller made sure its header_ctx() is not kNeedExt (those go through a
// request).
inline Eager eager_contig(PmlComm *pc, mca_bml_base_endpoint_t *ep, const char *data,
                          uint64_t bytes, int dst, int tag, uint16_t seq) noexcept {
    mca_bml_base_btl_t *bml = mca_bml_base_btl_array_get_next(&ep->btl_eager);
    mca_btl_base_module_t *btl = bml->btl;
    if (bytes > eager_room(btl, sizeof(wire::MatchHdr))) {
        return Eager::kTooBig;
    }
    const wire::MatchHdr h =
        wire::make_match(static_cast<uint16_t>(header_ctx(pc, dst)), seq, pc->my_rank, tag);
    const std::size_t len = sizeof h + bytes;
    if (bytes <= kInlineMax && btl->btl_sendi != nullptr) {
        alignas(8) uint8_t buf[sizeof(wire::MatchHdr) + kInlineMax];
        std::memcpy(buf, &h, sizeof h);
        copy_bytes(buf + sizeof h, data, bytes);
        int rc = btl->btl_sendi(btl, bml->btl_endpoint, &g.empty_convertor, buf, len, 0,
                                MCA_BTL_NO_ORDER,
                                MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP,
                                wire::tag_of(wire::Kind::kMatch), nullptr);
        if (OPAL_LIKELY(rc == OPAL_SUCCESS)) {
            ++g.counters.eager_inline;
            return Eager::kSent;
        }
    }
    mca_btl_base_descriptor_t *des =
        btl->btl_alloc(btl, bml->btl_endpoint, MCA_BTL_NO_ORDER, len,
                       MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (OPAL_UNLIKELY(des == nullptr)) {
        return Eager::kBusy;
    }
    auto *p = static_cast<uint8_t *>(des->des_segments[0].seg_addr.pval);
    std::memcpy(p, &h, sizeof h);
    copy_bytes(p + sizeof h, data, bytes);
    des->des_cbfunc = noop_completion;
    if (OPAL_LIKELY(mca_bml_base_send(bml, des, wire::tag_of(wire::Kind::kMatch)) >= 0)) {
        ++g.counters.eager_copy;
        return Eager::kSent;
    }
    btl->btl_free(btl, des);
    return Eager::kBusy;
}

// Packs `n` bytes from offset `off` of the message into dst.
void pack_at(SendRequest *r, uint64_t off, uint8_t *dst, std::size_t n) noexcept {
    if (n == 0) {
        return;
    }
    if (r->flags & kContig) {
        std::memcpy(dst, r->contig + off, n);
        return;
    }
    ensure_convertor(r);
    opal_convertor_t *conv = &r->base.req_base.req_convertor;
    if (conv->bConverted != off) {
        size_t pos = off;
        opal_convertor_set_position(conv, &pos);
    }
    iovec iov{dst, n};
    uint32_t cnt = 1;
    size_t max = n;
    opal_convertor_pack(conv, &iov, &cnt, &max);
}

// Eager send for a request (non-contiguous data, a retry, or a receiver
// whose index needs an EXT header).
Eager eager_req(SendRequest *r) noexcept {
    mca_bml_base_btl_t *bml = mca_bml_base_btl_array_get_next(&r->ep->btl_eager);
    mca_btl_base_module_t *btl = bml->btl;
    mca_pml_base_request_t *b = &r->base.req_base;
    const uint32_t ctx = header_ctx(r->pcomm, b->req_peer);
    const std::size_t ext = ext_bytes(ctx);
    if (r->total > eager_room(btl, ext + sizeof(wire::MatchHdr))) {
        return Eager::kTooBig;
    }
    const wire::MatchHdr h = wire::make_match(ext != 0 ? 0 : static_cast<uint16_t>(ctx), r->seq,
                                              r->pcomm->my_rank, b->req_tag);
    mca_btl_base_descriptor_t *des =
        btl->btl_alloc(btl, bml->btl_endpoint, MCA_BTL_NO_ORDER, ext + sizeof h + r->total,
                       MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (des == nullptr) {
        return Eager::kBusy;
    }
    auto *p = static_cast<uint8_t *>(des->des_segments[0].seg_addr.pval);
    if (ext != 0) {
        write_ext(r->pcomm, b->req_peer, wire::Kind::kMatch, p);
    }
    std::memcpy(p + ext, &h, sizeof h);
    pack_at(r, 0, p + ext + sizeof h, r->total);
    des->des_cbfunc = noop_completion;
    if (mca_bml_base_send(bml, des, match_tag(wire::Kind::kMatch, ext)) >= 0) {
        return Eager::kSent;
    }
    btl->btl_free(btl, des);
    return Eager::kBusy;
}

// A btl of the endpoint able to serve an RGET: RDMA get, sends (the RGET
// header travels over it so the receiver knows which btl the handle is for),
// a handle that fits, and room for header + handle in one fragment.
mca_bml_base_btl_t *rget_btl(SendRequest *r) noexcept {
    mca_bml_base_btl_array_t *arr = &r->ep->btl_rdma;
    // Room for an EXT header in front, should the receiver's index need one.
    const std::size_t ext = roce::compat::kExtendedIds && !r->pcomm->plain ? sizeof(wire::ExtHdr) : 0;
    for (size_t i = 0; i < arr->arr_size; ++i) {
        mca_bml_base_btl_t *bml = &arr->bml_btls[i];
        mca_btl_base_module_t *btl = bml->btl;
        uint32_t need = MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_SEND;
        if ((btl->btl_flags & need) != need || btl->btl_get == nullptr ||
            btl->btl_registration_handle_size > wire::kMaxHandle ||
            ext + sizeof(wire::RgetHdr) + btl->btl_registration_handle_size > btl->btl_eager_limit) {
            continue;
        }
        return bml;
    }
    return nullptr;
}

// Registers the send buffer for remote reads; false (logged at verbose 10)
// when the btl refuses, e.g. under a low memlock limit: the caller then uses
// the send pipeline, which needs no registration.
bool register_for_rget(SendRequest *r, mca_bml_base_btl_t *bml) noexcept {
    mca_btl_base_module_t *btl = bml->btl;
    r->reg = nullptr;
    if (btl->btl_register_mem == nullptr) {
        return g.fail_registration & 1 ? false : true;
    }
    if (!(g.fail_registration & 1)) {
        r->reg = btl->btl_register_mem(btl, bml->btl_endpoint, const_cast<char *>(r->contig),
                                       r->total, MCA_BTL_REG_FLAG_REMOTE_READ);
    }
    if (r->reg == nullptr) {
        ++g.counters.reg_failures;
        opal_output_verbose(10, output(),
                            "pml roce [%s]: registering %" PRIu64 " bytes with btl %s failed; "
                            "sending them through the send pipeline instead",
                            host_name(), r->total, btl->btl_component->btl_version.mca_component_name);
        return false;
    }
    return true;
}

// Sends the RNDV or RGET header; false when no descriptor was available
// (the caller queues the request). Must not touch r after a successful
// send: the answer can complete it before btl_send returns.
bool send_header(SendRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    PmlComm *pc = r->pcomm;
    const uint32_t ctx = header_ctx(pc, b->req_peer);
    const std::size_t ext = ext_bytes(ctx);
    const auto hctx = static_cast<uint16_t>(ext != 0 ? 0 : ctx);
    if (r->rdma_bml != nullptr) {
        mca_bml_base_btl_t *bml = r->rdma_bml;
        mca_btl_base_module_t *btl = bml->btl;
        uint16_t hlen = r->reg != nullptr ? static_cast<uint16_t>(btl->btl_registration_handle_size) : 0;
        mca_btl_base_descriptor_t *des =
            btl->btl_alloc(btl, bml->btl_endpoint, MCA_BTL_NO_ORDER, ext + sizeof(wire::RgetHdr) + hlen,
                           MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        if (des == nullptr) {
            return false;
        }
        wire::RgetHdr h = wire::make_rget(hctx, r->seq, pc->my_rank, b->req_tag, r->total, r->id,
                                          reinterpret_cast<uint64_t>(r->contig), hlen);
        auto *p = static_cast<uint8_t *>(des->des_segments[0].seg_addr.pval);
        if (ext != 0) {
            write_ext(pc, b->req_peer, wire::Kind::kRget, p);
            p += ext;
        }
        std::memcpy(p, &h, sizeof h);
        if (hlen > 0) {
            std::memcpy(p + sizeof h, r->reg, hlen);
        }
        des->des_cbfunc = noop_completion;
        r->proto = static_cast<uint8_t>(SendProto::kWaitFin);
        // Counted before the send: its answer may complete r before
        // btl_send returns.
        r->rget_out = true;
        add_fetch32(&g.rget_out, 1);
        if (mca_bml_base_send(bml, des, match_tag(wire::Kind::kRget, ext)) >= 0) {
            return true;
        }
        btl->btl_free(btl, des);
        r->rget_out = false;
        add_fetch32(&g.rget_out, -1);
        r->proto = static_cast<uint8_t>(SendProto::kHeaderPending);
        return false;
    }
    mca_bml_base_btl_t *bml = mca_bml_base_btl_array_get_next(&r->ep->btl_eager);
    mca_btl_base_module_t *btl = bml->btl;
    uint64_t room = eager_room(btl, ext + sizeof(wire::RndvHdr));
    std::size_t inl = static_cast<std::size_t>(r->total < room ? r->total : room);
    const bool stream = (r->flags & kStream) != 0;
    if (OPAL_UNLIKELY(stream && inl == 0)) {
        fatal("btl %s has an eager limit (%zu) too small for a RNDV header with data",
              btl->btl_component->btl_version.mca_component_name, btl->btl_eager_limit);
    }
    mca_btl_base_descriptor_t *des =
        btl->btl_alloc(btl, bml->btl_endpoint, MCA_BTL_NO_ORDER, ext + sizeof(wire::RndvHdr) + inl,
                       MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (des == nullptr) {
        return false;
    }
    wire::RndvHdr h = stream ? wire::make_rndv_stream(hctx, r->seq, pc->my_rank, b->req_tag,
                                                      r->total, r->id)
                             : wire::make_rndv(hctx, r->seq, pc->my_rank, b->req_tag, r->total, r->id);
    auto *p = static_cast<uint8_t *>(des->des_segments[0].seg_addr.pval);
    if (ext != 0) {
        write_ext(pc, b->req_peer, wire::Kind::kRndv, p);
        p += ext;
    }
    std::memcpy(p, &h, sizeof h);
    pack_at(r, 0, p + sizeof h, inl);
    des->des_cbfunc = noop_completion;
    if (stream) {
        r->sched_off = inl;
        r->sched_end = r->total;
    }
    r->proto = static_cast<uint8_t>(stream ? SendProto::kPipeline : SendProto::kWaitAck);
    if (mca_bml_base_send(bml, des, match_tag(wire::Kind::kRndv, ext)) < 0) {
        btl->btl_free(btl, des);
        r->proto = static_cast<uint8_t>(SendProto::kHeaderPending);
        return false;
    }
    if (stream) {
        // No answer will come: the request is still ours, and the rest
        // follows at once (the receiver keeps what arrives before the
        // header matched).
        if (r->sched_off == r->sched_end) {
            send_request_complete(r);
        } else {
            ensure_convertor(r);
            send_schedule(r);
        }
    }
    return true;
}

// Copies the data into the MPI_Buffer_attach buffer and completes the
// request for MPI (the protocol then runs from the copy). When the buffer
// is full but buffered sends of ours are still in flight, their completion
// will free space (a FIN or the last FRAG may simply not have been
// processed yet): progress and try again. With nothing in flight the
// buffer is too small for this message, which is the user's error
// (MPI_ERR_BUFFER).
int bsend_copy(SendRequest *r) noexcept {
    ensure_convertor(r);
    mca_pml_base_request_t *b = &r->base.req_base;
    ompi_datatype_t *dt = b->req_datatype;
    size_t count = b->req_count;
    const void *user = r->base.req_addr;
    r->base.req_bytes_packed = r->total;
    int rc;
    for (;;) {
        rc = mca_pml_base_bsend_request_start(&b->req_ompi);
        if (rc != OMPI_ERR_BUFFER) {
            break;
        }
        // The failed start cleared the address and marked the request
        // pml-complete; undo both before the next attempt.
        r->base.req_addr = user;
        b->req_pml_complete = false;
        if (__atomic_load_n(&g.bsend_inflight, __ATOMIC_ACQUIRE) == 0) {
            break;
        }
        opal_progress();
    }
    if (rc != OMPI_SUCCESS) {
        r->base.req_addr = user;
        return rc;
    }
    // The base switched the request to the packed copy; keep the user's
    // datatype in the request so that the reference taken at isend time is
    // the one released (the convertor already describes the copy).
    b->req_datatype = dt;
    b->req_count = count;
    __atomic_add_fetch(&g.bsend_inflight, 1, __ATOMIC_ACQ_REL);
    r->flags |= kBsendBuf | kContig;
    r->contig = static_cast<const char *>(r->base.req_addr);
    b->req_ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    ompi_request_complete(&b->req_ompi, true);
    return OMPI_SUCCESS;
}

void pend(SendRequest *r, SendProto why) noexcept {
    r->proto = static_cast<uint8_t>(why);
    pend_send(r);
}

// True when a rendezvous message streams (pml_roce_stream_limit): not
// synchronous (that needs the receiver's answer), small enough, to a
// receiver whose index goes in a plain header, over a network btl. Shared
// memory btls (exclusivity MCA_BTL_EXCLUSIVITY_HIGH - 1 and above: self,
// vader, sm) move it with one single-copy get instead.
bool want_stream(SendRequest *r) noexcept {
    if (r->total > g.stream_limit || r->base.req_send_mode == MCA_PML_BASE_SEND_SYNCHRONOUS ||
        header_ctx(r->pcomm, r->base.req_base.req_peer) == kNeedExt) {
        return false;
    }
    const mca_btl_base_module_t *eb = mca_bml_base_btl_array_get_index(&r->ep->btl_eager, 0)->btl;
    return eb->btl_exclusivity < MCA_BTL_EXCLUSIVITY_HIGH - 1;
}

// Rendezvous: streamed when small (want_stream), else RGET when possible,
// else RNDV (+ ACK + FRAGs).
int start_rendezvous(SendRequest *r) noexcept {
    r->rdma_bml = nullptr;
    r->reg = nullptr;
    r->split = 0;
    r->parts = 1; // a split RGET: the receiver's answer (pml_roce_split.cc)
    r->pipe_busy = false;
    r->next_end = 0;
    if (want_stream(r)) {
        r->flags |= kStream;
        r->id = add_fetch64(&g.stream_next, 1);
        ++g.counters.streams;
        if (!send_header(r)) {
            pend(r, SendProto::kHeaderPending);
        }
        return OMPI_SUCCESS;
    }
    bool want_rget = (r->flags & kContig) && g.use_rdma && r->total > 0 &&
                     r->total >= g.rget_limit;
    if (want_rget && r->base.req_send_mode == MCA_PML_BASE_SEND_SYNCHRONOUS) {
        // A synchronous send that fits in one RNDV fragment goes as one.
        mca_btl_base_module_t *eb = mca_bml_base_btl_array_get_index(&r->ep->btl_eager, 0)->btl;
        want_rget = r->total > eager_room(eb, sizeof(wire::RndvHdr));
    }
    if (want_rget) {
        mca_bml_base_btl_t *bml = rget_btl(r);
        if (bml != nullptr && register_for_rget(r, bml)) {
            r->rdma_bml = bml;
        }
    }
    {
        Guard guard(&g.ids_lock);
        r->id = g.send_ids.open(r);
    }
    if (r->id == 0) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (r->rdma_bml != nullptr) {
        ++g.counters.rget;
    } else {
        ++g.counters.rndv;
    }
    if (!send_header(r)) {
        pend(r, SendProto::kHeaderPending);
    }
    return OMPI_SUCCESS;
}

} // namespace

int send_start(SendRequest *r) noexcept {
    const mca_pml_base_send_mode_t mode = r->base.req_send_mode;
    r->proto = static_cast<uint8_t>(SendProto::kIdle);
    r->flags &= static_cast<uint8_t>(~kStream); // a persistent send chooses again
    r->sched_lock = 0;
    r->inflight = 0;
    r->frag_done = 0;
    if (mode != MCA_PML_BASE_SEND_SYNCHRONOUS) {
        Eager e = eager_req(r);
        if (e == Eager::kSent) {
            ++g.counters.eager_copy;
            send_request_complete(r);
            return OMPI_SUCCESS;
        }
        if (e == Eager::kBusy) {
            if (mode == MCA_PML_BASE_SEND_BUFFERED && r->total > 0) {
                int rc = bsend_copy(r);
                if (rc != OMPI_SUCCESS) {
                    return rc;
                }
            }
            pend(r, SendProto::kEagerPending);
            return OMPI_SUCCESS;
        }
    }
    if (mode == MCA_PML_BASE_SEND_BUFFERED && r->total > 0) {
        int rc = bsend_copy(r);
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return start_rendezvous(r);
}

void send_retry(SendRequest *r) noexcept {
    switch (static_cast<SendProto>(r->proto)) {
    case SendProto::kEagerPending:
        if (eager_req(r) == Eager::kSent) {
            send_request_complete(r);
        } else {
            pend(r, SendProto::kEagerPending);
        }
        break;
    case SendProto::kHeaderPending:
        if (!send_header(r)) {
            pend(r, SendProto::kHeaderPending);
        }
        break;
    case SendProto::kPipeline:
        send_schedule(r);
        break;
    case SendProto::kWaitFin:
        if (r->split != 0) {
            send_schedule(r); // a split send's FRAG range (pml_roce_split.cc)
        }
        break;
    default:
        break;
    }
}

} // namespace roce::pml

using namespace roce::pml;

namespace {

// The peer has no btl: say which peer and which btls were tried, once per
// peer, and let the MPI error handler (by default: abort) take over.
int unreachable(ompi_communicator_t *comm, int dst, ompi_proc_t *proc) noexcept;

// Fills a request for a send to `dst`; the caller sets refs.
inline SendRequest *make_send(const void *buf, size_t count, ompi_datatype_t *dt, int dst,
                              int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                              mca_bml_base_endpoint_t *ep, uint8_t flags, bool persistent) noexcept {
    SendRequest *r = send_request_alloc();
    if (OPAL_UNLIKELY(r == nullptr)) {
        return nullptr;
    }
    mca_pml_base_request_t *b = &r->base.req_base;
    OMPI_REQUEST_INIT(&b->req_ompi, persistent);
    b->req_ompi.req_mpi_object.comm = comm;
    b->req_ompi.req_status._cancelled = 0;
    b->req_ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    b->req_addr = const_cast<void *>(buf);
    b->req_count = count;
    b->req_datatype = dt;
    b->req_peer = dst;
    b->req_tag = tag;
    b->req_comm = comm;
    b->req_proc = nullptr;
    b->req_pml_complete = persistent;
    b->req_free_called = false;
    r->base.req_addr = buf;
    r->base.req_send_mode = mode;
    r->base.req_bytes_packed = 0;
    if (!(flags & kBlocking)) {
        flags |= retain_refs(comm, dt);
    }
    r->pcomm = pml_comm(comm);
    r->ep = ep;
    r->id = 0;
    r->reg = nullptr;
    r->rdma_bml = nullptr;
    r->split = 0;
    r->rget_out = false;
    r->proto = static_cast<uint8_t>(SendProto::kIdle);
    const char *start;
    if (layout_of(dt, count, buf, &start, &r->total)) {
        flags |= kContig;
        r->contig = start;
    }
    r->flags = flags;
    return r;
}

// The fast path of isend and send: a contiguous, non-synchronous message the
// btl takes at once (inline or in one eager fragment), to a receiver whose
// index fits a MATCH header. True when it was sent; then no request is
// needed.
inline bool send_eager_now(PmlComm *pc, mca_bml_base_endpoint_t *ep, const void *buf,
                           size_t count, ompi_datatype_t *dt, int dst, int tag,
                           mca_pml_base_send_mode_t mode, uint16_t seq) noexcept {
    const char *start;
    uint64_t bytes;
    if (roce::compat::kExtendedIds && OPAL_UNLIKELY(header_ctx(pc, dst) == kNeedExt)) {
        return false;
    }
    return OPAL_LIKELY(layout_of(dt, count, buf, &start, &bytes) &&
                       mode != MCA_PML_BASE_SEND_SYNCHRONOUS) &&
           OPAL_LIKELY(eager_contig(pc, ep, start, bytes, dst, tag, seq) == Eager::kSent);
}

inline void activate(SendRequest *r) noexcept {
    ompi_request_t *o = &r->base.req_base.req_ompi;
    o->req_complete = REQUEST_PENDING;
    o->req_state = OMPI_REQUEST_ACTIVE;
    o->req_status.MPI_ERROR = MPI_SUCCESS;
    o->req_status._cancelled = 0;
    r->base.req_base.req_pml_complete = false;
}

} // namespace

extern "C" {

int mca_pml_roce_isend_init(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                            mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                            ompi_request_t **request) noexcept {
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, dst);
    mca_bml_base_endpoint_t *ep = mca_bml_base_get_endpoint(proc);
    if (OPAL_UNLIKELY(ep == nullptr)) {
        return unreachable(comm, dst, proc);
    }
    SendRequest *r = make_send(buf, count, dt, dst, tag, mode, comm, ep, kPersistent, true);
    if (r == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->refs = 1; // the user's; each start adds the pml's
    *request = &r->base.req_base.req_ompi;
    return OMPI_SUCCESS;
}

int mca_pml_roce_isend(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                       mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                       ompi_request_t **request) noexcept {
    PmlComm *pc = pml_comm(comm);
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, dst);
    mca_bml_base_endpoint_t *ep = mca_bml_base_get_endpoint(proc);
    if (OPAL_UNLIKELY(ep == nullptr)) {
        return unreachable(comm, dst, proc);
    }
    uint16_t seq = next_seq(pc, dst);
    if (send_eager_now(pc, ep, buf, count, dt, dst, tag, mode, seq)) {
        // Nothing left to do: MPI allows the empty request here (only a
        // send's cancelled flag is defined, and it cannot be set now).
        *request = &ompi_request_empty;
        return OMPI_SUCCESS;
    }
    SendRequest *r = make_send(buf, count, dt, dst, tag, mode, comm, ep, 0, false);
    if (OPAL_UNLIKELY(r == nullptr)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->refs = 2; // the user's and the pml's
    r->seq = seq;
    activate(r);
    int rc = send_start(r);
    if (OPAL_UNLIKELY(rc != OMPI_SUCCESS)) {
        r->refs = 1;
        send_request_release(r);
        return rc;
    }
    *request = &r->base.req_base.req_ompi;
    return OMPI_SUCCESS;
}

int mca_pml_roce_send(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                      mca_pml_base_send_mode_t mode, ompi_communicator_t *comm) noexcept {
    PmlComm *pc = pml_comm(comm);
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, dst);
    mca_bml_base_endpoint_t *ep = mca_bml_base_get_endpoint(proc);
    if (OPAL_UNLIKELY(ep == nullptr)) {
        return unreachable(comm, dst, proc);
    }
    uint16_t seq = next_seq(pc, dst);
    if (send_eager_now(pc, ep, buf, count, dt, dst, tag, mode, seq)) {
        return OMPI_SUCCESS;
    }
    // A buffered send may complete before its data is sent: it needs a
    // request that outlives this call, so it retains what it uses.
    uint8_t flags = mode == MCA_PML_BASE_SEND_BUFFERED ? 0 : kBlocking;
    SendRequest *r = make_send(buf, count, dt, dst, tag, mode, comm, ep, flags, false);
    if (OPAL_UNLIKELY(r == nullptr)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->refs = 2;
    r->seq = seq;
    activate(r);
    int rc = send_start(r);
    if (OPAL_LIKELY(rc == OMPI_SUCCESS)) {
        ompi_request_wait_completion(&r->base.req_base.req_ompi);
        rc = r->base.req_base.req_ompi.req_status.MPI_ERROR;
    } else {
        r->refs = 1;
    }
    send_request_release(r);
    return rc;
}

} // extern "C"

namespace roce::pml {

/// Starts one persistent send (MPI_Start). A buffered one runs as a fresh
/// internal MPI_Ibsend of the current data, released at once, so that a
/// restart never waits for (or reuses the copy of) the previous message.
int send_start_persistent(SendRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    if (r->base.req_send_mode == MCA_PML_BASE_SEND_BUFFERED) {
        ompi_request_t *inner = nullptr;
        int rc = mca_pml_roce_isend(b->req_addr, b->req_count, b->req_datatype, b->req_peer,
                                    b->req_tag, MCA_PML_BASE_SEND_BUFFERED, b->req_comm, &inner);
        activate(r);
        b->req_ompi.req_status.MPI_ERROR = rc;
        if (rc == OMPI_SUCCESS && inner != nullptr) {
            ompi_request_free(&inner); // completes by itself (MPI-complete already)
        }
        b->req_pml_complete = true;
        ompi_request_complete(&b->req_ompi, true);
        return rc;
    }
    add_fetch32(&r->refs, 1);
    r->seq = next_seq(r->pcomm, b->req_peer);
    activate(r);
    int rc = send_start(r);
    if (rc != OMPI_SUCCESS) {
        b->req_ompi.req_status.MPI_ERROR = rc;
        send_request_complete(r);
    }
    return rc;
}

} // namespace roce::pml

namespace {

int unreachable(ompi_communicator_t *comm, int dst, ompi_proc_t *proc) noexcept {
    static volatile int32_t reported = 0;
    if (__atomic_fetch_add(&reported, 1, __ATOMIC_RELAXED) < 8) {
        char btls[256] = "";
        mca_btl_base_selected_module_t *sm;
        OPAL_LIST_FOREACH (sm, &mca_btl_base_modules_initialized, mca_btl_base_selected_module_t) {
            const char *name = sm->btl_component->btl_version.mca_component_name;
            if (std::strstr(btls, name) == nullptr && std::strlen(btls) + std::strlen(name) + 3 < sizeof btls) {
                std::strcat(btls, btls[0] ? ", " : "");
                std::strcat(btls, name);
            }
        }
        report("no btl",
               "error: no BTL reaches rank %d of communicator %s (cid %u), "
               "process %s on host %s; BTLs tried: %s. Enable a BTL that connects these "
               "hosts (e.g. --mca btl self," ROCE_SM_BTL_NAME ",roce or add tcp)",
               dst, comm->c_name, roce::compat::comm_cid(comm),
               OPAL_NAME_PRINT(proc->super.proc_name),
               roce::compat::proc_hostname(&proc->super).c_str(), btls[0] ? btls : "(none)");
    }
    return OMPI_ERR_UNREACH;
}

} // namespace
