// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>

#include "verbs/verbs_api.h"

namespace roce::verbs {

/// Whether a device can run mlx5's Dynamically Connected transport, and why
/// not when it cannot.
struct DcSupport {
    bool supported = false;
    /// One line: what was found ("mlx5_bond_0: DC supported (a DC target
    /// could be created; DC ODP caps 0x0)") or why not ("rxe_bond0 is not
    /// an mlx5 device: DC needs mlx5 direct verbs").
    std::string reason;
    uint32_t dc_odp_caps = 0; ///< IBV_ODP_SUPPORT_* over DC (0: no ODP)
};

/// Asks the device, as rdma-core lets one ask:
///  1. mlx5dv_is_supported(): DC exists only on mlx5 (rxe, bnxt, ... : no);
///  2. mlx5dv_query_device(MLX5DV_CONTEXT_MASK_DC_ODP_CAPS): the provider
///     answers (EOPNOTSUPP on a non-mlx5 context) and its DC ODP caps;
///  3. since rdma-core reports no "DC supported" flag (the HCA's dct
///     capability is visible only through DEVX), a DC target is created and
///     destroyed again on a PD, CQ and SRQ of its own - what UCX does
///     (uct_ib_mlx5dv_check_dc: "create DCT qp successful means DC is
///     supported"); the kernel refuses it with EOPNOTSUPP without the dct
///     capability.
/// `ctx` is an open context of the device `name` (for the messages). Every
/// object created is destroyed before returning (RAII). Never throws;
/// thread-safe as the verbs are.
DcSupport query_dc_support(const VerbsApi &api, ibv_context *ctx, const std::string &name);

} // namespace roce::verbs
