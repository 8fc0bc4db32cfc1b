// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Split RGET (issue 18): over a shared-memory btl one RDMA get of a large
// message keeps one core copying while the sender's spins. The receiver of
// an RGET of at least pml_roce_split_min bytes instead
//   1. opens the range [k, want) (k about want / 2) and sends a PUT asking
//      the sender to put it into its buffer,
//   2. gets [0, k) itself, then sends a FIN with kFinSplit (or, when a get
//      failed, an ACK with kAckSplit for the rest of [0, k));
// the sender puts [k, want) with btl_put and sends PUT-FIN, or, when it
// cannot put, sends that range in FRAGs naming the receiver's id. Each side
// completes when both parts are done (RecvRequest::parts, SendRequest::parts).
#include "pml_roce_internal.h"

namespace roce::pml {
namespace {

// Splits are rounded to this (a cache line): each side copies whole lines.
constexpr uint64_t kSplitAlign = 64;

void put_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *,
              mca_btl_base_registration_handle_t *, void *, void *cbdata, int status);

// The put of op's range finished (every put completed, or one failed):
// PUT-FIN and one part done, or the range in FRAGs.
void putop_finish(PutOp *op) noexcept {
    SendRequest *r = op->req;
    const bool failed = op->failed != 0;
    const uint64_t dst = op->dst_req, off = op->offset, size = op->size;
    ompi_proc_t *proc = op->proc;
    opal_free_list_return(&g.putops, &op->super);
    if (failed) {
        count(&g.counters.split_fallbacks);
        opal_output_verbose(10, output(),
                            "pml roce [%s]: a put of %" PRIu64
                            " bytes to %s failed; sending them in fragments",
                            host_name(), size, OPAL_NAME_PRINT(proc->super.proc_name));
        send_split_range(r, dst, off, off + size);
        return;
    }
    wire::PutFinHdr fin = wire::make_put_fin(dst, off, size);
    send_ctrl(proc, wire::Kind::kPutFin, &fin, sizeof fin);
    send_part_done(r);
}

void putop_drop(PutOp *op) noexcept {
    if (add_fetch32(&op->refs, -1) == 0) {
        putop_finish(op);
    }
}

// Issues puts until all are started, one fails to start, or the btl is out
// of resources (then the op waits in g.pending_puts with the issuer's
// reference).
void issue_puts(PutOp *op) noexcept {
    SendRequest *r = op->req;
    auto *remote = reinterpret_cast<mca_btl_base_registration_handle_t *>(op->remote_handle);
    while (op->issued < op->size && op->failed == 0) {
        uint64_t at = op->issued;
        uint64_t n = op->size - at < op->chunk ? op->size - at : op->chunk;
        add_fetch32(&op->refs, 1);
        int rc = mca_bml_base_put(
            op->bml, const_cast<char *>(r->contig) + op->offset + at, op->remote_addr + at, r->reg,
            op->handle_len > 0 ? remote : nullptr, n, 0, MCA_BTL_NO_ORDER, put_done, op);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE || rc == OPAL_ERR_TEMP_OUT_OF_RESOURCE) {
            add_fetch32(&op->refs, -1);
            pending_add(&g.pending_puts, &op->super.super);
            return;
        }
        op->issued = at + n;
        if (rc < 0) {
            op->failed = 1;
            putop_drop(op); // this put's reference: it never started
        }
    }
    putop_drop(op); // the issuer's reference
}

void put_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *,
              mca_btl_base_registration_handle_t *, void *, void *cbdata, int status) {
    auto *op = static_cast<PutOp *>(cbdata);
    if (status != OPAL_SUCCESS) {
        __atomic_store_n(&op->failed, 1, __ATOMIC_RELEASE);
    }
    putop_drop(op);
}

// Why the sender cannot put for this PUT (nullptr: it can); `bml` is set to
// the btl to put with.
const char *put_refusal(SendRequest *r, const wire::PutHdr &h, mca_bml_base_btl_t **bml) noexcept {
    *bml = nullptr;
    if (g.fail_rdma & 1) {
        return "pml_roce_test_fail_rdma";
    }
    if (r->rdma_bml == nullptr) {
        return "the send has no RDMA btl";
    }
    mca_bml_base_btl_t *b = mca_bml_base_btl_array_find(&r->ep->btl_rdma, r->rdma_bml->btl);
    if (b == nullptr) {
        return "the btl of the RGET cannot reach the receiver any more";
    }
    mca_btl_base_module_t *btl = b->btl;
    if (!(btl->btl_flags & MCA_BTL_FLAGS_PUT) || btl->btl_put == nullptr) {
        return "that btl cannot put";
    }
    if (btl->btl_register_mem != nullptr
            ? h.handle_len != btl->btl_registration_handle_size || r->reg == nullptr
            : h.handle_len != 0) {
        return "the registration handles do not fit that btl";
    }
    *bml = b;
    return nullptr;
}

// Counts and reports (rate limited) a refused PUT or PUT-FIN.
void refuse_split(const char *what, uint64_t id, uint64_t offset, uint64_t size,
                  rndv::Outcome why) noexcept {
    if (should_log(&g.counters.bad_split)) {
        report("refused message",
               "error: refused a %s for request id 0x%016" PRIx64 " naming bytes [%" PRIu64
               ", %" PRIu64 "): %s; %" PRIu64
               " PUT/PUT-FIN refused so far, only the first 16 and then one in 4096 are shown",
               what, id, offset, offset + size, rndv::outcome_name(why), g.counters.bad_split);
    }
}

// Reads a control header of type H from des (segment 0, nothing after it
// but `extra` bytes, which go to `rest`).
template <typename H, typename Decode>
wire::Defect decode_ctrl(const roce::compat::RecvDesc *des, H &h, Pieces &rest,
                         Decode decode) noexcept {
    if (des->des_segment_count < 1) {
        return wire::Defect::kShort;
    }
    const mca_btl_base_segment_t &s = des->des_segments[0];
    if (!pieces_of(des, s.seg_len < sizeof h ? s.seg_len : sizeof h, rest)) {
        return wire::Defect::kShort;
    }
    return decode(s.seg_addr.pval, s.seg_len, rest.total, h);
}

} // namespace

uint64_t split_point(const RecvRequest *r, const mca_bml_base_btl_t *bml, uint64_t want) noexcept {
    if (g.split_min == 0 || want < g.split_min || want < 2 * kSplitAlign || !(r->flags & kContig)) {
        return 0;
    }
    // Sends of our own out: the peers are receivers too (an exchange, both
    // ways at once), their cores are busy copying, and a put would only
    // make our receive wait for them (bidirectional 1 MiB bandwidth fell to
    // 0.81x of unsplit gets).
    if (__atomic_load_n(&g.rget_out, __ATOMIC_RELAXED) != 0) {
        return 0;
    }
    const mca_btl_base_module_t *btl = bml->btl;
    if (btl->btl_exclusivity < MCA_BTL_EXCLUSIVITY_HIGH - 1 ||
        !(btl->btl_flags & MCA_BTL_FLAGS_PUT) || btl->btl_put == nullptr) {
        return 0;
    }
    // The receiver's half starts at its buffer's first byte; end it on a
    // line boundary of the buffer.
    const auto base = reinterpret_cast<uintptr_t>(r->contig);
    uint64_t k = ((base + want / 2) & ~(kSplitAlign - 1)) - base;
    return k > 0 && k < want ? k : 0;
}

void split_start(RecvRequest *r, ompi_proc_t *proc, mca_bml_base_btl_t *bml,
                 mca_btl_base_registration_handle_t *reg, uint64_t src_req, uint64_t k) noexcept {
    uint64_t put_id;
    r->split = true;
    r->parts = 2;
    r->split_bml = bml;
    r->split_reg = reg;
    {
        Guard guard(&g.ids_lock);
        put_id = g.recv_ids.open(r->put_frags, k, r->want, r, true);
    }
    if (put_id == 0) {
        fatal("out of memory registering a receive for its put");
    }
    count(&g.counters.splits);
    const uint16_t hlen =
        reg != nullptr ? static_cast<uint16_t>(bml->btl->btl_registration_handle_size) : 0;
    alignas(8) uint8_t buf[sizeof(wire::PutHdr) + wire::kMaxHandle];
    wire::PutHdr h = wire::make_put(src_req, put_id, k, r->want - k,
                                    reinterpret_cast<uint64_t>(r->contig), hlen);
    std::memcpy(buf, &h, sizeof h);
    if (hlen > 0) {
        std::memcpy(buf + sizeof h, reg, hlen);
    }
    // Registered before the PUT leaves: the PUT-FIN can come back inside send_ctrl.
    send_ctrl(proc, wire::Kind::kPut, buf, sizeof h + hlen);
}

void recv_part_done(RecvRequest *r) noexcept {
    if (add_fetch32(&r->parts, -1) != 0) {
        return;
    }
    if (r->split_reg != nullptr) {
        r->split_bml->btl->btl_deregister_mem(r->split_bml->btl, r->split_reg);
        r->split_reg = nullptr;
    }
    const ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    recv_finish(r, st.MPI_SOURCE, st.MPI_TAG, r->msg_len, r->want);
}

void send_part_done(SendRequest *r) noexcept {
    if (add_fetch32(&r->parts, -1) != 0) {
        return;
    }
    if (r->reg != nullptr) {
        r->rdma_bml->btl->btl_deregister_mem(r->rdma_bml->btl, r->reg);
        r->reg = nullptr;
    }
    send_request_complete(r);
}

void send_split_range(SendRequest *r, uint64_t dst_req, uint64_t off, uint64_t end) noexcept {
    {
        Guard guard(&g.ids_lock);
        if (r->pipe_busy) {
            // The other part's range is being sent: this one follows it.
            r->next_dst = dst_req;
            r->next_off = off;
            r->next_end = end;
            return;
        }
        r->pipe_busy = true;
        r->dst_req = dst_req;
        r->sched_off = off;
        r->sched_end = end;
    }
    count(&g.counters.pipeline);
    ensure_convertor(r);
    send_schedule(r);
}

void send_split_range_done(SendRequest *r) noexcept {
    bool next;
    {
        Guard guard(&g.ids_lock);
        next = r->next_end != 0;
        if (next) {
            r->dst_req = r->next_dst;
            r->sched_off = r->next_off;
            r->sched_end = r->next_end;
            r->next_end = 0;
        } else {
            r->pipe_busy = false;
        }
    }
    add_fetch32(&r->refs, 1); // the part below may complete the send
    send_part_done(r);
    if (next) {
        send_schedule(r);
    }
    send_request_release(r);
}

void putop_resume(PutOp *op) noexcept {
    issue_puts(op);
}

} // namespace roce::pml

using namespace roce::pml;

extern "C" {

// The sender: a split RGET's receiver asks for [offset, offset + size).
void mca_pml_roce_cb_put(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des) {
    wire::PutHdr h;
    Pieces handle;
    wire::Defect d = decode_ctrl(des, h, handle, wire::decode_put);
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    rndv::AnswerTable::Claim c;
    {
        Guard guard(&g.ids_lock);
        c = g.send_ids.claim_put(h.src_req, h.offset, h.size);
        if (c.outcome == rndv::Outcome::kAccepted && c.first_split) {
            add_fetch32(&static_cast<SendRequest *>(c.request)->parts, 1); // the put is owed now
        }
    }
    if (c.outcome != rndv::Outcome::kAccepted) {
        refuse_split("PUT", h.src_req, h.offset, h.size, c.outcome);
        return;
    }
    auto *r = static_cast<SendRequest *>(c.request);
    ompi_proc_t *proc = ompi_comm_peer_lookup(r->base.req_base.req_comm, r->base.req_base.req_peer);
    mca_bml_base_btl_t *bml;
    const char *why = put_refusal(r, h, &bml);
    PutOp *op = why == nullptr ? reinterpret_cast<PutOp *>(opal_free_list_get(&g.putops)) : nullptr;
    if (op == nullptr) {
        count(&g.counters.split_fallbacks);
        opal_output_verbose(10, output(),
                            "pml roce [%s]: cannot put %" PRIu64
                            " bytes to %s: %s; sending them in fragments",
                            host_name(), h.size, OPAL_NAME_PRINT(proc->super.proc_name),
                            why != nullptr ? why : "out of memory");
        send_split_range(r, h.dst_req, h.offset, h.offset + h.size);
        return;
    }
    op->req = r;
    op->bml = bml;
    op->proc = proc;
    op->dst_req = h.dst_req;
    op->offset = h.offset;
    op->size = h.size;
    op->remote_addr = h.dst_addr + h.offset;
    op->chunk = bml->btl->btl_put_limit > 0 && bml->btl->btl_put_limit < h.size
                    ? bml->btl->btl_put_limit
                    : h.size;
    op->issued = 0;
    op->failed = 0;
    op->refs = 1;
    op->handle_len = h.handle_len;
    copy_pieces(op->remote_handle, handle, h.handle_len);
    issue_puts(op);
}

// The receiver: the sender's put of the range its PUT named completed.
void mca_pml_roce_cb_put_fin(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                             const roce::compat::RecvDesc *des) {
    wire::PutFinHdr h;
    Pieces rest;
    wire::Defect d = decode_ctrl(des, h, rest, wire::decode_put_fin);
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    rndv::FragTable::Admission a;
    bool done = false;
    {
        Guard guard(&g.ids_lock);
        a = g.recv_ids.admit_put(h.dst_req, h.offset, h.size);
        if (a.outcome == rndv::Outcome::kAccepted) {
            done = g.recv_ids.settle(*a.account); // nothing to unpack: the bytes are in place
        }
    }
    if (a.outcome != rndv::Outcome::kAccepted) {
        refuse_split("PUT-FIN", h.dst_req, h.offset, h.size, a.outcome);
        return;
    }
    if (done) {
        recv_part_done(static_cast<RecvRequest *>(a.account->owner()));
    }
}

} // extern "C"
