// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// One btl Module over FakeVerbs (mlx5 with DC) and thousands of fake peers
// added to it through add_procs, as Open MPI adds a large job's processes:
// what the per-peer memory of RC and DC is measured with (the unit test
// test_btl_dc_memory.cc and tests/bench/dc_memory_bench). Test code only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "btl_fabric.h"

namespace roce::testing {

/// Process 0 of a job of `peers` + 1 processes, its Device with the
/// default sizes (btl::DeviceConfig, as the MCA parameters default), `per_node` of them on each
/// node: the peers of one node share one GID (their modex names it), so a
/// DC module makes one address handle per node. Each peer publishes the
/// measured module's port advertisement with its node's GID and its own
/// DCT number, DC key and token (made up, never 0).
class DcMemoryRig {
public:
    /// `dc`: the module is forced to DC (btl_roce_transport = dc), else RC.
    DcMemoryRig(bool dc, size_t peers, size_t per_node);
    ~DcMemoryRig();

    /// add_procs of every fake peer through the module's C function table,
    /// in batches of `batch` (Open MPI adds a job's procs in one call; the
    /// batches bound the modex copies add_procs holds while it runs).
    /// Returns how many came back reachable.
    size_t add_all(size_t batch = 4096);
    /// The handle add_procs gave for peer k (0-based).
    mca_btl_base_endpoint_t *handle(size_t k) const { return handles_.at(k); }
    btl::Module &module() { return *fabric_->procs[0]->module; }
    BtlFabric &fabric() { return *fabric_; }
    size_t peers() const { return procs_.size(); }
    /// The node of peer k (its GID's host part).
    size_t node_of(size_t k) const { return (k + 1) / per_node_; }

private:
    util::Result<btl::wire::ModexAddress> modex_of(opal_proc_t *proc) const;

    std::unique_ptr<BtlFabric> fabric_;
    btl::wire::PortAdvert ours_;
    size_t per_node_;
    std::vector<opal_proc_t> procs_; ///< reserved up front: add_procs keeps pointers
    std::vector<mca_btl_base_endpoint_t *> handles_;
};

} // namespace roce::testing
