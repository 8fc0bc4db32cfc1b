// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>

#include "btl_roce_device.h"
#include "btl_roce_frag.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::btl {

/// The RDMA and atomic operations of a module: a fixed pool over one slab
/// registered on the module's PD, so that the old value of a non-fetching
/// atomic (or of one whose result buffer is not registered) can land in
/// RdmaOp::result. Part of the data path; not thread-safe (the module lock
/// covers it). Reset (or destroy) it before the Device: its slab is
/// registered on the Device's PD.
class RdmaOpPool {
public:
    RdmaOpPool() = default;
    /// `count` operations over fresh memory registered on `pd` for local
    /// write. The error names the pool (and RLIMIT_MEMLOCK when that is the
    /// likely cause). `log` takes a failed deregistration later.
    util::Status init(const verbs::VerbsApi &api, ibv_pd *pd, uint32_t count, util::LogSink *log);
    /// A free operation, value-initialized; nullptr when all are in use.
    RdmaOp *get();
    /// Gives `op` (from get()) back.
    void put(RdmaOp *op);
    /// The lkey of the slab: RdmaOp::result as a scatter/gather target.
    uint32_t lkey() const { return slab_.lkey(); }
    /// Deregisters and frees the slab; every operation must be back.
    void reset();

private:
    RegisteredSlab slab_;
    RdmaOp *free_ = nullptr;
};

} // namespace roce::btl
