// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The receiver's half of a rendezvous: RDMA gets for an RGET (then FIN),
// and FRAGs for a RNDV or for an RGET that could not use RDMA.
//
// An RGET falls back to FRAGs ("ACK with offset") when the receive buffer is
// not contiguous, when the btl that brought the RGET cannot get from us, when
// its handle does not have the size this btl uses, when the local buffer
// cannot be registered (e.g. a low memlock limit), or when a get fails: the
// sender then deregisters and sends the bytes from the first one missing.
#include "pml_roce_internal.h"

namespace roce::pml {
namespace {

void get_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *local_address,
              mca_btl_base_registration_handle_t *, void *context, void *cbdata, int status);

void getop_finish(GetOp *op) noexcept {
    RecvRequest *r = op->req;
    mca_btl_base_module_t *btl = op->bml->btl;
    if (op->local != nullptr) {
        btl->btl_deregister_mem(btl, op->local);
        op->local = nullptr;
    }
    uint64_t failed = op->failed_at;
    ompi_proc_t *proc = op->proc;
    uint64_t src_req = op->src_req;
    uint64_t length = op->length;
    opal_free_list_return(&g.getops, &op->super);
    if (failed != UINT64_MAX) {
        ++g.counters.rget_fallbacks;
        opal_output_verbose(10, output(),
                            "pml roce [%s]: RDMA get from %s failed at byte %" PRIu64
                            "; asking for the rest in fragments",
                            host_name(), OPAL_NAME_PRINT(proc->super.proc_name), failed);
        recv_ask_frags(r, proc, src_req, failed);
        return;
    }
    if (r->split) {
        // [0, k) is here; the sender's put brings the rest.
        wire::FinHdr fin = wire::make_fin_split(src_req, length);
        send_ctrl(proc, wire::Kind::kFin, &fin, sizeof fin);
        recv_part_done(r);
        return;
    }
    wire::FinHdr fin = wire::make_fin(src_req, length);
    send_ctrl(proc, wire::Kind::kFin, &fin, sizeof fin);
    const ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    recv_finish(r, st.MPI_SOURCE, st.MPI_TAG, r->msg_len, length);
}

void getop_drop(GetOp *op) noexcept {
    if (add_fetch32(&op->refs, -1) == 0) {
        getop_finish(op);
    }
}

void record_failure(GetOp *op, uint64_t offset) noexcept {
    uint64_t cur = __atomic_load_n(&op->failed_at, __ATOMIC_ACQUIRE);
    while (offset < cur &&
           !__atomic_compare_exchange_n(&op->failed_at, &cur, offset, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
    }
}

// Issues gets until all are started, one fails to start, or the btl is out
// of resources (then the op waits in the pending queue, still holding the
// issuer's reference).
void issue_gets(GetOp *op) noexcept {
    mca_bml_base_btl_t *bml = op->bml;
    auto *remote = reinterpret_cast<mca_btl_base_registration_handle_t *>(op->remote_handle);
    char *base = op->req->contig;
    while (op->issued < op->length) {
        uint64_t off = op->issued;
        uint64_t size = op->length - off < op->chunk ? op->length - off : op->chunk;
        add_fetch32(&op->refs, 1);
        int rc = OPAL_UNLIKELY(g.fail_rdma & 2)
                     ? OPAL_ERROR // pml_roce_test_fail_rdma
                     : mca_bml_base_get(bml, base + off, op->remote_addr + off, op->local,
                                        op->handle_len > 0 ? remote : nullptr, size, 0,
                                        MCA_BTL_NO_ORDER, get_done, op);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE || rc == OPAL_ERR_TEMP_OUT_OF_RESOURCE) {
            add_fetch32(&op->refs, -1);
            pending_add(&g.pending_gets, &op->super.super);
            return;
        }
        op->issued = off + size;
        if (rc < 0) {
            record_failure(op, off);
            getop_drop(op); // this get's reference: it never started
            break;
        }
    }
    getop_drop(op); // the issuer's reference
}

void get_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *local_address,
              mca_btl_base_registration_handle_t *, void *, void *cbdata, int status) {
    auto *op = static_cast<GetOp *>(cbdata);
    if (status != OPAL_SUCCESS) {
        record_failure(op, static_cast<uint64_t>(static_cast<char *>(local_address) - op->req->contig));
    }
    getop_drop(op);
}

// Why the RGET cannot be served by RDMA here (nullptr: it can).
const char *rget_refusal(RecvRequest *r, const wire::RgetHdr &h, mca_bml_base_btl_t *bml) noexcept {
    if (!(r->flags & kContig)) {
        return "the receive buffer is not contiguous";
    }
    if (!g.use_rdma) {
        return "pml_roce_use_rdma is off";
    }
    if (bml == nullptr) {
        return "the btl that brought it has no RDMA path back";
    }
    mca_btl_base_module_t *btl = bml->btl;
    if (!(btl->btl_flags & MCA_BTL_FLAGS_GET) || btl->btl_get == nullptr) {
        return "that btl cannot get";
    }
    if (h.handle_len != 0 && h.handle_len != btl->btl_registration_handle_size) {
        return "its registration handle has another size";
    }
    if (h.handle_len == 0 && btl->btl_register_mem != nullptr) {
        return "it carries no registration handle";
    }
    return nullptr;
}

} // namespace

void rget_start(RecvRequest *r, const wire::RgetHdr &h, const uint8_t *handle,
                mca_btl_base_module_t *btl) noexcept {
    const wire::MatchHdr &m = h.rndv.match;
    ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    st.MPI_SOURCE = m.src;
    st.MPI_TAG = m.tag;
    r->msg_len = h.rndv.msg_len;
    r->split = false;
    ompi_proc_t *proc = ompi_comm_peer_lookup(r->base.req_base.req_comm, m.src);
    uint64_t length = h.rndv.msg_len < r->capacity ? h.rndv.msg_len : r->capacity;
    if (length == 0) { // a zero-size buffer: nothing to get
        wire::FinHdr fin = wire::make_fin(h.rndv.src_req, 0);
        send_ctrl(proc, wire::Kind::kFin, &fin, sizeof fin);
        recv_finish(r, m.src, m.tag, h.rndv.msg_len, 0);
        return;
    }
    mca_bml_base_endpoint_t *ep = mca_bml_base_get_endpoint(proc);
    mca_bml_base_btl_t *bml = ep != nullptr ? mca_bml_base_btl_array_find(&ep->btl_rdma, btl) : nullptr;
    const char *why = rget_refusal(r, h, bml);
    // Split (pml_roce_split.cc): the sender puts [k, length) while we get
    // [0, k). Not with ourselves (btl self): one process copies either way.
    const uint64_t k =
        why == nullptr && proc != ompi_proc_local() ? split_point(r, bml, length) : 0;
    mca_btl_base_registration_handle_t *local = nullptr;
    if (why == nullptr && bml->btl->btl_register_mem != nullptr &&
        (k > 0 || length > bml->btl->btl_get_local_registration_threshold)) {
        if (!(g.fail_registration & 2)) {
            local = bml->btl->btl_register_mem(bml->btl, bml->btl_endpoint, r->contig, length,
                                               MCA_BTL_REG_FLAG_LOCAL_WRITE |
                                                   (k > 0 ? MCA_BTL_REG_FLAG_REMOTE_WRITE : 0));
        }
        if (local == nullptr) {
            ++g.counters.reg_failures;
            why = "the receive buffer could not be registered";
        }
    } else if (why == nullptr && (g.fail_registration & 2)) {
        why = "the receive buffer could not be registered (test injection)";
    }
    GetOp *op = why == nullptr ? reinterpret_cast<GetOp *>(opal_free_list_get(&g.getops)) : nullptr;
    if (op == nullptr) {
        if (local != nullptr) {
            bml->btl->btl_deregister_mem(bml->btl, local);
        }
        ++g.counters.rget_fallbacks;
        opal_output_verbose(10, output(), "pml roce [%s]: RGET of %" PRIu64 " bytes from %s: %s; "
                            "asking for fragments", host_name(), length,
                            OPAL_NAME_PRINT(proc->super.proc_name), why ? why : "out of memory");
        recv_ask_frags(r, proc, h.rndv.src_req, 0);
        return;
    }
    if (k > 0) {
        // The PUT leaves before the first get; the receive owns the
        // registration from now on (the sender puts into it).
        r->want = length;
        split_start(r, proc, bml, local, h.rndv.src_req, k);
        local = nullptr;
        length = k;
    }
    op->req = r;
    op->bml = bml;
    op->local = local;
    op->proc = proc;
    op->src_req = h.rndv.src_req;
    op->remote_addr = h.src_addr;
    op->length = length;
    op->chunk = bml->btl->btl_get_limit > 0 && bml->btl->btl_get_limit < length
                    ? bml->btl->btl_get_limit
                    : length;
    op->issued = 0;
    op->failed_at = UINT64_MAX;
    op->refs = 1;
    op->handle_len = h.handle_len;
    std::memcpy(op->remote_handle, handle, h.handle_len);
    issue_gets(op);
}

void getop_resume(GetOp *op) noexcept { issue_gets(op); }

void recv_ask_frags(RecvRequest *r, ompi_proc_t *proc, uint64_t src_req, uint64_t offset) noexcept {
    uint64_t want = r->msg_len < r->capacity ? r->msg_len : r->capacity;
    if (r->split) {
        want = r->put_frags.lo(); // a split receive's own part is [0, k)
    }
    {
        Guard guard(&g.ids_lock);
        r->id = g.recv_ids.open(r->frags, offset, want, r);
    }
    if (r->id == 0) {
        fatal("out of memory registering a receive for its fragments");
    }
    // Registered before the ACK leaves: FRAGs can come back inside send_ctrl.
    wire::AckHdr ack = r->split ? wire::make_ack_split(src_req, r->id, offset, want - offset)
                                : wire::make_ack(src_req, r->id, offset, want - offset);
    send_ctrl(proc, wire::Kind::kAck, &ack, sizeof ack);
}

} // namespace roce::pml

using namespace roce::pml;

extern "C" void mca_pml_roce_cb_frag(mca_btl_base_module_t *, mca_btl_base_tag_t tag,
                                     const roce::compat::RecvDesc *des) {
    wire::FragHdr h;
    Pieces data;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1 && pieces_of(des, sizeof h, data)) {
        d = wire::decode_frag(des->des_segments[0].seg_addr.pval, des->des_segments[0].seg_len,
                              data.total, h);
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    // Admission records the FRAG's bytes before they are unpacked, so a
    // copy arriving meanwhile (in another thread) is a duplicate too. Only
    // an accepted FRAG touches the receive; one naming a finished receive
    // finds a closed id and never reaches its memory.
    rndv::FragTable::Admission a;
    uint64_t lo = 0, hi = 0, arrived = 0;
    {
        Guard guard(&g.ids_lock);
        a = g.recv_ids.admit(h.dst_req, h.offset, data.total);
        if (OPAL_UNLIKELY(a.outcome != rndv::Outcome::kAccepted && a.account != nullptr)) {
            lo = a.account->lo();
            hi = a.account->hi();
            arrived = a.account->arrived();
        }
    }
    switch (a.outcome) {
    case rndv::Outcome::kAccepted:
        break;
    case rndv::Outcome::kDuplicate:
        drop_duplicate(&g.counters.dup_frags, "FRAG", h.dst_req, h.offset, data.total);
        return;
    case rndv::Outcome::kUnknown:
    case rndv::Outcome::kWrongState:
        reject_id("FRAG", h.dst_req, a.outcome);
        return;
    case rndv::Outcome::kNoMemory:
        fatal("out of memory recording a message fragment");
    default:
        if (should_log(&g.counters.bad_frags)) {
            report("refused message",
                   "error: refused a FRAG of %zu bytes at offset %" PRIu64
                   " for request id 0x%016" PRIx64 ": %s (the receive wants [%" PRIu64 ", %" PRIu64
                   "), %" PRIu64 " bytes of it arrived); %" PRIu64
                   " refused so far, only the first 16 and then one in 4096 are shown",
                   data.total, h.offset, h.dst_req, rndv::outcome_name(a.outcome), lo, hi, arrived,
                   g.counters.bad_frags);
        }
        return;
    }
    auto *r = static_cast<RecvRequest *>(a.account->owner());
    unpack(r, h.offset, data, data.total);
    bool done;
    {
        Guard guard(&g.ids_lock);
        done = g.recv_ids.settle(*a.account); // r->frags, or a split receive's put range
    }
    if (done && r->split) {
        recv_part_done(r);
    } else if (done) {
        const ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
        recv_finish(r, st.MPI_SOURCE, st.MPI_TAG, r->msg_len, r->frags.hi());
    }
}
