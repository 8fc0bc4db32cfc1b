// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Endpoints and their paths: creation from the modex (or from an unknown
// peer's request), the RC queue pairs of each path, and how the paths are
// spread over the members of a LAG.
#include "btl_roce_module.h"

#include <algorithm>
#include <random>

#include "qp/lag_port.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

namespace {

uint64_t name_of(const opal_process_name_t &pn) {
    return (static_cast<uint64_t>(pn.jobid) << 32) | pn.vpid;
}

opal_process_name_t name_from(uint64_t v) {
    opal_process_name_t pn;
    pn.jobid = static_cast<opal_jobid_t>(v >> 32);
    pn.vpid = static_cast<opal_vpid_t>(v & 0xffffffffu);
    return pn;
}

uint32_t random_psn() {
    static thread_local std::mt19937 rng{std::random_device{}()};
    return rng() & 0xffffffu;
}

} // namespace

Endpoint::Endpoint(Module &module, opal_proc_t *proc, uint64_t peer_name,
                   uint16_t peer_port_index, wire::PortAdvert peer_port, PathChoice path)
    : module_(&module), proc_(proc), peer_port_(std::move(peer_port)), path_(std::move(path)),
      completed_(module.config().seq_span), received_(module.config().seq_span) {
    name = peer_name;
    port_index = peer_port_index;
    opal_process_name_t pn = name_from(peer_name);
    const char *host = (proc && proc->proc_hostname) ? proc->proc_hostname : "?";
    label = util::format("rank %u (%s, %s)", pn.vpid, host, OPAL_NAME_PRINT(pn));
}

Endpoint::~Endpoint() = default;

Endpoint *Module::add_endpoint(opal_proc_t *proc, const wire::ModexAddress &addr,
                               std::string *why) {
    std::vector<std::string> reasons;
    for (size_t i = 0; i < addr.ports.size(); ++i) {
        const wire::PortAdvert &pp = addr.ports[i];
        if (pp.qkey != plan_.qkey) {
            reasons.push_back(util::format("peer port %s:%u uses qkey %s, we use %s (set "
                                           "btl_roce_qkey the same everywhere)",
                                           util::printable(pp.device).c_str(), pp.port,
                                           util::hex32(pp.qkey).c_str(),
                                           util::hex32(plan_.qkey).c_str()));
            continue;
        }
        auto path = choose_path(plan_, pp);
        if (!path) {
            reasons.push_back(path.status().message());
            continue;
        }
        uint64_t name = name_of(proc->proc_name);
        auto ep = std::make_unique<Endpoint>(*this, proc, name, static_cast<uint16_t>(i), pp,
                                             path.value());
        ep->loopback = (name == env_.who.name);
        ep->token = addr.token;
        BondView bond = bond_view(*plan_.snapshot, ep->path().selection.netdev);
        ep->spread_model_ = spread_model(bond.members, bond.hash_policy,
                                         util::IpAddress::from_gid(ep->path().sgid),
                                         util::IpAddress::from_gid(ep->path().dgid));
        log_.write(LogLevel::kDebug,
                   util::format("%s:%d -> %s: %s", plan_.device.c_str(), plan_.port,
                                ep->label.c_str(), ep->path().why.c_str()));
        Endpoint *raw = ep.get();
        endpoints_.push_back(std::move(ep));
        by_name_[name] = raw;
        return raw;
    }
    *why = util::join(reasons, "; ");
    return nullptr;
}

// A REQ with our token came from a name we have no endpoint for: a process
// of our job that Open MPI has not added yet (remote procs are added
// lazily). Only names of our own job, within its size, are looked up, and
// not here: the lookup reads the modex (which may block on the PMIx server)
// and may allocate an opal_proc_t, so it runs in progress() without the
// module lock (resolve_lookups). The requester's next REQ finds the endpoint.
bool Module::unknown_requester(uint64_t name) {
    if (by_name_.count(name) != 0) {
        return true; // ourselves (no handshake with the loopback endpoint)
    }
    uint32_t jobid = static_cast<uint32_t>(name >> 32);
    uint32_t vpid = static_cast<uint32_t>(name & 0xffffffffu);
    if (jobid != static_cast<uint32_t>(env_.who.name >> 32) ||
        (env_.who.job_size != 0 && vpid >= env_.who.job_size) || lookup_failed_.count(name) != 0) {
        return false;
    }
    if (std::find(lookups_.begin(), lookups_.end(), name) == lookups_.end() &&
        lookups_.size() < kMaxLookups) {
        lookups_.push_back(name);
    }
    return true;
}

void Module::resolve_lookups(const std::vector<uint64_t> &names) {
    for (uint64_t name : names) {
        opal_proc_t *proc = env_.peers->proc_for(name);
        auto addr = proc ? env_.peers->address(proc)
                         : Result<wire::ModexAddress>(Status(Code::kNotFound, "no such process"));
        OPAL_THREAD_LOCK(&lock_);
        std::string why = addr ? "" : addr.status().message();
        if (by_name_.count(name) == 0 && (!addr || add_endpoint(proc, *addr, &why) == nullptr)) {
            lookup_failed_.insert(name);
            log_.write(LogLevel::kWarn,
                       util::format("connection request from %s refused: %s",
                                    OPAL_NAME_PRINT(name_from(name)), why.c_str()));
        }
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

qp::QpParams Module::rc_params(const Path &path) const {
    qp::QpParams p;
    p.sq_psn = path.local_psn;
    p.access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
    p.timeout = static_cast<uint8_t>(cfg_.ack_timeout);
    p.retry_cnt = static_cast<uint8_t>(cfg_.retry_count);
    p.rnr_retry = static_cast<uint8_t>(cfg_.rnr_retry);
    p.min_rnr_timer = 12;
    int rd = dev_->attr().max_qp_rd_atom > 16 ? 16 : dev_->attr().max_qp_rd_atom;
    int init_rd = dev_->attr().max_qp_init_rd_atom > 16 ? 16 : dev_->attr().max_qp_init_rd_atom;
    p.max_dest_rd_atomic = static_cast<uint8_t>(rd > 0 ? rd : 1);
    p.max_rd_atomic = static_cast<uint8_t>(init_rd > 0 ? init_rd : 1);
    p.flow_label = path.tx.spread.flow_label;
    return p;
}

// A new RC QP moved to INIT (preflighted), not yet attached to a path.
Result<std::unique_ptr<qp::QueuePair>> Module::new_init_qp(const Endpoint &ep) {
    auto raw = dev_->create_rc_qp();
    if (!raw) {
        return raw.status();
    }
    auto qp = std::make_unique<qp::QueuePair>(dev_->api(), std::move(raw.value()),
                                              qp::QpType::kRC, ep.path().selection,
                                              env_.snapshots, plan_.privileged, &log_);
    Path blank; // INIT only needs the access flags
    Status s = qp->to_init(rc_params(blank));
    if (!s) {
        return s;
    }
    return qp;
}

void Module::install_qp(Endpoint &ep, size_t i, std::unique_ptr<qp::QueuePair> qp) {
    Path &path = ep.paths_[i];
    path.qp = std::move(qp);
    path.local_psn = random_psn();
    path.tx.sq_free = dev_->config().sq_depth;
    path.tx.outstanding = 0;
    path.tx.credits = CreditLedger(1, cfg_.credit_threshold);
    path.tx.spread = PathSpread{};
    by_qpn_[path.qpn()] = QpRef{&ep, i};
}

Status Module::create_path_qp(Endpoint &ep, size_t i) {
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
Status Module::create_paired_qp(Endpoint &ep, size_t i, uint32_t remote_qpn,
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
Status Module::connect_path_qp(Endpoint &ep, Path &path, qp::QueuePair &qp, uint32_t remote_qpn,
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
Status Module::apply_lag_port(Endpoint &ep, size_t i) {
    if (!lag_affinity_ || cfg_.lag_policy == LagPolicy::kOff ||
        cfg_.lag_policy == LagPolicy::kSport) {
        return Status::ok();
    }
    Path &path = ep.paths_[i];
    uint8_t want = static_cast<uint8_t>(i % static_cast<size_t>(plan_.lag_members) + 1);
    auto got = qp::set_lag_port(dev_->api(), path.qp->get(), path.qpn(), want);
    if (!got.is_ok()) {
        return got.status().with_context(util::format("path %zu", i));
    }
    path.tx.spread.member = static_cast<int>(got->active) - 1;
    return Status::ok();
}

} // namespace roce::btl
