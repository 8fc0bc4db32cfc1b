// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// FakeVerbs: the QP state machine with the kernel's attribute-mask table and
// errno order, and the data path (post, completions).
#include <cerrno>
#include <cstring>

#include "fake_verbs_state.h"
#include "util/strings.h"

namespace roce::testing {

namespace {

FakeVerbs::State &st(FakeVerbs &f) { return f.state(); }

struct Masks {
    int required = 0;
    int optional = 0;
};

constexpr int kAltEtc = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;

/// The legal transitions of the kernel's qp_state_table (core/verbs.c) for
/// RC/UC/UD, and of mlx5's modify_dci_qp_is_ok / mlx5_ib_modify_dct for DC.
/// IBV_QP_STATE is added by the caller. SQD/SQE are not modelled. A DCT
/// knows RESET->INIT and INIT->RTR only (mlx5_ib_modify_dct: anything else
/// is "Invalid transition", EINVAL; it is destroyed, never reset).
bool transition_masks(FakeQpKind k, ibv_qp_state cur, ibv_qp_state next, Masks &m) {
    m = {};
    if (k == FakeQpKind::kDCT && !(cur == IBV_QPS_RESET && next == IBV_QPS_INIT) &&
        !(cur == IBV_QPS_INIT && next == IBV_QPS_RTR)) {
        return false;
    }
    if (next == IBV_QPS_RESET || (next == IBV_QPS_ERR && cur != IBV_QPS_RESET)) {
        return true; // no attributes besides the state
    }
    const bool rc = k == FakeQpKind::kRC, uc = k == FakeQpKind::kUC, ud = k == FakeQpKind::kUD;
    const bool dci = k == FakeQpKind::kDCI, dct = k == FakeQpKind::kDCT;
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
        m.required = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        m.required |= ud ? IBV_QP_QKEY : (rc || uc || dct) ? IBV_QP_ACCESS_FLAGS : 0;
        return true;
    }
    if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT && !dct) {
        m.optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        m.optional |= ud ? IBV_QP_QKEY : (rc || uc) ? IBV_QP_ACCESS_FLAGS : 0;
        return true;
    }
    if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
        if (ud) {
            m.optional = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
        } else if (rc || uc) {
            m.required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
            m.required |= rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0;
            m.optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
        } else if (dci) {
            m.required = IBV_QP_PATH_MTU;
            m.optional = IBV_QP_PKEY_INDEX | IBV_QP_AV;
        } else {
            m.required = IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU;
        }
        return true;
    }
    if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS && !dct) {
        if (ud || uc) {
            m.required = IBV_QP_SQ_PSN;
            m.optional = ud ? IBV_QP_CUR_STATE | IBV_QP_QKEY : IBV_QP_CUR_STATE | kAltEtc;
        } else {
            m.required = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC;
            m.optional = rc ? IBV_QP_CUR_STATE | kAltEtc | IBV_QP_MIN_RNR_TIMER
                            : IBV_QP_MIN_RNR_TIMER;
        }
        return true;
    }
    if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS && !dct) {
        m.optional = ud ? IBV_QP_CUR_STATE | IBV_QP_QKEY
                     : uc ? IBV_QP_CUR_STATE | kAltEtc
                     : rc ? IBV_QP_CUR_STATE | kAltEtc | IBV_QP_MIN_RNR_TIMER
                          : IBV_QP_MIN_RNR_TIMER;
        return true;
    }
    return cur == IBV_QPS_RESET && next == IBV_QPS_RESET;
}

const char *state_name(ibv_qp_state s) {
    switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "?";
    }
}

/// The kernel order: uverbs (ports, qkey), core (address vector), driver
/// (transition table, pkey index, MTU). Returns 0 or the errno, with why.
int check_modify(FakeVerbs &f, FakeQpObj &q, const ibv_qp_attr &a, int mask, std::string &why) {
    const ibv_context *ctx = q.qp.context;
    const FakeDevice &dev = FakeOps::device_of(ctx);
    const ibv_qp_state cur = q.qp.state;
    const ibv_qp_state next = mask & IBV_QP_STATE ? a.qp_state : cur;
    if ((mask & IBV_QP_PORT) && !FakeOps::port_valid(ctx, a.port_num)) {
        why = util::format("port_num %d is not a port of %s (it has %zu)", a.port_num,
                           dev.name.c_str(), dev.ports.size());
        return EINVAL;
    }
    if ((mask & IBV_QP_AV) && !FakeOps::port_valid(ctx, a.ah_attr.port_num)) {
        why = util::format("ah_attr.port_num %d is not a port of %s", a.ah_attr.port_num,
                           dev.name.c_str());
        return EINVAL;
    }
    if ((mask & IBV_QP_QKEY) && (a.qkey & 0x80000000u) && !st(f).privileged) {
        why = "controlled qkey (bit 31) without CAP_NET_RAW";
        return EPERM;
    }
    if (mask & IBV_QP_AV) {
        if (int err = FakeOps::check_av(f, ctx, a.ah_attr, why)) {
            return err;
        }
    }
    Masks m;
    if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS) {
        why = "IBV_QP_CUR_STATE is allowed only from RTR or RTS";
        return EINVAL;
    }
    if (!transition_masks(q.kind, cur, next, m)) {
        why = util::format("%s -> %s is not a legal transition", state_name(cur), state_name(next));
        return EINVAL;
    }
    int req = m.required | IBV_QP_STATE;
    if ((mask & req) != req || (mask & ~(req | m.optional))) {
        why = util::format("%s -> %s: attribute mask 0x%x, required 0x%x, optional 0x%x",
                           state_name(cur), state_name(next), mask, req, m.optional);
        return EINVAL;
    }
    int port = mask & IBV_QP_PORT ? a.port_num : q.attr.port_num;
    if ((mask & IBV_QP_PKEY_INDEX) && dev.checks_pkey_index && port >= 1 &&
        a.pkey_index >= dev.ports[static_cast<size_t>(port - 1)].pkeys.size()) {
        why = util::format("pkey_index %d is beyond the pkey table (size %zu)", a.pkey_index,
                           dev.ports[static_cast<size_t>(port - 1)].pkeys.size());
        return EINVAL;
    }
    if (q.kind == FakeQpKind::kDCT && (mask & IBV_QP_ACCESS_FLAGS) &&
        (a.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) && !dev.dc_atomics) {
        why = "REMOTE_ATOMIC on a DCT of a device without DC atomics (mlx5_ib_modify_dct)";
        return EOPNOTSUPP;
    }
    if (mask & IBV_QP_PATH_MTU) {
        int p = mask & IBV_QP_AV ? a.ah_attr.port_num : port;
        if (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096 ||
            (p >= 1 && a.path_mtu > dev.ports[static_cast<size_t>(p - 1)].max_mtu)) {
            why = util::format("path_mtu %d is not a valid MTU for this port", a.path_mtu);
            return EINVAL;
        }
    }
    return 0;
}

void apply(FakeQpObj &q, const ibv_qp_attr &a, int mask) {
    auto take = [&](int bit, auto field) {
        if (mask & bit) {
            q.attr.*field = a.*field;
        }
    };
    take(IBV_QP_PKEY_INDEX, &ibv_qp_attr::pkey_index);
    take(IBV_QP_PORT, &ibv_qp_attr::port_num);
    take(IBV_QP_QKEY, &ibv_qp_attr::qkey);
    take(IBV_QP_ACCESS_FLAGS, &ibv_qp_attr::qp_access_flags);
    take(IBV_QP_AV, &ibv_qp_attr::ah_attr);
    take(IBV_QP_PATH_MTU, &ibv_qp_attr::path_mtu);
    take(IBV_QP_DEST_QPN, &ibv_qp_attr::dest_qp_num);
    take(IBV_QP_RQ_PSN, &ibv_qp_attr::rq_psn);
    take(IBV_QP_SQ_PSN, &ibv_qp_attr::sq_psn);
    take(IBV_QP_MAX_DEST_RD_ATOMIC, &ibv_qp_attr::max_dest_rd_atomic);
    take(IBV_QP_MAX_QP_RD_ATOMIC, &ibv_qp_attr::max_rd_atomic);
    take(IBV_QP_MIN_RNR_TIMER, &ibv_qp_attr::min_rnr_timer);
    take(IBV_QP_TIMEOUT, &ibv_qp_attr::timeout);
    take(IBV_QP_RETRY_CNT, &ibv_qp_attr::retry_cnt);
    take(IBV_QP_RNR_RETRY, &ibv_qp_attr::rnr_retry);
    q.applied_mask |= mask;
}

} // namespace

ibv_wc fake_wc(const FakeQpObj &q, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode op,
               uint32_t len) {
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = op;
    wc.qp_num = q.qp.qp_num;
    wc.byte_len = len;
    return wc;
}

namespace {

FakeCqObj &cq_of(FakeVerbs &f, ibv_cq *cq) { return *st(f).cqs.at(cq); }

/// Moving to ERR flushes every posted receive.
void flush_recvs(FakeVerbs &f, FakeQpObj &q) {
    while (!q.rq.empty()) {
        cq_of(f, q.qp.recv_cq).wcs.push_back(fake_wc(q, q.rq.front().wr_id, IBV_WC_WR_FLUSH_ERR,
                                                     IBV_WC_RECV, 0));
        q.rq.pop_front();
    }
}

} // namespace

ibv_wc_opcode fake_wc_opcode(ibv_wr_opcode op) {
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
    }
}

/// The QP enters ERR: posted receives flush, and a QP attached to an SRQ
/// raises Last WQE Reached (IBA o11-5.2.5; fake_verbs.h says which devices).
void fake_enter_error(FakeVerbs &f, FakeQpObj &q) {
    flush_recvs(f, q);
    while (!q.sq.empty()) {
        const PostedWr &wr = q.sq.front();
        cq_of(f, q.qp.send_cq)
            .wcs.push_back(fake_wc(q, wr.wr_id, IBV_WC_WR_FLUSH_ERR, fake_wc_opcode(wr.opcode), 0));
        q.sq.pop_front();
    }
    bool srq_kind =
        q.kind == FakeQpKind::kRC || q.kind == FakeQpKind::kUC || q.kind == FakeQpKind::kUD;
    if (q.qp.srq != nullptr && srq_kind && FakeOps::device_of(q.qp.context).raises_last_wqe) {
        ibv_async_event e{};
        e.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
        e.element.qp = &q.qp;
        FakeOps::queue_event(f, q.qp.context, e);
    }
}

namespace {

/// mlx5's __mlx5_cq_clean: removes `qpn`'s completions from `cq`, giving
/// each consumed SRQ receive back to `srq`.
void clean_cq(FakeVerbs &f, ibv_cq *cq, uint32_t qpn, ibv_srq *srq) {
    auto &wcs = cq_of(f, cq).wcs;
    for (auto it = wcs.begin(); it != wcs.end();) {
        if (it->qp_num != qpn) {
            ++it;
            continue;
        }
        if (srq != nullptr && (it->opcode & IBV_WC_RECV) != 0) {
            FakeSrqObj &s = *st(f).srqs.at(srq);
            auto taken = s.taken.find(it->wr_id);
            if (taken != s.taken.end()) {
                s.posted.push_back(taken->second);
                s.taken.erase(taken);
            }
        }
        it = wcs.erase(it);
    }
}

PostedWr record(const FakeQpObj &q, const ibv_send_wr &wr) {
    PostedWr p;
    p.qp_num = q.qp.qp_num;
    p.wr_id = wr.wr_id;
    p.opcode = wr.opcode;
    p.send_flags = wr.send_flags;
    p.sge.assign(wr.sg_list, wr.sg_list + wr.num_sge);
    for (const auto &sge : p.sge) {
        p.length += sge.length;
    }
    p.imm_data = wr.imm_data;
    if (q.kind == FakeQpKind::kUD) {
        p.ah = wr.wr.ud.ah;
        p.remote_qpn = wr.wr.ud.remote_qpn;
        p.remote_qkey = wr.wr.ud.remote_qkey;
    } else if (wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
        p.remote_addr = wr.wr.atomic.remote_addr;
        p.rkey = wr.wr.atomic.rkey;
        p.compare_add = wr.wr.atomic.compare_add;
        p.swap = wr.wr.atomic.swap;
    } else {
        p.remote_addr = wr.wr.rdma.remote_addr;
        p.rkey = wr.wr.rdma.rkey;
    }
    if ((wr.send_flags & IBV_SEND_INLINE) != 0) {
        // Inline data is copied at post time: the buffer may be reused at once.
        for (const auto &sge : p.sge) {
            const auto *b = reinterpret_cast<const uint8_t *>(sge.addr);
            p.inline_data.insert(p.inline_data.end(), b, b + sge.length);
        }
    }
    return p;
}

/// 0 or the errno post_send gives for this WR.
int check_send(FakeVerbs &f, const FakeQpObj &q, const ibv_send_wr &wr) {
    if (q.qp.state != IBV_QPS_RTS && q.qp.state != IBV_QPS_ERR) {
        return EINVAL; // mlx5: posting before RTS
    }
    if (wr.num_sge < 0 || wr.num_sge > 30) {
        return EINVAL;
    }
    if ((wr.send_flags & IBV_SEND_INLINE) != 0) {
        if (wr.opcode == IBV_WR_RDMA_READ || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
            wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            return EINVAL; // nothing to carry inline
        }
        uint64_t len = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            len += wr.sg_list[i].length;
        }
        if (len > q.max_inline) {
            // mlx5 set_data_inl_seg: ENOMEM; rxe validate_send_wr: EINVAL.
            return FakeOps::device_of(q.qp.context).mlx5 ? ENOMEM : EINVAL;
        }
    }
    if (q.kind == FakeQpKind::kUD) {
        if (wr.opcode != IBV_WR_SEND && wr.opcode != IBV_WR_SEND_WITH_IMM) {
            return EINVAL;
        }
        if (wr.wr.ud.ah == nullptr || st(f).ahs.count(wr.wr.ud.ah) == 0) {
            return EINVAL;
        }
    }
    return 0;
}

} // namespace

ibv_qp *FakeOps::make_qp(FakeVerbs &f, ibv_pd *pd, const ibv_qp_init_attr &init,
                         FakeQpKind kind) {
    auto &s = st(f);
    if (s.pds.count(pd) == 0 || s.cqs.count(init.send_cq) == 0 || s.cqs.count(init.recv_cq) == 0 ||
        (init.srq != nullptr && s.srqs.count(init.srq) == 0) || init.cap.max_send_wr > 32768 ||
        init.cap.max_recv_wr > 32768 || init.cap.max_send_sge > 30 || init.cap.max_recv_sge > 30 ||
        init.cap.max_inline_data > device_of(pd->context).max_inline_data) {
        errno = EINVAL;
        return nullptr;
    }
    auto obj = std::make_unique<FakeQpObj>();
    obj->kind = kind;
    obj->sq_sig_all = init.sq_sig_all != 0;
    obj->max_inline = init.cap.max_inline_data;
    ibv_qp &qp = obj->qp;
    qp.context = pd->context;
    qp.qp_context = init.qp_context;
    qp.pd = pd;
    qp.send_cq = init.send_cq;
    qp.recv_cq = init.recv_cq;
    qp.srq = init.srq;
    qp.qp_num = s.next_qpn++;
    qp.state = IBV_QPS_RESET;
    qp.qp_type = init.qp_type;
    ++s.pds.at(pd)->users;
    ++s.cqs.at(init.send_cq)->users;
    ++s.cqs.at(init.recv_cq)->users;
    if (init.srq != nullptr) {
        ++s.srqs.at(init.srq)->users;
    }
    s.qps[&qp] = std::move(obj);
    return &qp;
}

ibv_qp *FakeOps::create_qp(ibv_pd *pd, ibv_qp_init_attr *init) {
    FakeVerbs &f = *owner(pd->context);
    if (int err = enter(f, Call::kCreateQp)) {
        errno = err;
        return nullptr;
    }
    switch (init->qp_type) {
    case IBV_QPT_RC: return make_qp(f, pd, *init, FakeQpKind::kRC);
    case IBV_QPT_UC: return make_qp(f, pd, *init, FakeQpKind::kUC);
    case IBV_QPT_UD: return make_qp(f, pd, *init, FakeQpKind::kUD);
    default: errno = EOPNOTSUPP; return nullptr;
    }
}

// FakeOps::mlx5dv_create_qp: fake_verbs_dc.cc.

int FakeOps::destroy_qp(ibv_qp *qp) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kDestroyQp)) {
        return fail_with(err);
    }
    auto &s = st(f);
    auto it = s.qps.find(qp);
    if (it == s.qps.end()) {
        return fail_with(EINVAL);
    }
    if (device_of(qp->context).cleans_cq_on_destroy) {
        clean_cq(f, qp->recv_cq, qp->qp_num, qp->srq);
        if (qp->send_cq != qp->recv_cq) {
            clean_cq(f, qp->send_cq, qp->qp_num, nullptr);
        }
    }
    drop_qp_events(f, qp->context, qp);
    fake_forget_dc(f, qp);
    --s.pds.at(qp->pd)->users;
    --s.cqs.at(qp->send_cq)->users;
    --s.cqs.at(qp->recv_cq)->users;
    if (qp->srq != nullptr) {
        --s.srqs.at(qp->srq)->users;
    }
    f.destroyed_qps_.push_back(qp->qp_num);
    s.qps.erase(it);
    return 0;
}

int FakeOps::modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
    FakeVerbs &f = *owner(qp->context);
    f.last_modify_errno_ = 0;
    f.last_modify_reason_.clear();
    if (int err = enter(f, Call::kModifyQp)) {
        f.last_modify_errno_ = err;
        f.last_modify_reason_ = "scripted failure";
        return fail_with(err);
    }
    FakeQpObj &q = *st(f).qps.at(qp);
    std::string why;
    if (int err = check_modify(f, q, *attr, mask, why)) {
        f.last_modify_errno_ = err;
        f.last_modify_reason_ = why;
        return fail_with(err);
    }
    ibv_qp_state next = mask & IBV_QP_STATE ? attr->qp_state : qp->state;
    apply(q, *attr, mask);
    if (q.kind == FakeQpKind::kDCT && next == IBV_QPS_RTR) {
        // mlx5 creates the DCT in the firmware at RTR, which gives it its
        // number then (rdma-core's modify_dct: qp->qp_num = resp.dctn).
        qp->qp_num = st(f).next_qpn++;
    }
    // As mlx5dv_modify_qp_lag_port(3) warns: a later state change may
    // reconfigure the LAG port. The fake always does, so callers that do
    // not set it again after RTS are caught.
    if (next != qp->state) {
        q.lag_port = 0;
    }
    if (next == IBV_QPS_RESET) {
        q.rq.clear();
        q.sq.clear();
        q.applied_mask = 0;
        q.attr = ibv_qp_attr{};
    } else if (next == IBV_QPS_ERR && qp->state != IBV_QPS_ERR) {
        fake_enter_error(f, q);
    }
    qp->state = next;
    return 0;
}

int FakeOps::query_qp(ibv_qp *qp, ibv_qp_attr *attr, int, ibv_qp_init_attr *init) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kQueryQp)) {
        return fail_with(err);
    }
    const FakeQpObj &q = *st(f).qps.at(qp);
    *attr = q.attr;
    attr->qp_state = qp->state;
    attr->cur_qp_state = qp->state;
    attr->cap.max_inline_data = q.max_inline;
    if (init != nullptr) {
        std::memset(init, 0, sizeof(*init));
        init->qp_type = qp->qp_type;
        init->send_cq = qp->send_cq;
        init->recv_cq = qp->recv_cq;
        init->srq = qp->srq;
        init->sq_sig_all = q.sq_sig_all;
        init->cap.max_inline_data = q.max_inline;
    }
    return 0;
}

int FakeOps::post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kPostSend)) {
        *bad = wr;
        return fail_with(err);
    }
    FakeQpObj &q = *st(f).qps.at(qp);
    for (; wr != nullptr; wr = wr->next) {
        if (int err = check_send(f, q, *wr)) {
            *bad = wr;
            return fail_with(err);
        }
        f.sends_.push_back(record(q, *wr));
        uint32_t len = f.sends_.back().length;
        FakeCqObj &cq = cq_of(f, qp->send_cq);
        if (q.fail_next_send) {
            ibv_wc wc = fake_wc(q, wr->wr_id, q.next_status, fake_wc_opcode(wr->opcode), 0);
            wc.vendor_err = q.next_vendor_err;
            cq.wcs.push_back(wc);
            q.fail_next_send = false;
            qp->state = IBV_QPS_ERR;
            fake_enter_error(f, q);
        } else if (qp->state == IBV_QPS_ERR) {
            cq.wcs.push_back(
                fake_wc(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, fake_wc_opcode(wr->opcode), 0));
        } else if (st(f).wire && q.kind == FakeQpKind::kUD) {
            fake_send_datagram(f, q, *wr);
            if (q.sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
                cq.wcs.push_back(fake_wc(q, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, len));
            }
        } else if (!st(f).auto_complete || st(f).wire) {
            q.sq.push_back(f.sends_.back());
        } else if (q.sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
            cq.wcs.push_back(
                fake_wc(q, wr->wr_id, IBV_WC_SUCCESS, fake_wc_opcode(wr->opcode), len));
        }
    }
    return 0;
}

int FakeOps::post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kPostRecv)) {
        *bad = wr;
        return fail_with(err);
    }
    FakeQpObj &q = *st(f).qps.at(qp);
    for (; wr != nullptr; wr = wr->next) {
        if (qp->state == IBV_QPS_RESET || qp->srq != nullptr || wr->num_sge > 30) {
            *bad = wr;
            return fail_with(EINVAL);
        }
        PostedWr p;
        p.qp_num = qp->qp_num;
        p.wr_id = wr->wr_id;
        p.sge.assign(wr->sg_list, wr->sg_list + wr->num_sge);
        f.recvs_.push_back(p);
        q.rq.push_back(p);
        if (qp->state == IBV_QPS_ERR) {
            flush_recvs(f, q);
        }
    }
    return 0;
}

int FakeOps::post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad) {
    FakeVerbs &f = *owner(srq->context);
    if (int err = enter(f, Call::kPostSrqRecv)) {
        *bad = wr;
        return fail_with(err);
    }
    FakeSrqObj &s = *st(f).srqs.at(srq);
    for (; wr != nullptr; wr = wr->next) {
        PostedWr p;
        p.wr_id = wr->wr_id;
        p.sge.assign(wr->sg_list, wr->sg_list + wr->num_sge);
        f.recvs_.push_back(p);
        s.posted.push_back(p);
    }
    return 0;
}

// ---- FakeVerbs members for QPs ---------------------------------------------------

ibv_qp_state FakeVerbs::qp_state(const ibv_qp *qp) const { return st_->qps.at(qp)->qp.state; }

const ibv_qp_attr &FakeVerbs::qp_attr(const ibv_qp *qp) const { return st_->qps.at(qp)->attr; }

void FakeVerbs::fail_next_send(ibv_qp *qp, ibv_wc_status status, uint32_t vendor_err) {
    FakeQpObj &q = *st_->qps.at(qp);
    q.fail_next_send = true;
    q.next_status = status;
    q.next_vendor_err = vendor_err;
}

size_t FakeVerbs::complete_sends(ibv_qp *qp, size_t n) {
    FakeQpObj &q = *st_->qps.at(qp);
    size_t done = 0;
    for (; done < n && !q.sq.empty(); ++done) {
        const PostedWr &wr = q.sq.front();
        if (q.sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED)) {
            st_->cqs.at(qp->send_cq)
                ->wcs.push_back(fake_wc(q, wr.wr_id, IBV_WC_SUCCESS, fake_wc_opcode(wr.opcode),
                                        wr.length));
        }
        q.sq.pop_front();
    }
    return done;
}

bool FakeVerbs::deliver_recv(ibv_qp *qp, uint32_t byte_len, uint32_t src_qp, const uint32_t *imm) {
    FakeQpObj &q = *st_->qps.at(qp);
    std::deque<PostedWr> &queue = qp->srq != nullptr ? st_->srqs.at(qp->srq)->posted : q.rq;
    if (queue.empty() || (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)) {
        return false;
    }
    ibv_wc wc = fake_wc(q, queue.front().wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, byte_len);
    wc.src_qp = src_qp;
    if (imm != nullptr) {
        wc.imm_data = *imm;
        wc.wc_flags |= IBV_WC_WITH_IMM;
    }
    if (q.kind == FakeQpKind::kUD) {
        wc.wc_flags |= IBV_WC_GRH;
    }
    if (qp->srq != nullptr) {
        st_->srqs.at(qp->srq)->taken[queue.front().wr_id] = queue.front();
    }
    queue.pop_front();
    st_->cqs.at(qp->recv_cq)->wcs.push_back(wc);
    return true;
}

} // namespace roce::testing

namespace roce::testing {

// mlx5 LAG controls. EOPNOTSUPP unless the device is mlx5 in LAG mode
// (num_lag_ports > 1), as the man pages say; the QP must be out of RESET.
int FakeOps::mlx5dv_modify_qp_lag_port(ibv_qp *qp, uint8_t port) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kMlx5dvModifyQpLagPort)) {
        return fail_with(err);
    }
    const FakeDevice &d = device_of(qp->context);
    if (!d.mlx5 || d.num_lag_ports < 2) {
        return fail_with(EOPNOTSUPP);
    }
    FakeQpObj &q = *st(f).qps.at(qp);
    if (port < 1 || port > d.num_lag_ports || qp->state == IBV_QPS_RESET ||
        qp->state == IBV_QPS_ERR) {
        return fail_with(EINVAL);
    }
    q.lag_port = port;
    return 0;
}

int FakeOps::mlx5dv_query_qp_lag_port(ibv_qp *qp, uint8_t *port, uint8_t *active) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kMlx5dvQueryQpLagPort)) {
        return fail_with(err);
    }
    const FakeDevice &d = device_of(qp->context);
    if (!d.mlx5 || d.num_lag_ports < 2) {
        return fail_with(EOPNOTSUPP);
    }
    const FakeQpObj &q = *st(f).qps.at(qp);
    *port = q.lag_port;
    uint8_t a = q.lag_port != 0 ? q.lag_port : 1;
    if (d.lag_port_down == a) {
        a = static_cast<uint8_t>(a % d.num_lag_ports + 1);
    }
    *active = a;
    return 0;
}

int FakeOps::mlx5dv_modify_qp_udp_sport(ibv_qp *qp, uint16_t sport) {
    FakeVerbs &f = *owner(qp->context);
    if (int err = enter(f, Call::kMlx5dvModifyQpUdpSport)) {
        return fail_with(err);
    }
    const FakeDevice &d = device_of(qp->context);
    FakeQpObj &q = *st(f).qps.at(qp);
    if (!d.mlx5) {
        return fail_with(EOPNOTSUPP);
    }
    if (q.kind != FakeQpKind::kRC || (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)) {
        return fail_with(EINVAL);
    }
    q.udp_sport = sport;
    return 0;
}

uint8_t FakeVerbs::qp_lag_port(const ibv_qp *qp) const {
    return st_->qps.at(const_cast<ibv_qp *>(qp))->lag_port;
}

uint16_t FakeVerbs::qp_udp_sport(const ibv_qp *qp) const {
    return st_->qps.at(const_cast<ibv_qp *>(qp))->udp_sport;
}

} // namespace roce::testing
