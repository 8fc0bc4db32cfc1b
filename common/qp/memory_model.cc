// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/memory_model.h"

#include <infiniband/mlx5dv.h>

#include <algorithm>

namespace roce::qp {

namespace {

constexpr uint64_t align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

uint64_t pow2_at_least(uint64_t v) {
    uint64_t p = 1;
    while (p < v) {
        p <<= 1;
    }
    return p;
}

} // namespace

uint32_t mlx5_send_wqe_bytes(bool dci, bool with_mw, uint32_t max_sge, uint32_t max_inline) {
    // The operations both QP kinds are created for here: send, RDMA, atomics.
    uint64_t ctrl = sizeof(mlx5_wqe_ctrl_seg);
    uint64_t rdma = ctrl + sizeof(mlx5_wqe_raddr_seg);
    uint64_t atomic = rdma + sizeof(mlx5_wqe_atomic_seg);
    uint64_t mw = with_mw
                      ? ctrl + sizeof(mlx5_wqe_umr_ctrl_seg) + sizeof(mlx5_wqe_mkey_context_seg) +
                            std::max<uint64_t>(sizeof(mlx5_wqe_umr_klm_seg), 64)
                      : 0;
    uint64_t overhead = std::max({ctrl, rdma, atomic, mw});
    if (dci) {
        overhead += sizeof(mlx5_wqe_datagram_seg);
    }
    uint64_t gather = overhead + uint64_t{max_sge} * sizeof(mlx5_wqe_data_seg);
    uint64_t inl =
        max_inline > 0 ? overhead + align_up(sizeof(mlx5_wqe_inl_data_seg) + max_inline, 16) : 0;
    return static_cast<uint32_t>(align_up(std::max(gather, inl), MLX5_SEND_WQE_BB));
}

uint64_t mlx5_sq_bytes(bool dci, bool with_mw, uint32_t depth, uint32_t max_sge,
                       uint32_t max_inline) {
    if (depth == 0) {
        return 0;
    }
    return pow2_at_least(uint64_t{depth} * mlx5_send_wqe_bytes(dci, with_mw, max_sge, max_inline));
}

uint64_t mlx5_ah_bytes() {
    return sizeof(ibv_ah) + sizeof(mlx5_wqe_av);
}

MemoryEstimate rc_memory(const MemoryInputs &in, uint64_t peers) {
    MemoryEstimate e;
    uint64_t ends = peers * in.ports; // endpoints
    e.qps = ends * in.paths_per_peer;
    e.send_wqes = e.qps * in.rc_sq_depth;
    e.queue_bytes =
        e.qps * mlx5_sq_bytes(false, true, in.rc_sq_depth, in.rc_max_sge, in.rc_max_inline);
    e.state_bytes = ends * in.peer_bytes + e.qps * in.rc_path_bytes;
    return e;
}

MemoryEstimate dc_memory(const MemoryInputs &in, uint64_t peers) {
    MemoryEstimate e;
    uint64_t ends = peers * in.ports;
    uint64_t dcis = uint64_t{in.ports} * in.dci_pool;
    e.qps = in.ports + dcis; // a DCT per port
    e.send_wqes = dcis * in.dci_sq_depth;
    e.queue_bytes =
        dcis * mlx5_sq_bytes(true, false, in.dci_sq_depth, in.dci_max_sge, in.dci_max_inline);
    e.state_bytes =
        uint64_t{in.ports} * in.dc_port_bytes + ends * (in.peer_bytes + in.dc_peer_bytes);
    return e;
}

} // namespace roce::qp
