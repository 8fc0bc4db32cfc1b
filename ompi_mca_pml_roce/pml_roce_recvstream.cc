// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The receiver's half of a streamed message (pml_roce_send.cc: a RNDV with
// wire::kRndvStream, then STREAM fragments sent at once, no answer). The
// bookkeeping is rndv::StreamTable (pml_roce_stream.h), under the id lock:
//   STREAM before its receive matched: copied into the table's staging
//           buffer for the message (under the lock);
//   RNDV matched (deliver_stream): its bytes and whatever was staged go
//           into the receive (under the lock), then every later STREAM
//           goes straight to it (unpacked outside the lock, settled under
//           it, as FRAGs are);
//   the last byte: the receive completes (status from the RNDV).
// A receive shorter than the message takes what fits (MPI_ERR_TRUNCATE);
// every byte must still arrive before the message is closed.
#include "pml_roce_internal.h"

namespace roce::pml {
namespace {

// Unpacks [offset, offset + len) of the message, clipped to the buffer.
void unpack_clipped(RecvRequest *r, uint64_t offset, const Pieces &data, uint64_t len) noexcept {
    if (offset >= r->capacity) {
        return;
    }
    uint64_t room = r->capacity - offset;
    unpack(r, offset, data, static_cast<std::size_t>(len < room ? len : room));
}

void finish(RecvRequest *r) noexcept {
    const ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    recv_finish(r, st.MPI_SOURCE, st.MPI_TAG, r->msg_len,
                r->msg_len < r->capacity ? r->msg_len : r->capacity);
}

[[noreturn]] void too_many_staged() noexcept {
    fatal("more than %zu streamed messages (up to pml_roce_stream_limit bytes each) arrived "
          "before their receives were posted; post receives earlier or lower "
          "pml_roce_stream_limit (0: no streaming) on the senders",
          rndv::StreamTable::kMaxStaged);
}

} // namespace

void deliver_stream(RecvRequest *r, const wire::RndvHdr &h, const Pieces &data) noexcept {
    const wire::MatchHdr &m = h.match;
    ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    st.MPI_SOURCE = m.src;
    st.MPI_TAG = m.tag;
    r->msg_len = h.msg_len;
    const rndv::StreamKey key{r->pcomm->ctx, m.src, h.src_req};
    void *owner = nullptr;
    bool done = false;
    rndv::StreamTable::Binding b;
    {
        Guard guard(&g.ids_lock);
        b = g.streams.bind(key, h.msg_len, data.total, r);
        if (b.outcome == rndv::Outcome::kAccepted) {
            unpack_clipped(r, 0, data, data.total);
            for (const auto &rg : b.ranges) {
                const uint64_t n = rg.second - rg.first;
                unpack_clipped(r, rg.first, Pieces::one(b.stage + rg.first, n), n);
            }
            g.streams.drop_stage(key);
            done = g.streams.settle(key, &owner);
        }
    }
    if (OPAL_UNLIKELY(b.outcome != rndv::Outcome::kAccepted)) {
        if (b.outcome == rndv::Outcome::kNoMemory) {
            fatal("out of memory matching a streamed message");
        }
        // A second RNDV for a message that has its receive, or one whose
        // pieces said otherwise: the receive cannot get trustworthy data.
        count(&g.counters.bad_streams);
        if (should_log(&g.counters.bad_headers)) {
            report("refused message",
                   "error: refused a streamed RNDV from rank %d (tag %d, id 0x%016" PRIx64
                   ", %" PRIu64 " bytes) on communicator %u: %s; the receive that matched it "
                   "fails with MPI_ERR_OTHER (%" PRIu64 " refused headers so far)",
                   m.src, m.tag, h.src_req, h.msg_len, r->pcomm->ctx,
                   rndv::outcome_name(b.outcome), g.counters.bad_headers);
        }
        st._ucount = 0;
        st.MPI_ERROR = MPI_ERR_OTHER;
        r->base.req_bytes_packed = h.msg_len;
        recv_request_complete(r);
        return;
    }
    if (done) {
        finish(r);
    }
}

} // namespace roce::pml

using namespace roce::pml;

extern "C" void mca_pml_roce_cb_stream(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                                       const roce::compat::RecvDesc *des) {
    wire::StreamHdr h;
    Pieces data;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1 && pieces_of(des, sizeof h, data)) {
        d = wire::decode_stream(des->des_segments[0].seg_addr.pval, des->des_segments[0].seg_len,
                                data.total, h);
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    const rndv::StreamKey key{h.ctx, h.src, h.src_req};
    rndv::StreamTable::Piece p;
    std::size_t staged = 0;
    {
        Guard guard(&g.ids_lock);
        p = g.streams.piece(key, h.msg_len, h.offset, data.total);
        if (p.outcome == rndv::Outcome::kAccepted && p.owner == nullptr) {
            // No receive yet: keep the bytes (settling cannot finish a
            // message that has no receive).
            copy_pieces(p.stage, data, data.total);
            void *none;
            (void)g.streams.settle(key, &none);
            ++g.counters.stream_staged;
        }
        staged = g.streams.staged();
    }
    switch (p.outcome) {
    case rndv::Outcome::kAccepted:
        break;
    case rndv::Outcome::kDuplicate:
        drop_duplicate(&g.counters.dup_frags, "STREAM", h.src_req, h.offset, data.total);
        return;
    case rndv::Outcome::kNoMemory:
        if (staged >= rndv::StreamTable::kMaxStaged) {
            too_many_staged();
        }
        fatal("out of memory keeping a piece of a streamed message");
    default:
        count(&g.counters.bad_streams);
        if (should_log(&g.counters.bad_frags)) {
            report("refused message",
                   "error: refused a STREAM of %zu bytes at offset %" PRIu64 " from rank %d on "
                   "communicator %u (id 0x%016" PRIx64 ", a %" PRIu32 "-byte message): %s (the "
                   "message is %" PRIu64 " bytes, %" PRIu64 " of them arrived); %" PRIu64
                   " refused so far, only the first 16 and then one in 4096 are shown",
                   data.total, h.offset, h.src, h.ctx, h.src_req, h.msg_len,
                   rndv::outcome_name(p.outcome), p.msg_len, p.arrived, g.counters.bad_frags);
        }
        return;
    }
    if (p.owner == nullptr) {
        return; // staged
    }
    auto *r = static_cast<RecvRequest *>(p.owner);
    unpack_clipped(r, h.offset, data, data.total);
    void *owner = nullptr;
    bool done;
    {
        Guard guard(&g.ids_lock);
        done = g.streams.settle(key, &owner);
    }
    if (done) {
        finish(r);
    }
}
