// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "data/rdma_op_pool.h"

#include <new>

namespace roce::btl {

util::Status RdmaOpPool::init(const verbs::VerbsApi &api, ibv_pd *pd, uint32_t count,
                              util::LogSink *log) {
    auto slab = register_slab(api, pd, sizeof(RdmaOp) * count, IBV_ACCESS_LOCAL_WRITE, log);
    if (!slab) {
        return slab.status().with_context("RDMA operation pool");
    }
    slab_ = std::move(slab.value());
    free_ = nullptr;
    auto *ops = reinterpret_cast<RdmaOp *>(slab_.data());
    for (uint32_t i = 0; i < count; ++i) {
        RdmaOp *op = new (&ops[i]) RdmaOp();
        op->next_free = free_;
        free_ = op;
    }
    return util::Status::ok();
}

RdmaOp *RdmaOpPool::get() {
    RdmaOp *op = free_;
    if (op != nullptr) {
        free_ = op->next_free;
        *op = RdmaOp();
    }
    return op;
}

void RdmaOpPool::put(RdmaOp *op) {
    op->next_free = free_;
    free_ = op;
}

void RdmaOpPool::reset() {
    free_ = nullptr;
    slab_ = RegisteredSlab{};
}

} // namespace roce::btl
