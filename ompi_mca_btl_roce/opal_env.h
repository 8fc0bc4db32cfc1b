// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <memory>

#include "btl_roce_module.h"
#include "util/log.h"
#include "util/status.h"

/// The Open MPI and rdma-core side of a module's environment (ModuleEnv):
/// what the component hands each module, so that the module itself calls no
/// global (the real verbs table, the live machine, PMIx, the rcache
/// framework). Used by the component glue only.
namespace roce::btl {

/// PeerDirectory over Open MPI: modex reads through PMIx (they may block)
/// and opal_proc_for_name.
class OpalPeerDirectory final : public PeerDirectory {
public:
    util::Result<wire::ModexAddress> address(opal_proc_t *proc) override;
    opal_proc_t *proc_for(uint64_t name) override;
};

/// Open MPI's grdma registration cache over `dev`'s PD (Open MPI's memory
/// hooks keep it correct when the application frees and reuses memory).
/// kUnavailable when the grdma component cannot be loaded. `log` must
/// outlive the registry; `dev` too.
util::Result<std::unique_ptr<MemoryRegistry>> grdma_registry(Device &dev, util::LogSink &log);

/// This process's name as 64 bits (jobid << 32 | vpid), from opal_proc_local_get.
uint64_t local_process_name();

} // namespace roce::btl
