// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "qp/preflight.h"
#include "qp/transitions.h"
#include "topo/snapshot.h"

namespace roce::qp {

/// The likely cause of an errno from ibv_modify_qp / ibv_create_ah, and the
/// fix, as one short sentence each.
struct LikelyCause {
    std::string cause;
    std::string fix;
};

/// The errno -> likely cause table, specialised by what the request
/// carried (e.g. EPERM with IBV_QP_QKEY and bit 31 set is the controlled
/// qkey; EINVAL with IBV_QP_PORT beyond the device's ports is the one-port
/// LAG device). Covers EPERM, EACCES, EINVAL, ENODATA, ETIMEDOUT,
/// ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ENODEV, ENXIO, EOPNOTSUPP,
/// ENOMEM, EAGAIN, EBUSY, EIO, EFAULT; anything else gets a generic line.
/// Pure.
LikelyCause likely_cause(int err, QpType type, Transition t, const ModifyRequest &req);

/// The one-paragraph diagnostic of a failed (or refused) transition, in the
/// house format:
///   ibv_modify_qp(UD, RESET->INIT) on mlx5_bond_0:1 pkey_index 0 (0xffff)
///   qkey 0x1ee7a330 gid[5] ::ffff:172.26.92.74 (RoCE v2, bond0.3027) mtu 1024
///   failed: Invalid argument (22); likely cause: ...; fix: ...
/// Attributes come from the request where its mask carries them, else from
/// `sel` (so the reader sees the whole addressing decision); the GID's value,
/// type and netdev are looked up in `fresh` when given (what the slot holds
/// now), else taken from `sel`. `problems` (from preflight, when the call
/// was made anyway or refused) take precedence over the errno table for the
/// cause and fix. `refused` = the call was not made ("refused before the
/// call: ... the kernel would fail with ...").
struct DiagnosticInput {
    QpType type = QpType::kUD;
    Transition transition = Transition::kResetToInit;
    const select::Selection *sel = nullptr;
    const ModifyRequest *req = nullptr;
    const topo::Snapshot *fresh = nullptr;
    int err = 0;
    const std::vector<Problem> *problems = nullptr;
    bool refused = false;
    /// Another verb than ibv_modify_qp, e.g. "ibv_create_ah" (then the
    /// header is "ibv_create_ah(UD)" and req carries the AV under IBV_QP_AV).
    const char *verb = nullptr;
};
std::string format_diagnostic(const DiagnosticInput &in);

/// The attribute part alone: "on mlx5_bond_0:1 pkey_index 0 (0xffff) qkey
/// 0x1ee7a330 gid[5] ::ffff:... (RoCE v2, bond0.3027) mtu 1024".
std::string describe_attributes(const DiagnosticInput &in);

} // namespace roce::qp
