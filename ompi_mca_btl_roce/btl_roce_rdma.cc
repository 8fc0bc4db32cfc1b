// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// One-sided operations: RDMA write (put), RDMA read (get), 64-bit
// fetch-and-add and compare-and-swap, and flush.
#include "btl_roce_module.h"

#include <new>

#include "util/strings.h"

namespace roce::btl {

using util::Status;

Status Module::init_rdma_ops() {
    size_t bytes = sizeof(RdmaOp) * cfg_.max_rdma_ops;
    auto slab = register_slab(dev_->api(), dev_->pd(), bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!slab) {
        return slab.status().with_context("RDMA operation pool");
    }
    rdma_slab_ = std::move(slab.value());
    auto *ops = reinterpret_cast<RdmaOp *>(rdma_slab_.data());
    for (uint32_t i = 0; i < cfg_.max_rdma_ops; ++i) {
        RdmaOp *op = new (&ops[i]) RdmaOp();
        op->next_free = rdma_free_;
        rdma_free_ = op;
    }
    return Status::ok();
}

Module::RdmaOp *Module::get_rdma_op() {
    RdmaOp *op = rdma_free_;
    if (op != nullptr) {
        rdma_free_ = op->next_free;
        op->next_free = nullptr;
    }
    return op;
}

void Module::put_rdma_op(RdmaOp *op) {
    op->next_free = rdma_free_;
    rdma_free_ = op;
}

int Module::rdma(Endpoint *ep, bool is_put, void *local_address, uint64_t remote_address,
                 mca_btl_base_registration_handle_t *local_handle,
                 mca_btl_base_registration_handle_t *remote_handle, size_t size,
                 mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    if (ep == nullptr || (size > 0 && (remote_handle == nullptr || local_handle == nullptr))) {
        return OPAL_ERR_BAD_PARAM;
    }
    OPAL_THREAD_LOCK(&lock_);
    if (ep->state_ == EpState::kFailed) {
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_UNREACH;
    }
    if (ep->state_ != EpState::kConnected) {
        start_connect(*ep);
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE; // the caller retries after progress
    }
    RdmaOp *op = (ep->sq_free_ > 0 && inflight_ < max_inflight_) ? get_rdma_op() : nullptr;
    if (op == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->local_address = local_address;
    op->local_handle = local_handle;
    op->ep = ep;
    op->copy_result = false;

    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(local_address);
    sge.length = static_cast<uint32_t>(size);
    sge.lkey = local_handle ? local_handle->lkey : 0;
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(op, WrKind::kRdma);
    wr.sg_list = &sge;
    wr.num_sge = size > 0 ? 1 : 0;
    wr.opcode = is_put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = remote_handle ? remote_handle->rkey : 0;
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(dev_->api().post_send(ep->qp_->get(), &wr, &bad), errno);
    if (rc != 0) {
        put_rdma_op(op);
        OPAL_THREAD_UNLOCK(&lock_);
        log_.write(util::LogLevel::kWarn,
                   Status::from_errno(rc, util::format("ibv_post_send(RDMA %s, %zu bytes) to %s",
                                                       is_put ? "WRITE" : "READ", size,
                                                       ep->label().c_str()))
                       .message());
        return OPAL_ERROR;
    }
    --ep->sq_free_;
    ++ep->rdma_outstanding_;
    ++inflight_;
    OPAL_THREAD_UNLOCK(&lock_);
    if (log_.enabled(util::LogLevel::kTrace)) {
        log_.write(util::LogLevel::kTrace,
                   util::format("RDMA %s %zu bytes local %p lkey 0x%x -> %s remote 0x%llx rkey "
                                "0x%x",
                                is_put ? "WRITE" : "READ", size, local_address, sge.lkey,
                                ep->label().c_str(), static_cast<unsigned long long>(remote_address),
                                wr.wr.rdma.rkey));
    }
    return OPAL_SUCCESS;
}

int Module::atomic(Endpoint *ep, void *local_address, uint64_t remote_address,
                   mca_btl_base_registration_handle_t *local_handle,
                   mca_btl_base_registration_handle_t *remote_handle, int op_code,
                   uint64_t operand, uint64_t compare, bool is_cswap,
                   mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    // Verbs atomics are 64-bit fetch-and-add and compare-and-swap; only
    // those are advertised (btl_atomic_flags), so osc/rdma emulates the rest.
    if (!is_cswap && op_code != MCA_BTL_ATOMIC_ADD) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    // A remote handle is required (the target memory must be registered).
    // Open MPI 4.1.4's osc/rdma calls cswap with none for windows it could
    // reach through shared memory, and handles the error by using CPU
    // atomics there, which is the right thing for that memory.
    if (ep == nullptr || remote_handle == nullptr || (remote_address & 7) != 0) {
        return OPAL_ERR_BAD_PARAM;
    }
    OPAL_THREAD_LOCK(&lock_);
    if (ep->state_ == EpState::kFailed) {
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_UNREACH;
    }
    if (ep->state_ != EpState::kConnected) {
        start_connect(*ep);
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    RdmaOp *op = (ep->sq_free_ > 0 && inflight_ < max_inflight_) ? get_rdma_op() : nullptr;
    if (op == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->local_address = local_address;
    op->local_handle = local_handle;
    op->ep = ep;

    ibv_sge sge{};
    sge.length = 8;
    if (local_address != nullptr && local_handle != nullptr) {
        sge.addr = reinterpret_cast<uint64_t>(local_address);
        sge.lkey = local_handle->lkey;
    } else {
        // Non-fetching op, or an unregistered result buffer: the old value
        // lands in the op's own registered word (copied out on completion).
        sge.addr = reinterpret_cast<uint64_t>(&op->result);
        sge.lkey = rdma_slab_.lkey();
    }
    op->copy_result = local_address != nullptr && local_handle == nullptr;
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(op, WrKind::kRdma);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = is_cswap ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = remote_address;
    wr.wr.atomic.rkey = remote_handle ? remote_handle->rkey : 0;
    wr.wr.atomic.compare_add = is_cswap ? compare : operand;
    wr.wr.atomic.swap = is_cswap ? operand : 0;
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(dev_->api().post_send(ep->qp_->get(), &wr, &bad), errno);
    if (rc != 0) {
        put_rdma_op(op);
        OPAL_THREAD_UNLOCK(&lock_);
        log_.write(util::LogLevel::kWarn,
                   Status::from_errno(rc, "ibv_post_send(atomic) to " + ep->label()).message());
        return OPAL_ERROR;
    }
    --ep->sq_free_;
    ++ep->rdma_outstanding_;
    ++inflight_;
    OPAL_THREAD_UNLOCK(&lock_);
    if (log_.enabled(util::LogLevel::kTrace)) {
        log_.write(util::LogLevel::kTrace,
                   util::format("ATOMIC %s -> %s remote 0x%llx rkey 0x%x operand 0x%llx",
                                is_cswap ? "CSWAP" : "FADD", ep->label().c_str(),
                                static_cast<unsigned long long>(remote_address),
                                wr.wr.atomic.rkey, static_cast<unsigned long long>(operand)));
    }
    return OPAL_SUCCESS;
}

int Module::flush(Endpoint *ep) {
    // RC completes in order per QP, so "all operations issued so far are
    // done" is "nothing is outstanding".
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
            return OPAL_SUCCESS;
        }
        (void)progress();
    }
}

} // namespace roce::btl
