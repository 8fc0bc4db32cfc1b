// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
#include <cstdint>

#include "qp/queue_pair.h"

namespace roce::qp {

// mlx5's Dynamically Connected transport: a DC target (DCT) receives from
// any initiator that names it (address handle, DCT number, access key); a
// DC initiator (DCI) sends to any target, one work request at a time naming
// its destination. Both are created with mlx5dv_create_qp (qp_type
// IBV_QPT_DRIVER) and driven through QueuePair, so every transition is
// preflighted and a failure reads as the one diagnostic paragraph.

/// The send opcodes a DCI is created with (IBV_QP_EX_WITH_*): SEND, SEND
/// with immediate, RDMA WRITE and READ, and the two 64-bit atomics.
extern const uint64_t kDciSendOps;

/// The attributes a DC target is activated with by default: QpParams{}
/// with access flags LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ |
/// REMOTE_ATOMIC (what the btl's RDMA and atomics need at the target).
QpParams dct_params();

/// A DC target: owns the DCT (through its QueuePair). Movable, not
/// copyable; not thread-safe (its owner serialises, as for QueuePair).
class DcTarget {
public:
    /// Creates a DCT on `pd` whose receives come from `srq` and complete on
    /// `cq`, answering only initiators that present `access_key`; it is in
    /// RESET. `sel` is the addressing it will be activated with (device,
    /// port, pkey, GID index, path MTU). Errors: kInvalidArgument for a null
    /// `srq` or a key of 0 (the value of a key nobody drew); otherwise
    /// mlx5dv_create_qp's errno (EOPNOTSUPP: not mlx5, or no dct
    /// capability), the message naming the device.
    static util::Result<DcTarget> create(const verbs::VerbsApi &api, ibv_context *ctx, ibv_pd *pd,
                                         ibv_cq *cq, ibv_srq *srq, uint64_t access_key,
                                         select::Selection sel, SharedSnapshotSource snapshots,
                                         bool privileged, util::LogSink *log);

    /// RESET -> INIT (pkey_index, port, params.access_flags) -> RTR (the
    /// address vector with sgid_index = the selection's GID, path MTU,
    /// params.min_rnr_timer), each preflighted (QueuePair::modify). A DCT
    /// stops at RTR: it never sends. Errors: the refused or failed step's
    /// diagnostic; the DCT stays in the state it reached.
    [[nodiscard]] util::Status activate(const QpParams &params = dct_params());

    /// The number initiators address (mlx5dv_wr_set_dc_addr's remote_dctn).
    /// Valid once activate() succeeded: mlx5 creates the DCT in the
    /// firmware at RTR and numbers it then (rdma-core's modify_dct). 0 once
    /// the QP was destroyed (qp().destroy()).
    uint32_t number() const { return qp_.get() != nullptr ? qp_.get()->qp_num : 0; }
    uint64_t access_key() const { return key_; }
    QueuePair &qp() { return qp_; }
    const QueuePair &qp() const { return qp_; }

private:
    DcTarget(QueuePair qp, uint64_t key) : qp_(std::move(qp)), key_(key) {}
    QueuePair qp_;
    uint64_t key_;
};

/// The send queue of a DCI.
struct DciCaps {
    uint32_t max_send_wr = 64;
    uint32_t max_send_sge = 1;
    uint32_t max_inline_data = 0;
    bool sq_sig_all = false;
};

/// One DC work request: an operation, its local buffers and its
/// destination (the target's address handle, DCT number and key).
struct DcWork {
    enum class Op { kSend, kSendImm, kWrite, kRead, kCmpSwap, kFetchAdd };
    Op op = Op::kSend;
    uint64_t wr_id = 0;
    unsigned flags = 0;           ///< IBV_SEND_SIGNALED, IBV_SEND_FENCE, ...
    const ibv_sge *sge = nullptr; ///< local buffers (atomics: the 8-byte result buffer)
    size_t num_sge = 0;
    uint32_t imm = 0;  ///< kSendImm, network order as rdma-core takes it
    uint32_t rkey = 0; ///< RDMA and atomics
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0; ///< kCmpSwap: compare; kFetchAdd: add
    uint64_t swap = 0;        ///< kCmpSwap
    ibv_ah *ah = nullptr;     ///< to the target's GID
    uint32_t dctn = 0;
    uint64_t dc_key = 0;
};

/// A DC initiator: owns the DCI (through its QueuePair) and its extended
/// work-request handles. Movable, not copyable; not thread-safe.
class DcInitiator {
public:
    /// Creates a DCI on `pd` completing on `cq`, with the send opcodes of
    /// kDciSendOps (so it is posted with post(), never ibv_post_send); in
    /// RESET. Errors: mlx5dv_create_qp's errno (EOPNOTSUPP: not mlx5, or
    /// no dct capability; EINVAL: caps the device refuses), or kInternal if
    /// rdma-core gives no extended QP for it.
    static util::Result<DcInitiator> create(const verbs::VerbsApi &api, ibv_context *ctx,
                                            ibv_pd *pd, ibv_cq *cq, const DciCaps &caps,
                                            select::Selection sel, SharedSnapshotSource snapshots,
                                            bool privileged, util::LogSink *log);

    /// RESET -> INIT (pkey_index, port) -> RTR (path MTU and an address
    /// vector on the selection's port and GID, as UCX gives a RoCE DCI) ->
    /// RTS (timeout, retry counts, max_rd_atomic from `params`), each
    /// preflighted. Errors: the refused or failed step's diagnostic.
    [[nodiscard]] util::Status activate(const QpParams &params = {});

    /// Brings a DCI back after an error completion: whatever state it is in
    /// (ERR after an error; the work in flight has flushed by then) ->
    /// RESET -> INIT -> RTR -> RTS, keeping its number. The peers are not
    /// affected: a DCI holds no connection. Errors: as activate(), or the
    /// reset's errno.
    [[nodiscard]] util::Status recover(const QpParams &params = {});

    /// Posts `n` work requests as one batch (ibv_wr_start ... ibv_wr_complete
    /// with mlx5dv_wr_set_dc_addr): all of them or none. Errors:
    /// kInvalidArgument for n == 0, a null sge list where data is needed or
    /// a null address handle (nothing is posted); otherwise wr_complete's
    /// errno (ENOMEM: the send queue is full; EINVAL: a DCI not in RTS, or a
    /// request the device refuses) with the DCI's number and device. A DCI
    /// in ERR accepts work and flushes it (IBV_WC_WR_FLUSH_ERR).
    [[nodiscard]] util::Status post(const DcWork *works, size_t n);

    /// The DCI's QP number (0 once destroyed).
    uint32_t number() const { return qp_.get() != nullptr ? qp_.get()->qp_num : 0; }
    QueuePair &qp() { return qp_; }
    const QueuePair &qp() const { return qp_; }

private:
    DcInitiator(const verbs::VerbsApi &api, QueuePair qp, ibv_qp_ex *ex, mlx5dv_qp_ex *dv)
        : api_(&api), qp_(std::move(qp)), ex_(ex), dv_(dv) {}
    const verbs::VerbsApi *api_;
    QueuePair qp_;
    ibv_qp_ex *ex_;
    mlx5dv_qp_ex *dv_;
};

} // namespace roce::qp
