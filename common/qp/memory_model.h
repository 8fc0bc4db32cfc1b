// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>

namespace roce::qp {

// Memory per process against the number of peers, RC against DC: a model
// computed from sizes, not a measurement of a run. Every input is a size the
// caller takes from the code (a config constant, a sizeof) or measures (heap
// growth per peer, as tests/bench/btl_conn_bench does); the send-queue
// buffers are the sizes rdma-core's mlx5 provider allocates for the QP's
// capacities, computed from mlx5dv.h's WQE segment layouts. Not included:
// the NIC's own QP contexts (firmware memory, invisible to software) and
// what RC and DC share (the SRQ and its buffers, the CQ, registrations).

/// The bytes of one send WQE of an mlx5 QP as rdma-core's provider sizes it
/// (providers/mlx5/verbs.c, mlx5_calc_send_wqe): the largest operation
/// overhead the QP may post (control segment; + remote address for RDMA; +
/// atomic segment for atomics; the memory-window/UMR segments when
/// `with_mw`, which an RC QP created with ibv_create_qp always allows), +
/// the datagram (address vector) segment for a DCI, then the larger of
/// `max_sge` data segments and the inline segment with `max_inline` bytes
/// (16-byte aligned), rounded up to the 64-byte basic block. Pure.
uint32_t mlx5_send_wqe_bytes(bool dci, bool with_mw, uint32_t max_sge, uint32_t max_inline);

/// The send-queue buffer of such a QP with `depth` WQEs: depth x WQE bytes
/// rounded up to a power of two (mlx5_calc_sq_size); 0 for depth 0. Pure.
uint64_t mlx5_sq_bytes(bool dci, bool with_mw, uint32_t depth, uint32_t max_sge,
                       uint32_t max_inline);

/// The lower bound of a user-space mlx5 address handle: the ibv_ah and the
/// address vector the provider keeps in it (sizeof(ibv_ah) +
/// sizeof(mlx5_wqe_av)).
uint64_t mlx5_ah_bytes();

/// What the model is computed from. One module per port: every peer has an
/// endpoint on each port.
struct MemoryInputs {
    uint32_t ports = 1;
    // RC: one QP per path, paths_per_peer per peer and port.
    uint32_t paths_per_peer = 1;
    uint32_t rc_sq_depth = 0; ///< max_send_wr of each RC QP
    uint32_t rc_max_sge = 0;
    uint32_t rc_max_inline = 0;
    uint64_t rc_path_bytes = 0; ///< host state per path beyond its SQ buffer
    // DC: one DCT and dci_pool DCIs per port; an address handle per peer and port.
    uint32_t dci_pool = 0;
    uint32_t dci_sq_depth = 0;
    uint32_t dci_max_sge = 0;
    uint32_t dci_max_inline = 0;
    uint64_t dc_port_bytes = 0; ///< host state per port for DC (the DcTarget and DcInitiators)
    uint64_t dc_peer_bytes = 0; ///< host state per peer and port beyond the endpoint (the AH)
    // Both: the endpoint of a peer on a port (its object and what it allocates).
    uint64_t peer_bytes = 0;
};

/// The memory of one transport at a number of peers.
struct MemoryEstimate {
    uint64_t qps = 0;         ///< QPs of the process
    uint64_t send_wqes = 0;   ///< send-queue entries (WQEs) over all of them
    uint64_t queue_bytes = 0; ///< their send-queue buffers
    uint64_t state_bytes = 0; ///< host state: endpoints, paths, address handles, DC objects
    uint64_t total() const { return queue_bytes + state_bytes; }
};

/// RC at `peers` peers: peers x ports x paths QPs, each with its SQ buffer
/// and path state, plus the endpoints. Pure.
MemoryEstimate rc_memory(const MemoryInputs &in, uint64_t peers);

/// DC at `peers` peers: per port one DCT (no send queue) and the DCI pool
/// with its SQ buffers, plus per peer and port the endpoint and the
/// address handle. Pure.
MemoryEstimate dc_memory(const MemoryInputs &in, uint64_t peers);

} // namespace roce::qp
