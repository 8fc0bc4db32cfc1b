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
    /// of the step that failed.
    std::string detail;
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

} // namespace roce::qp
