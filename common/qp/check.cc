// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/check.h"

#include <cerrno>
#include <cstring>

#include "qp/dc.h"
#include "qp/diagnostic.h"
#include "verbs/dc_support.h"
#include "util/strings.h"

namespace roce::qp {

namespace {

std::string failed(const char *verb, const std::string &device, int err) {
    return util::format("%s on %s failed: %s (%d)", verb, device.c_str(), std::strerror(err), err);
}

/// The UD address handle to our own GID, preflighted like a transition.
std::string check_ah(const verbs::VerbsApi &api, ibv_pd *pd, const select::Selection &sel,
                     const SnapshotSource &fresh) {
    ibv_ah_attr ah = build_ah_attr(sel, sel.gid, QpParams{});
    auto snap = fresh ? fresh() : util::Result<topo::Snapshot>(
                                      util::Status(util::Code::kUnavailable, "no snapshot"));
    ModifyRequest as_req;
    as_req.mask = IBV_QP_AV;
    DiagnosticInput d;
    d.type = QpType::kUD;
    d.sel = &sel;
    d.req = &as_req;
    d.verb = "ibv_create_ah";
    if (snap) {
        PreflightResult pf = preflight_ah(*snap, sel, ah);
        as_req.attr.ah_attr = ah;
        d.fresh = &snap.value();
        if (!pf.ok()) {
            d.problems = &pf.problems;
            d.refused = true;
            return format_diagnostic(d);
        }
    }
    as_req.attr.ah_attr = ah;
    verbs::Ah handle(api.create_ah(pd, &ah), verbs::AhDeleter{&api});
    if (!handle) {
        d.err = errno != 0 ? errno : EIO;
        return format_diagnostic(d);
    }
    return {};
}

CheckOutcome run_one(const verbs::VerbsApi &api, ibv_pd *pd, ibv_cq *cq, QpType type,
                     const select::Selection &sel, const SnapshotSource &fresh, bool privileged,
                     util::LogSink *log) {
    CheckOutcome out;
    out.type = type;
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = type == QpType::kUD ? IBV_QPT_UD : IBV_QPT_RC;
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    verbs::Qp raw(api.create_qp(pd, &init), verbs::QpDeleter{&api});
    if (!raw) {
        out.detail = failed(type == QpType::kUD ? "ibv_create_qp(UD)" : "ibv_create_qp(RC)",
                            sel.device, errno != 0 ? errno : EIO);
        return out;
    }
    uint32_t qpn = raw->qp_num;
    QueuePair qp(api, std::move(raw), type, sel, fresh, privileged, log);
    RemoteEnd self{qp.selection().gid, qpn, 0};
    util::Status st = qp.to_init();
    st = st ? qp.to_rtr(type == QpType::kRC ? &self : nullptr) : st;
    st = st ? qp.to_rts() : st;
    if (!st) {
        out.detail = qp.last_diagnostic().empty() ? st.message() : qp.last_diagnostic();
        return out;
    }
    if (type == QpType::kUD) {
        std::string ah = check_ah(api, pd, qp.selection(), fresh);
        if (!ah.empty()) {
            out.detail = ah;
            return out;
        }
    }
    out.passed = true;
    out.detail = util::format("RESET->INIT->RTR->RTS ok (qpn 0x%x%s)", qpn,
                              type == QpType::kUD ? ", address handle to the selected GID ok"
                                                  : ", connected to itself");
    for (const auto &c : qp.last_corrections()) {
        out.detail += "; corrected " + c;
    }
    return out;
}

/// Opens sel.device; on failure an empty context and `why`.
verbs::Context open_selected(const verbs::VerbsApi &api, const select::Selection &sel,
                             std::string &why) {
    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    if (!list) {
        why = failed("ibv_get_device_list", sel.device, errno != 0 ? errno : EIO);
        return verbs::Context(nullptr, verbs::ContextDeleter{&api});
    }
    ibv_device *device = nullptr;
    for (int i = 0; i < n; ++i) {
        const char *name = api.get_device_name(list[i]);
        if (name != nullptr && sel.device == name) {
            device = list[i];
        }
    }
    if (device == nullptr) {
        why = sel.device + " is not among the RDMA devices rdma-core lists now";
        return verbs::Context(nullptr, verbs::ContextDeleter{&api});
    }
    verbs::Context ctx(api.open_device(device), verbs::ContextDeleter{&api});
    if (!ctx) {
        why = failed("ibv_open_device", sel.device, errno != 0 ? errno : EIO);
    }
    return ctx;
}

std::string transitions_ok(const char *steps, const char *what, uint32_t qpn,
                           const QueuePair &qp) {
    std::string out = util::format("%s ok (%s 0x%x)", steps, what, qpn);
    for (const auto &c : qp.last_corrections()) {
        out += "; corrected " + c;
    }
    return out;
}

} // namespace

std::vector<CheckOutcome> check_transitions(const verbs::VerbsApi &api,
                                            const select::Selection &sel,
                                            const SnapshotSource &fresh, bool privileged,
                                            util::LogSink *log) {
    std::vector<CheckOutcome> out;
    auto fail_all = [&](const std::string &why) {
        for (QpType t : {QpType::kUD, QpType::kRC}) {
            out.push_back({t, false, why});
        }
        return out;
    };
    std::string why;
    // Declared in creation order: destroyed in reverse (QPs are gone before).
    verbs::Context ctx = open_selected(api, sel, why);
    if (!ctx) {
        return fail_all(why);
    }
    verbs::Pd pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
    if (!pd) {
        return fail_all(failed("ibv_alloc_pd", sel.device, errno != 0 ? errno : EIO));
    }
    verbs::Cq cq(api.create_cq(ctx.get(), 4, nullptr, nullptr, 0), verbs::CqDeleter{&api});
    if (!cq) {
        return fail_all(failed("ibv_create_cq", sel.device, errno != 0 ? errno : EIO));
    }
    for (QpType t : {QpType::kUD, QpType::kRC}) {
        out.push_back(run_one(api, pd.get(), cq.get(), t, sel, fresh, privileged, log));
    }
    return out;
}

std::vector<CheckOutcome> check_dc_transitions(const verbs::VerbsApi &api,
                                               const select::Selection &sel,
                                               const SnapshotSource &fresh, bool privileged,
                                               util::LogSink *log) {
    std::vector<CheckOutcome> out;
    auto all = [&](const std::string &why, bool skipped) {
        out = {{QpType::kDCT, false, why, skipped}, {QpType::kDCI, false, why, skipped}};
        return out;
    };
    std::string why;
    verbs::Context ctx = open_selected(api, sel, why);
    if (!ctx) {
        return all(why, false);
    }
    verbs::DcSupport dc = verbs::query_dc_support(api, ctx.get(), sel.device);
    if (!dc.supported) {
        return all("SKIP: " + dc.reason, true);
    }
    // Declared in creation order: destroyed in reverse (QPs are gone before).
    verbs::Pd pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
    verbs::Cq cq(pd ? api.create_cq(ctx.get(), 4, nullptr, nullptr, 0) : nullptr,
                 verbs::CqDeleter{&api});
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 1;
    sa.attr.max_sge = 1;
    verbs::Srq srq(cq ? api.create_srq(pd.get(), &sa) : nullptr, verbs::SrqDeleter{&api});
    if (!srq) {
        return all(failed(!pd ? "ibv_alloc_pd" : !cq ? "ibv_create_cq" : "ibv_create_srq",
                          sel.device, errno != 0 ? errno : EIO),
                   false);
    }
    SharedSnapshotSource snaps = shared_snapshot_source(fresh);
    // The probe's DCT is never addressed: a fixed key is enough ("chk").
    constexpr uint64_t kCheckKey = 0x63686bull;
    // DCT then DCI: created, activated, reported the same way.
    auto outcome = [](QpType type, auto &made, const char *steps, const char *what) {
        CheckOutcome o{type, false, ""};
        if (!made) {
            o.detail = made.status().message();
            return o;
        }
        if (util::Status st = made->activate(); !st) {
            const std::string &diag = made->qp().last_diagnostic();
            o.detail = diag.empty() ? st.message() : diag;
            return o;
        }
        o.passed = true;
        o.detail = transitions_ok(steps, what, made->number(), made->qp());
        return o;
    };
    auto t = DcTarget::create(api, ctx.get(), pd.get(), cq.get(), srq.get(), kCheckKey, sel,
                              snaps, privileged, log);
    out.push_back(outcome(QpType::kDCT, t, "RESET->INIT->RTR", "DCT"));
    auto i = DcInitiator::create(api, ctx.get(), pd.get(), cq.get(), DciCaps{}, sel, snaps,
                                 privileged, log);
    out.push_back(outcome(QpType::kDCI, i, "RESET->INIT->RTR->RTS", "DCI"));
    return out;
}

} // namespace roce::qp
