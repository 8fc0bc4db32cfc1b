// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Arrival of match-type fragments (MATCH, RNDV, RGET) from the btls, and
// their delivery into receives. A fragment is decoded (refused with a log
// line if malformed), its communicator looked up by context id (held in
// EarlyArrivals if the communicator does not exist yet), and offered to the
// communicator's matcher under its lock. Matched: the data goes straight
// from the btl's segments into the receive buffer, after the lock is
// released. Unexpected or ahead of sequence: the matcher calls keep, which
// copies the fragment into a Kept item.
#include "pml_roce_internal.h"

namespace roce::pml {

bool pieces_of(const roce::compat::RecvDesc *des, std::size_t skip, Pieces &out) noexcept {
    out.count = 0;
    out.total = 0;
    if (des->des_segment_count < 1 || des->des_segment_count > 4) {
        return false;
    }
    for (std::size_t i = 0; i < des->des_segment_count; ++i) {
        const mca_btl_base_segment_t &s = des->des_segments[i];
        const auto *p = static_cast<const uint8_t *>(s.seg_addr.pval);
        std::size_t n = s.seg_len;
        if (i == 0) {
            if (n < skip) {
                return false;
            }
            p += skip;
            n -= skip;
        }
        if (n > 0) {
            out.piece[out.count++] = {p, n};
            out.total += n;
        }
    }
    return true;
}

void copy_bytes_call(uint8_t *dst, const uint8_t *src, std::size_t n) noexcept {
    if (n != 0) {
        std::memcpy(dst, src, n);
    }
}

void copy_pieces(uint8_t *dst, const Pieces &pc, std::size_t n) noexcept {
    for (int i = 0; i < pc.count && n > 0; ++i) {
        std::size_t k = pc.piece[i].n < n ? pc.piece[i].n : n;
        std::memcpy(dst, pc.piece[i].p, k);
        dst += k;
        n -= k;
    }
}

void unpack(RecvRequest *r, uint64_t offset, const Pieces &data, std::size_t n) noexcept {
    if (n == 0) {
        return;
    }
    if (OPAL_LIKELY(r->flags & kContig)) {
        copy_pieces(reinterpret_cast<uint8_t *>(r->contig) + offset, data, n);
        return;
    }
    // Concurrent FRAGs of one message share the convertor.
    Guard guard(&r->unpack_lock);
    opal_convertor_t *conv = &r->base.req_base.req_convertor;
    if (conv->bConverted != offset) {
        size_t pos = offset;
        opal_convertor_set_position(conv, &pos);
    }
    iovec iov[4];
    uint32_t cnt = 0;
    std::size_t left = n;
    for (int i = 0; i < data.count && left > 0; ++i) {
        std::size_t k = data.piece[i].n < left ? data.piece[i].n : left;
        iov[cnt].iov_base = const_cast<uint8_t *>(data.piece[i].p);
        iov[cnt].iov_len = k;
        ++cnt;
        left -= k;
    }
    size_t max = n;
    opal_convertor_unpack(conv, iov, &cnt, &max);
}

namespace {

// The match envelope and the proc of the sender, for ACKs.
ompi_proc_t *sender_proc(RecvRequest *r, int32_t src) noexcept {
    return ompi_comm_peer_lookup(r->base.req_base.req_comm, src);
}

void deliver_match(RecvRequest *r, const wire::MatchHdr &h, const Pieces &data) noexcept {
    std::size_t n = data.total < r->capacity ? data.total : static_cast<std::size_t>(r->capacity);
    unpack(r, 0, data, n);
    recv_finish(r, h.src, h.tag, data.total, n);
}

void deliver_rndv(RecvRequest *r, const wire::RndvHdr &h, const Pieces &data) noexcept {
    if (h.match.common.flags & wire::kRndvStream) {
        deliver_stream(r, h, data);
        return;
    }
    const wire::MatchHdr &m = h.match;
    r->split = false;
    uint64_t want = h.msg_len < r->capacity ? h.msg_len : r->capacity;
    std::size_t n = data.total < want ? data.total : static_cast<std::size_t>(want);
    unpack(r, 0, data, n);
    ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    st.MPI_SOURCE = m.src;
    st.MPI_TAG = m.tag;
    r->msg_len = h.msg_len;
    if (n >= want) {
        // All the receiver wants is here: the ACK only tells the sender the
        // message matched (synchronous send) and that nothing more is needed.
        wire::AckHdr ack = wire::make_ack(h.src_req, 0, n, 0);
        send_ctrl(sender_proc(r, m.src), wire::Kind::kAck, &ack, sizeof ack);
        recv_finish(r, m.src, m.tag, h.msg_len, want);
        return;
    }
    recv_ask_frags(r, sender_proc(r, m.src), h.src_req, n);
}

} // namespace

void deliver(RecvRequest *r, uint8_t kind, const void *hdr, const Pieces &data,
             mca_btl_base_module_t *btl) noexcept {
    switch (static_cast<wire::Kind>(kind)) {
    case wire::Kind::kMatch:
        deliver_match(r, *static_cast<const wire::MatchHdr *>(hdr), data);
        break;
    case wire::Kind::kRndv:
        deliver_rndv(r, *static_cast<const wire::RndvHdr *>(hdr), data);
        break;
    case wire::Kind::kRget: {
        const auto &h = *static_cast<const wire::RgetHdr *>(hdr);
        // The handle bytes are the whole payload; copy them out of the pieces.
        alignas(8) uint8_t handle[wire::kMaxHandle];
        copy_pieces(handle, data, h.handle_len);
        rget_start(r, h, handle, btl);
        break;
    }
    default:
        break;
    }
}

void deliver_kept(RecvRequest *r, Kept *k) noexcept {
    deliver(r, k->kind, &k->hdr, Pieces::one(k->data, k->len), k->btl);
    kept_free(k);
}

namespace {

std::size_t header_size(uint8_t kind) noexcept {
    switch (static_cast<wire::Kind>(kind)) {
    case wire::Kind::kMatch: return sizeof(wire::MatchHdr);
    case wire::Kind::kRndv: return sizeof(wire::RndvHdr);
    default: return sizeof(wire::RgetHdr);
    }
}

// Copies an arrived fragment so the matcher can keep it; nullptr when out of
// memory. Inlined into the arrival paths (keep_copy for pml_roce_ext.cc).
inline Kept *keep_copy_inl(mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                           const Pieces &data) noexcept {
    Kept *k = kept_alloc(data.total);
    if (OPAL_UNLIKELY(k == nullptr)) {
        return nullptr;
    }
    k->btl = btl;
    k->kind = kind;
    std::memcpy(&k->hdr, hdr, header_size(kind));
    k->len = data.total;
    copy_pieces(k->data, data, data.total);
    return k;
}

} // namespace

Kept *keep_copy(mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                const Pieces &data) noexcept {
    return keep_copy_inl(btl, kind, hdr, data);
}

namespace {

// A match header the matcher refused: a sequence number received already is
// a duplicate (counted, verbose 50); anything else is malformed (counted,
// rate-limited error).
void log_refusal(PmlComm *pc, const match::Envelope &env, match::Verdict v) noexcept {
    if (v == match::Verdict::kNoMemory) {
        fatal("out of memory while matching a message on communicator %u", pc->ctx);
    }
    if (v == match::Verdict::kDuplicate) {
        count(&g.counters.dup_matches);
        opal_output_verbose(50, output(),
                            "pml roce [%s]: dropped a duplicate match header from %d (tag %d, "
                            "seq %u) on communicator %u",
                            host_name(), env.source, env.tag, static_cast<unsigned>(env.seq),
                            pc->ctx);
        return;
    }
    if (!should_log(&g.counters.bad_headers)) {
        return;
    }
    util::Status s = match::explain(v, env, pc->ctx, pc->remote_size);
    report("refused message", "error: %s; message dropped (%" PRIu64 " refused headers so far)",
           s.message().c_str(), g.counters.bad_headers);
}

// Admits held messages of `src` that are now in sequence.
void drain_ready(PmlComm *pc, int32_t src) noexcept {
    for (;;) {
        match::Arrival a;
        {
            Guard guard(&pc->lock);
            a = pc->matcher->next_ready(src);
        }
        if (a.kind == match::ArrivalKind::kMatched) {
            deliver_kept(static_cast<RecvRequest *>(a.request), static_cast<Kept *>(a.message.payload));
        } else if (a.kind == match::ArrivalKind::kRejected) {
            log_refusal(pc, match::Envelope{src, a.message.tag, a.message.seq}, a.verdict);
            return;
        }
        if (!a.more_ready) {
            return;
        }
    }
}

// Holds a fragment for a communicator this process has not created yet and
// returns nullptr; when the communicator appeared meanwhile, returns it with
// a reference taken (the caller matches the fragment there).
PmlComm *hold_early(uint32_t ctx, mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                    const wire::MatchHdr &m, const Pieces &data) noexcept {
    Guard guard(&g.early_lock);
    PmlComm *pc = g.comms.acquire(ctx);
    if (pc != nullptr) {
        return pc;
    }
    Kept *k = keep_copy_inl(btl, kind, hdr, data);
    if (k == nullptr || !g.early->hold(ctx, match::Envelope{m.src, m.tag, m.seq}, k).is_ok()) {
        fatal("out of memory holding a message for communicator %u (not created yet)", ctx);
    }
    ++g.counters.early;
    return nullptr;
}

} // namespace

// Matches one decoded match-type fragment. The reference on the
// communicator is held until the end: a delivery may complete the last
// request that kept the communicator alive, and drain_ready still uses it.
void incoming(uint32_t ctx, mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
              const wire::MatchHdr &m, const Pieces &data) noexcept {
    CommRef pc(g.comms.acquire(ctx));
    if (OPAL_UNLIKELY(!pc)) {
        pc.reset(hold_early(ctx, btl, kind, hdr, m, data));
        if (!pc) {
            return;
        }
    }
    incoming_on(pc.get(), btl, kind, hdr, m, data);
}

void incoming_on(PmlComm *pc, mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                 const wire::MatchHdr &m, const Pieces &data) noexcept {
    const match::Envelope env{m.src, m.tag, m.seq};
    auto keep = [&]() -> void * { return keep_copy_inl(btl, kind, hdr, data); };
    match::Arrival a;
    {
        Guard guard(&pc->lock);
        a = pc->matcher->arrive(env, keep);
        ++g.counters.match_attempts;
    }
    if (OPAL_LIKELY(a.kind == match::ArrivalKind::kMatched)) {
        deliver(static_cast<RecvRequest *>(a.request), kind, hdr, data, btl);
    } else if (a.kind == match::ArrivalKind::kRejected) {
        log_refusal(pc, env, a.verdict);
        return;
    }
    if (OPAL_UNLIKELY(a.more_ready)) {
        drain_ready(pc, m.src);
    }
}

namespace {

// The eager fast path: one segment, a valid header, a communicator that
// exists, a posted contiguous receive that takes it on arrival. Everything
// else (and every refusal) is left to the general path, which redoes the
// decoding and logs; nothing here has changed any state when it returns
// false.
inline bool fast_match(mca_btl_base_module_t *btl, const roce::compat::RecvDesc *des) noexcept {
    if (OPAL_UNLIKELY(des->des_segment_count != 1)) {
        return false;
    }
    const mca_btl_base_segment_t &s = des->des_segments[0];
    wire::MatchHdr h;
    if (OPAL_UNLIKELY(wire::decode_match(s.seg_addr.pval, s.seg_len, h) != wire::Defect::kNone)) {
        return false;
    }
    // must_lock() read once: the lookup, the lock and the release would
    // each read it again (two loads and two branches each).
    const bool threads = must_lock();
    CommRef pc(g.comms.acquire(h.ctx, threads), threads);
    if (OPAL_UNLIKELY(!pc)) {
        return false;
    }
    const auto *data = static_cast<const uint8_t *>(s.seg_addr.pval) + sizeof h;
    const std::size_t len = s.seg_len - sizeof h;
    // keep_copy for one segment; one capture (cheaper to set up than four)
    struct KeepArgs {
        mca_btl_base_module_t *btl;
        const wire::MatchHdr *h;
        const uint8_t *data;
        std::size_t len;
    } ka{btl, &h, data, len};
    auto keep = [pk = &ka]() -> void * {
        Kept *k = kept_alloc(pk->len);
        if (OPAL_LIKELY(k != nullptr)) {
            k->btl = pk->btl;
            k->kind = static_cast<uint8_t>(wire::Kind::kMatch);
            k->hdr.match = *pk->h;
            k->len = pk->len;
            copy_bytes(k->data, pk->data, pk->len);
        }
        return k;
    };
    // Only what is used leaves the locked scope: a whole Arrival kept alive
    // across it is copied through the stack (arrive's inline fast path and
    // its general path return it differently).
    match::ArrivalKind kind;
    match::Verdict verdict;
    void *request;
    bool more_ready;
    {
        Guard guard(&pc->lock, threads);
        match::Arrival a = pc->matcher->arrive(match::Envelope{h.src, h.tag, h.seq}, keep);
        ++g.counters.match_attempts;
        kind = a.kind;
        verdict = a.verdict;
        request = a.request;
        more_ready = a.more_ready;
    }
    if (OPAL_LIKELY(kind == match::ArrivalKind::kMatched)) {
        auto *r = static_cast<RecvRequest *>(request);
        if (OPAL_LIKELY(r->flags & kContig)) {
            std::size_t n = len < r->capacity ? len : static_cast<std::size_t>(r->capacity);
            copy_bytes(r->contig, data, n);
            recv_finish(r, h.src, h.tag, len, n);
        } else {
            deliver_match(r, h, Pieces::one(data, len));
        }
    } else if (OPAL_UNLIKELY(kind == match::ArrivalKind::kRejected)) {
        log_refusal(pc.get(), match::Envelope{h.src, h.tag, h.seq}, verdict);
        return true;
    }
    if (OPAL_UNLIKELY(more_ready)) {
        drain_ready(pc.get(), h.src);
    }
    return true;
}

} // namespace
} // namespace roce::pml

using namespace roce::pml;

extern "C" {

void mca_pml_roce_cb_match(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                           const roce::compat::RecvDesc *des) {
    if (OPAL_LIKELY(fast_match(btl, des))) {
        return;
    }
    wire::MatchHdr h;
    Pieces data;
    const mca_btl_base_segment_t *s = des->des_segments;
    wire::Defect d = wire::Defect::kShort;
    if (OPAL_LIKELY(des->des_segment_count >= 1)) {
        d = wire::decode_match(s[0].seg_addr.pval, s[0].seg_len, h);
    }
    if (OPAL_UNLIKELY(d != wire::Defect::kNone || !pieces_of(des, sizeof h, data))) {
        reject_header(tag, des, d != wire::Defect::kNone ? d : wire::Defect::kLength);
        return;
    }
    incoming(h.ctx, btl, static_cast<uint8_t>(wire::Kind::kMatch), &h, h, data);
}

void mca_pml_roce_cb_rndv(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          const roce::compat::RecvDesc *des) {
    wire::RndvHdr h;
    Pieces data;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1 && pieces_of(des, sizeof h, data)) {
        d = wire::decode_rndv(des->des_segments[0].seg_addr.pval, des->des_segments[0].seg_len,
                              data.total, h);
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    incoming(h.match.ctx, btl, static_cast<uint8_t>(wire::Kind::kRndv), &h, h.match, data);
}

void mca_pml_roce_cb_rget(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          const roce::compat::RecvDesc *des) {
    wire::RgetHdr h;
    Pieces data;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1 && pieces_of(des, sizeof h, data)) {
        d = wire::decode_rget(des->des_segments[0].seg_addr.pval, des->des_segments[0].seg_len,
                              data.total, h);
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    incoming(h.rndv.match.ctx, btl, static_cast<uint8_t>(wire::Kind::kRget), &h, h.rndv.match, data);
}

} // extern "C"
