// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/queue_pair.h"

#include <cstring>

#include <cerrno>

#include "qp/diagnostic.h"
#include "util/strings.h"

namespace roce::qp {

using util::Code;
using util::Status;

namespace {

const char *state_name(ibv_qp_state s) {
    switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_ERR: return "ERR";
    default: return "another state";
    }
}

/// The Code of a refusal: from the errno the kernel would have returned.
Code refusal_code(const std::vector<Problem> &ps) {
    for (const auto &p : ps) {
        if (p.kernel_errno != 0) {
            return util::code_from_errno(p.kernel_errno);
        }
    }
    return Code::kUnavailable;
}

} // namespace

SharedSnapshotSource shared_snapshot_source(SnapshotSource fresh) {
    if (!fresh) {
        return {};
    }
    return [fresh = std::move(fresh)]() -> util::Result<std::shared_ptr<const topo::Snapshot>> {
        auto s = fresh();
        if (!s) {
            return s.status();
        }
        return std::make_shared<const topo::Snapshot>(std::move(s.value()));
    };
}

SharedSnapshotSource cache_snapshot_source(topo::SnapshotCache &cache, std::string device) {
    return [&cache, device = std::move(device)]()
               -> util::Result<std::shared_ptr<const topo::Snapshot>> {
        auto v = cache.view_for(device);
        if (!v) {
            return v.status();
        }
        return v->snapshot;
    };
}

QueuePair::QueuePair(const verbs::VerbsApi &api, verbs::Qp qp, QpType type, select::Selection sel,
                     SnapshotSource fresh, bool privileged, util::LogSink *log)
    : QueuePair(api, std::move(qp), type, std::move(sel), shared_snapshot_source(std::move(fresh)),
                privileged, log) {}

QueuePair::QueuePair(const verbs::VerbsApi &api, verbs::Qp qp, QpType type, select::Selection sel,
                     SharedSnapshotSource snapshots, bool privileged, util::LogSink *log)
    : api_(&api), qp_(std::move(qp)), type_(type), sel_(std::move(sel)),
      fresh_(std::move(snapshots)), privileged_(privileged), log_(log) {}

void QueuePair::log(util::LogLevel level, const std::string &line) const {
    if (log_ != nullptr && log_->enabled(level)) {
        log_->write(level, line);
    }
}

Status QueuePair::reset() {
    if (!qp_) {
        return Status(Code::kInternal, "QueuePair::reset on a QP that was never created");
    }
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RESET;
    int rc = verbs::normalize_rc(api_->modify_qp(qp_.get(), &attr, IBV_QP_STATE), errno);
    if (rc != 0) {
        last_diag_ = util::format("ibv_modify_qp(%s, %s->RESET) on %s qpn 0x%x failed: %s",
                                  to_string(type_), state_name(state_), sel_.device.c_str(),
                                  qp_->qp_num, std::strerror(rc));
        log(util::LogLevel::kError, last_diag_);
        return Status(util::code_from_errno(rc), last_diag_, rc);
    }
    log(util::LogLevel::kDebug, util::format("ibv_modify_qp(%s, %s->RESET) on %s qpn 0x%x: ok",
                                             to_string(type_), state_name(state_),
                                             sel_.device.c_str(), qp_->qp_num));
    state_ = IBV_QPS_RESET;
    return Status::ok();
}

Status QueuePair::to_error() {
    if (!qp_) {
        return Status(Code::kInternal, "QueuePair::to_error on a QP that was never created");
    }
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    int rc = verbs::normalize_rc(api_->modify_qp(qp_.get(), &attr, IBV_QP_STATE), errno);
    if (rc != 0) {
        last_diag_ = util::format("ibv_modify_qp(%s, %s->ERR) on %s qpn 0x%x failed: %s (%d)",
                                  to_string(type_), state_name(state_), sel_.device.c_str(),
                                  qp_->qp_num, std::strerror(rc), rc);
        return Status(util::code_from_errno(rc), last_diag_, rc);
    }
    log(util::LogLevel::kDebug,
        util::format("ibv_modify_qp(%s, %s->ERR) on %s qpn 0x%x: ok", to_string(type_),
                     state_name(state_), sel_.device.c_str(), qp_->qp_num));
    state_ = IBV_QPS_ERR;
    return Status::ok();
}

Status QueuePair::destroy() {
    if (!qp_) {
        return Status::ok();
    }
    ibv_qp *raw = qp_.release();
    uint32_t qpn = raw->qp_num;
    int rc = verbs::normalize_rc(api_->destroy_qp(raw), errno);
    if (rc != 0) {
        verbs::note_destroy_failure(rc);
        return Status(util::code_from_errno(rc),
                      util::format("ibv_destroy_qp(%s) on %s qpn 0x%x failed: %s (%d)",
                                   to_string(type_), sel_.device.c_str(), qpn, std::strerror(rc),
                                   rc),
                      rc);
    }
    return Status::ok();
}

ibv_qp_state QueuePair::query_state() const {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (!qp_ || api_->query_qp(qp_.get(), &attr, IBV_QP_STATE, &init) != 0) {
        return state_;
    }
    return attr.qp_state;
}

Status QueuePair::to_init(const QpParams &params) {
    return modify(Transition::kResetToInit,
                  build_request(type_, Transition::kResetToInit, sel_, nullptr, params));
}

Status QueuePair::to_rtr(const RemoteEnd *remote, const QpParams &params) {
    return modify(Transition::kInitToRtr,
                  build_request(type_, Transition::kInitToRtr, sel_, remote, params));
}

Status QueuePair::to_rts(const QpParams &params) {
    return modify(Transition::kRtrToRts,
                  build_request(type_, Transition::kRtrToRts, sel_, nullptr, params));
}

Status QueuePair::modify(Transition t, ModifyRequest req) {
    last_diag_.clear();
    last_corrections_.clear();
    if (!qp_) {
        return Status(Code::kInternal, "QueuePair::modify on a QP that was never created");
    }
    if (state_ != from_state(t)) {
        last_diag_ = util::format("%s transition refused: the QP is in %s, not %s",
                                  to_string(t), state_name(state_), state_name(from_state(t)));
        return Status(Code::kInvalidArgument, last_diag_);
    }
    DiagnosticInput d;
    d.type = type_;
    d.transition = t;
    d.sel = &sel_;
    d.req = &req;
    auto fresh = fresh_ ? fresh_()
                        : util::Result<std::shared_ptr<const topo::Snapshot>>(
                              Status(Code::kUnavailable, "no snapshot source"));
    if (fresh) {
        d.fresh = fresh->get();
        PreflightContext ctx{type_, t, sel_, privileged_};
        PreflightResult pf = preflight(**fresh, ctx, req);
        for (const auto &c : pf.corrections) {
            log(util::LogLevel::kInfo, util::format("%s %s on %s: preflight corrected %s",
                                                    to_string(type_), to_string(t),
                                                    sel_.device.c_str(), c.c_str()));
        }
        last_corrections_ = pf.corrections;
        if (!pf.ok()) {
            d.problems = &pf.problems;
            d.refused = true;
            last_diag_ = format_diagnostic(d);
            log(util::LogLevel::kError, last_diag_);
            int err = pf.problems.front().kernel_errno;
            return Status(refusal_code(pf.problems), last_diag_, err);
        }
        if (req.mask & IBV_QP_AV) {
            sel_.gid_index = req.attr.ah_attr.grh.sgid_index;
        }
        if (req.mask & IBV_QP_PKEY_INDEX) {
            sel_.pkey_index = req.attr.pkey_index;
        }
    } else {
        log(util::LogLevel::kWarn,
            util::format("%s %s on %s: no fresh snapshot (%s); transition not preflighted",
                         to_string(type_), to_string(t), sel_.device.c_str(),
                         fresh.status().message().c_str()));
    }
    int rc = verbs::normalize_rc(api_->modify_qp(qp_.get(), &req.attr, req.mask), errno);
    if (rc != 0) {
        d.err = rc;
        last_diag_ = format_diagnostic(d);
        log(util::LogLevel::kError, last_diag_);
        return Status(util::code_from_errno(rc), last_diag_, rc);
    }
    state_ = to_state(t);
    log(util::LogLevel::kDebug, util::format("ibv_modify_qp(%s, %s) %s: ok", to_string(type_),
                                             to_string(t), describe_attributes(d).c_str()));
    return Status::ok();
}

} // namespace roce::qp
