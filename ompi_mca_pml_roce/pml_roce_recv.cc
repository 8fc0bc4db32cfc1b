// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The receive side as MPI calls it: irecv/recv/irecv_init, the probes,
// mprobe/improbe and mrecv/imrecv, and MPI_Start for both directions.
#include "pml_roce_internal.h"

#include "ompi/message/message.h"
#include "opal/runtime/opal_progress.h"

namespace roce::pml {

int send_start_persistent(SendRequest *r) noexcept; // pml_roce_send.cc

namespace {

// Both inline into irecv/recv (the compiler folds their overlapping stores).
[[gnu::always_inline]] inline void recv_request_init(RecvRequest *r, void *buf, size_t count,
                                                     ompi_datatype_t *dt, int src, int tag,
                                                     ompi_communicator_t *comm,
                                                     uint8_t flags) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    bool persistent = (flags & kPersistent) != 0;
    OMPI_REQUEST_INIT(&b->req_ompi, persistent);
    b->req_ompi.req_mpi_object.comm = comm;
    b->req_addr = buf;
    b->req_count = count;
    b->req_datatype = dt;
    b->req_peer = src;
    b->req_tag = tag;
    b->req_comm = comm;
    b->req_proc = nullptr;
    b->req_pml_complete = persistent;
    b->req_free_called = false;
    r->base.req_bytes_packed = 0;
    if (!(flags & kBlocking)) {
        flags |= retain_refs(comm, dt);
    }
    r->pcomm = pml_comm(comm);
    r->handle = match::PostedHandle{};
    r->id = 0;
    const char *start;
    if (OPAL_LIKELY(layout_of(dt, count, buf, &start, &r->capacity))) {
        flags |= kContig;
        r->contig = const_cast<char *>(start);
    } else {
        opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dt->super, count, buf,
                                                 0, &b->req_convertor);
        flags |= kConvReady;
        r->contig = nullptr;
    }
    r->flags = flags;
}

// Makes the request active: status reset, not complete.
[[gnu::always_inline]] inline void recv_arm(RecvRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    ompi_request_t *o = &b->req_ompi;
    o->req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    o->req_status.MPI_TAG = MPI_ANY_TAG;
    o->req_status.MPI_ERROR = MPI_SUCCESS;
    o->req_status._ucount = 0;
    o->req_status._cancelled = 0;
    o->req_complete = REQUEST_PENDING;
    o->req_state = OMPI_REQUEST_ACTIVE;
    b->req_pml_complete = false;
    if (OPAL_UNLIKELY(r->flags & kConvReady)) {
        size_t zero = 0;
        opal_convertor_set_position(&b->req_convertor, &zero);
    }
}

[[gnu::always_inline]] inline int recv_post(RecvRequest *r) noexcept {
    mca_pml_base_request_t *b = &r->base.req_base;
    recv_arm(r);
    PmlComm *pc = r->pcomm;
    // Only what is used leaves the locked scope: a whole Posting kept alive
    // across it is copied through the stack (the inline fast path and the
    // general one return it differently).
    match::Verdict verdict;
    void *matched;
    {
        Guard guard(&pc->lock);
        match::Posting p = pc->matcher->post(b->req_peer, b->req_tag, r);
        ++g.counters.match_attempts;
        r->handle = p.handle;
        verdict = p.verdict;
        matched = p.matched ? p.message.payload : nullptr;
    }
    if (OPAL_UNLIKELY(verdict != match::Verdict::kOk)) {
        return verdict == match::Verdict::kNoMemory ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_ERR_BAD_PARAM;
    }
    if (matched != nullptr) {
        deliver_kept(r, static_cast<Kept *>(matched));
    }
    return OMPI_SUCCESS;
}

// A request made and posted at once (irecv; recv into a non-contiguous
// buffer); nullptr with *rc set when that fails.
[[gnu::always_inline]] inline RecvRequest *recv_start_posted(void *buf, size_t count,
                                                             ompi_datatype_t *dt, int src, int tag,
                                                             ompi_communicator_t *comm,
                                                             uint8_t flags, int *rc) noexcept {
    RecvRequest *r = recv_request_alloc();
    if (OPAL_UNLIKELY(r == nullptr)) {
        *rc = OMPI_ERR_OUT_OF_RESOURCE;
        return nullptr;
    }
    recv_request_init(r, buf, count, dt, src, tag, comm, flags);
    r->refs = 2;
    *rc = recv_post(r);
    if (OPAL_UNLIKELY(*rc != OMPI_SUCCESS)) {
        r->refs = 1;
        recv_request_release(r);
        return nullptr;
    }
    return r;
}

// Status of a message found by a probe (under the communicator lock: the
// Kept item may be taken by another thread once the lock is released).
void probe_status(const match::Message &m, ompi_status_public_t *status) noexcept {
    if (status == MPI_STATUS_IGNORE) {
        return;
    }
    const auto *k = static_cast<const Kept *>(m.payload);
    status->MPI_SOURCE = m.source;
    status->MPI_TAG = m.tag;
    status->MPI_ERROR = MPI_SUCCESS;
    status->_cancelled = 0;
    status->_ucount = k->kind == static_cast<uint8_t>(wire::Kind::kMatch) ? k->len : k->hdr.rndv.msg_len;
}

bool iprobe_once(int src, int tag, ompi_communicator_t *comm, ompi_status_public_t *status,
                 int *rc) noexcept {
    PmlComm *pc = pml_comm(comm);
    Guard guard(&pc->lock);
    match::Probe p = pc->matcher->iprobe(src, tag);
    ++g.counters.match_attempts;
    if (OPAL_UNLIKELY(p.verdict == match::Verdict::kNoMemory)) {
        *rc = OMPI_ERR_OUT_OF_RESOURCE; // the wildcard's index could not be built
    }
    if (p.found) {
        probe_status(p.message, status);
    }
    return p.found;
}

// MPI_Improbe: the message leaves the matcher and travels in an
// ompi_message_t until MPI_Mrecv/MPI_Imrecv.
bool improbe_once(int src, int tag, ompi_communicator_t *comm, ompi_message_t **message,
                  ompi_status_public_t *status, int *rc) noexcept {
    PmlComm *pc = pml_comm(comm);
    ompi_message_t *msg = ompi_message_alloc();
    if (msg == nullptr) {
        *rc = OMPI_ERR_TEMP_OUT_OF_RESOURCE;
        return false;
    }
    match::Probe p;
    {
        Guard guard(&pc->lock);
        p = pc->matcher->improbe(src, tag);
        ++g.counters.match_attempts;
    }
    if (OPAL_UNLIKELY(p.verdict == match::Verdict::kNoMemory)) {
        *rc = OMPI_ERR_OUT_OF_RESOURCE; // the wildcard's index could not be built
    }
    if (!p.found) {
        ompi_message_return(msg);
        return false;
    }
    ompi_status_public_t st;
    probe_status(p.message, &st);
    if (status != MPI_STATUS_IGNORE) {
        *status = st;
    }
    msg->comm = comm;
    msg->req_ptr = p.message.payload;
    msg->peer = p.message.source;
    msg->count = st._ucount;
    *message = msg;
    return true;
}

// Arms a fresh request `r` to receive from a message taken out of the
// matcher (mprobe, or a blocking receive that found it) and delivers it.
void recv_from_kept(RecvRequest *r, void *buf, size_t count, ompi_datatype_t *dt, int32_t src,
                    ompi_communicator_t *comm, Kept *k, uint8_t flags) noexcept {
    recv_request_init(r, buf, count, dt, src, k->hdr.match.tag, comm, flags);
    r->refs = 2;
    ompi_request_t *o = &r->base.req_base.req_ompi;
    o->req_status.MPI_ERROR = MPI_SUCCESS;
    o->req_status._cancelled = 0;
    o->req_complete = REQUEST_PENDING;
    o->req_state = OMPI_REQUEST_ACTIVE;
    r->base.req_base.req_pml_complete = false;
    deliver_kept(r, k);
}

// A receive for a message taken by mprobe: no posting, data from the copy.
RecvRequest *mrecv_start(void *buf, size_t count, ompi_datatype_t *dt, ompi_message_t **message,
                         uint8_t flags) noexcept {
    ompi_message_t *msg = *message;
    auto *k = static_cast<Kept *>(msg->req_ptr);
    RecvRequest *r = recv_request_alloc();
    if (r == nullptr) {
        return nullptr;
    }
    ompi_communicator_t *comm = msg->comm;
    int32_t src = msg->peer;
    *message = MPI_MESSAGE_NULL;
    ompi_message_return(msg);
    recv_from_kept(r, buf, count, dt, src, comm, k, flags);
    return r;
}

int wait_recv(RecvRequest *r, ompi_status_public_t *status) noexcept {
    ompi_request_t *o = &r->base.req_base.req_ompi;
    ompi_request_wait_completion(o);
    int rc = o->req_status.MPI_ERROR;
    if (status != MPI_STATUS_IGNORE) {
        OMPI_COPY_STATUS(status, o->req_status, false);
    }
    recv_request_release(r);
    return rc;
}

} // namespace
} // namespace roce::pml

using namespace roce::pml;

extern "C" {

int mca_pml_roce_irecv_init(void *buf, size_t count, ompi_datatype_t *dt, int src, int tag,
                            ompi_communicator_t *comm, ompi_request_t **request) noexcept {
    RecvRequest *r = recv_request_alloc();
    if (r == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    recv_request_init(r, buf, count, dt, src, tag, comm, kPersistent);
    r->refs = 1; // the user's; each start adds the pml's
    *request = &r->base.req_base.req_ompi;
    return OMPI_SUCCESS;
}

int mca_pml_roce_irecv(void *buf, size_t count, ompi_datatype_t *dt, int src, int tag,
                       ompi_communicator_t *comm, ompi_request_t **request) noexcept {
    int rc;
    RecvRequest *r = recv_start_posted(buf, count, dt, src, tag, comm, 0, &rc);
    if (OPAL_UNLIKELY(r == nullptr)) {
        return rc;
    }
    *request = &r->base.req_base.req_ompi;
    return OMPI_SUCCESS;
}

int mca_pml_roce_recv(void *buf, size_t count, ompi_datatype_t *dt, int src, int tag,
                      ompi_communicator_t *comm, ompi_status_public_t *status) noexcept {
    const char *start;
    uint64_t capacity;
    if (OPAL_UNLIKELY(!layout_of(dt, count, buf, &start, &capacity))) {
        // Non-contiguous: a request with a convertor, posted at once.
        int rc;
        RecvRequest *r = recv_start_posted(buf, count, dt, src, tag, comm, kBlocking, &rc);
        return OPAL_LIKELY(r != nullptr) ? wait_recv(r, status) : rc;
    }
    // Contiguous: the matcher makes the request only if the message is not
    // here yet (it runs `make` under the communicator lock, before posting).
    PmlComm *pc = pml_comm(comm);
    // One capture (the arguments live in `a`): cheaper to set up than eight.
    struct Args {
        void *buf;
        size_t count;
        ompi_datatype_t *dt;
        ompi_communicator_t *comm;
        int src, tag;
        RecvRequest *r;
    } a{buf, count, dt, comm, src, tag, nullptr};
    auto make = [pa = &a]() -> void * {
        RecvRequest *r = recv_request_alloc();
        if (OPAL_LIKELY(r != nullptr)) {
            recv_request_init(r, pa->buf, pa->count, pa->dt, pa->src, pa->tag, pa->comm, kBlocking);
            r->refs = 2;
            recv_arm(r);
        }
        return pa->r = r;
    };
    match::Posting p;
    {
        Guard guard(&pc->lock);
        p = pc->matcher->post(src, tag, make);
        ++g.counters.match_attempts;
        if (a.r != nullptr) {
            a.r->handle = p.handle;
        }
    }
    RecvRequest *r = a.r;
    if (OPAL_UNLIKELY(p.verdict != match::Verdict::kOk)) {
        return p.verdict == match::Verdict::kNoMemory ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_ERR_BAD_PARAM;
    }
    if (!p.matched) {
        return wait_recv(r, status); // posted
    }
    auto *k = static_cast<Kept *>(p.message.payload);
    if (OPAL_LIKELY(k->kind == static_cast<uint8_t>(wire::Kind::kMatch))) {
        // An eager message that was waiting: copy it out, no request at all.
        std::size_t n = k->len < capacity ? k->len : static_cast<std::size_t>(capacity);
        copy_bytes(const_cast<char *>(start), k->data, n);
        int rc = OPAL_UNLIKELY(k->len > capacity) ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
        if (status != MPI_STATUS_IGNORE) {
            status->MPI_SOURCE = k->hdr.match.src;
            status->MPI_TAG = k->hdr.match.tag;
            status->MPI_ERROR = rc;
            status->_cancelled = 0;
            status->_ucount = n;
        }
        kept_free(k);
        return rc;
    }
    // A rendezvous header that was waiting: the protocol needs a request.
    r = recv_request_alloc();
    if (OPAL_UNLIKELY(r == nullptr)) {
        fatal("out of memory for the request of a receive that matched a rendezvous message "
              "from rank %d (tag %d) on communicator %u", k->hdr.match.src, k->hdr.match.tag,
              pc->ctx);
    }
    recv_from_kept(r, buf, count, dt, k->hdr.match.src, comm, k, kBlocking);
    return wait_recv(r, status);
}

int mca_pml_roce_iprobe(int src, int tag, ompi_communicator_t *comm, int *matched,
                        ompi_status_public_t *status) noexcept {
    int rc = OMPI_SUCCESS;
    *matched = 1;
    if (iprobe_once(src, tag, comm, status, &rc)) {
        return OMPI_SUCCESS;
    }
    if (rc == OMPI_SUCCESS) {
        opal_progress();
        if (iprobe_once(src, tag, comm, status, &rc)) {
            return OMPI_SUCCESS;
        }
    }
    *matched = 0;
    return rc;
}

int mca_pml_roce_probe(int src, int tag, ompi_communicator_t *comm,
                       ompi_status_public_t *status) noexcept {
    int rc = OMPI_SUCCESS;
    while (!iprobe_once(src, tag, comm, status, &rc)) {
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
        opal_progress();
    }
    return OMPI_SUCCESS;
}

int mca_pml_roce_improbe(int src, int tag, ompi_communicator_t *comm, int *matched,
                         ompi_message_t **message, ompi_status_public_t *status) noexcept {
    int rc = OMPI_SUCCESS;
    *matched = 1;
    if (improbe_once(src, tag, comm, message, status, &rc)) {
        return OMPI_SUCCESS;
    }
    if (rc == OMPI_SUCCESS) {
        opal_progress();
        if (improbe_once(src, tag, comm, message, status, &rc)) {
            return OMPI_SUCCESS;
        }
    }
    *matched = 0;
    *message = MPI_MESSAGE_NULL;
    return rc;
}

int mca_pml_roce_mprobe(int src, int tag, ompi_communicator_t *comm, ompi_message_t **message,
                        ompi_status_public_t *status) noexcept {
    int rc = OMPI_SUCCESS;
    while (!improbe_once(src, tag, comm, message, status, &rc)) {
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
        opal_progress();
    }
    return OMPI_SUCCESS;
}

int mca_pml_roce_imrecv(void *buf, size_t count, ompi_datatype_t *dt, ompi_message_t **message,
                        ompi_request_t **request) noexcept {
    RecvRequest *r = mrecv_start(buf, count, dt, message, 0);
    if (r == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    *request = &r->base.req_base.req_ompi;
    return OMPI_SUCCESS;
}

int mca_pml_roce_mrecv(void *buf, size_t count, ompi_datatype_t *dt, ompi_message_t **message,
                       ompi_status_public_t *status) noexcept {
    RecvRequest *r = mrecv_start(buf, count, dt, message, kBlocking);
    if (r == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    return wait_recv(r, status);
}

int mca_pml_roce_start(size_t count, ompi_request_t **requests) noexcept {
    for (size_t i = 0; i < count; ++i) {
        ompi_request_t *o = requests[i];
        if (o == nullptr || o->req_type != OMPI_REQUEST_PML) {
            continue;
        }
        auto *b = reinterpret_cast<mca_pml_base_request_t *>(o);
        int rc;
        if (b->req_type == MCA_PML_REQUEST_SEND) {
            rc = send_start_persistent(reinterpret_cast<SendRequest *>(o));
        } else if (b->req_type == MCA_PML_REQUEST_RECV) {
            auto *r = reinterpret_cast<RecvRequest *>(o);
            add_fetch32(&r->refs, 1);
            rc = recv_post(r);
            if (rc != OMPI_SUCCESS) {
                o->req_status.MPI_ERROR = rc;
                recv_request_complete(r);
            }
        } else {
            rc = OMPI_ERR_REQUEST;
        }
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

} // extern "C"
