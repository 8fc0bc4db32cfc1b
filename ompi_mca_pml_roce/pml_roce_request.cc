// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Request lifetime. A request carries a reference count instead of ob1's
// pair of flags (req_pml_complete / req_free_called): the user holds one
// reference until MPI_Request_free or the end of a wait, the pml one while
// the operation is active (taken by isend/irecv/start, dropped at
// completion), and pipeline callbacks a temporary one. Whoever drops the
// last reference returns the request to its free list, so completion in a
// progress thread can never race a free in the user's thread.
#include "pml_roce_internal.h"

#include "ompi/mca/pml/base/pml_base_bsend.h"

namespace roce::pml {
namespace {

int send_req_free(ompi_request_t **rptr) noexcept;
int recv_req_free(ompi_request_t **rptr) noexcept;
int send_req_cancel(ompi_request_t *, int) noexcept;
int recv_req_cancel(ompi_request_t *req, int) noexcept;

// The entry points are set once per item: they never change, and items
// come back to the same free list.
void send_ctor(SendRequest *r) {
    ompi_request_t *o = &r->base.req_base.req_ompi;
    o->req_free = send_req_free;
    o->req_cancel = send_req_cancel;
    o->req_start = mca_pml_roce_start;
    r->base.req_base.req_ompi.req_type = OMPI_REQUEST_PML;
    r->base.req_base.req_type = MCA_PML_REQUEST_SEND;
    r->flags = 0;
    r->refs = 0;
}

void recv_ctor(RecvRequest *r) {
    ompi_request_t *o = &r->base.req_base.req_ompi;
    o->req_free = recv_req_free;
    o->req_cancel = recv_req_cancel;
    o->req_start = mca_pml_roce_start;
    r->base.req_base.req_ompi.req_type = OMPI_REQUEST_PML;
    r->base.req_base.req_type = MCA_PML_REQUEST_RECV;
    r->flags = 0;
    r->refs = 0;
    new (&r->frags) rndv::FragAccount();
    new (&r->put_frags) rndv::FragAccount();
    r->split = false;
    r->split_reg = nullptr;
    OBJ_CONSTRUCT(&r->unpack_lock, opal_mutex_t);
}

void recv_dtor(RecvRequest *r) {
    OBJ_DESTRUCT(&r->unpack_lock);
    r->put_frags.~FragAccount();
    r->frags.~FragAccount();
}

void kept_ctor(Kept *k) {
    k->home = nullptr;
    k->data = reinterpret_cast<uint8_t *>(k + 1);
}

void getop_ctor(GetOp *op) { op->req = nullptr; }
void ctrl_ctor(Ctrl *c) { c->proc = nullptr; }
void putop_ctor(PutOp *op) {
    op->req = nullptr;
}

} // namespace
} // namespace roce::pml

using namespace roce::pml;

extern "C" {
OBJ_CLASS_INSTANCE(mca_pml_roce_send_request_t, mca_pml_base_send_request_t, send_ctor, nullptr);
OBJ_CLASS_INSTANCE(mca_pml_roce_recv_request_t, mca_pml_base_recv_request_t, recv_ctor, recv_dtor);
OBJ_CLASS_INSTANCE(mca_pml_roce_kept_t, opal_free_list_item_t, kept_ctor, nullptr);
OBJ_CLASS_INSTANCE(mca_pml_roce_getop_t, opal_free_list_item_t, getop_ctor, nullptr);
OBJ_CLASS_INSTANCE(mca_pml_roce_ctrl_t, opal_free_list_item_t, ctrl_ctor, nullptr);
OBJ_CLASS_INSTANCE(mca_pml_roce_putop_t, opal_free_list_item_t, putop_ctor, nullptr);
}

namespace roce::pml {
namespace {

int send_req_free(ompi_request_t **rptr) noexcept {
    auto *r = reinterpret_cast<SendRequest *>(*rptr);
    r->base.req_base.req_free_called = true;
    *rptr = MPI_REQUEST_NULL;
    send_request_release(r);
    return OMPI_SUCCESS;
}

// What only requests with a convertor or retained objects need, out of the
// way of the common return.
[[gnu::cold, gnu::noinline]] void recv_request_drop(RecvRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    release_refs(r->flags, b->req_comm, b->req_datatype);
    if (r->flags & kConvReady) {
        opal_convertor_cleanup(&b->req_convertor);
    }
}

// recv_request_return's body, also inline in recv_req_free: the free after
// MPI_Wait drops the last reference of nearly every receive.
[[gnu::always_inline]] inline void recv_request_return_inl(RecvRequest *r) noexcept {
    if (OPAL_UNLIKELY(r->flags & (kConvReady | kRetainedComm | kRetainedDt))) {
        recv_request_drop(r);
    }
    r->flags = 0;
    OMPI_REQUEST_FINI(&r->base.req_base.req_ompi);
    opal_free_list_return(&g.recv_reqs, &r->base.req_base.req_ompi.super);
}

int recv_req_free(ompi_request_t **rptr) noexcept {
    auto *r = reinterpret_cast<RecvRequest *>(*rptr);
    r->base.req_base.req_free_called = true;
    *rptr = MPI_REQUEST_NULL;
    if (add_fetch32(&r->refs, -1) == 0) {
        recv_request_return_inl(r);
    }
    return OMPI_SUCCESS;
}

// Sends are not cancelled (as in ob1): MPI allows a cancel to fail, and the
// status then says "not cancelled".
int send_req_cancel(ompi_request_t *, int) noexcept { return OMPI_SUCCESS; }

// A receive is cancelled only if the matcher still has it posted; its answer
// under the communicator lock is authoritative (matched means not cancelled).
int recv_req_cancel(ompi_request_t *req, int) noexcept {
    auto *r = reinterpret_cast<RecvRequest *>(req);
    if (REQUEST_COMPLETE(req) || r->pcomm == nullptr) {
        return OMPI_SUCCESS;
    }
    bool removed;
    {
        Guard guard(&r->pcomm->lock);
        removed = r->pcomm->matcher->cancel(r->handle);
        r->handle = match::PostedHandle{};
    }
    if (removed) {
        req->req_status._cancelled = 1;
        req->req_status._ucount = 0;
        recv_request_complete(r);
    }
    return OMPI_SUCCESS;
}

} // namespace

SendRequest *send_request_alloc() noexcept {
    auto *r = reinterpret_cast<SendRequest *>(opal_free_list_get(&g.send_reqs));
    if (OPAL_UNLIKELY(r == nullptr)) {
        return nullptr;
    }
    return r;
}

void send_request_release(SendRequest *r) noexcept {
    if (add_fetch32(&r->refs, -1) != 0) {
        return;
    }
    mca_pml_base_request_t *b = &r->base.req_base;
    release_refs(r->flags, b->req_comm, b->req_datatype);
    if (r->flags & kConvReady) {
        opal_convertor_cleanup(&b->req_convertor);
    }
    r->flags = 0;
    OMPI_REQUEST_FINI(&b->req_ompi);
    opal_free_list_return(&g.send_reqs, &b->req_ompi.super);
}

void send_request_complete(SendRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    if (r->flags & kBsendBuf) {
        // The data went out of the MPI_Buffer_attach buffer: give it back.
        mca_pml_base_bsend_request_fini(&b->req_ompi);
        r->flags &= static_cast<uint8_t>(~kBsendBuf);
        __atomic_sub_fetch(&g.bsend_inflight, 1, __ATOMIC_ACQ_REL);
    }
    if (r->rget_out) {
        r->rget_out = false;
        add_fetch32(&g.rget_out, -1);
    }
    r->proto = static_cast<uint8_t>(SendProto::kIdle);
    b->req_pml_complete = true;
    // A buffered send was MPI-complete as soon as its data was copied.
    if (!REQUEST_COMPLETE(&b->req_ompi)) {
        ompi_request_complete(&b->req_ompi, true);
    }
    send_request_release(r);
}

void recv_request_return(RecvRequest *r) noexcept {
    recv_request_return_inl(r);
}

Kept *kept_alloc_large(std::size_t bytes) noexcept {
    opal_free_list_t *home = bytes <= g.kept_large_bytes ? &g.kept_large : nullptr;
    Kept *k;
    if (OPAL_LIKELY(home != nullptr)) {
        k = reinterpret_cast<Kept *>(opal_free_list_get(home));
        if (OPAL_UNLIKELY(k == nullptr)) {
            return nullptr;
        }
    } else {
        // Larger than any btl's eager fragment: only a peer with a larger
        // eager limit sends this; keep it without a pool.
        k = static_cast<Kept *>(malloc(sizeof(Kept) + bytes));
        if (k == nullptr) {
            return nullptr;
        }
        k->data = reinterpret_cast<uint8_t *>(k + 1);
    }
    k->home = home;
    return k;
}

} // namespace roce::pml
