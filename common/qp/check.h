// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "qp/queue_pair.h"

namespace roce::qp {

/// The result of trying one QP type's transitions on a real (or fake) device.
struct CheckOutcome {
    QpType type = QpType::kUD;
    bool passed = false;
    /// "RESET->INIT->RTR->RTS ok (qpn 0x102)", or the diagnostic paragraph
    /// of the step that failed, or why it was skipped.
    std::string detail;
    /// Not tried: the device cannot do it (DC off mlx5); `detail` says why.
    /// Never counted as passed.
    bool skipped = false;
};

/// What `roce-doctor --check` does for one selection: opens sel.device,
/// creates a PD and a CQ, then
///  - a UD QP taken RESET->INIT->RTR->RTS, plus an address handle to the
///    selected GID itself (the UD send path's sgid check);
///  - an RC QP taken RESET->INIT->RTR->RTS, connected to itself (dgid = the
///    selected GID, dest_qpn = its own QPN), which exercises the address
///    vector, sgid_index and path MTU exactly as a real connection does;
/// each transition preflighted by QueuePair. Everything created is destroyed
/// again (RAII) before returning. Never throws; failures are outcomes.
std::vector<CheckOutcome> check_transitions(const verbs::VerbsApi &api,
                                            const select::Selection &sel,
                                            const SnapshotSource &fresh, bool privileged,
                                            util::LogSink *log);

/// The DC part of the check for the same selection: whether sel.device
/// runs mlx5 DC (verbs::query_dc_support); if it does, a DC target taken
/// RESET->INIT->RTR and a DC initiator taken RESET->INIT->RTR->RTS
/// (DcTarget, DcInitiator: every transition preflighted) on a PD, CQ and
/// SRQ of their own, all destroyed again before returning. Without DC
/// both outcomes are skipped with the reason (rxe, other providers, mlx5
/// without the dct capability). Two outcomes, DCT then DCI. Never throws.
std::vector<CheckOutcome> check_dc_transitions(const verbs::VerbsApi &api,
                                               const select::Selection &sel,
                                               const SnapshotSource &fresh, bool privileged,
                                               util::LogSink *log);

} // namespace roce::qp
