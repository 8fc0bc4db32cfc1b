// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The roce PML's internal state and types, shared by its C++ files. Include
// ompi_cxx_compat.h first (done here). Nothing in this header is visible
// outside mca_pml_roce.so.
//
// Objects:
//  - Pml (one, `g`): free lists, the communicator table, EarlyArrivals, the
//    request-id tables, the pending-work queues, limits and counters;
//  - PmlComm (one per communicator, comm->c_pml_comm): the CommMatcher and
//    its lock, the per-destination send sequence numbers;
//  - SendRequest / RecvRequest: Open MPI requests (first member the pml base
//    request), from free lists;
//  - Kept: an arrived match-type fragment copied for later (unexpected,
//    held for sequence order, early, or mprobed);
//  - GetOp: the receiver's state of one RDMA-get rendezvous;
//  - Ctrl: an ACK or FIN waiting for a btl descriptor.
// README.md in this directory has the protocols and the locking rules.
#pragma once

#include "ompi_cxx_compat.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/mca/pml/base/pml_base_recvreq.h"
#include "ompi/mca/pml/base/pml_base_sendreq.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "opal/class/opal_free_list.h"
#include "opal/class/opal_list.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/btl/btl.h"
#include "opal_btl_compat.h"
#include "opal/threads/mutex.h"
#include "opal/util/output.h"

#include "match/comm_matcher.h"
#include "match/early_arrivals.h"
#include "pml_roce.h"
#include "pml_roce_excid.h"
#include "pml_roce_handles.h"
#include "pml_roce_help.h"
#include "pml_roce_rndv.h"
#include "pml_roce_stream.h"
#include "pml_roce_wire.h"

namespace roce::pml {

static_assert(match::kAnySource == MPI_ANY_SOURCE, "engine wildcard must equal MPI's");
static_assert(match::kAnyTag == MPI_ANY_TAG, "engine wildcard must equal MPI's");
static_assert(wire::kAnyTag == MPI_ANY_TAG, "wire wildcard must equal MPI's");

/// Messages up to this many bytes go out through btl_sendi from a stack
/// buffer holding header and data (no descriptor, no convertor).
inline constexpr std::size_t kInlineMax = 256;
/// Unexpected messages up to this many data bytes are kept in small items.
inline constexpr std::size_t kKeptSmall = 256 - 96;

// ------------------------------------------------------------------ locks ----

/// Set at init when a btl has its own progress thread (its callbacks then run
/// concurrently even in a single-threaded MPI program).
extern bool g_btl_threads;

/// True when the pml must lock and use atomics: MPI_THREAD_MULTIPLE, or a
/// btl progress thread.
inline bool must_lock() noexcept { return opal_using_threads() || g_btl_threads; }

class Guard {
public:
    explicit Guard(opal_mutex_t *m) noexcept : Guard(m, must_lock()) {}
    /// For a caller that read must_lock() already (it does not change while
    /// the pml runs): the compiler cannot know that and would read it again.
    Guard(opal_mutex_t *m, bool lock) noexcept : m_(lock ? m : nullptr) {
        if (m_ != nullptr) {
            opal_mutex_lock(m_);
        }
    }
    ~Guard() {
        if (m_ != nullptr) {
            opal_mutex_unlock(m_);
        }
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;

private:
    opal_mutex_t *m_;
};

inline int32_t add_fetch32(volatile int32_t *p, int32_t v, bool atomic) noexcept {
    if (!atomic) {
        return *p += v;
    }
    return __atomic_add_fetch(p, v, __ATOMIC_ACQ_REL);
}
inline int32_t add_fetch32(volatile int32_t *p, int32_t v) noexcept {
    return add_fetch32(p, v, must_lock());
}
inline uint64_t add_fetch64(volatile uint64_t *p, uint64_t v) noexcept {
    if (!must_lock()) {
        return *p += v;
    }
    return __atomic_add_fetch(p, v, __ATOMIC_ACQ_REL);
}

// ---------------------------------------------------------- communicators ----

/// Per-communicator state (comm->c_pml_comm).
///
/// Lifetime. The arrival path (btl callbacks, in whatever thread runs
/// progress) looks a communicator up by the context id a fragment names,
/// while MPI_Comm_free may run del_comm in another thread at the same time
/// (MPI_THREAD_MULTIPLE, or a btl progress thread; a fragment naming a
/// communicator that is being freed is a late duplicate, a stray or a
/// forgery, but it arrives all the same). So:
///  - `refs` counts references: the communicator table holds one from
///    add_comm to del_comm, and every lookup from the arrival path holds one
///    (CommTable::acquire, released by comm_release / CommRef) for as long
///    as it uses the object, including after the delivery that may let the
///    user free the communicator;
///  - del_comm unpublishes the context id and drops the table's reference;
///    whoever drops the last one (del_comm, or the arrival that finished
///    last) retires the object: drains its matcher (messages that arrived
///    for it are freed) and returns it to a pool;
///  - PmlComm memory is type-stable: it stays in the pool (g.comm_pool)
///    until finalize and is reused by later communicators, never returned
///    to the allocator while the pml runs. So a lookup that races the
///    retirement increments a counter that still exists, sees 0 (retired:
///    it backs off) or another context id (reused: it releases and looks
///    again), and never touches freed memory.
/// Everything but `refs`, `lock` and the pool links belongs to one life
/// (add_comm to retirement) and is read by the arrival path only under a
/// reference. Lock order: g.early_lock before `lock`; comm_release may take
/// g.early_lock, so no reference is dropped with either lock held.
struct PmlComm {
    opal_mutex_t lock; ///< serialises every call on `matcher` (and keep callbacks)
    std::unique_ptr<match::CommMatcher> matcher;
    ompi_communicator_t *comm = nullptr;
    uint32_t ctx = 0; ///< this process's index (compat::comm_cid), <= compat::kMaxContextId
    int32_t my_rank = 0;
    int32_t remote_size = 0;
    /// Next sequence number per destination (atomic when threads are used).
    std::unique_ptr<uint32_t[]> send_seq;
    /// True when every peer's index is `ctx` and fits a MATCH header's 16
    /// bits (always under 4.1): headers carry ctx, nothing else is needed.
    bool plain = true;
    /// Not plain (Open MPI 5.0): each peer's index + 1, 0 while unknown
    /// (then messages to it go by extended id, pml_roce_ext.cc); written
    /// once per peer by the arrival path, read by senders (atomics under
    /// must_lock()).
    std::unique_ptr<uint32_t[]> peer_ctx;
    uint64_t excid[2] = {0, 0}; ///< the extended id (communicators without a global index)
    bool global = true;         ///< the index is the same everywhere
    volatile int32_t refs = 0; ///< 0: retired (in the pool, or being set up)
    PmlComm *next_free = nullptr; ///< pool link (under g.early_lock)
    PmlComm *next_all = nullptr;  ///< every PmlComm ever made, for finalize
};

inline PmlComm *pml_comm(ompi_communicator_t *comm) noexcept {
    return reinterpret_cast<PmlComm *>(comm->c_pml_comm);
}

/// Retires a PmlComm whose last reference was just dropped: frees the
/// messages left in its matcher and returns the object to g.comm_pool
/// (takes g.early_lock).
void comm_retire(PmlComm *pc) noexcept;
/// Drops one reference; the last one retires the communicator state. Any
/// thread; the last holder takes g.early_lock, so never call it with
/// g.early_lock or a communicator lock held. Inline: every match-type
/// arrival drops one.
/// `threads`: must_lock(), when the caller read it already.
inline void comm_release(PmlComm *pc, bool threads) noexcept {
    if (OPAL_UNLIKELY(add_fetch32(&pc->refs, -1, threads) == 0)) {
        comm_retire(pc);
    }
}
inline void comm_release(PmlComm *pc) noexcept {
    comm_release(pc, must_lock());
}
/// A PmlComm from the pool, or a new one (its lock constructed), refs 0;
/// nullptr when out of memory. Caller holds g.early_lock.
PmlComm *comm_take_from_pool() noexcept;
/// Clears a PmlComm nobody references and returns it to the pool. Caller
/// holds g.early_lock.
void comm_retire_locked(PmlComm *pc) noexcept;

/// Takes a reference if the object is alive (refs > 0); false when it is
/// retired or being set up. For threads (must_lock()).
inline bool comm_try_ref(PmlComm *pc) noexcept {
    int32_t r = __atomic_load_n(&pc->refs, __ATOMIC_RELAXED);
    while (r > 0) {
        if (__atomic_compare_exchange_n(&pc->refs, &r, r + 1, true, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            return true;
        }
    }
    return false;
}

/// context id -> PmlComm, two levels (chunks of 256 below a top level that
/// covers compat::kMaxContextId: 256 entries under 4.1, 4096 under 5.0),
/// lock-free readers; writers hold the early-arrivals lock. Callers pass
/// ids up to compat::kMaxContextId (16-bit ones from MATCH headers, larger
/// ones checked in pml_roce_ext.cc).
class CommTable {
public:
    /// The communicator published for `ctx` with one reference taken for
    /// the caller (drop it with comm_release), or nullptr. Lock-free; safe
    /// against a concurrent del_comm/add_comm (see PmlComm).
    PmlComm *acquire(uint32_t ctx) const noexcept { return acquire(ctx, must_lock()); }
    /// As acquire(ctx), for a caller that read must_lock() (`threads`) already.
    PmlComm *acquire(uint32_t ctx, bool threads) const noexcept {
        if (OPAL_LIKELY(!threads)) {
            // One thread: nothing changes between the lookup and the
            // reference, and a published object is alive with its own ctx.
            PmlComm *pc = find(ctx);
            if (OPAL_LIKELY(pc != nullptr)) {
                ++pc->refs;
            }
            return pc;
        }
        for (;;) {
            PmlComm *pc = find(ctx);
            if (pc == nullptr) {
                return nullptr;
            }
            if (comm_try_ref(pc)) {
                if (pc->ctx == ctx) {
                    return pc;
                }
                comm_release(pc); // reused for another context id meanwhile
            }
            // Retired or reused between find and the reference: look again.
            // The table changed meanwhile (a published object always has
            // refs >= 1 and its own ctx), so this ends once it is stable,
            // and never loops under g.early_lock.
        }
    }
    bool publish(uint32_t ctx, PmlComm *pc) noexcept;
    void clear() noexcept; // frees the chunks (finalize)

private:
    PmlComm *find(uint32_t ctx) const noexcept {
        PmlComm **chunk = __atomic_load_n(&top_[ctx >> 8], __ATOMIC_ACQUIRE);
        return chunk == nullptr ? nullptr : __atomic_load_n(&chunk[ctx & 0xff], __ATOMIC_ACQUIRE);
    }

    PmlComm **top_[(roce::compat::kMaxContextId >> 8) + 1] = {};
};

/// A reference on a PmlComm taken by CommTable::acquire, dropped at scope
/// exit (the arrival path).
class CommRef {
public:
    explicit CommRef(PmlComm *pc) noexcept : pc_(pc), threads_(must_lock()) {}
    /// For a caller that read must_lock() (`threads`) already.
    CommRef(PmlComm *pc, bool threads) noexcept : pc_(pc), threads_(threads) {}
    ~CommRef() {
        if (pc_ != nullptr) {
            comm_release(pc_, threads_);
        }
    }
    CommRef(const CommRef &) = delete;
    CommRef &operator=(const CommRef &) = delete;
    /// Takes over a reference (the previous one, if any, is dropped).
    void reset(PmlComm *pc) noexcept {
        if (pc_ != nullptr) {
            comm_release(pc_, threads_);
        }
        pc_ = pc;
    }
    PmlComm *get() const noexcept { return pc_; }
    PmlComm *operator->() const noexcept { return pc_; }
    explicit operator bool() const noexcept { return pc_ != nullptr; }

private:
    PmlComm *pc_;
    bool threads_; ///< must_lock(), read once
};

// --------------------------------------------------------------- requests ----

enum ReqFlags : uint8_t {
    kContig = 0x01,    ///< the user buffer is one contiguous block (contig_ is valid)
    kBlocking = 0x02,  ///< made by a blocking call: comm and datatype not retained
    kConvReady = 0x04, ///< req_convertor is prepared for this request's buffer
    kBsendBuf = 0x08,  ///< the data was copied into the MPI_Buffer_attach buffer
    kPersistent = 0x10,
    kRetainedComm = 0x20, ///< the request holds a reference on its communicator
    kRetainedDt = 0x40,   ///< the request holds a reference on its datatype
    kStream = 0x80,       ///< SendRequest: streamed (RNDV with kRndvStream, then STREAM fragments)
};

/// Takes the references a nonblocking request needs so that MPI_Comm_free or
/// MPI_Type_free cannot pull its communicator or datatype away; intrinsic
/// communicators and predefined datatypes live until finalize and are not
/// counted (saves two atomics per message on the hot path). Returns the
/// flags recording what was retained, for release_refs().
inline uint8_t retain_refs(ompi_communicator_t *comm, ompi_datatype_t *dt) noexcept {
    uint8_t f = 0;
    if (OPAL_UNLIKELY(!OMPI_COMM_IS_INTRINSIC(comm))) {
        OBJ_RETAIN(comm);
        f |= kRetainedComm;
    }
    if (OPAL_UNLIKELY(!ompi_datatype_is_predefined(dt))) {
        OBJ_RETAIN(dt);
        f |= kRetainedDt;
    }
    return f;
}
inline void release_refs(uint8_t flags, ompi_communicator_t *comm, ompi_datatype_t *dt) noexcept {
    if (OPAL_UNLIKELY(flags & kRetainedComm)) {
        OBJ_RELEASE(comm);
    }
    if (OPAL_UNLIKELY(flags & kRetainedDt)) {
        OBJ_RELEASE(dt);
    }
}

/// The sender's protocol state (pml_roce_rndv.h: the answer checks read it).
using SendProto = rndv::SendPhase;

struct SendRequest {
    mca_pml_base_send_request_t base; ///< first: Open MPI's view of the request
    PmlComm *pcomm;
    mca_bml_base_endpoint_t *ep;
    const char *contig; ///< start of the packed data when kContig (or the bsend copy)
    mca_bml_base_btl_t *rdma_bml;
    mca_btl_base_registration_handle_t *reg; ///< RGET registration of the send buffer
    uint64_t id;        ///< id in the send-request table while the peer may answer
    uint64_t dst_req;   ///< receiver's request id for FRAGs
    uint64_t total;     ///< packed bytes of the message
    uint64_t sched_off; ///< next byte to put in a FRAG
    uint64_t sched_end; ///< end of the range the receiver asked for
    volatile uint64_t frag_done; ///< FRAG bytes whose descriptors completed
    volatile int32_t refs;       ///< user + pml references; 0 -> back to the free list
    volatile int32_t sched_lock; ///< > 0 while a thread schedules FRAGs
    volatile int32_t inflight;   ///< FRAG descriptors not yet completed
    uint16_t seq;
    uint8_t flags;
    volatile uint8_t proto; ///< SendProto
    bool queued;            ///< on g.pending_sends (under g.pending_lock)
    /// Split RGET (pml_roce_split.cc): rndv::SplitBits the receiver's PUT
    /// and FIN set (under g.ids_lock); 0: not split.
    uint8_t split;
    /// Split: parts still owed before the send completes: the receiver's
    /// answer (FIN, or the FRAGs its ACK asked for) and, once a PUT or a
    /// split FIN came, the put (or the FRAGs that replace it).
    volatile int32_t parts;
    /// Split: a FRAG range is being sent; a second one (the other part's
    /// fallback) waits in next_* until it is done (under g.ids_lock).
    bool pipe_busy;
    uint64_t next_dst, next_off, next_end; ///< the waiting range (next_end 0: none)
    /// Its RGET header went out and it is not complete: counted in
    /// g.rget_out until send_request_complete().
    bool rget_out;
};
typedef SendRequest mca_pml_roce_send_request_t;

struct RecvRequest {
    mca_pml_base_recv_request_t base; ///< first: Open MPI's view of the request
    PmlComm *pcomm;
    char *contig;      ///< start of the buffer when kContig
    uint64_t capacity; ///< packed bytes the buffer holds
    match::PostedHandle handle;
    uint64_t id;       ///< id in g.recv_ids while FRAGs are expected
    uint64_t msg_len;  ///< length the sender announced
    rndv::FragAccount frags; ///< which FRAG bytes arrived (under the id lock)
    /// Split RGET (pml_roce_split.cc): the range the sender puts, [k, want),
    /// brought by its PUT-FIN or by FRAGs (under the id lock).
    rndv::FragAccount put_frags;
    uint64_t want;          ///< split: bytes the receive takes (message clipped to the buffer)
    volatile int32_t parts; ///< split: parts not done yet (the gets' [0, k), the put's [k, want))
    mca_bml_base_btl_t *split_bml; ///< split: btl of split_reg
    mca_btl_base_registration_handle_t
        *split_reg; ///< split: the buffer's registration (nullptr: none)
    bool split;     ///< this message was split
    volatile int32_t refs;
    uint8_t flags;
    opal_mutex_t unpack_lock; ///< non-contiguous FRAG unpacks share the convertor
};
typedef RecvRequest mca_pml_roce_recv_request_t;

/// An arrived match-type fragment (MATCH, RNDV or RGET) copied for later.
struct Kept {
    opal_free_list_item_t super;
    opal_free_list_t *home; ///< free list it returns to; nullptr: malloc'd
    mca_btl_base_module_t *btl; ///< btl it arrived on (RGET: owner of the handle)
    uint8_t kind;               ///< wire::Kind
    union {
        wire::MatchHdr match;
        wire::RndvHdr rndv;
        wire::RgetHdr rget;
    } hdr;
    std::size_t len; ///< bytes in data: message data (MATCH/RNDV) or the handle (RGET)
    uint8_t *data;   ///< inline storage right after this struct
};
typedef Kept mca_pml_roce_kept_t;

/// The receiver's state of one RGET.
struct GetOp {
    opal_free_list_item_t super;
    RecvRequest *req;
    mca_bml_base_btl_t *bml;
    mca_btl_base_registration_handle_t *local; ///< our registration (nullptr: not needed)
    ompi_proc_t *proc;                         ///< the sender
    uint64_t src_req;
    uint64_t remote_addr;
    uint64_t length; ///< bytes to get (message length clipped to the buffer)
    uint64_t chunk;  ///< bytes per btl_get
    uint64_t issued; ///< bytes for which a get was started
    volatile uint64_t failed_at; ///< lowest offset whose get failed (UINT64_MAX: none)
    volatile int32_t refs;       ///< gets in flight + 1 while issuing
    uint16_t handle_len;
    alignas(8) uint8_t remote_handle[wire::kMaxHandle];
};
typedef GetOp mca_pml_roce_getop_t;

/// The sender's state of the put a split RGET's PUT asked for.
struct PutOp {
    opal_free_list_item_t super;
    SendRequest *req;
    mca_bml_base_btl_t *bml;
    ompi_proc_t *proc;       ///< the receiver
    uint64_t dst_req;        ///< the receiver's id of the range (PUT-FIN, fallback FRAGs)
    uint64_t offset;         ///< first byte of the range in the message
    uint64_t size;           ///< bytes of the range
    uint64_t remote_addr;    ///< the receiver's byte `offset`
    uint64_t chunk;          ///< bytes per btl_put
    uint64_t issued;         ///< bytes of the range for which a put was started
    volatile int32_t refs;   ///< puts in flight + 1 while issuing
    volatile int32_t failed; ///< a put failed: send the range in FRAGs
    uint16_t handle_len;
    alignas(8) uint8_t remote_handle[wire::kMaxHandle];
};
typedef PutOp mca_pml_roce_putop_t;

/// A control message (ACK, FIN, PUT with its handle, PUT-FIN, EXT answer)
/// to send when a descriptor is available.
struct Ctrl {
    opal_free_list_item_t super;
    ompi_proc_t *proc;
    uint8_t tag;
    uint16_t len;
    union {
        wire::AckHdr ack;
        wire::FinHdr fin;
        wire::ExtHdr ext; ///< an answer to a message by extended id
        uint8_t bytes[sizeof(wire::PutHdr) + wire::kMaxHandle]; ///< a PUT and its handle
    } hdr;
};
typedef Ctrl mca_pml_roce_ctrl_t;

extern "C" {
OBJ_CLASS_DECLARATION(mca_pml_roce_send_request_t);
OBJ_CLASS_DECLARATION(mca_pml_roce_recv_request_t);
OBJ_CLASS_DECLARATION(mca_pml_roce_kept_t);
OBJ_CLASS_DECLARATION(mca_pml_roce_getop_t);
OBJ_CLASS_DECLARATION(mca_pml_roce_ctrl_t);
OBJ_CLASS_DECLARATION(mca_pml_roce_putop_t);
}

// ------------------------------------------------------------- the pml ----

/// The phase and length of a SendRequest, for g.send_ids' answer checks.
inline rndv::SendView send_view(const void *request) noexcept {
    auto *r = static_cast<SendRequest *>(const_cast<void *>(request));
    // Every RGET may be split: a sender that cannot put sends the range in FRAGs.
    return {static_cast<SendProto>(r->proto), r->total,
            r->rdma_bml != nullptr ? &r->split : nullptr};
}

/// Counters shown by pml_dump and, at pml_roce_verbose >= 10, at finalize
/// (relaxed, approximate under threads). Plain fields so that MPI_T
/// performance variables can expose them.
struct Counters {
    uint64_t eager_inline = 0, eager_copy = 0, rndv = 0, rget = 0, pipeline = 0;
    /// Streamed sends; STREAM fragments kept because their message had no
    /// receive yet; STREAM fragments refused (not counted in bad_frags).
    uint64_t streams = 0, stream_staged = 0, bad_streams = 0;
    uint64_t rget_fallbacks = 0, reg_failures = 0, pending_retries = 0;
    /// Split RGETs: receives that split one (pml_roce_split_min), PUTs a
    /// sender answered with FRAGs instead of a put, and PUT / PUT-FIN
    /// messages refused (unknown id, second one, wrong range or state).
    uint64_t splits = 0, split_fallbacks = 0, bad_split = 0;
    uint64_t bad_headers = 0, bad_ids = 0, early = 0;
    /// Extended ids (5.0): match-type messages sent with an EXT header,
    /// answers sent, messages by extended id that arrived before their
    /// communicator existed here, EXT messages refused (unknown or stale
    /// communicator, conflicting index, too many unknown ids waiting).
    uint64_t ext_sent = 0, ext_answers = 0, ext_early = 0, bad_ext = 0;
    /// Dropped as duplicates (late or repeated copies): FRAGs whose bytes
    /// all arrived already or whose receive had completed; ACK/FIN for a
    /// send that had its answer; match headers whose sequence number was
    /// received already.
    uint64_t dup_frags = 0, dup_answers = 0, dup_matches = 0;
    /// FRAGs refused as malformed: outside the range asked for, partly
    /// overlapping bytes that arrived, or too fragmented.
    uint64_t bad_frags = 0;
    /// Arrivals offered to a matcher, receives posted and probes (plain
    /// increments under the communicator's lock: exact without threads).
    uint64_t match_attempts = 0;
};

/// Adds one to a counter (relaxed atomic: callbacks may run in several
/// threads at once).
inline void count(uint64_t *counter) noexcept {
    __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

struct Pml {
    bool enabled = false;
    std::size_t eager_limit = 0; ///< pml_roce_eager_limit
    int fail_registration = 0;   ///< pml_roce_test_fail_registration (tests only)
    int fail_rdma = 0;           ///< pml_roce_test_fail_rdma (tests only): 1 puts, 2 gets
    int ext_delay_ms = 0;        ///< pml_roce_test_ext_delay (tests only)
    int use_rdma = 1;            ///< pml_roce_use_rdma
    std::size_t rget_limit = 0;  ///< pml_roce_rget_limit
    int32_t pipeline_depth = 8;  ///< pml_roce_pipeline_depth: FRAGs in flight per send
    std::size_t stream_limit = 0; ///< pml_roce_stream_limit
    std::size_t split_min = 0;    ///< pml_roce_split_min (0: never split an RGET)
    volatile uint64_t stream_next = 0; ///< last id given to a streamed send (never 0)

    opal_free_list_t send_reqs;
    opal_free_list_t recv_reqs;
    opal_free_list_t kept_small;
    opal_free_list_t kept_large;
    std::size_t kept_large_bytes = 0; ///< data bytes a kept_large item holds
    opal_free_list_t getops;
    opal_free_list_t putops;
    opal_free_list_t ctrls;

    CommTable comms;
    opal_mutex_t early_lock; ///< EarlyArrivals, CommTable writers, the PmlComm pool; before a comm lock
    PmlComm *comm_pool = nullptr; ///< retired PmlComms ready for reuse (under early_lock)
    PmlComm *comm_all = nullptr;  ///< every PmlComm made (under early_lock), freed at finalize
    match::EarlyArrivals *early = nullptr;
    /// Extended id -> index of this process's communicators without a
    /// global index, and the ids messages waited for (under early_lock).
    excid::ExcIdTable *excids = nullptr;

    opal_mutex_t ids_lock;                 ///< both request-id tables
    rndv::AnswerTable send_ids{send_view}; ///< sends waiting for an ACK or FIN
    rndv::FragTable recv_ids;              ///< receives waiting for FRAGs
    rndv::StreamTable streams;             ///< streamed messages being assembled

    opal_mutex_t pending_lock;
    opal_list_t pending_sends; ///< SendRequest waiting for descriptors
    opal_list_t pending_gets;  ///< GetOp waiting to issue more gets
    opal_list_t pending_puts;  ///< PutOp waiting to issue more puts
    opal_list_t pending_ctrl;  ///< Ctrl waiting for descriptors
    volatile int32_t pending_count = 0;
    int32_t bsend_inflight = 0; ///< buffered sends holding space in the attached buffer
    /// RGET sends of this process not complete yet (SendRequest::rget_out).
    /// While there are any, received RGETs are not split (split_point): in
    /// an exchange both processes are receivers and their cores already copy.
    volatile int32_t rget_out = 0;

    opal_convertor_t empty_convertor; ///< passed to btl_sendi with payload 0
    Counters counters;
};
extern Pml g;

inline int output() noexcept { return mca_pml_roce_component.output; }
const char *host_name() noexcept;

// ----------------------------------------------------- shared operations ----

/// Data of a fragment after its header: up to the btl's segments.
struct Pieces {
    struct Piece {
        const uint8_t *p;
        std::size_t n;
    };
    Piece piece[4];
    int count = 0;
    std::size_t total = 0;
    /// `n` bytes at `p` as one piece (no piece when n is 0).
    static Pieces one(const uint8_t *p, std::size_t n) noexcept {
        Pieces pc;
        if (n > 0) {
            pc.piece[0] = {p, n};
            pc.count = 1;
        }
        pc.total = n;
        return pc;
    }
};
/// The bytes after `skip` header bytes of a btl descriptor (segment 0 holds
/// the header, any later segments only data; more than 4 segments is refused).
bool pieces_of(const roce::compat::RecvDesc *des, std::size_t skip, Pieces &out) noexcept;
/// Copies up to `n` bytes of `pc` into dst.
void copy_pieces(uint8_t *dst, const Pieces &pc, std::size_t n) noexcept;

/// Logs a refused header (rate limited) and counts it.
void reject_header(uint8_t tag, const roce::compat::RecvDesc *des, wire::Defect d) noexcept;
/// Logs a protocol message naming a request id that was never issued or
/// whose request is not waiting for it (rate limited) and counts it.
void reject_id(const char *what, uint64_t id, rndv::Outcome why) noexcept;
/// Counts a duplicate (`counter`) and logs it at verbose level 50.
void drop_duplicate(uint64_t *counter, const char *what, uint64_t id, uint64_t offset,
                    uint64_t len) noexcept;
/// True for the first 16 events counted in `counter`, then one in 4096;
/// counts the event. The rate limit of every peer-caused error line.
bool should_log(uint64_t *counter) noexcept;
/// Logs the protocol counters (duplicates, refusals) at verbose level 10.
void log_counters(const char *when) noexcept;
/// Aborts the job with a one-line reason (a btl reported a fatal error, or
/// memory ran out where no retry is possible).
[[noreturn]] void fatal(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// request lifetime (pml_roce_request.cc)
SendRequest *send_request_alloc() noexcept;
/// A receive request from the free list (entry points set by its
/// constructor), or nullptr when out of memory. Inline: every receive.
inline RecvRequest *recv_request_alloc() noexcept {
    return reinterpret_cast<RecvRequest *>(opal_free_list_get(&g.recv_reqs));
}
void send_request_release(SendRequest *r) noexcept; ///< drop one ref; last one returns it
void send_request_complete(SendRequest *r) noexcept; ///< MPI + pml complete, drop pml ref

/// Returns a receive request nobody references any more to its free list
/// (drops what it retained, cleans up its convertor).
void recv_request_return(RecvRequest *r) noexcept;

/// Drops one reference; the last one returns the request to its free list.
/// Inline, and the return out of line: it runs on every receive, and in
/// every completion, where the user's reference is still there.
inline void recv_request_release(RecvRequest *r) noexcept {
    if (add_fetch32(&r->refs, -1) == 0) {
        recv_request_return(r);
    }
}

/// MPI- and pml-complete; drops the pml's reference. Forced inline: out of
/// line it saved six registers to complete one request (issue 18).
[[gnu::always_inline]] inline void recv_request_complete(RecvRequest *r) noexcept {
    r->base.req_base.req_pml_complete = true;
    ompi_request_complete(&r->base.req_base.req_ompi, true);
    recv_request_release(r);
}

/// Sets status (source, tag, count, truncation) and completes.
[[gnu::always_inline]] inline void recv_finish(RecvRequest *r, int32_t src, int32_t tag,
                                               uint64_t msg_len, uint64_t delivered) noexcept {
    ompi_status_public_t &st = r->base.req_base.req_ompi.req_status;
    st.MPI_SOURCE = src;
    st.MPI_TAG = tag;
    st._ucount = delivered;
    st.MPI_ERROR = OPAL_UNLIKELY(msg_len > r->capacity) ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
    r->base.req_bytes_packed = msg_len;
    recv_request_complete(r);
}

// sending (pml_roce_send.cc, pml_roce_pipeline.cc)
int send_start(SendRequest *r) noexcept;
void send_schedule(SendRequest *r) noexcept;
/// Prepares req_convertor for the user's buffer unless it is ready (kConvReady:
/// done before, or a bsend copy's).
void ensure_convertor(SendRequest *r) noexcept;
void send_retry(SendRequest *r) noexcept; ///< from the pending queue
/// Sends an ACK or FIN to `proc` (queued when no descriptor is free).
void send_ctrl(ompi_proc_t *proc, wire::Kind kind, const void *hdr, std::size_t len) noexcept;
bool ctrl_retry(Ctrl *c) noexcept;

// receiving (pml_roce_recv.cc, pml_roce_recvfrag.cc, pml_roce_rdma.cc)
/// Delivers an arrived match-type fragment into a matched receive.
void deliver(RecvRequest *r, uint8_t kind, const void *hdr, const Pieces &data,
             mca_btl_base_module_t *btl) noexcept;
/// Delivers a kept fragment into a receive and frees the copy.
void deliver_kept(RecvRequest *r, Kept *k) noexcept;
/// A Kept item for `bytes` data bytes (k->data), or nullptr when out of
/// memory; small ones (every eager message of btl self and vader) inline.
Kept *kept_alloc_large(std::size_t bytes) noexcept;
inline Kept *kept_alloc(std::size_t bytes) noexcept {
    if (OPAL_LIKELY(bytes <= kKeptSmall)) {
        auto *k = reinterpret_cast<Kept *>(opal_free_list_get(&g.kept_small));
        if (OPAL_LIKELY(k != nullptr)) {
            k->home = &g.kept_small;
        }
        return k;
    }
    return kept_alloc_large(bytes);
}
/// Returns a Kept item to where it came from.
inline void kept_free(Kept *k) noexcept {
    if (OPAL_LIKELY(k->home != nullptr)) {
        opal_free_list_return(k->home, &k->super);
    } else {
        free(k);
    }
}
void unpack(RecvRequest *r, uint64_t offset, const Pieces &data, std::size_t n) noexcept;
/// A streamed RNDV (wire::kRndvStream) matched `r`: its first bytes and the
/// pieces that came before go into the receive; it completes once every
/// byte arrived (pml_roce_recvstream.cc).
void deliver_stream(RecvRequest *r, const wire::RndvHdr &h, const Pieces &data) noexcept;
void rget_start(RecvRequest *r, const wire::RgetHdr &h, const uint8_t *handle,
                mca_btl_base_module_t *btl) noexcept;
void getop_resume(GetOp *op) noexcept;

// split RGET (pml_roce_split.cc)
/// The first byte a receive of `want` bytes gets itself when it splits an
/// RGET over `bml` (the sender puts the rest); 0: no split (pml_roce_split_min
/// off or not reached, not a shared-memory btl, no put).
uint64_t split_point(const RecvRequest *r, const mca_bml_base_btl_t *bml, uint64_t want) noexcept;
/// Splits: opens the put range [k, want) and sends the PUT (with the
/// registration of the buffer `reg`, or none) to the sender `proc`; the
/// caller then gets [0, k).
void split_start(RecvRequest *r, ompi_proc_t *proc, mca_bml_base_btl_t *bml,
                 mca_btl_base_registration_handle_t *reg, uint64_t src_req, uint64_t k) noexcept;
/// One part of a split receive is done (the gets, their FRAGs, or the
/// put's range); the last one completes the receive.
void recv_part_done(RecvRequest *r) noexcept;
/// One part of a split send is done (the answer, or the put); the last
/// one completes the send.
void send_part_done(SendRequest *r) noexcept;
/// Split send: sends [off, end) in FRAGs naming dst_req, after the range
/// being sent if any; the range's end is one part done.
void send_split_range(SendRequest *r, uint64_t dst_req, uint64_t off, uint64_t end) noexcept;
/// Split send: FRAG range finished (all sent and completed): the next
/// waiting range starts, and one part is done.
void send_split_range_done(SendRequest *r) noexcept;
void putop_resume(PutOp *op) noexcept;
/// Receiver fallback: ask the sender for [offset, end) in FRAGs.
void recv_ask_frags(RecvRequest *r, ompi_proc_t *proc, uint64_t src_req, uint64_t offset) noexcept;

// the arrival path shared with pml_roce_ext.cc (pml_roce_recvfrag.cc)
/// Copies an arrived match-type fragment so it can be kept; nullptr when
/// out of memory.
Kept *keep_copy(mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                const Pieces &data) noexcept;
/// Matches a decoded match-type fragment (m: its match header) on the
/// communicator this process knows as `ctx` (<= compat::kMaxContextId),
/// or holds it in EarlyArrivals until that communicator is created.
void incoming(uint32_t ctx, mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
              const wire::MatchHdr &m, const Pieces &data) noexcept;
/// Matches it on `pc` (a reference held by the caller).
void incoming_on(PmlComm *pc, mca_btl_base_module_t *btl, uint8_t kind, const void *hdr,
                 const wire::MatchHdr &m, const Pieces &data) noexcept;

// extended communicator ids (pml_roce_ext.cc; Open MPI 5.0)
/// header_ctx(): the destination's index is unknown or above 16 bits, so
/// the match-type header goes behind an EXT header.
inline constexpr uint32_t kNeedExt = UINT32_MAX;
/// The context id a MATCH, RNDV or RGET header to rank `dst` carries: the
/// receiver's index of the communicator; kNeedExt when it is not known
/// yet or does not fit 16 bits. Inline: every send. Under 4.1 always ctx.
inline uint32_t header_ctx(const PmlComm *pc, int32_t dst) noexcept {
    if (!roce::compat::kExtendedIds || OPAL_LIKELY(pc->plain)) {
        return pc->ctx;
    }
    uint32_t v = must_lock() ? __atomic_load_n(&pc->peer_ctx[dst], __ATOMIC_ACQUIRE) : pc->peer_ctx[dst];
    return v != 0 && v - 1 <= 0xffff ? v - 1 : kNeedExt;
}
/// Writes the EXT header for a match-type header of `inner` to rank `dst`
/// (header_ctx() was kNeedExt) at p: by index when the receiver's index is
/// known (it exceeds 16 bits), else by the extended id; counts it.
void write_ext(const PmlComm *pc, int32_t dst, wire::Kind inner, uint8_t *p) noexcept;
/// add_comm's part under Open MPI 5.0, for a communicator that is not
/// plain (no global index, or an index above 16 bits): the peer index
/// table and, without a global index, publishing the extended id (called
/// with g.early_lock held, before the communicator is published). When
/// messages by extended id waited for it, sets *waiting_key to their
/// EarlyArrivals key (else 0) and records the peers' indexes they carried;
/// the peers learnt that way are appended to `answers` (answered by
/// ext_send_answers once the locks are dropped). An OMPI error code when
/// out of memory or the extended id is in use.
int ext_add_comm(PmlComm *pc, ompi_communicator_t *comm, uint32_t *waiting_key,
                 std::vector<int32_t> &answers) noexcept;
/// Sends the answers ext_add_comm collected (no lock held).
void ext_send_answers(PmlComm *pc, const std::vector<int32_t> &answers) noexcept;
/// del_comm's part: forgets the extended id (g.early_lock held).
void ext_del_comm(PmlComm *pc) noexcept;

// pending work (pml_roce_module.cc)
void pending_add(opal_list_t *list, opal_list_item_t *item) noexcept;
/// Queues a send request for a retry from pml progress (at most once).
void pend_send(SendRequest *r) noexcept;

// btl callbacks (pml_roce_recvfrag.cc, pml_roce_pipeline.cc), registered through
// compat::recv_cb<> (compat/opal_btl_compat.h: the callback's shape differs
// between Open MPI 4.1 and 5.0)
extern "C" {
void mca_pml_roce_cb_match(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                           const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_rndv(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_rget(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_ack(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_frag(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_fin(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_ext(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_stream(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                            const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_put(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des);
void mca_pml_roce_cb_put_fin(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                             const roce::compat::RecvDesc *des);
}

/// The eager payload a btl can carry in one fragment after `hdr` bytes.
inline std::size_t eager_room(const mca_btl_base_module_t *btl, std::size_t hdr) noexcept {
    std::size_t lim = btl->btl_eager_limit < g.eager_limit ? btl->btl_eager_limit : g.eager_limit;
    return lim > hdr ? lim - hdr : 0;
}

/// memcpy for copy_bytes' other sizes: n == 0 touches nothing (a zero-count
/// message may come with a null buffer, which memcpy must not be given).
void copy_bytes_call(uint8_t *dst, const uint8_t *src, std::size_t n) noexcept;

/// memcpy, with the few bytes of small eager messages copied inline (two
/// overlapping loads and stores) instead of through a call.
inline void copy_bytes(void *dst, const void *src, std::size_t n) noexcept {
    auto *d = static_cast<uint8_t *>(dst);
    const auto *s = static_cast<const uint8_t *>(src);
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        std::memcpy(&a, s, 8);
        std::memcpy(&b, s + n - 8, 8);
        std::memcpy(d, &a, 8);
        std::memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        std::memcpy(&a, s, 4);
        std::memcpy(&b, s + n - 4, 4);
        std::memcpy(d, &a, 4);
        std::memcpy(d + n - 4, &b, 4);
    } else {
        copy_bytes_call(d, s, n);
    }
}

/// Packed size and, for a contiguous layout, the address of the first byte.
inline bool layout_of(ompi_datatype_t *dt, size_t count, const void *buf, const char **start,
                      uint64_t *bytes) noexcept {
    const opal_datatype_t *d = &dt->super;
    *bytes = static_cast<uint64_t>(d->size) * count;
    bool contig = (d->flags & OPAL_DATATYPE_FLAG_CONTIGUOUS) &&
                  (count <= 1 || (d->flags & OPAL_DATATYPE_FLAG_NO_GAPS));
    *start = static_cast<const char *>(buf) + d->true_lb;
    return contig;
}

} // namespace roce::pml
