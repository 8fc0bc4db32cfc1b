// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// One-sided operations: RDMA write (put), RDMA read (get), 64-bit
// fetch-and-add and compare-and-swap, and flush. Large transfers are
// striped over the endpoint's paths; an operation whose path fails is
// posted again on another (reads and writes always; atomics only when the
// error proves they never executed).
#include "data/data_path.h"

#include <algorithm>
#include <iterator>

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

// Posts `op` on path i (which must be up with a free slot). retry_later()
// when the post failed: the path is failed over (path_failed has the error).
Status DataPath::post_rdma_on(Endpoint &ep, size_t i, RdmaOp *op) {
    Path &path = ep.paths_[i];
    ibv_send_wr wr{};
    ibv_sge sge = op->sge;
    wr.wr_id = make_wr_id(op, WrKind::kRdma);
    wr.sg_list = &sge;
    wr.num_sge = sge.length > 0 ? 1 : 0;
    wr.opcode = op->opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (op->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || op->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
        wr.wr.atomic.remote_addr = op->remote_address;
        wr.wr.atomic.rkey = op->rkey;
        wr.wr.atomic.compare_add = op->compare_add;
        wr.wr.atomic.swap = op->swap;
    } else {
        wr.wr.rdma.remote_addr = op->remote_address;
        wr.wr.rdma.rkey = op->rkey;
    }
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(dev_.api().post_send(path.qp->get(), &wr, &bad), errno);
    if (rc != 0) {
        host_.path_failed(ep, i, Status::from_errno(rc, "ibv_post_send(RDMA)").message());
        return retry_later();
    }
    op->path = static_cast<int>(i);
    op->stay = false;
    if (op->parent != nullptr) {
        ++path.tx.chunks;
    }
    --path.tx.sq_free;
    ++path.tx.outstanding;
    ++inflight_;
    path.tx.stats.bytes += sge.length;
    path.tx.stats.rdma_reads += op->opcode == IBV_WR_RDMA_READ ? 1 : 0;
    path.tx.stats.rdma_writes += op->opcode == IBV_WR_RDMA_WRITE ? 1 : 0;
    if (log_.enabled(util::LogLevel::kTrace)) {
        log_.write(util::LogLevel::kTrace,
                   util::format("RDMA op %d, %u bytes, path %zu -> %s remote 0x%llx rkey 0x%x",
                                static_cast<int>(op->opcode), sge.length, i, ep.label.c_str(),
                                static_cast<unsigned long long>(op->remote_address), op->rkey));
    }
    return Status::ok();
}

namespace {
constexpr size_t kMaxRdmaChunks = 64; // per operation; bounds the op pool it takes (also DC's)

// The keys of the same memory on every rail, for a carrier (a chunk has
// its operation's).
void copy_rail_keys(RdmaOp &to, const RdmaOp &from) {
    std::copy(std::begin(from.rail_lkey), std::end(from.rail_lkey), std::begin(to.rail_lkey));
    std::copy(std::begin(from.rail_rkey), std::end(from.rail_rkey), std::begin(to.rail_rkey));
    to.lkey_rails = from.lkey_rails;
    to.rkey_rails = from.rkey_rails;
}

// The rail keys of a handle (from the wire when remote: only the bits the
// table has room for count).
uint32_t rail_keys(const mca_btl_base_registration_handle_t *h, bool remote, uint32_t *out) {
    if (h == nullptr) {
        return 0;
    }
    const uint32_t *keys = remote ? h->rail_rkey : h->rail_lkey;
    std::copy(keys, keys + kHandleRails, out);
    return h->rails & kHandleRailMask;
}

} // namespace

// Posts an operation. A large read or write is cut into chunks of at most
// rdma_chunk bytes, spread over every path that can take one now; chunks no
// path can take yet wait on the endpoint's retry queue and go out as earlier
// ones complete. Called with the lock held and the endpoint connected;
// retry_later() (nothing posted) when no path can take anything. With
// `queue_all` (the endpoint lost every path; another rail carries what
// waits) it posts nothing: the chunks, or the operation, wait on the queue.
Status DataPath::start_rdma(Endpoint &ep, RdmaOp *op, size_t size, bool queue_all) {
    std::vector<size_t> ready;
    for (size_t k = 0; k < ep.paths_.size() && !queue_all; ++k) {
        size_t i = (ep.next_path_ + k) % ep.paths_.size();
        if (ep.paths_[i].state == PathState::kUp && ep.paths_[i].tx.sq_free > 0) {
            ready.push_back(i);
        }
    }
    if (!queue_all && (ready.empty() || inflight_ + ready.size() > max_inflight_)) {
        return retry_later();
    }
    auto queue_tail = [&ep] {
        RdmaOp **t = &ep.rdma_retry_;
        while (*t != nullptr) {
            t = &(*t)->next_retry;
        }
        return t;
    };
    bool data = op->opcode == IBV_WR_RDMA_READ || op->opcode == IBV_WR_RDMA_WRITE;
    bool stripe = data && ready.size() > 1 && size >= cfg_.stripe_min;
    if (!stripe && !(data && size > cfg_.rdma_chunk)) {
        if (queue_all) {
            op->next_retry = nullptr;
            *queue_tail() = op;
            return Status::ok();
        }
        ep.next_path_ = static_cast<unsigned>(ready[0] + 1);
        return post_rdma_on(ep, ready[0], op);
    }
    // Equal chunks, 4 KiB aligned, at most rdma_chunk bytes each (unless that
    // would take more than kMaxRdmaChunks), at least one per ready path.
    size_t n = std::max((size + cfg_.rdma_chunk - 1) / cfg_.rdma_chunk, stripe ? ready.size() : 1);
    std::vector<RdmaOp *> parts;
    if (!cut_rdma(ep, op, size, std::min(n, kMaxRdmaChunks), parts)) {
        return retry_later();
    }
    // Round-robin over the ready paths while they have room; the rest (and a
    // chunk whose path just failed) waits on the retry queue, in order.
    RdmaOp **tail = queue_tail();
    size_t r = 0;
    for (RdmaOp *part : parts) {
        bool posted = false;
        for (size_t tries = 0; !posted && tries < ready.size(); ++tries, ++r) {
            Path &path = ep.paths_[ready[r % ready.size()]];
            if (path.state != PathState::kUp || path.tx.sq_free == 0 ||
                inflight_ >= max_inflight_ || path.tx.chunks >= cfg_.chunks_per_path) {
                continue;
            }
            posted = post_rdma_on(ep, ready[r % ready.size()], part).is_ok();
        }
        if (!posted) {
            part->next_retry = nullptr;
            *tail = part;
            tail = &part->next_retry;
        }
    }
    if (!ready.empty()) {
        ep.next_path_ = static_cast<unsigned>(ready[0] + 1);
    }
    return Status::ok();
}

bool DataPath::cut_rdma(Endpoint &ep, RdmaOp *op, size_t size, size_t n,
                        std::vector<RdmaOp *> &parts) {
    size_t chunk = ((size + n - 1) / n + 4095) & ~size_t{4095};
    for (size_t off = 0; off < size; off += chunk) {
        RdmaOp *c = rdma_ops_.get();
        if (c == nullptr) {
            for (RdmaOp *p : parts) {
                rdma_ops_.put(p);
            }
            parts.clear();
            return false;
        }
        size_t len = std::min(chunk, size - off);
        c->ep = &ep;
        c->parent = op;
        c->opcode = op->opcode;
        c->sge = op->sge;
        c->sge.addr += off;
        c->sge.length = static_cast<uint32_t>(len);
        c->remote_address = op->remote_address + off;
        c->rkey = op->rkey;
        copy_rail_keys(*c, *op);
        parts.push_back(c);
    }
    op->chunks_left = static_cast<uint32_t>(parts.size());
    return true;
}

// Common entry of put/get/atomics once the work request is described.
Status DataPath::issue(Endpoint &ep, RdmaOp *op, size_t size, bool queue_all) {
    Status s = ep.dc() ? dc_start_rdma(ep, op, size) : start_rdma(ep, op, size, queue_all);
    if (!s) {
        rdma_ops_.put(op);
        return s;
    }
    ++ep.rdma_outstanding_;
    return Status::ok();
}

Status DataPath::rdma(Endpoint *ep, bool is_put, void *local_address, uint64_t remote_address,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    const char *what = is_put ? "RDMA write" : "RDMA read";
    if (ep == nullptr) {
        return Status(Code::kInvalidArgument, util::format("%s: no endpoint", what));
    }
    if (size > 0 && (remote_handle == nullptr || local_handle == nullptr)) {
        return Status(Code::kInvalidArgument,
                      util::format("%s of %zu bytes to %s: no %s registration handle", what, size,
                                   ep->label.c_str(), remote_handle ? "local" : "remote"));
    }
    OPAL_THREAD_LOCK(&lock_);
    bool carried = false;
    Result<RdmaOp *> made =
        new_rdma_op(*ep, what, local_address, local_handle, cbfunc, cbcontext, cbdata, &carried);
    if (!made) {
        OPAL_THREAD_UNLOCK(&lock_);
        return made.status();
    }
    RdmaOp *op = *made;
    op->opcode = is_put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    op->sge.addr = reinterpret_cast<uint64_t>(local_address);
    op->sge.length = static_cast<uint32_t>(size);
    op->sge.lkey = local_handle ? local_handle->lkey : 0;
    op->remote_address = remote_address;
    op->rkey = remote_handle ? remote_handle->rkey : 0;
    op->lkey_rails = rail_keys(local_handle, false, op->rail_lkey);
    op->rkey_rails = rail_keys(remote_handle, true, op->rail_rkey);
    // Without a live path but with a sibling rail that reaches the peer, the
    // operation waits on the retry queue for that rail to carry it
    // (data/rdma_carry.cc) instead of sending the PML away.
    Status s = issue(*ep, op, size, carried);
    OPAL_THREAD_UNLOCK(&lock_);
    return s;
}

// An operation for ep with its completion and local side filled in, or why
// there is none: not connected yet, failed (ready_for_rdma), or no
// operation free (retry_later()). `what` names the operation in an error.
Result<RdmaOp *> DataPath::new_rdma_op(Endpoint &ep, const char *what, void *local_address,
                                       mca_btl_base_registration_handle_t *local_handle,
                                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                       void *cbdata, bool *carried) {
    Status ready = ready_for_rdma(ep, what);
    if (!ready) {
        // Not failed, not connected: the connection is (re)started; with a
        // sibling rail that reaches the peer the operation waits for it.
        bool carry =
            carried != nullptr && ready.code() == Code::kResourceExhausted && host_.can_carry(ep);
        if (!carry) {
            return ready;
        }
        *carried = true;
    }
    RdmaOp *op = rdma_ops_.get();
    if (op == nullptr) {
        return retry_later();
    }
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->local_address = local_address;
    op->local_handle = local_handle;
    op->ep = &ep;
    return op;
}

// Ok when ep can take an RDMA operation now; otherwise starts the
// connection if needed and says why not (kUnavailable: failed).
Status DataPath::ready_for_rdma(Endpoint &ep, const char *what) {
    if (ep.state == EpState::kFailed) {
        return Status(Code::kUnavailable,
                      util::format("%s to %s: the peer has failed", what, ep.label.c_str()));
    }
    if (ep.dc()) {
        return Status::ok(); // no connection (data/dc_rdma.cc)
    }
    if (ep.state != EpState::kConnected) {
        host_.start_connect(ep);
        return retry_later(); // the caller retries after progress
    }
    return Status::ok();
}

Status DataPath::atomic(Endpoint *ep, void *local_address, uint64_t remote_address,
                        mca_btl_base_registration_handle_t *local_handle,
                        mca_btl_base_registration_handle_t *remote_handle, int op_code,
                        uint64_t operand, uint64_t compare, bool is_cswap,
                        mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    // Verbs atomics are 64-bit fetch-and-add and compare-and-swap; only
    // those are advertised (btl_atomic_flags), so osc/rdma emulates the rest.
    if (!is_cswap && op_code != MCA_BTL_ATOMIC_ADD) {
        return Status(Code::kUnsupported,
                      util::format("atomic op %d: only 64-bit fetch-and-add and compare-and-swap "
                                   "are supported",
                                   op_code));
    }
    const char *what = is_cswap ? "atomic compare-and-swap" : "atomic fetch-and-add";
    // A remote handle is required (the target memory must be registered).
    // Open MPI 4.1.4's osc/rdma calls cswap with none for windows it could
    // reach through shared memory, and handles the error by using CPU
    // atomics there, which is the right thing for that memory. That is its
    // routine path, so the answer carries no message (nothing to format).
    if (remote_handle == nullptr) {
        return Status(Code::kInvalidArgument, std::string());
    }
    if (ep == nullptr) {
        return Status(Code::kInvalidArgument, util::format("%s: no endpoint", what));
    }
    if ((remote_address & 7) != 0) {
        return Status(Code::kInvalidArgument,
                      util::format("%s at 0x%llx on %s: the target is not 8-byte aligned", what,
                                   static_cast<unsigned long long>(remote_address),
                                   ep->label.c_str()));
    }
    OPAL_THREAD_LOCK(&lock_);
    Result<RdmaOp *> made =
        new_rdma_op(*ep, what, local_address, local_handle, cbfunc, cbcontext, cbdata);
    if (!made) {
        OPAL_THREAD_UNLOCK(&lock_);
        return made.status();
    }
    RdmaOp *op = *made;
    op->opcode = is_cswap ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
    op->sge.length = 8;
    if (local_address != nullptr && local_handle != nullptr) {
        op->sge.addr = reinterpret_cast<uint64_t>(local_address);
        op->sge.lkey = local_handle->lkey;
    } else {
        // Non-fetching op, or an unregistered result buffer: the old value
        // lands in the op's own registered word (copied out on completion).
        op->sge.addr = reinterpret_cast<uint64_t>(&op->result);
        op->sge.lkey = rdma_ops_.lkey();
        op->copy_result = local_address != nullptr;
    }
    op->remote_address = remote_address;
    op->rkey = remote_handle->rkey;
    op->compare_add = is_cswap ? compare : operand;
    op->swap = is_cswap ? operand : 0;
    Status s = issue(*ep, op, 8);
    OPAL_THREAD_UNLOCK(&lock_);
    return s;
}

void DataPath::on_rdma_completion(const ibv_wc &wc) {
    RdmaOp *op = wr_ptr<RdmaOp>(wc.wr_id);
    if (dc_ != nullptr && dci_by_qpn_.count(wc.qp_num) != 0) {
        on_dc_rdma_completion(wc, op); // data/dc_rdma.cc
        return;
    }
    Endpoint &ep = *op->ep;
    Endpoint *owner = nullptr;
    Path *path = account_completion(wc.qp_num, &owner);
    if (op->parent != nullptr && op->path >= 0 &&
        static_cast<size_t>(op->path) < ep.paths_.size()) {
        // Every posted chunk completes once (flushed, if its QP was retired).
        Path &p = ep.paths_[static_cast<size_t>(op->path)];
        p.tx.chunks -= p.tx.chunks > 0 ? 1 : 0;
    }
    if (wc.status == IBV_WC_SUCCESS) {
        if (path != nullptr) {
            ++path->tx.stats.messages;
        }
        rdma_done(op, OPAL_SUCCESS);
        if (ep.rdma_retry_ != nullptr) {
            retry_rdma(ep); // chunks of a large operation waiting for room
        }
        drain_pending(ep);
        return;
    }
    if (path != nullptr && wc.status != IBV_WC_WR_FLUSH_ERR) {
        host_.path_failed(ep, static_cast<size_t>(op->path), wc_error(wc, "RDMA"));
    }
    if (op->carried != nullptr) {
        // Another rail's operation: it goes back there to wait, or to be
        // carried again (data/rdma_carry.cc), never posted again here.
        rdma_done(op, OPAL_ERR_TEMP_OUT_OF_RESOURCE);
        return;
    }
    bool atomic =
        op->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || op->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    // A flushed request never started; a read or write may simply run again.
    // An atomic that got the error itself may have executed: it fails.
    if (ep.state != EpState::kFailed && (!atomic || wc.status == IBV_WC_WR_FLUSH_ERR)) {
        if (op->path >= 0 && static_cast<size_t>(op->path) < ep.paths_.size()) {
            ++ep.paths_[static_cast<size_t>(op->path)].tx.stats.retransmits;
        }
        op->next_retry = ep.rdma_retry_;
        ep.rdma_retry_ = op;
        retry_rdma(ep);
    } else {
        log_.write(util::LogLevel::kError,
                   util::format("atomic operation to %s lost with its path (%s): it may or may "
                                "not have been applied, so it is not repeated",
                                ep.label.c_str(), ibv_wc_status_str(wc.status)));
        rdma_done(op, OPAL_ERROR);
    }
}

// Posts again what waits on the endpoint's retry queue, while paths allow.
void DataPath::retry_rdma(Endpoint &ep) {
    while (ep.rdma_retry_ != nullptr && ep.state == EpState::kConnected) {
        RdmaOp *op = ep.rdma_retry_;
        int i = -1;
        for (size_t k = 0; k < ep.paths_.size(); ++k) { // round-robin: keep striping
            size_t j = (ep.next_path_ + k) % ep.paths_.size();
            const Path &p = ep.paths_[j];
            if (p.state == PathState::kUp && p.tx.sq_free > 0 &&
                (op->parent == nullptr || p.tx.chunks < cfg_.chunks_per_path)) {
                i = static_cast<int>(j);
                ep.next_path_ = static_cast<unsigned>(j + 1);
                break;
            }
        }
        if (i < 0 || inflight_ >= max_inflight_) {
            return;
        }
        ep.rdma_retry_ = op->next_retry;
        op->next_retry = nullptr;
        if (!post_rdma_on(ep, static_cast<size_t>(i), op)) {
            op->next_retry = ep.rdma_retry_;
            ep.rdma_retry_ = op;
        }
    }
}

// An operation (or one chunk of a striped one) finished with `status`.
void DataPath::rdma_done(RdmaOp *op, int status) {
    RdmaOp *whole = op;
    if (op->parent != nullptr) {
        whole = op->parent;
        if (status != OPAL_SUCCESS && whole->status == OPAL_SUCCESS) {
            whole->status = status;
        }
        rdma_ops_.put(op);
        if (--whole->chunks_left != 0) {
            return;
        }
        status = whole->status;
    }
    --whole->ep->rdma_outstanding_;
    Deferred &d = deferred_.emplace_back();
    d.kind = Deferred::Kind::kRdmaDone;
    d.ep = whole->ep;
    d.op = whole;
    d.status = status;
}

Status DataPath::flush(Endpoint *ep) {
    // Everything issued so far is done when nothing is outstanding.
    for (;;) {
        OPAL_THREAD_LOCK(&lock_);
        uint32_t left = 0;
        if (ep != nullptr) {
            left = ep->rdma_outstanding_;
        } else {
            for (auto &e : endpoints_) {
                left += e->rdma_outstanding_;
            }
        }
        OPAL_THREAD_UNLOCK(&lock_);
        if (left == 0) {
            return Status::ok();
        }
        (void)host_.flush_progress(); // without the lock
    }
}

} // namespace roce::btl
