// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// FakeVerbs in wire mode: UD datagrams between the QPs of one FakeVerbs,
// and RC work requests executed against the connected QP (fake_verbs.h).
#include <cstring>

#include "fake_verbs_state.h"

namespace roce::testing {

namespace {

FakeVerbs::State &st(FakeVerbs &f) {
    return f.state();
}

FakeQpObj *qp_by_num(FakeVerbs &f, uint32_t qpn) {
    for (auto &[key, q] : st(f).qps) {
        if (q->qp.qp_num == qpn) {
            return q.get();
        }
    }
    return nullptr;
}

bool ready(const FakeQpObj &q) {
    return q.qp.state == IBV_QPS_RTR || q.qp.state == IBV_QPS_RTS;
}

std::vector<uint8_t> gather(const PostedWr &wr) {
    if (!wr.inline_data.empty()) {
        return wr.inline_data;
    }
    std::vector<uint8_t> out;
    for (const auto &sge : wr.sge) {
        const auto *b = reinterpret_cast<const uint8_t *>(sge.addr);
        out.insert(out.end(), b, b + sge.length);
    }
    return out;
}

/// Writes `data` over the scatter list; false when it does not fit.
bool scatter(const std::vector<ibv_sge> &sges, const uint8_t *data, size_t len) {
    size_t room = 0;
    for (const auto &sge : sges) {
        room += sge.length;
    }
    if (len > room) {
        return false;
    }
    for (const auto &sge : sges) {
        size_t n = std::min<size_t>(len, sge.length);
        std::memcpy(reinterpret_cast<void *>(sge.addr), data, n);
        data += n;
        len -= n;
    }
    return true;
}

/// The responder's memory for [addr, addr + len) under `rkey`, with `access`
/// allowed by the MR and by the QP; nullptr: a remote access error.
uint8_t *remote_memory(FakeVerbs &f, const FakeQpObj &responder, uint32_t rkey, uint64_t addr,
                       size_t len, int access) {
    if ((static_cast<int>(responder.attr.qp_access_flags) & access) != access) {
        return nullptr;
    }
    for (auto &[key, m] : st(f).mrs) {
        const ibv_mr &mr = m->mr;
        auto base = reinterpret_cast<uint64_t>(mr.addr);
        if (mr.rkey == rkey && mr.pd == responder.qp.pd && (m->access & access) == access &&
            addr >= base && addr + len <= base + mr.length) {
            return reinterpret_cast<uint8_t *>(addr);
        }
    }
    return nullptr;
}

void complete(FakeVerbs &f, FakeQpObj &q, const PostedWr &wr, ibv_wc_status status, uint32_t len) {
    if (status == IBV_WC_SUCCESS && !q.sq_sig_all && !(wr.send_flags & IBV_SEND_SIGNALED)) {
        return;
    }
    st(f)
        .cqs.at(q.qp.send_cq)
        ->wcs.push_back(fake_wc(q, wr.wr_id, status, fake_wc_opcode(wr.opcode), len));
}

/// The requester's front work request failed with `status`: it completes
/// so, the QP goes to ERR and the rest flush.
void fail_front(FakeVerbs &f, FakeQpObj &q, ibv_wc_status status) {
    PostedWr wr = q.sq.front();
    q.sq.pop_front();
    complete(f, q, wr, status, 0);
    q.qp.state = IBV_QPS_ERR;
    fake_enter_error(f, q);
}

void to_error(FakeVerbs &f, FakeQpObj &q) {
    // A DCT serves every initiator: a bad request fails that initiator's
    // work request and the target stays RTR (MLNX_OFED's experimental verbs
    // reported it as a DCT event; upstream rdma-core has no event type for
    // it, so the fake raises none).
    if (q.kind == FakeQpKind::kDCT) {
        return;
    }
    if (q.qp.state != IBV_QPS_ERR) {
        q.qp.state = IBV_QPS_ERR;
        fake_enter_error(f, q);
    }
}

using Step = FakeStep;

/// Executes q's oldest work request against `r`; `ack`: the requester
/// learns of it (false: the acknowledgement is lost on the way back).
Step execute(FakeVerbs &f, FakeQpObj &q, FakeQpObj &r, bool ack = true) {
    const PostedWr &wr = q.sq.front();
    auto complete = [&](FakeVerbs &ff, FakeQpObj &qq, const PostedWr &w, ibv_wc_status st,
                        uint32_t len) {
        if (ack || st != IBV_WC_SUCCESS) {
            testing::complete(ff, qq, w, st, len);
        }
    };
    switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: {
        std::deque<PostedWr> &rq = r.qp.srq != nullptr ? st(f).srqs.at(r.qp.srq)->posted : r.rq;
        if (rq.empty()) {
            return Step::kWait; // RNR NAK; rnr_retry 7 retries forever
        }
        std::vector<uint8_t> data = gather(wr);
        PostedWr recv = rq.front();
        rq.pop_front();
        if (!scatter(recv.sge, data.data(), data.size())) {
            ibv_wc bad = fake_wc(r, recv.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0);
            st(f).cqs.at(r.qp.recv_cq)->wcs.push_back(bad);
            to_error(f, r);
            fail_front(f, q, IBV_WC_REM_INV_REQ_ERR);
            return Step::kFailed;
        }
        ibv_wc wc =
            fake_wc(r, recv.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, static_cast<uint32_t>(data.size()));
        wc.src_qp = q.qp.qp_num;
        if (wr.opcode == IBV_WR_SEND_WITH_IMM) {
            wc.imm_data = wr.imm_data;
            wc.wc_flags |= IBV_WC_WITH_IMM;
        }
        if (r.qp.srq != nullptr) {
            st(f).srqs.at(r.qp.srq)->taken[recv.wr_id] = recv;
        }
        st(f).cqs.at(r.qp.recv_cq)->wcs.push_back(wc);
        complete(f, q, wr, IBV_WC_SUCCESS, static_cast<uint32_t>(data.size()));
        break;
    }
    case IBV_WR_RDMA_WRITE: {
        std::vector<uint8_t> data = gather(wr);
        uint8_t *dst =
            remote_memory(f, r, wr.rkey, wr.remote_addr, data.size(), IBV_ACCESS_REMOTE_WRITE);
        if (dst == nullptr) {
            to_error(f, r);
            fail_front(f, q, IBV_WC_REM_ACCESS_ERR);
            return Step::kFailed;
        }
        std::memcpy(dst, data.data(), data.size());
        complete(f, q, wr, IBV_WC_SUCCESS, static_cast<uint32_t>(data.size()));
        break;
    }
    case IBV_WR_RDMA_READ: {
        uint8_t *src =
            remote_memory(f, r, wr.rkey, wr.remote_addr, wr.length, IBV_ACCESS_REMOTE_READ);
        if (src == nullptr) {
            to_error(f, r);
            fail_front(f, q, IBV_WC_REM_ACCESS_ERR);
            return Step::kFailed;
        }
        (void)scatter(wr.sge, src, wr.length);
        complete(f, q, wr, IBV_WC_SUCCESS, wr.length);
        break;
    }
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_CMP_AND_SWP: {
        uint8_t *p = (wr.remote_addr & 7) == 0 && wr.length == 8
                         ? remote_memory(f, r, wr.rkey, wr.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC)
                         : nullptr;
        if (p == nullptr) {
            to_error(f, r);
            fail_front(f, q, IBV_WC_REM_ACCESS_ERR);
            return Step::kFailed;
        }
        uint64_t old = 0;
        std::memcpy(&old, p, 8);
        uint64_t now = wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? old + wr.compare_add
                       : old == wr.compare_add                  ? wr.swap
                                                                : old;
        std::memcpy(p, &now, 8);
        (void)scatter(wr.sge, reinterpret_cast<const uint8_t *>(&old), 8);
        complete(f, q, wr, IBV_WC_SUCCESS, 8);
        break;
    }
    default:
        fail_front(f, q, IBV_WC_LOC_QP_OP_ERR);
        return Step::kFailed;
    }
    q.sq.pop_front();
    return Step::kDone;
}

/// The IPv4 header checksum (RFC 791).
uint16_t ip_checksum(const uint8_t *h) {
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) {
        sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return static_cast<uint16_t>(~sum);
}

bool v4_mapped(const std::array<uint8_t, 16> &g) {
    static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.data(), kPrefix, 12) == 0;
}

/// The 40 bytes a RoCE v2 device writes ahead of a UD message.
void write_grh(uint8_t *grh, const FakeVerbs::Datagram &d, size_t len) {
    std::memset(grh, 0, 40);
    if (v4_mapped(d.sgid)) {
        uint8_t *ip = grh + 20;
        size_t total = 20 + 8 + 12 + len + 4; // IP, UDP, BTH+DETH, payload, ICRC
        ip[0] = 0x45;
        ip[2] = static_cast<uint8_t>(total >> 8);
        ip[3] = static_cast<uint8_t>(total);
        ip[8] = 64;
        ip[9] = 17; // UDP
        std::memcpy(ip + 12, d.sgid.data() + 12, 4);
        std::memcpy(ip + 16, d.dgid.data() + 12, 4);
        uint16_t c = ip_checksum(ip);
        ip[10] = static_cast<uint8_t>(c >> 8);
        ip[11] = static_cast<uint8_t>(c);
        return;
    }
    grh[0] = 0x60;
    grh[6] = 17;
    grh[7] = 64;
    std::memcpy(grh + 8, d.sgid.data(), 16);
    std::memcpy(grh + 24, d.dgid.data(), 16);
}

} // namespace

FakeStep fake_execute(FakeVerbs &f, FakeQpObj &q, FakeQpObj &r) { return execute(f, q, r); }

void fake_fail_front(FakeVerbs &f, FakeQpObj &q, ibv_wc_status status) {
    fail_front(f, q, status);
}

void fake_send_datagram(FakeVerbs &f, const FakeQpObj &q, const ibv_send_wr &wr) {
    FakeVerbs::Datagram d;
    d.src_qpn = q.qp.qp_num;
    d.dst_qpn = wr.wr.ud.remote_qpn;
    d.qkey = wr.wr.ud.remote_qkey;
    const FakeAhObj &ah = *st(f).ahs.at(wr.wr.ud.ah);
    d.sgid = ah.sgid; // held since create_ah, whatever the slot holds now
    std::memcpy(d.dgid.data(), ah.attr.grh.dgid.raw, 16);
    for (int i = 0; i < wr.num_sge; ++i) {
        const auto *b = reinterpret_cast<const uint8_t *>(wr.sg_list[i].addr);
        d.payload.insert(d.payload.end(), b, b + wr.sg_list[i].length);
    }
    st(f).datagrams.push_back(std::move(d));
}

void FakeVerbs::set_wire(bool on) {
    st_->wire = on;
}

std::deque<FakeVerbs::Datagram> &FakeVerbs::datagrams() {
    return st_->datagrams;
}

ibv_qp *FakeVerbs::find_qp(uint32_t qpn) const {
    FakeQpObj *q = qp_by_num(const_cast<FakeVerbs &>(*this), qpn);
    return q != nullptr ? &q->qp : nullptr;
}

bool FakeVerbs::deliver_datagram(const Datagram &d) {
    FakeQpObj *q = qp_by_num(*this, d.dst_qpn);
    if (q == nullptr || q->kind != FakeQpKind::kUD || !ready(*q) || q->rq.empty() ||
        q->attr.qkey != d.qkey) {
        return false;
    }
    // A pulled cable at either end: the datagram is lost on the way.
    const FakeQpObj *from = qp_by_num(*this, d.src_qpn);
    if (FakeOps::device_of(q->qp.context).link_down ||
        (from != nullptr && FakeOps::device_of(from->qp.context).link_down)) {
        return false;
    }
    // The network delivers to the port that has the destination GID.
    const FakePort &port =
        FakeOps::device_of(q->qp.context).ports.at(static_cast<size_t>(q->attr.port_num) - 1);
    bool here = false;
    for (const auto &[index, g] : port.gids) {
        here = here || g.gid == d.dgid;
    }
    if (!here) {
        return false;
    }
    PostedWr recv = q->rq.front();
    std::vector<uint8_t> buf(40 + d.payload.size());
    write_grh(buf.data(), d, d.payload.size());
    std::memcpy(buf.data() + 40, d.payload.data(), d.payload.size());
    q->rq.pop_front();
    if (!scatter(recv.sge, buf.data(), buf.size())) {
        // Larger than the receive buffer: the device completes it in error.
        st_->cqs.at(q->qp.recv_cq)
            ->wcs.push_back(fake_wc(*q, recv.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0));
        return false;
    }
    ibv_wc wc =
        fake_wc(*q, recv.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, static_cast<uint32_t>(buf.size()));
    wc.src_qp = d.src_qpn;
    wc.wc_flags |= IBV_WC_GRH;
    st_->cqs.at(q->qp.recv_cq)->wcs.push_back(wc);
    return true;
}

size_t FakeVerbs::run_rc() {
    size_t executed = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (auto &[key, qp] : st_->qps) {
            FakeQpObj &q = *qp;
            if (q.kind != FakeQpKind::kRC || q.qp.state != IBV_QPS_RTS) {
                continue;
            }
            while (!q.sq.empty()) {
                FakeQpObj *r = qp_by_num(*this, q.attr.dest_qp_num);
                // A pulled cable separates two contexts (processes, hosts);
                // a QP pair within one (a process's loopback path) still
                // loops back inside the device, as rxe and mlx5 do.
                // (A responder QP that is gone counts as across the cable.)
                const FakeDevice &qd = FakeOps::device_of(q.qp.context);
                const FakeDevice *rd = r != nullptr ? &FakeOps::device_of(r->qp.context) : nullptr;
                bool across = r == nullptr || q.qp.context != r->qp.context;
                bool cut = across && (qd.link_down || (rd != nullptr && rd->link_down));
                if (cut && (qd.link_retrying || (rd != nullptr && rd->link_retrying))) {
                    break; // still retrying: no completion yet
                }
                if (r == nullptr || r->kind != FakeQpKind::kRC || !ready(*r) || cut) {
                    // Nobody answers (or the cable of either end is pulled).
                    fail_front(*this, q, IBV_WC_RETRY_EXC_ERR);
                    ++executed;
                    moved = true;
                    break;
                }
                Step s = execute(*this, q, *r);
                if (s == Step::kWait) {
                    break;
                }
                ++executed;
                moved = true;
                if (s == Step::kFailed) {
                    break;
                }
            }
        }
    }
    return executed;
}

void FakeVerbs::break_qp(ibv_qp *qp, ibv_wc_status status, size_t delivered) {
    FakeQpObj &q = *st_->qps.at(qp);
    // The first `delivered` reach the responder; their ACKs are lost, so
    // the requester still holds them, oldest first, when the link dies.
    // A DCI's responder is the DCT its oldest work request names.
    std::deque<PostedWr> unacked;
    auto responder = [&]() {
        return qp_by_num(*this, q.kind == FakeQpKind::kDCI && !q.sq.empty()
                                    ? q.sq.front().remote_qpn
                                    : q.attr.dest_qp_num);
    };
    for (FakeQpObj *r = responder();
         unacked.size() < delivered && !q.sq.empty() && r != nullptr && ready(*r);
         r = responder()) {
        PostedWr copy = q.sq.front();
        if (execute(*this, q, *r, false) != Step::kDone) {
            break;
        }
        unacked.push_back(std::move(copy));
    }
    for (auto it = unacked.rbegin(); it != unacked.rend(); ++it) {
        q.sq.push_front(*it);
    }
    if (q.sq.empty()) {
        fail_next_send(qp, status);
        return;
    }
    fail_front(*this, q, status);
}

} // namespace roce::testing
