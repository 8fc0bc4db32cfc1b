// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The btl's counters as a plain snapshot: what the MPI_T performance
// variables (btl_roce_pvars.cc) publish. Pure data, no Open MPI or verbs:
// the unit tests build snapshots by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "connection/peer.h"

namespace roce::btl {

/// One path (RC QP) to a peer, as read from a module at one moment.
struct PathCounters {
    uint32_t peer_vpid = 0;  ///< the peer's rank in its job (MPI_COMM_WORLD)
    uint16_t port_index = 0; ///< the module (RoCE port) of this process
    uint16_t path = 0;       ///< path index within the peer's paths
    PathState state = PathState::kIdle;
    uint64_t bytes_sent = 0;     ///< payload bytes sent: sends and RDMA
    uint64_t bytes_received = 0; ///< payload bytes of the data fragments delivered
    uint64_t messages_sent = 0;  ///< sends and RDMA operations completed
    uint64_t messages_received = 0;
    uint64_t rdma_reads = 0;
    uint64_t rdma_writes = 0;
    uint64_t retransmits = 0;
    uint64_t failovers = 0;
    uint64_t reconnects = 0;
    uint64_t credit_stalls = 0;
};

/// One module (rail) while another rail lost its peers or it lost its own
/// (issue 16): the sends, puts and gets that moved between rails.
struct RailCounters {
    uint16_t port_index = 0;          ///< the module (RoCE port) of this process
    uint64_t rerouted_sends = 0;      ///< its sends another rail carried
    uint64_t rerouted_bytes = 0;
    uint64_t carried_sends = 0;       ///< sends of another rail it carried
    uint64_t carried_bytes = 0;
    uint64_t forwarded_received = 0;  ///< carried sends of its peers delivered as its own
    uint64_t forwarded_duplicates = 0; ///< carried sends its window already had
    uint64_t forwarded_refused = 0;   ///< forwarded fragments refused (malformed, wrong rail)
    uint64_t rerouted_rdma = 0;       ///< its puts/gets (or chunks) another rail carried
    uint64_t rerouted_rdma_bytes = 0;
    uint64_t carried_rdma = 0; ///< puts/gets (or chunks) of another rail it posted
    uint64_t carried_rdma_bytes = 0;
    uint64_t port_down_notices = 0; ///< peers that said their port of this rail went down
};

/// Everything the btl counts in one process: the sum over its modules.
struct BtlCounters {
    /// Every path of every module, in a stable order: module, then endpoint
    /// (creation order), then path index. A path keeps its position while
    /// the process runs (endpoints are never removed before finalize).
    std::vector<PathCounters> paths;
    /// Connection-manager messages dropped, by reason (CmDrops summed over
    /// the managers and their peers).
    CmDrops cm_drops;
    /// Every module, in the same order.
    std::vector<RailCounters> rails;

    /// Sum of `field` over every path.
    uint64_t total(uint64_t PathCounters::*field) const noexcept;
    /// Paths in state kUp.
    uint64_t paths_up() const noexcept;
    /// Sum of `field` over every module.
    uint64_t rail_total(uint64_t RailCounters::*field) const noexcept;
};

/// `from`'s drops added to `into`.
void add_drops(CmDrops &into, const CmDrops &from) noexcept;

/// Values of MPI_T's path_state variable (an enumeration; kNoPath marks a
/// slot beyond the paths that exist).
enum class PathSlotState : int { kNoPath = -1, kIdle = 0, kConnecting = 1, kAwaitRtu = 2, kUp = 3 };
PathSlotState slot_state(PathState s) noexcept;

/// Fills `n` slots (MPI_T array elements) with `get(path)` for the first
/// `n` paths of `c` and `fill` beyond them.
template <typename T, typename Get>
void fill_slots(const BtlCounters &c, T *out, std::size_t n, T fill, Get get) {
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = i < c.paths.size() ? static_cast<T>(get(c.paths[i])) : fill;
    }
}

} // namespace roce::btl
