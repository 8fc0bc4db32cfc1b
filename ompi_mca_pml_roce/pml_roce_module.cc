// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module's control path: enable, add/del procs, add/del comm, progress
// (the pending queues), dump, ft_event, and the shared helpers (logging,
// the communicator table, pending work).
#include "pml_roce_internal.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>

#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/class/opal_bitmap.h"
#include "opal/mca/btl/base/base.h"
#include "opal/runtime/opal_progress.h"

namespace roce::pml {

Pml g;
bool g_btl_threads = false;

const char *host_name() noexcept {
    return opal_process_info.nodename != nullptr ? opal_process_info.nodename : "?";
}

void fatal(const char *fmt, ...) noexcept {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_fatal("fatal: %s; aborting", msg);
    ompi_mpi_abort(&ompi_mpi_comm_world.comm, MPI_ERR_INTERN);
    std::abort(); // ompi_mpi_abort does not return; keep [[noreturn]] honest
}

bool should_log(uint64_t *counter) noexcept {
    uint64_t n = __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
    return n <= 16 || n % 4096 == 0;
}

void reject_header(uint8_t tag, const roce::compat::RecvDesc *des, wire::Defect d) noexcept {
    if (!should_log(&g.counters.bad_headers)) {
        return;
    }
    const void *p = nullptr;
    std::size_t n = 0, payload = 0;
    if (des->des_segment_count >= 1) {
        p = des->des_segments[0].seg_addr.pval;
        n = des->des_segments[0].seg_len;
        for (std::size_t i = 1; i < des->des_segment_count && i < 4; ++i) {
            payload += des->des_segments[i].seg_len;
        }
    }
    std::string s = wire::describe_rejected(tag, p, n, payload, d);
    report("refused message", "error: refused a %s (%" PRIu64 " refused so far)", s.c_str(),
           g.counters.bad_headers);
}

void reject_id(const char *what, uint64_t id, rndv::Outcome why) noexcept {
    if (!should_log(&g.counters.bad_ids)) {
        return;
    }
    report("refused message",
           "error: refused a %s for request id 0x%016" PRIx64 ": %s "
           "(%" PRIu64 " refused so far; only the first 16 and then one in 4096 are shown)",
           what, id,
           why == rndv::Outcome::kWrongState ? "that request is not waiting for it"
                                             : "no such request was ever made here",
           g.counters.bad_ids);
}

void drop_duplicate(uint64_t *counter, const char *what, uint64_t id, uint64_t offset,
                    uint64_t len) noexcept {
    count(counter);
    opal_output_verbose(50, output(),
                        "pml roce [%s]: dropped a duplicate %s (request id 0x%016" PRIx64
                        ", offset %" PRIu64 ", %" PRIu64 " bytes)",
                        host_name(), what, id, offset, len);
}

void log_counters(const char *when) noexcept {
    const Counters &c = g.counters;
    opal_output_verbose(10, output(),
                        "pml roce [%s]: %s: duplicates dropped: %" PRIu64 " FRAG, %" PRIu64
                        " ACK/FIN, %" PRIu64 " match; refused: %" PRIu64 " headers, %" PRIu64
                        " request ids, %" PRIu64 " FRAG ranges, %" PRIu64 " EXT, %" PRIu64
                        " STREAM; streamed %" PRIu64 " sends, kept %" PRIu64
                        " pieces before their receive",
                        host_name(), when, c.dup_frags, c.dup_answers, c.dup_matches,
                        c.bad_headers, c.bad_ids, c.bad_frags, c.bad_ext, c.bad_streams, c.streams,
                        c.stream_staged);
    if (roce::compat::kExtendedIds) {
        opal_output_verbose(10, output(),
                            "pml roce [%s]: %s: extended ids: %" PRIu64 " messages sent with an EXT "
                            "header, %" PRIu64 " answers sent, %" PRIu64 " arrived before their "
                            "communicator",
                            host_name(), when, c.ext_sent, c.ext_answers, c.ext_early);
    }
    if (c.splits + c.split_fallbacks + c.bad_split != 0) {
        opal_output_verbose(10, output(),
                            "pml roce [%s]: %s: split RGET: %" PRIu64 " receives split, %" PRIu64
                            " puts replaced by fragments, %" PRIu64 " PUT/PUT-FIN refused",
                            host_name(), when, c.splits, c.split_fallbacks, c.bad_split);
    }
}

bool CommTable::publish(uint32_t ctx, PmlComm *pc) noexcept {
    PmlComm **chunk = top_[ctx >> 8];
    if (chunk == nullptr) {
        chunk = static_cast<PmlComm **>(calloc(256, sizeof(PmlComm *)));
        if (chunk == nullptr) {
            return false;
        }
        __atomic_store_n(&top_[ctx >> 8], chunk, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&chunk[ctx & 0xff], pc, __ATOMIC_RELEASE);
    return true;
}

void CommTable::clear() noexcept {
    for (auto &chunk : top_) {
        free(chunk);
        chunk = nullptr;
    }
}

namespace {

// Frees what one life of a PmlComm holds: messages still in its matcher
// (unexpected, held, or arrived after del_comm), the matcher, the sequence
// numbers. The caller made sure nobody else can reach it (refs 0).
void comm_clear(PmlComm *pc) noexcept {
    if (pc->matcher != nullptr) {
        std::size_t left = pc->matcher->drain(
            [](void *) {}, [](const match::Message &m) { kept_free(static_cast<Kept *>(m.payload)); });
        if (left > 0) {
            opal_output_verbose(10, output(),
                                "pml roce [%s]: communicator %u freed with %zu messages or "
                                "receives never matched",
                                host_name(), pc->ctx, left);
        }
    }
    pc->matcher.reset();
    pc->send_seq.reset();
    pc->peer_ctx.reset();
    pc->plain = true;
    pc->global = true;
    pc->excid[0] = pc->excid[1] = 0;
    pc->comm = nullptr;
}

} // namespace

PmlComm *comm_take_from_pool() noexcept {
    PmlComm *pc = g.comm_pool;
    if (pc != nullptr) {
        g.comm_pool = pc->next_free;
        pc->next_free = nullptr;
        return pc;
    }
    pc = new (std::nothrow) PmlComm();
    if (pc == nullptr) {
        return nullptr;
    }
    OBJ_CONSTRUCT(&pc->lock, opal_mutex_t);
    pc->next_all = g.comm_all;
    g.comm_all = pc;
    return pc;
}

void comm_retire_locked(PmlComm *pc) noexcept {
    comm_clear(pc);
    pc->next_free = g.comm_pool;
    g.comm_pool = pc;
}

void comm_retire(PmlComm *pc) noexcept {
    // Last reference: unpublished, and no lookup can take a new one (they
    // see refs 0). Kept items go back to their free lists outside the lock.
    comm_clear(pc);
    Guard early(&g.early_lock);
    pc->next_free = g.comm_pool;
    g.comm_pool = pc;
}

void pending_add(opal_list_t *list, opal_list_item_t *item) noexcept {
    Guard guard(&g.pending_lock);
    opal_list_append(list, item);
    add_fetch32(&g.pending_count, 1);
    ++g.counters.pending_retries;
}

void pend_send(SendRequest *r) noexcept {
    Guard guard(&g.pending_lock);
    if (r->queued) {
        return;
    }
    r->queued = true;
    opal_list_append(&g.pending_sends, &r->base.req_base.req_ompi.super.super);
    add_fetch32(&g.pending_count, 1);
    ++g.counters.pending_retries;
}

namespace {

opal_list_item_t *pending_pop(opal_list_t *list, bool sends) noexcept {
    Guard guard(&g.pending_lock);
    opal_list_item_t *item = opal_list_remove_first(list);
    if (item != nullptr) {
        add_fetch32(&g.pending_count, -1);
        if (sends) {
            reinterpret_cast<SendRequest *>(item)->queued = false;
        }
    }
    return item;
}

std::size_t pending_size(opal_list_t *list) noexcept {
    Guard guard(&g.pending_lock);
    return opal_list_get_size(list);
}

// Retries what waited for btl resources: control messages first (they
// unblock peers), then gets, then sends. Each queue is walked at most once
// per call, since a retry that fails queues its item again.
int process_pending() noexcept {
    int done = 0;
    for (std::size_t n = pending_size(&g.pending_ctrl); n > 0; --n) {
        auto *c = reinterpret_cast<Ctrl *>(pending_pop(&g.pending_ctrl, false));
        if (c == nullptr) {
            break;
        }
        if (!ctrl_retry(c)) {
            pending_add(&g.pending_ctrl, &c->super.super);
            break;
        }
        ++done;
    }
    for (std::size_t n = pending_size(&g.pending_gets); n > 0; --n) {
        auto *op = reinterpret_cast<GetOp *>(pending_pop(&g.pending_gets, false));
        if (op == nullptr) {
            break;
        }
        getop_resume(op);
        ++done;
    }
    for (std::size_t n = pending_size(&g.pending_puts); n > 0; --n) {
        auto *op = reinterpret_cast<PutOp *>(pending_pop(&g.pending_puts, false));
        if (op == nullptr) {
            break;
        }
        putop_resume(op);
        ++done;
    }
    for (std::size_t n = pending_size(&g.pending_sends); n > 0; --n) {
        auto *r = reinterpret_cast<SendRequest *>(pending_pop(&g.pending_sends, true));
        if (r == nullptr) {
            break;
        }
        send_retry(r);
        ++done;
    }
    return done;
}

void btl_error(mca_btl_base_module_t *btl, int32_t flags, opal_proc_t *errproc, char *btlinfo) {
    if (!(flags & MCA_BTL_ERROR_FLAGS_FATAL)) {
        return;
    }
    fatal("btl %s reported a fatal error%s%s%s%s", btl->btl_component->btl_version.mca_component_name,
          errproc != nullptr ? " with " : "",
          errproc != nullptr ? OPAL_NAME_PRINT(errproc->proc_name) : "",
          btlinfo != nullptr ? ": " : "", btlinfo != nullptr ? btlinfo : "");
}

bool init_list(opal_free_list_t *list, std::size_t size, opal_class_t *cls) noexcept {
    OBJ_CONSTRUCT(list, opal_free_list_t);
    return opal_free_list_init(list, size, opal_cache_line_size, cls, 0, opal_cache_line_size, 4,
                               -1, 64, nullptr, 0, nullptr, nullptr, nullptr) == OPAL_SUCCESS;
}

int register_callbacks() noexcept {
    struct {
        wire::Kind kind;
        mca_btl_base_module_recv_cb_fn_t fn;
    } cbs[] = {
        {wire::Kind::kMatch, roce::compat::recv_cb<mca_pml_roce_cb_match>},
        {wire::Kind::kRndv, roce::compat::recv_cb<mca_pml_roce_cb_rndv>},
        {wire::Kind::kRget, roce::compat::recv_cb<mca_pml_roce_cb_rget>},
        {wire::Kind::kAck, roce::compat::recv_cb<mca_pml_roce_cb_ack>},
        {wire::Kind::kFrag, roce::compat::recv_cb<mca_pml_roce_cb_frag>},
        {wire::Kind::kFin, roce::compat::recv_cb<mca_pml_roce_cb_fin>},
        {wire::Kind::kExt, roce::compat::recv_cb<mca_pml_roce_cb_ext>},
        {wire::Kind::kStream, roce::compat::recv_cb<mca_pml_roce_cb_stream>},
        {wire::Kind::kPut, roce::compat::recv_cb<mca_pml_roce_cb_put>},
        {wire::Kind::kPutFin, roce::compat::recv_cb<mca_pml_roce_cb_put_fin>},
    };
    for (auto &c : cbs) {
        int rc = mca_bml.bml_register(wire::tag_of(c.kind), c.fn, nullptr);
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

// Kept items for unexpected fragments up to the largest eager fragment any
// btl in use may deliver (and any RGET handle).
std::size_t largest_fragment() noexcept {
    std::size_t most = 2 * wire::kMaxHandle;
    mca_btl_base_selected_module_t *sm;
    OPAL_LIST_FOREACH (sm, &mca_btl_base_modules_initialized, mca_btl_base_selected_module_t) {
        std::size_t e = sm->btl_module->btl_eager_limit;
        if (e > most) {
            most = e;
        }
    }
    return (most + 63) & ~std::size_t{63};
}

// add_comm under g.early_lock: a PmlComm for `comm` (this process's index
// `ctx`), with the messages that arrived before it existed, published.
// Messages that arrived early become unexpected (or held) now; publishing
// under the same lock means no arrival can slip between the transfer and
// the table. Peers to answer (5.0, extended ids) go to `answers`.
int install_comm(ompi_communicator_t *comm, uint32_t ctx, std::unique_ptr<match::CommMatcher> m,
                 std::unique_ptr<uint32_t[]> seq, std::vector<int32_t> &answers,
                 PmlComm **out) noexcept {
    Guard early(&g.early_lock);
    PmlComm *pc = comm_take_from_pool();
    if (pc == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    // The object is retired (refs 0): no lookup uses these fields until the
    // release store of refs below.
    pc->matcher = std::move(m);
    pc->send_seq = std::move(seq);
    pc->comm = comm;
    pc->ctx = ctx;
    pc->my_rank = comm->c_my_rank;
    pc->remote_size = comm->c_remote_group->grp_proc_count;
    // 5.0: no global index, or an index above 16 bits.
    uint32_t waiting_key = 0;
    if (roce::compat::kExtendedIds && (!roce::compat::comm_has_global_index(comm) || ctx > 0xffff)) {
        int rc = ext_add_comm(pc, comm, &waiting_key, answers);
        if (rc != OMPI_SUCCESS) {
            comm_retire_locked(pc);
            return rc;
        }
    }
    __atomic_store_n(&pc->refs, 1, __ATOMIC_RELEASE); // the table's reference
    {
        Guard lock(&pc->lock);
        auto rejected = [&](void *payload, match::Verdict v, const roce::util::Status &why) {
            if (v == match::Verdict::kDuplicate) {
                count(&g.counters.dup_matches);
                opal_output_verbose(50, output(), "pml roce [%s]: dropped a duplicate: %s",
                                    host_name(), why.message().c_str());
            } else if (should_log(&g.counters.bad_headers)) {
                report("refused message", "error: %s; message dropped", why.message().c_str());
            }
            kept_free(static_cast<Kept *>(payload));
        };
        roce::util::Status s = g.early->transfer(pc->ctx, *pc->matcher, rejected);
        (void)s;
        if (waiting_key != 0) {
            // Messages by extended id that arrived before the communicator
            // existed, in arrival order (sequence numbers order them with
            // the others).
            s = g.early->transfer(waiting_key, *pc->matcher, rejected);
            (void)s;
        }
    }
    if (!g.comms.publish(pc->ctx, pc)) {
        ext_del_comm(pc);
        // A stale lookup may have taken a reference meanwhile; then it
        // retires the object when it is done.
        if (add_fetch32(&pc->refs, -1) == 0) {
            comm_retire_locked(pc);
        }
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    comm->c_pml_comm = reinterpret_cast<mca_pml_comm_t *>(pc);
    *out = pc;
    return OMPI_SUCCESS;
}

} // namespace
} // namespace roce::pml

using namespace roce::pml;

extern "C" {

int mca_pml_roce_enable(bool enable) noexcept {
    if (!enable || g.enabled) {
        return OMPI_SUCCESS;
    }
    OBJ_CONSTRUCT(&g.early_lock, opal_mutex_t);
    OBJ_CONSTRUCT(&g.ids_lock, opal_mutex_t);
    OBJ_CONSTRUCT(&g.pending_lock, opal_mutex_t);
    OBJ_CONSTRUCT(&g.pending_sends, opal_list_t);
    OBJ_CONSTRUCT(&g.pending_gets, opal_list_t);
    OBJ_CONSTRUCT(&g.pending_puts, opal_list_t);
    OBJ_CONSTRUCT(&g.pending_ctrl, opal_list_t);
    OBJ_CONSTRUCT(&g.empty_convertor, opal_convertor_t);
    g.kept_large_bytes = largest_fragment();
    bool ok =
        init_list(&g.send_reqs, sizeof(SendRequest), OBJ_CLASS(mca_pml_roce_send_request_t)) &&
        init_list(&g.recv_reqs, sizeof(RecvRequest), OBJ_CLASS(mca_pml_roce_recv_request_t)) &&
        init_list(&g.kept_small, sizeof(Kept) + kKeptSmall, OBJ_CLASS(mca_pml_roce_kept_t)) &&
        init_list(&g.kept_large, sizeof(Kept) + g.kept_large_bytes,
                  OBJ_CLASS(mca_pml_roce_kept_t)) &&
        init_list(&g.getops, sizeof(GetOp), OBJ_CLASS(mca_pml_roce_getop_t)) &&
        init_list(&g.putops, sizeof(PutOp), OBJ_CLASS(mca_pml_roce_putop_t)) &&
        init_list(&g.ctrls, sizeof(Ctrl), OBJ_CLASS(mca_pml_roce_ctrl_t));
    g.early = new (std::nothrow) match::EarlyArrivals();
    g.excids = new (std::nothrow) excid::ExcIdTable();
    if (!ok || g.early == nullptr || g.excids == nullptr) {
        report("resource", "error: out of memory while enabling");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    int rc = register_callbacks();
    if (rc != OMPI_SUCCESS) {
        report("internal error", "error: registering the pml's btl tags 0x%02x..0x%02x failed (%d)",
               wire::tag_of(wire::Kind::kMatch), wire::tag_of(wire::Kind::kExt), rc);
        return rc;
    }
    g.enabled = true;
    return OMPI_SUCCESS;
}

int mca_pml_roce_add_procs(ompi_proc_t **procs, size_t nprocs) noexcept {
    if (nprocs == 0) {
        return OMPI_SUCCESS;
    }
    int rc = mca_pml_base_pml_check_selected("roce", procs, nprocs);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    opal_bitmap_t reachable;
    OBJ_CONSTRUCT(&reachable, opal_bitmap_t);
    rc = opal_bitmap_init(&reachable, static_cast<int>(nprocs));
    if (rc == OMPI_SUCCESS) {
        rc = mca_bml.bml_add_procs(nprocs, procs, &reachable);
    }
    OBJ_DESTRUCT(&reachable);
    // The error callback goes to every btl module the bml knows, and the bml
    // learns its modules in its first add_procs: registered from enable()
    // (before any add_procs) it reached no btl, so a btl's fatal error (a
    // peer lost for good) went nowhere and the job hung instead of ending.
    // Registering again is harmless: it replaces the same pointer.
    if (rc == OMPI_SUCCESS || rc == OMPI_ERR_UNREACH) {
        int erc = mca_bml.bml_register_error(btl_error);
        if (erc != OMPI_SUCCESS) {
            report("internal error", "error: registering the pml's btl error callback failed (%d)",
                   erc);
            return erc;
        }
    }
    if (rc == OMPI_ERR_UNREACH) {
        for (size_t i = 0; i < nprocs; ++i) {
            if (procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML] == nullptr) {
                report("no btl",
                       "error: no BTL reaches process %s on host %s (a process "
                       "of this node); pml roce cannot run this job",
                       OPAL_NAME_PRINT(procs[i]->super.proc_name),
                       roce::compat::proc_hostname(&procs[i]->super).c_str());
                break;
            }
        }
    }
    return rc;
}

int mca_pml_roce_del_procs(ompi_proc_t **procs, size_t nprocs) noexcept {
    return mca_bml.bml_del_procs(nprocs, procs);
}

int mca_pml_roce_progress(void) noexcept {
    if (OPAL_LIKELY(g.pending_count == 0)) {
        return 0;
    }
    return process_pending();
}

int mca_pml_roce_add_comm(ompi_communicator_t *comm) noexcept {
    const uint32_t cid = roce::compat::comm_cid(comm);
    if (cid > roce::compat::kMaxContextId) {
        report("resource", "error: communicator %s has index %u, above pml_max_contextid %u",
               comm->c_name, cid, roce::compat::kMaxContextId);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    int32_t size = comm->c_remote_group->grp_proc_count;
    auto m = match::CommMatcher::create(size);
    std::unique_ptr<uint32_t[]> seq(new (std::nothrow) uint32_t[size]());
    if (!m || seq == nullptr) {
        report("resource", "error: cannot create communicator %u of %d ranks: %s", cid, size,
               m ? "out of memory" : m.status().message().c_str());
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (roce::compat::kExtendedIds && OPAL_UNLIKELY(g.ext_delay_ms > 0) &&
        !roce::compat::comm_has_global_index(comm) &&
        ompi_proc_local()->super.proc_name.vpid % 2 == 0) {
        // pml_roce_test_ext_delay: progress for that long before the
        // communicator exists here, as another thread of this process could
        // (MPI_THREAD_MULTIPLE); the peers' first messages on it (Open MPI's
        // barrier at creation) arrive meanwhile and must wait for it.
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(g.ext_delay_ms);
        while (std::chrono::steady_clock::now() < end) {
            opal_progress();
        }
    }
    std::vector<int32_t> answers;
    PmlComm *pc = nullptr;
    int rc = install_comm(comm, cid, std::move(m.value()), std::move(seq), answers, &pc);
    if (rc == OMPI_SUCCESS && !answers.empty()) {
        ext_send_answers(pc, answers);
    }
    return rc;
}

int mca_pml_roce_del_comm(ompi_communicator_t *comm) noexcept {
    PmlComm *pc = pml_comm(comm);
    if (pc == nullptr) {
        return OMPI_SUCCESS;
    }
    {
        Guard early(&g.early_lock);
        (void)g.comms.publish(pc->ctx, nullptr);
        ext_del_comm(pc);
    }
    comm->c_pml_comm = nullptr;
    // The table's reference. An arrival in another thread that looked the
    // communicator up before it was unpublished still holds one; then that
    // arrival retires it when it is done (see PmlComm).
    comm_release(pc);
    return OMPI_SUCCESS;
}

int mca_pml_roce_dump(ompi_communicator_t *comm, int verbose) noexcept {
    PmlComm *pc = pml_comm(comm);
    const Counters &c = g.counters;
    opal_output(0,
                "pml roce [%s]: sends eager %" PRIu64 " (+inline), rndv %" PRIu64 ", rget %" PRIu64
                ", pipelines %" PRIu64 ", streamed %" PRIu64 " (%" PRIu64
                " pieces kept before their receive, %" PRIu64 " refused)"
                ", rget fallbacks %" PRIu64 ", registration failures %" PRIu64
                "; pending %d; live ids %zu send / %zu recv; early %zu; refused headers %" PRIu64
                ", ids %" PRIu64 ", FRAG ranges %" PRIu64 "; duplicates dropped: %" PRIu64
                " FRAG, %" PRIu64 " ACK/FIN, %" PRIu64 " match",
                host_name(), c.eager_copy, c.rndv, c.rget, c.pipeline, c.streams, c.stream_staged,
                c.bad_streams, c.rget_fallbacks,
                c.reg_failures, g.pending_count, g.send_ids.live(), g.recv_ids.live(),
                g.early != nullptr ? g.early->size() : 0, c.bad_headers, c.bad_ids, c.bad_frags,
                c.dup_frags, c.dup_answers, c.dup_matches);
    if (pc == nullptr) {
        return OMPI_SUCCESS;
    }
    match::MatcherStats s;
    {
        Guard lock(&pc->lock);
        s = pc->matcher->stats();
    }
    opal_output(0,
                "pml roce [%s]: communicator %s cid %u rank %d of %d: posted %zu (peak %zu), "
                "unexpected %zu (peak %zu), held %zu (peak %zu); matched on arrival %" PRIu64
                ", on post %" PRIu64 "; out of order %" PRIu64 "; refused %" PRIu64,
                host_name(), comm->c_name, pc->ctx, pc->my_rank, pc->remote_size, s.posted,
                s.peak_posted, s.unexpected, s.peak_unexpected, s.held, s.peak_held,
                s.matched_on_arrival, s.matched_on_post, s.out_of_order, s.rejected);
    if (verbose > 0) {
        for (int32_t i = 0; i < pc->remote_size; ++i) {
            ompi_proc_t *proc = ompi_group_get_proc_ptr(comm->c_remote_group, i, false);
            if (proc == nullptr || proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML] == nullptr) {
                continue;
            }
            auto *ep = static_cast<mca_bml_base_endpoint_t *>(proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML]);
            opal_output(0, "pml roce [%s]:   rank %d: next send seq %u", host_name(), i,
                        pc->send_seq[i] & 0xffff);
            for (size_t n = 0; n < ep->btl_eager.arr_size; ++n) {
                mca_bml_base_btl_t *b = &ep->btl_eager.bml_btls[n];
                b->btl->btl_dump(b->btl, b->btl_endpoint, verbose);
            }
        }
    }
    return OMPI_SUCCESS;
}

int mca_pml_roce_ft_event(int) noexcept { return OMPI_SUCCESS; }

// Open MPI 5.0 built with ULFM (Debian's is) calls this from MPIX_Comm_revoke
// to purge the communicator's queues and fail its requests. pml roce does
// not implement revoke: it says so once per process and answers
// OMPI_ERR_NOT_SUPPORTED (Open MPI ignores the answer; the communicator is
// still marked revoked, but pending receives here are not failed).
int mca_pml_roce_revoke_comm(ompi_communicator_t *comm, bool coll_only) noexcept {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        report("revoke",
               "error: MPIX_Comm_revoke(%s, %u)%s is not supported by pml roce; pending "
               "operations on that communicator are not failed with MPI_ERR_REVOKED",
               comm->c_name, roce::compat::comm_cid(comm), coll_only ? " (collectives only)" : "");
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

} // extern "C"

namespace roce::pml {

/// Releases everything enable() made (component finalize).
void pml_teardown() noexcept {
    if (!g.enabled) {
        return;
    }
    log_counters("at finalize");
    g.enabled = false;
    if (g.early != nullptr) {
        g.early->drain([](uint32_t, const match::Message &m) { kept_free(static_cast<Kept *>(m.payload)); });
        delete g.early;
        g.early = nullptr;
    }
    delete g.excids;
    g.excids = nullptr;
    std::size_t streams = g.streams.clear();
    if (streams != 0) {
        opal_output_verbose(10, output(),
                            "pml roce [%s]: %zu streamed messages were incomplete at finalize "
                            "(pieces without a header that matched)",
                            host_name(), streams);
    }
    g.comms.clear();
    // Every PmlComm ever made: retired ones sit in the pool; one still
    // published here was never freed by Open MPI.
    for (PmlComm *pc = g.comm_all; pc != nullptr;) {
        PmlComm *next = pc->next_all;
        comm_clear(pc);
        OBJ_DESTRUCT(&pc->lock);
        delete pc;
        pc = next;
    }
    g.comm_all = nullptr;
    g.comm_pool = nullptr;
    OBJ_DESTRUCT(&g.send_reqs);
    OBJ_DESTRUCT(&g.recv_reqs);
    OBJ_DESTRUCT(&g.kept_small);
    OBJ_DESTRUCT(&g.kept_large);
    OBJ_DESTRUCT(&g.getops);
    OBJ_DESTRUCT(&g.putops);
    OBJ_DESTRUCT(&g.ctrls);
    OBJ_DESTRUCT(&g.pending_sends);
    OBJ_DESTRUCT(&g.pending_gets);
    OBJ_DESTRUCT(&g.pending_puts);
    OBJ_DESTRUCT(&g.pending_ctrl);
    OBJ_DESTRUCT(&g.empty_convertor);
    OBJ_DESTRUCT(&g.pending_lock);
    OBJ_DESTRUCT(&g.ids_lock);
    OBJ_DESTRUCT(&g.early_lock);
}

} // namespace roce::pml
