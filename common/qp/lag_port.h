// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Queue affinity on an mlx5 LAG: which physical port of the bond a QP sends
// on. Set after RTS (a later transition may reset it) and read back.
#pragma once

#include <cstdint>

#include "util/status.h"
#include "verbs/verbs_api.h"

struct ibv_qp;

namespace roce::qp {

/// The effect of set_lag_port(): the port in force and the port the device
/// actually transmits on (they differ while the wanted member is down).
struct LagPort {
    uint8_t port = 0;   ///< 1-based LAG port the QP is bound to
    uint8_t active = 0; ///< 1-based LAG port in use now
};

/// Binds `qp` (number `qpn`, for messages) to LAG port `want` (1-based) with
/// mlx5dv_modify_qp_lag_port and verifies it with mlx5dv_query_qp_lag_port.
/// Call after every transition to RTS. Errors: the errno of either call
/// (EOPNOTSUPP when the device has no queue-affinity LAG), or kInternal when
/// the port read back is not the one requested.
util::Result<LagPort> set_lag_port(const verbs::VerbsApi &api, ibv_qp *qp, uint32_t qpn,
                                   uint8_t want);

} // namespace roce::qp
