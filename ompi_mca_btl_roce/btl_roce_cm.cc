// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Connection management: endpoints are created when Open MPI adds a peer
// (or when an unknown peer's request arrives), and their RC queue pairs are
// connected lazily, on first use, by a REQ/REP/RTU handshake over the UD QP:
//
//   A (active)                       B (passive)
//   create QP, RESET->INIT
//   REQ {qpn, psn, credits} ------>  create QP, INIT->RTR->RTS
//                           <------  REP {qpn, psn, credits}
//   INIT->RTR->RTS, RTU     ------>  connected (or on the first RC message)
//
// REQ is retransmitted with exponential backoff until a deadline; a
// duplicate REQ gets the stored REP again. When both sides connect at once,
// the request of the process with the smaller name wins and the other side
// answers it with the QP it had already created.
#include "btl_roce_module.h"

#include <cstring>
#include <random>

#include "opal/mca/pmix/pmix.h"

#include "btl_roce.h"
#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

const char *to_string(EpState s) noexcept {
    switch (s) {
    case EpState::kClosed: return "closed";
    case EpState::kConnecting: return "connecting";
    case EpState::kAwaitRtu: return "awaiting RTU";
    case EpState::kConnected: return "connected";
    case EpState::kFailed: return "failed";
    }
    return "?";
}

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

std::string gid_text(const wire::Gid &g) { return util::IpAddress::from_gid(g).to_string(); }

} // namespace

Endpoint::Endpoint(Module &module, opal_proc_t *proc, uint64_t peer_name,
                   uint16_t peer_port_index, wire::PortAdvert peer_port, PathChoice path)
    : module_(&module), proc_(proc), peer_name_(peer_name), peer_port_index_(peer_port_index),
      peer_port_(std::move(peer_port)), path_(std::move(path)) {
    opal_process_name_t pn = name_from(peer_name);
    const char *host = (proc && proc->proc_hostname) ? proc->proc_hostname : "?";
    label_ = util::format("rank %u (%s, %s)", pn.vpid, host, OPAL_NAME_PRINT(pn));
}

Endpoint::~Endpoint() = default;

Endpoint *Module::make_endpoint(opal_proc_t *proc, std::string *why) {
    uint8_t *blob = nullptr;
    size_t size = 0;
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_RECV(rc, &mca_btl_roce_component.super.btl_version, &proc->proc_name,
                    reinterpret_cast<void **>(&blob), &size);
    if (rc != OPAL_SUCCESS || blob == nullptr) {
        *why = "the peer published no roce address (no usable RoCE port there, or btl roce "
               "excluded on it)";
        return nullptr;
    }
    auto addr = wire::parse_modex(blob, size);
    free(blob);
    if (!addr) {
        *why = addr.status().message();
        return nullptr;
    }
    std::vector<std::string> reasons;
    for (size_t i = 0; i < addr->ports.size(); ++i) {
        const wire::PortAdvert &pp = addr->ports[i];
        if (pp.qkey != plan_.qkey) {
            reasons.push_back(util::format("peer port %s:%u uses qkey %s, we use %s (set "
                                           "btl_roce_qkey the same everywhere)",
                                           pp.device.c_str(), pp.port,
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
        ep->self_ = (name == my_name_);
        ep->credits_ = CreditLedger(1, cfg_.credit_threshold);
        log_.write(LogLevel::kDebug,
                   util::format("%s:%d -> %s: %s", plan_.device.c_str(), plan_.port,
                                ep->label().c_str(), ep->path().why.c_str()));
        Endpoint *raw = ep.get();
        endpoints_.push_back(std::move(ep));
        by_name_[name] = raw;
        return raw;
    }
    *why = util::join(reasons, "; ");
    return nullptr;
}

Endpoint *Module::endpoint_for_name(uint64_t name, bool create, uint16_t) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) {
        return it->second;
    }
    if (!create) {
        return nullptr;
    }
    // A peer reached us before Open MPI told us about it (remote procs are
    // added lazily): look the proc up by name, as btl tcp and uct do.
    opal_proc_t *proc = opal_proc_for_name(name_from(name));
    if (proc == nullptr) {
        log_.write(LogLevel::kWarn,
                   util::format("connection request from unknown process %s ignored",
                                OPAL_NAME_PRINT(name_from(name))));
        return nullptr;
    }
    std::string why;
    Endpoint *ep = make_endpoint(proc, &why);
    if (ep == nullptr) {
        log_.write(LogLevel::kWarn,
                   util::format("connection request from %s refused: %s",
                                OPAL_NAME_PRINT(name_from(name)), why.c_str()));
    }
    return ep;
}

qp::QpParams Module::rc_params(uint32_t sq_psn) const {
    qp::QpParams p;
    p.sq_psn = sq_psn;
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
    return p;
}

Result<std::unique_ptr<qp::QueuePair>> Module::new_rc_qp(const Endpoint &ep) {
    auto raw = dev_->create_rc_qp();
    if (!raw) {
        return raw.status();
    }
    auto qp = std::make_unique<qp::QueuePair>(dev_->api(), std::move(raw.value()),
                                              qp::QpType::kRC, ep.path().selection,
                                              live_snapshot_source(), plan_.privileged, &log_);
    Status s = qp->to_init(rc_params(0));
    if (!s) {
        return s;
    }
    return qp;
}

Status Module::create_path_qp(Endpoint &ep) {
    auto qp = new_rc_qp(ep);
    if (!qp) {
        return qp.status();
    }
    ep.local_psn_ = random_psn();
    ep.qp_ = std::move(qp.value());
    ep.sq_free_ = dev_->config().sq_depth;
    by_qpn_[ep.qpn()] = &ep;
    return Status::ok();
}

// INIT->RTR->RTS towards the remote QP, each transition preflighted: the
// sgid index, pkey, port and MTU are checked against the machine as it is
// now, so a GID that moved when the bond was readdressed is followed (or the
// transition refused with the diagnostic), never sent blindly.
Status Module::connect_qp(Endpoint &ep, qp::QueuePair &qp, uint32_t remote_qpn,
                          uint32_t remote_psn) {
    qp::RemoteEnd remote;
    remote.gid = ep.path().dgid;
    remote.qpn = remote_qpn;
    remote.psn = remote_psn;
    Status s = qp.to_rtr(&remote, rc_params(0));
    if (s) {
        s = qp.to_rts(rc_params(ep.local_psn_));
    }
    return s;
}

Status Module::ensure_ah(Endpoint &ep) {
    if (ep.ah_) {
        return Status::ok();
    }
    qp::QpParams params;
    ibv_ah_attr a = qp::build_ah_attr(ep.path().selection, ep.path().dgid, params);
    // Address handles go through the same checks as QP transitions.
    auto snap = live_snapshot_source()();
    if (snap) {
        qp::PreflightResult pf = qp::preflight_ah(*snap, ep.path().selection, a);
        for (const auto &c : pf.corrections) {
            log_.write(LogLevel::kInfo, "address handle to " + ep.label() + ": " + c);
        }
        if (!pf.ok()) {
            std::vector<std::string> why;
            for (const auto &p : pf.problems) {
                why.push_back(p.message + "; " + p.fix);
            }
            return Status(Code::kUnavailable,
                          "ibv_create_ah to " + ep.label() + " refused before the call: " +
                              util::join(why, "; "));
        }
    }
    ibv_ah *ah = dev_->api().create_ah(dev_->pd(), &a);
    if (ah == nullptr) {
        const PathChoice &p = ep.path();
        return Status::from_errno(errno, util::format("ibv_create_ah on %s:%d gid[%d] %s -> %s",
                                                      plan_.device.c_str(), plan_.port,
                                                      a.grh.sgid_index, gid_text(p.sgid).c_str(),
                                                      gid_text(p.dgid).c_str()));
    }
    ep.ah_ = verbs::Ah(ah, verbs::AhDeleter{&dev_->api()});
    return Status::ok();
}

wire::CmMessage Module::cm_template(const Endpoint &ep, wire::CmType type) const {
    wire::CmMessage m;
    m.type = type;
    m.src_name = my_name_;
    m.dst_name = ep.peer_name();
    m.src_ud_qpn = dev_->ud_qp()->qp_num;
    m.src_port = port_index_;
    m.dst_port = ep.peer_port_index();
    return m;
}

wire::CmMessage Module::handshake(const Endpoint &ep, wire::CmType type, uint32_t conn_id) const {
    wire::CmMessage m = cm_template(ep, type);
    m.conn_id = conn_id;
    m.path_mtu = static_cast<uint8_t>(ep.path().path_mtu);
    m.credits = cfg_.credits_per_peer;
    m.src_gid = ep.path().sgid;
    m.dst_gid = ep.path().dgid;
    m.paths.push_back({ep.qpn(), ep.local_psn_});
    return m;
}

Status Module::send_cm(Endpoint &ep, const wire::CmMessage &m) {
    Status s = ensure_ah(ep);
    if (!s) {
        return s;
    }
    std::vector<uint8_t> bytes = wire::encode(m);
    if (m.type == wire::CmType::kReply) {
        ep.last_reply_ = bytes;
    }
    return dev_->ud_send(ep.ah_.get(), ep.peer_port().ud_qpn, ep.peer_port().qkey, bytes.data(),
                         bytes.size());
}

void Module::start_connect(Endpoint &ep) {
    if (ep.state_ != EpState::kClosed) {
        return;
    }
    if (ep.is_self()) {
        connect_self(ep);
        return;
    }
    Status s = create_path_qp(ep);
    if (!s) {
        fail_endpoint(ep, s.message());
        return;
    }
    ep.state_ = EpState::kConnecting;
    ep.conn_id_ = next_conn_id_++;
    ep.tries_ = 1;
    ep.retry_interval_ = cfg_.connect_retry_s;
    double now = now_seconds();
    ep.next_retry_ = now + ep.retry_interval_;
    ep.deadline_ = now + cfg_.connect_timeout_s;
    ++connecting_;
    s = send_cm(ep, handshake(ep, wire::CmType::kRequest, ep.conn_id_));
    if (!s) {
        // The timer retries; an address-handle failure will not heal by itself.
        log_.write(LogLevel::kDebug, "REQ to " + ep.label() + " not sent yet: " + s.message());
        if (s.code() != Code::kResourceExhausted) {
            fail_endpoint(ep, s.message());
        }
    }
    log_.write(LogLevel::kDebug, util::format("REQ %u to %s (qpn 0x%x)", ep.conn_id_,
                                              ep.label().c_str(), ep.qpn()));
}

void Module::connect_self(Endpoint &ep) {
    // Loopback through the NIC: two QPs wired to each other, no handshake.
    Status s = create_path_qp(ep);
    if (s) {
        auto peer = new_rc_qp(ep);
        s = peer.status();
        if (peer) {
            ep.self_peer_qp_ = std::move(peer.value());
            by_qpn_[ep.self_peer_qp_->get()->qp_num] = &ep;
            s = connect_qp(ep, *ep.qp_, ep.self_peer_qp_->get()->qp_num, ep.local_psn_);
            if (s) {
                s = connect_qp(ep, *ep.self_peer_qp_, ep.qpn(), ep.local_psn_);
            }
        }
    }
    if (!s) {
        fail_endpoint(ep, s.message());
        return;
    }
    ep.remote_qpn_ = ep.self_peer_qp_->get()->qp_num;
    ep.credits_.set_initial(cfg_.credits_per_peer);
    mark_connected(ep);
}

void Module::handle_cm(const uint8_t *data, size_t len) {
    auto msg = wire::parse_cm(data, len);
    if (!msg) {
        log_.write(LogLevel::kWarn, "dropped a malformed connection message: " +
                                        msg.status().message());
        return;
    }
    if (msg->dst_name != my_name_) {
        log_.write(LogLevel::kDebug,
                   util::format("dropped %s for %s (not this process)", to_string(msg->type),
                                OPAL_NAME_PRINT(name_from(msg->dst_name))));
        return;
    }
    switch (msg->type) {
    case wire::CmType::kRequest: on_request(*msg); break;
    case wire::CmType::kReply: on_reply(*msg); break;
    case wire::CmType::kReadyToUse: on_rtu(*msg); break;
    case wire::CmType::kReject: on_reject(*msg); break;
    }
}

void Module::on_request(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, true, m.src_port);
    if (ep == nullptr) {
        return;
    }
    if ((ep->state_ == EpState::kAwaitRtu || ep->state_ == EpState::kConnected) &&
        m.conn_id == ep->peer_conn_id_) {
        // Our REP was lost: send the same one again.
        if (!ep->last_reply_.empty() && ensure_ah(*ep)) {
            (void)dev_->ud_send(ep->ah_.get(), ep->peer_port().ud_qpn, ep->peer_port().qkey,
                                ep->last_reply_.data(), ep->last_reply_.size());
        }
        return;
    }
    if (ep->state_ == EpState::kConnecting) {
        if (my_name_ < m.src_name) {
            return; // simultaneous connect: our REQ wins, the peer will answer it
        }
        --connecting_; // the peer's REQ wins: answer it with the QP we already made
    } else if (ep->state_ == EpState::kConnected || ep->state_ == EpState::kAwaitRtu ||
               ep->state_ == EpState::kFailed) {
        // The peer starts over (it lost its QP): so do we.
        by_qpn_.erase(ep->qpn());
        ep->qp_.reset();
    }
    Status s = ep->qp_ ? Status::ok() : create_path_qp(*ep);
    if (s) {
        s = connect_qp(*ep, *ep->qp_, m.paths[0].qpn, m.paths[0].psn);
    }
    if (!s) {
        wire::CmMessage rej = cm_template(*ep, wire::CmType::kReject);
        rej.conn_id = m.conn_id;
        rej.reason = wire::RejectReason::kNoResources;
        rej.text = s.message();
        (void)send_cm(*ep, rej);
        fail_endpoint(*ep, s.message());
        return;
    }
    ep->peer_conn_id_ = m.conn_id;
    ep->remote_qpn_ = m.paths[0].qpn;
    ep->credits_.set_initial(m.credits);
    ep->state_ = EpState::kAwaitRtu;
    s = send_cm(*ep, handshake(*ep, wire::CmType::kReply, m.conn_id));
    if (!s) {
        log_.write(LogLevel::kDebug, "REP to " + ep->label() + " not sent: " + s.message() +
                                         " (the peer retransmits its REQ)");
    }
}

void Module::on_reply(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    if (ep == nullptr || ep->state_ != EpState::kConnecting || m.conn_id != ep->conn_id_) {
        return; // stale or duplicate
    }
    Status s = connect_qp(*ep, *ep->qp_, m.paths[0].qpn, m.paths[0].psn);
    if (!s) {
        fail_endpoint(*ep, s.message());
        return;
    }
    --connecting_;
    ep->remote_qpn_ = m.paths[0].qpn;
    ep->credits_.set_initial(m.credits);
    wire::CmMessage rtu = cm_template(*ep, wire::CmType::kReadyToUse);
    rtu.conn_id = ep->conn_id_;
    (void)send_cm(*ep, rtu); // if lost, our first RC message tells the peer instead
    mark_connected(*ep);
}

void Module::on_rtu(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    if (ep != nullptr && ep->state_ == EpState::kAwaitRtu && m.conn_id == ep->peer_conn_id_) {
        mark_connected(*ep);
    }
}

void Module::on_reject(const wire::CmMessage &m) {
    Endpoint *ep = endpoint_for_name(m.src_name, false, m.src_port);
    if (ep != nullptr && ep->state_ == EpState::kConnecting && m.conn_id == ep->conn_id_) {
        --connecting_;
        fail_endpoint(*ep, "the peer refused the connection: " + m.text);
    }
}

void Module::mark_connected(Endpoint &ep) {
    ep.state_ = EpState::kConnected;
    log_.write(LogLevel::kDebug,
               util::format("connected to %s over %s:%d qpn 0x%x -> 0x%x (%s)",
                            ep.label().c_str(), plan_.device.c_str(), plan_.port,
                            ep.qpn(), ep.remote_qpn_, ep.path().why.c_str()));
    drain_pending(ep);
}

void Module::run_timers(double now) {
    for (auto &owned : endpoints_) {
        Endpoint &ep = *owned;
        if (ep.state_ != EpState::kConnecting) {
            continue;
        }
        if (now >= ep.deadline_) {
            --connecting_;
            fail_endpoint(ep, util::format(
                                  "connection to %s timed out after %.0f s (%d requests from "
                                  "%s:%d gid[%d] %s to %s, UD qpn 0x%x, no reply); check that "
                                  "the peer's RoCE port is up and the two addresses reach each "
                                  "other (roce-doctor --peer %s)",
                                  ep.label().c_str(), cfg_.connect_timeout_s, ep.tries_,
                                  plan_.device.c_str(), plan_.port, ep.path().sgid_index,
                                  gid_text(ep.path().sgid).c_str(),
                                  gid_text(ep.path().dgid).c_str(), ep.peer_port().ud_qpn,
                                  gid_text(ep.path().dgid).c_str()));
            continue;
        }
        if (now >= ep.next_retry_) {
            (void)send_cm(ep, handshake(ep, wire::CmType::kRequest, ep.conn_id_));
            ++ep.tries_;
            ep.retry_interval_ = ep.retry_interval_ * 2 > 2.0 ? 2.0 : ep.retry_interval_ * 2;
            ep.next_retry_ = now + ep.retry_interval_;
        }
    }
}

} // namespace roce::btl
