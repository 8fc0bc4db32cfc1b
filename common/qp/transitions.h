// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "select/selection.h"

namespace roce::qp {

/// The QP types ompi-roce drives. DCI/DCT are mlx5 DC initiator/target
/// (created with mlx5dv_create_qp, qp_type IBV_QPT_DRIVER).
enum class QpType { kUD, kRC, kDCI, kDCT };
/// "UD", "RC", "DCI", "DCT".
const char *to_string(QpType t) noexcept;

/// The three transitions that take a QP from RESET to sending.
enum class Transition { kResetToInit, kInitToRtr, kRtrToRts };
/// "RESET->INIT", "INIT->RTR", "RTR->RTS".
const char *to_string(Transition t) noexcept;
/// The state a QP must be in before `t` (RESET for RESET->INIT, ...).
ibv_qp_state from_state(Transition t) noexcept;
/// The state `t` moves a QP to (the qp_state of its request).
ibv_qp_state to_state(Transition t) noexcept;

/// The attribute masks a transition accepts, as the kernel checks them
/// (ib_modify_qp_is_ok's table for UD/RC; mlx5's DCI/DCT rules).
/// `required` includes IBV_QP_STATE.
struct MaskRule {
    int required = 0;
    int optional = 0;
};
/// nullopt when the type does not make that transition (a DCT stops at RTR).
std::optional<MaskRule> transition_masks(QpType type, Transition t) noexcept;

/// "IBV_QP_PKEY_INDEX|IBV_QP_PORT" ("0" for none).
std::string mask_names(int mask);
/// "LOCAL_WRITE|REMOTE_READ" for IBV_ACCESS_* flags ("0" for none; other
/// bits in hex).
std::string access_names(unsigned flags);

/// What the remote side of a connection told us, for RTR.
struct RemoteEnd {
    std::array<uint8_t, 16> gid{};
    uint32_t qpn = 0;
    uint32_t psn = 0;
};

/// Protocol parameters of the transitions that are not addressing.
struct QpParams {
    uint32_t sq_psn = 0;
    int access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    uint8_t timeout = 14;       ///< 4.096 us * 2^14 = 67 ms per try
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;      ///< 7 = infinite
    uint8_t min_rnr_timer = 12;
    uint8_t max_rd_atomic = 1;
    uint8_t max_dest_rd_atomic = 1;
    uint8_t hop_limit = 64;
    uint8_t traffic_class = 0;
    uint8_t sl = 0;
    /// GRH flow label (20 bits). RoCE v2 devices derive the UDP source port
    /// from it (0: the device picks one from the QP numbers), which is how
    /// paths are spread over the members of a hash-based LAG.
    uint32_t flow_label = 0;
};

/// Attributes plus mask for one ibv_modify_qp call.
struct ModifyRequest {
    ibv_qp_attr attr{};
    int mask = 0;
};

/// The request for `t` of a `type` QP with the addressing of `sel`: port,
/// pkey_index and qkey (UD) or access flags (RC/DCT) at INIT; path MTU and
/// - for RC/DCT, and DCI when `remote` is given - the address vector with
/// sgid_index = sel.gid_index at RTR; PSN/timers at RTS. `remote` is needed
/// for RC INIT->RTR (dgid, qpn, psn); ignored otherwise. Pure.
ModifyRequest build_request(QpType type, Transition t, const select::Selection &sel,
                            const RemoteEnd *remote, const QpParams &params);

/// An address vector from `sel` to `dgid` (GRH always set: RoCE needs it).
ibv_ah_attr build_ah_attr(const select::Selection &sel, const std::array<uint8_t, 16> &dgid,
                          const QpParams &params);

} // namespace roce::qp
