// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "qp/transitions.h"
#include "select/selection.h"
#include "topo/snapshot.h"

namespace roce::qp {

/// One attribute that does not fit the device as it is now.
struct Problem {
    std::string attribute;  ///< "port_num", "pkey_index", "qkey", "sgid_index", "path_mtu", ...
    int kernel_errno = 0;   ///< what ibv_modify_qp would return (0: it would succeed, but the
                            ///< QP would not work, e.g. a path MTU above the link's)
    std::string message;    ///< what is wrong, with the values
    std::string fix;        ///< what to do about it
};

/// What the caller is about to do and what it expects the attributes to
/// refer to.
struct PreflightContext {
    QpType type = QpType::kUD;
    Transition transition = Transition::kResetToInit;
    /// The addressing decision the request was built from: device, port (for
    /// transitions without IBV_QP_PORT), the GID value/type/netdev behind
    /// sgid_index (to detect a stale index), pkey value, qkey.
    select::Selection expected;
    bool privileged = false; ///< may use a controlled qkey (CAP_NET_RAW)
};

struct PreflightResult {
    std::vector<Problem> problems;      ///< not correctable: the call must not be made
    std::vector<std::string> corrections; ///< what was changed in the request, and why
    bool ok() const { return problems.empty(); }
};

/// Checks a modify_qp request against `fresh` (a snapshot taken just before
/// the call) and the kernel's rules, before the kernel sees it:
///  - the attribute mask against transition_masks (missing or extra bits);
///  - the device still exists; IBV_QP_PORT / the AV's port exist on it;
///  - pkey_index inside the pkey table and holding the expected pkey;
///  - a qkey with bit 31 set only when privileged;
///  - the AV: GRH present on RoCE; sgid_index populated and still holding
///    the expected GID, type and netdev (a stale index after an address
///    change on the bond or a VLAN is the classic LAG failure);
///  - path_mtu a valid enum, not above the port's active MTU nor the MTU
///    the GID's netdev allows;
///  - for DC (DCI/DCT) also: the port active (a DC QP on a down port fails
///    every peer at once, so it is refused rather than left to time out),
///    DCT access flags among LOCAL_WRITE/REMOTE_WRITE/REMOTE_READ/
///    REMOTE_ATOMIC, min_rnr_timer within its 5 bits. (The DC access key is
///    fixed at creation, not by modify_qp: DcTarget::create checks it.)
/// Corrections (made in `req` and listed) only where they are invisible to
/// the peer: an sgid_index whose GID moved to another slot (same GID value,
/// type and netdev) is pointed at the new slot; a pkey_index that does not
/// hold 0xffff is pointed at the slot that does. Everything else - a port the
/// device lacks, a controlled qkey, a GID that is gone, an MTU above the
/// link's - is a Problem: changing it would silently break the contract
/// with the peer. Pure: no I/O, thread-safe.
PreflightResult preflight(const topo::Snapshot &fresh, const PreflightContext &ctx,
                          ModifyRequest &req);

/// The address-vector checks alone, for ibv_create_ah (UD sends): port,
/// GRH, sgid_index (with the same correction), MTU not involved.
PreflightResult preflight_ah(const topo::Snapshot &fresh, const select::Selection &expected,
                             ibv_ah_attr &ah);

} // namespace roce::qp
