// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "qp/preflight.h"
#include "qp/transitions.h"
#include "select/selection.h"
#include "topo/snapshot.h"
#include "topo/snapshot_cache.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/handles.h"
#include "verbs/verbs_api.h"

namespace roce::qp {

/// Gives a fresh snapshot of the machine. Production: topo::read_live (or the
/// netlink monitor's view); tests: a lambda over a fixture or a FakeVerbs.
using SnapshotSource = std::function<util::Result<topo::Snapshot>()>;

/// Gives the snapshot to preflight against without copying it: the shared,
/// immutable view of a topo::SnapshotCache (cache_snapshot_source), or a
/// fresh read (shared_snapshot_source).
using SharedSnapshotSource =
    std::function<util::Result<std::shared_ptr<const topo::Snapshot>>()>;

/// `fresh` (one read per call, as before the cache) as a
/// SharedSnapshotSource; an empty source stays empty.
SharedSnapshotSource shared_snapshot_source(SnapshotSource fresh);

/// The view of `cache` for transitions on `device`
/// (topo::SnapshotCache::view_for): what the cache holds, re-read only where
/// an invalidation or (unmonitored) age says so - no machine read per
/// transition. `cache` must outlive the source; thread-safe as the cache is.
SharedSnapshotSource cache_snapshot_source(topo::SnapshotCache &cache, std::string device);

/// A QP with its state machine, whose every transition is preflighted.
///
/// modify() (and the to_* helpers) do, in order:
///  1. refuse a transition that does not start from the current state;
///  2. take the snapshot source's current view and preflight the request against it
///     (preflight.h): safe corrections (a moved GID, a moved pkey) are applied
///     to the request and to selection(), and logged at info level; any other
///     mismatch refuses the transition with the diagnostic paragraph, and
///     ibv_modify_qp is not called;
///  3. call ibv_modify_qp; on failure return the one-paragraph diagnostic
///     (format_diagnostic) with the errno and log it at error level.
/// If no snapshot can be taken, the transition goes ahead unchecked and a
/// warning is logged (preflight is a safety net, not a gate on the kernel).
///
/// Ownership: owns the ibv_qp (destroyed through the VerbsApi on
/// destruction). Not thread-safe: one thread drives a QP's transitions.
class QueuePair {
public:
    /// `qp` must be in RESET and was created for `type` on `sel.device`.
    /// `log` may be null (nothing is logged then).
    QueuePair(const verbs::VerbsApi &api, verbs::Qp qp, QpType type, select::Selection sel,
              SnapshotSource fresh, bool privileged, util::LogSink *log);
    /// The same, preflighting against `snapshots` (e.g. cache_snapshot_source):
    /// the snapshot is shared, not copied, at each transition.
    QueuePair(const verbs::VerbsApi &api, verbs::Qp qp, QpType type, select::Selection sel,
              SharedSnapshotSource snapshots, bool privileged, util::LogSink *log);

    QpType type() const { return type_; }
    ibv_qp *get() const { return qp_.get(); }
    /// The state as this object drove it (RESET, INIT, RTR, RTS, ERR).
    ibv_qp_state state() const { return state_; }
    /// The addressing in force: the selection given at construction, with
    /// preflight's corrections applied.
    const select::Selection &selection() const { return sel_; }

    /// The three transitions with the attributes built from selection()
    /// (build_request). RC needs `remote` at to_rtr.
    [[nodiscard]] util::Status to_init(const QpParams &params = {});
    [[nodiscard]] util::Status to_rtr(const RemoteEnd *remote, const QpParams &params = {});
    [[nodiscard]] util::Status to_rts(const QpParams &params = {});

    /// Any of the three with a caller-built request (preflighted the same way).
    [[nodiscard]] util::Status modify(Transition t, ModifyRequest req);

    /// Any state -> RESET (allowed from every state, nothing to preflight):
    /// how a QP the device moved to the error state is brought back with
    /// the same number. Outstanding work requests are discarded without
    /// completions. Errors: the errno of ibv_modify_qp.
    [[nodiscard]] util::Status reset();

    /// Any state but RESET -> ERR (nothing to preflight): every outstanding
    /// work request completes with IBV_WC_WR_FLUSH_ERR, and a QP attached to
    /// an SRQ raises IBV_EVENT_QP_LAST_WQE_REACHED once no more SRQ receives
    /// will be consumed by it. Errors: the errno of ibv_modify_qp (EINVAL
    /// from RESET, where nothing is outstanding anyway), not logged: the
    /// caller says what it does next.
    [[nodiscard]] util::Status to_error();

    /// Destroys the QP now (ibv_destroy_qp) instead of at destruction, so the
    /// caller learns whether it worked. The QP is gone from this object
    /// either way: a failed destroy is not retried (the kernel reclaims the
    /// QP when the context is closed), and the Status names the verb, the
    /// type, the device, the QPN and the errno. Ok when already destroyed.
    [[nodiscard]] util::Status destroy();

    /// The state the device reports now (ibv_query_qp: a system call, for
    /// error paths); state() when the query fails.
    ibv_qp_state query_state() const;

    /// The diagnostic of the last refused or failed transition ("" if none).
    const std::string &last_diagnostic() const { return last_diag_; }
    /// What preflight corrected in the last transition.
    const std::vector<std::string> &last_corrections() const { return last_corrections_; }

private:
    void log(util::LogLevel level, const std::string &line) const;

    const verbs::VerbsApi *api_;
    verbs::Qp qp_;
    QpType type_;
    select::Selection sel_;
    SharedSnapshotSource fresh_;
    bool privileged_;
    util::LogSink *log_;
    ibv_qp_state state_ = IBV_QPS_RESET;
    std::string last_diag_;
    std::vector<std::string> last_corrections_;
};

} // namespace roce::qp
