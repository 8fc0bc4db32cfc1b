// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The RC queue pairs of the paths, the connection side's verbs work: created
// (in INIT, preflighted), paired over the LAG (the passive side picks QP
// numbers whose pairing the bond spreads), connected (RTR, RTS) and pinned
// to a LAG port where the device does queue affinity, and retired.
#include "connector/connector.h"

#include "btl_roce_module.h"

#include <random>

#include "qp/lag_port.h"
#include "util/strings.h"

namespace roce::btl {

using util::Result;
using util::Status;

namespace {

uint32_t random_psn() {
    static thread_local std::mt19937 rng{std::random_device{}()};
    return rng() & 0xffffffu;
}

} // namespace

qp::QpParams Connector::rc_params(const Path &path) const {
    qp::QpParams p;
    p.sq_psn = path.local_psn;
    p.access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
    p.timeout = static_cast<uint8_t>(cfg_.ack_timeout);
    p.retry_cnt = static_cast<uint8_t>(cfg_.retry_count);
    p.rnr_retry = static_cast<uint8_t>(cfg_.rnr_retry);
    p.min_rnr_timer = 12;
    int rd = dev_.attr().max_qp_rd_atom > 16 ? 16 : dev_.attr().max_qp_rd_atom;
    int init_rd = dev_.attr().max_qp_init_rd_atom > 16 ? 16 : dev_.attr().max_qp_init_rd_atom;
    p.max_dest_rd_atomic = static_cast<uint8_t>(rd > 0 ? rd : 1);
    p.max_rd_atomic = static_cast<uint8_t>(init_rd > 0 ? init_rd : 1);
    p.flow_label = path.tx.spread.flow_label;
    return p;
}

// A new RC QP moved to INIT (preflighted), not yet attached to a path.
Result<std::unique_ptr<qp::QueuePair>> Connector::new_init_qp(const Endpoint &ep) {
    auto raw = dev_.create_rc_qp();
    if (!raw) {
        return raw.status();
    }
    auto qp = std::make_unique<qp::QueuePair>(dev_.api(), std::move(raw.value()),
                                              qp::QpType::kRC, ep.path().selection,
                                              env_.snapshots, plan_.privileged, &log_);
    Path blank; // INIT only needs the access flags
    Status s = qp->to_init(rc_params(blank));
    if (!s) {
        return s;
    }
    return qp;
}

void Connector::install_qp(Endpoint &ep, size_t i, std::unique_ptr<qp::QueuePair> qp) {
    Path &path = ep.paths_[i];
    path.qp = std::move(qp);
    path.local_psn = random_psn();
    path.tx.sq_free = dev_.config().sq_depth;
    path.tx.outstanding = 0;
    path.tx.credits = CreditLedger(1, cfg_.credit_threshold);
    path.tx.spread = PathSpread{};
    dp_.map_qp(path.qpn(), ep, i);
}

Status Connector::create_path_qp(Endpoint &ep, size_t i) {
    auto qp = new_init_qp(ep);
    if (!qp) {
        return qp.status();
    }
    install_qp(ep, i, std::move(qp.value()));
    return Status::ok();
}

// The passive side of a handshake picks, for path i, a QP whose pairing with
// the requester's QP `remote_qpn` the bond sends on member i % n (the UDP
// source port comes from both QP numbers): it creates QPs until one fits,
// keeping the misfits in `spares` for the next paths. Without a predictable
// bond any QP will do.
Status Connector::create_paired_qp(Endpoint &ep, size_t i, uint32_t remote_qpn,
                                std::vector<std::unique_ptr<qp::QueuePair>> &spares) {
    const SpreadModel &model = ep.spread_model_;
    if (model.predictable && cfg_.lag_policy != LagPolicy::kOff) {
        int want = static_cast<int>(i % model.members);
        for (auto it = spares.begin(); it != spares.end(); ++it) {
            if (model.member_of((*it)->get()->qp_num, remote_qpn) == want) {
                install_qp(ep, i, std::move(*it));
                spares.erase(it);
                return Status::ok();
            }
        }
        for (unsigned tries = 0; tries < 8 * model.members; ++tries) {
            auto qp = new_init_qp(ep);
            if (!qp) {
                return qp.status();
            }
            if (model.member_of(qp.value()->get()->qp_num, remote_qpn) == want) {
                install_qp(ep, i, std::move(qp.value()));
                return Status::ok();
            }
            spares.push_back(std::move(qp.value()));
        }
        // Unlucky numbering: take any; the path still works, just not spread.
        if (!spares.empty()) {
            install_qp(ep, i, std::move(spares.back()));
            spares.pop_back();
            return Status::ok();
        }
    }
    return create_path_qp(ep, i);
}

// INIT->RTR->RTS towards the remote QP, each transition preflighted: the
// sgid index, pkey, port and MTU are checked against the machine as it is
// now, so a GID that moved when the bond was readdressed is followed (or the
// transition refused with the diagnostic), never sent blindly.
Status Connector::connect_path_qp(Endpoint &ep, Path &path, qp::QueuePair &qp, uint32_t remote_qpn,
                               uint32_t remote_psn) {
    qp::RemoteEnd remote;
    remote.gid = ep.path().dgid;
    remote.qpn = remote_qpn;
    remote.psn = remote_psn;
    // The flow label (and so the UDP source port) follows from both QP
    // numbers, the same on both ends and whether or not the device honours
    // a flow label given at RTR.
    path.tx.spread = spread_of(ep.spread_model_, qp.get()->qp_num, remote_qpn);
    qp::QpParams params = rc_params(path);
    Status s = qp.to_rtr(&remote, params);
    if (s) {
        s = qp.to_rts(params);
    }
    return s;
}

// Queue affinity (mlx5 LAG): pin path i to LAG port i % n + 1 after RTS and
// read it back; the kernel may move it on later transitions, so this runs
// after every (re)connection.
Status Connector::apply_lag_port(Endpoint &ep, size_t i) {
    if (!lag_affinity_ || cfg_.lag_policy == LagPolicy::kOff ||
        cfg_.lag_policy == LagPolicy::kSport) {
        return Status::ok();
    }
    Path &path = ep.paths_[i];
    uint8_t want = static_cast<uint8_t>(i % static_cast<size_t>(plan_.lag_members) + 1);
    auto got = qp::set_lag_port(dev_.api(), path.qp->get(), path.qpn(), want);
    if (!got.is_ok()) {
        return got.status().with_context(util::format("path %zu", i));
    }
    path.tx.spread.member = static_cast<int>(got->active) - 1;
    return Status::ok();
}

void Connector::retire_qp(Peer &peer, size_t i) {
    Path &p = ep_of(peer).paths_[i];
    // The QPs go to the error state (their work requests flush back) and
    // are destroyed by the Retirement once nothing of them can still reach
    // the CQ; their QPN table entries stay until then, so receives already
    // completed on them are still delivered.
    double now = env_.clock();
    if (p.loop_peer) {
        retirement_.retire(std::move(p.loop_peer), 0, now);
    }
    if (p.qp) {
        retirement_.retire(std::move(p.qp), p.tx.outstanding, now);
    }
    p.tx.outstanding = 0;
    p.tx.sq_free = 0;
}

} // namespace roce::btl
