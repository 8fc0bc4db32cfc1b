// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "cm_sim.h"

#include <algorithm>
#include <tuple>

#include "util/strings.h"

namespace roce::btl::testing {

using util::Code;
using util::Status;

void CountingSink::write(util::LogLevel level, std::string_view line) noexcept {
    if (level == util::LogLevel::kWarn) {
        ++warnings;
    } else if (level == util::LogLevel::kError) {
        ++errors;
    }
    last.emplace_back(util::level_name(level) + std::string(": ") + std::string(line));
    if (last.size() > 50) {
        last.erase(last.begin());
    }
}

wire::Gid sim_gid(uint8_t n) {
    wire::Gid g{};
    g[10] = 0xff;
    g[11] = 0xff;
    g[12] = 198;
    g[13] = 18;
    g[14] = 0;
    g[15] = n;
    return g;
}

// ---------------------------------------------------------------- node ---

SimNode::SimNode(SimFabric &fabric, uint64_t name, uint64_t token, wire::Gid gid, size_t paths)
    : fabric_(fabric), name_(name), token_(token), gid_(gid), paths_(paths) {
    CmIdentity me;
    me.name = name;
    me.token = token;
    me.port_index = 0;
    me.ud_qpn = 0x11;
    CmConfig cfg;
    cfg.connect_timeout_s = 30;
    cm_ = std::make_unique<ConnectionManager>(*this, me, cfg, log_);
}

SimPeer &SimNode::know(const SimNode &other) {
    auto p = std::make_unique<SimPeer>();
    p->name = other.name_;
    p->token = other.token_;
    p->port_index = 0;
    p->gid = other.gid_;
    p->loopback = &other == this;
    p->label = util::format("node %llx", static_cast<unsigned long long>(other.name_));
    SimPeer &ref = *p;
    peers_[other.name_] = std::move(p);
    return ref;
}

SimPeer *SimNode::peer(uint64_t name) {
    auto it = peers_.find(name);
    return it == peers_.end() ? nullptr : it->second.get();
}

size_t SimNode::live_qps() const {
    size_t n = 0;
    for (const auto &q : qps_) {
        n += q.second.retired ? 0 : 1;
    }
    return n;
}

double SimNode::now() const { return fabric_.now(); }

Status SimNode::send_cm(Peer &peer, const std::vector<uint8_t> &bytes) {
    ++sent_;
    fabric_.send(gid_, peer.name, bytes);
    return Status::ok();
}

void SimNode::address(const Peer &peer, wire::CmMessage &m) const {
    m.src_gid = gid_;
    m.dst_gid = static_cast<const SimPeer &>(peer).gid;
    m.path_mtu = 3;
}

uint32_t SimNode::new_qp(uint64_t peer, size_t path) {
    uint32_t qpn = next_qpn_++;
    qps_[qpn] = SimQp{peer, path, false, 0, false};
    return qpn;
}

util::Result<LocalQp> SimNode::open_qp(Peer &peer, size_t i) {
    if (fail_qps_ > 0) {
        --fail_qps_;
        return Status(Code::kResourceExhausted, "simulated: no QP");
    }
    uint32_t qpn = new_qp(peer.name, i);
    return LocalQp{qpn, static_cast<uint32_t>(fabric_.rng()() & 0xffffff)};
}

Status SimNode::accept_qps(Peer &peer, size_t first, const std::vector<wire::PathInfo> &remote,
                           std::vector<LocalQp> *local) {
    if (fail_qps_ > 0) {
        --fail_qps_;
        return Status(Code::kResourceExhausted, "simulated: no QP");
    }
    local->clear();
    for (size_t k = 0; k < remote.size(); ++k) {
        uint32_t qpn = new_qp(peer.name, first + k);
        qps_[qpn].connected = true;
        qps_[qpn].remote_qpn = remote[k].qpn;
        local->push_back({qpn, static_cast<uint32_t>(fabric_.rng()() & 0xffffff)});
    }
    return Status::ok();
}

Status SimNode::connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) {
    uint32_t qpn = peer.path_conn(i).local_qpn;
    auto it = qps_.find(qpn);
    if (it == qps_.end() || it->second.retired || it->second.connected) {
        return Status(Code::kInternal, util::format("simulated: path %zu QP 0x%x cannot be "
                                                    "connected",
                                                    i, qpn));
    }
    it->second.connected = true;
    it->second.remote_qpn = remote.qpn;
    return Status::ok();
}

Status SimNode::wire_loopback(Peer &peer, size_t i) {
    if (fail_qps_ > 0) {
        --fail_qps_;
        return Status(Code::kResourceExhausted, "simulated: no QP");
    }
    uint32_t a = new_qp(peer.name, i), b = new_qp(peer.name, i);
    qps_[a].connected = qps_[b].connected = true;
    qps_[a].remote_qpn = b;
    qps_[b].remote_qpn = a;
    loop_partner_[a] = b;
    PathConn &p = peer.path_conn(i);
    p.local_qpn = a;
    p.remote_qpn = b;
    return Status::ok();
}

void SimNode::retire_qp(Peer &peer, size_t i) {
    uint32_t qpn = peer.path_conn(i).local_qpn;
    auto it = qps_.find(qpn);
    if (qpn != 0 && it != qps_.end()) {
        it->second.retired = true;
    }
    auto loop = loop_partner_.find(qpn);
    if (loop != loop_partner_.end()) {
        qps_[loop->second].retired = true; // a loopback pair goes together
        loop_partner_.erase(loop);
    }
}

void SimNode::path_up(Peer &peer, size_t i, uint32_t, bool) {
    events_.push_back({SimEvent::Kind::kUp, peer.name, i, now(), ""});
}

void SimNode::path_lost(Peer &peer, size_t i) {
    events_.push_back({SimEvent::Kind::kLost, peer.name, i, now(), ""});
}

void SimNode::peer_failed(Peer &peer, const std::string &why) {
    events_.push_back({SimEvent::Kind::kFailed, peer.name, 0, now(), why});
}

void SimNode::peer_moved(Peer &peer, const wire::Gid &from) {
    SimPeer &p = static_cast<SimPeer &>(peer);
    if (from == p.gid) {
        return;
    }
    p.gid = from;
    events_.push_back({SimEvent::Kind::kMoved, peer.name, 0, now(), ""});
}

bool SimNode::unknown_requester(uint64_t name) {
    ++unknown_lookups_;
    auto it = lazy_.find(name);
    if (it == lazy_.end()) {
        return false;
    }
    know(*it->second);
    return true;
}

// -------------------------------------------------------------- fabric ---

SimNode &SimFabric::add_node(uint64_t name, uint64_t token, uint8_t addr_byte, size_t paths) {
    auto n = std::make_unique<SimNode>(*this, name, token, sim_gid(addr_byte), paths);
    SimNode &ref = *n;
    nodes_[name] = std::move(n);
    return ref;
}

SimNode *SimFabric::node(uint64_t name) {
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : it->second.get();
}

void SimFabric::send(const wire::Gid &from, uint64_t to, std::vector<uint8_t> bytes) {
    std::uniform_real_distribution<double> u(0, 1);
    for (auto &n : nodes_) {
        if (n.second->gid() == from && dead_.count(n.first) != 0) {
            return; // a dead process sends nothing
        }
    }
    if (u(rng_) < weather.loss) {
        return;
    }
    int copies = u(rng_) < weather.duplicate ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
        std::vector<uint8_t> b = bytes;
        if (u(rng_) < weather.truncate && !b.empty()) {
            b.resize(std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng_));
        }
        double delay = 0.0001 + u(rng_) * std::max(0.0, weather.max_delay_s - 0.0001);
        queue_.push_back({now_ + delay, seq_++, from, to, std::move(b)});
    }
}

void SimFabric::deliver(const Datagram &d) {
    ++delivered_;
    SimNode *n = node(d.to);
    if (n != nullptr && dead_.count(d.to) == 0) {
        n->cm().on_datagram(&d.from, d.bytes.data(), d.bytes.size());
    }
}

void SimFabric::advance(double dt) {
    double end = now_ + dt;
    while (now_ < end) {
        double step_end = std::min(end, now_ + 0.01);
        for (;;) {
            auto due = std::min_element(queue_.begin(), queue_.end(), [](const auto &a, const auto &b) {
                return a.at < b.at || (a.at == b.at && a.seq < b.seq);
            });
            if (due == queue_.end() || due->at > step_end) {
                break;
            }
            Datagram d = std::move(*due);
            queue_.erase(due);
            now_ = std::max(now_, d.at);
            deliver(d);
        }
        now_ = step_end;
        for (auto &n : nodes_) {
            if (dead_.count(n.first) == 0) {
                n.second->cm().run_timers(now_);
            }
        }
        // RC traffic: a message on a really connected pair of QPs tells an
        // awaiting responder that its REP arrived (as the data path does);
        // an up path whose peer QP is gone fails after the RC retries
        // (transport retry exceeded), as hardware reports it.
        for (auto &a : nodes_) {
            for (auto &b : nodes_) {
                if (a.first == b.first) {
                    continue;
                }
                SimPeer *pb = a.second->peer(b.first);
                SimPeer *pa = b.second->peer(a.first);
                if (pb == nullptr || pa == nullptr || dead_.count(a.first) != 0) {
                    continue;
                }
                for (size_t i = 0; i < pb->path_count() && i < pa->path_count(); ++i) {
                    const PathConn &x = pb->paths[i];
                    const PathConn &y = pa->paths[i];
                    if (x.state == PathState::kUp && y.state == PathState::kAwaitRtu &&
                        x.remote_qpn == y.local_qpn && y.remote_qpn == x.local_qpn) {
                        b.second->cm().on_rc_message(*pa, i);
                    }
                }
                for (size_t i = 0; i < pb->path_count(); ++i) {
                    const PathConn &x = pb->paths[i];
                    if (x.state != PathState::kUp) {
                        continue;
                    }
                    auto q = b.second->qps().find(x.remote_qpn);
                    bool alive = dead_.count(b.first) == 0 && q != b.second->qps().end() &&
                                 !q->second.retired &&
                                 q->second.connected && q->second.remote_qpn == x.local_qpn;
                    auto key = std::make_tuple(a.first, b.first, x.local_qpn);
                    if (alive) {
                        orphaned_.erase(key);
                        continue;
                    }
                    auto since = orphaned_.emplace(key, now_).first->second;
                    if (now_ - since >= rc_retry_s) {
                        orphaned_.erase(key);
                        a.second->cm().path_failed(*pb, i, "simulated: transport retry counter "
                                                           "exceeded");
                    }
                }
            }
        }
    }
}

bool SimFabric::settle(double limit) {
    double end = now_ + limit;
    while (now_ < end) {
        bool busy = !queue_.empty();
        for (auto &n : nodes_) {
            busy = busy || (dead_.count(n.first) == 0 && n.second->cm().busy());
        }
        if (!busy) {
            return true;
        }
        advance(0.05);
    }
    return false;
}

// ----------------------------------------------------------- invariants ---

namespace {

std::string check_side(SimNode &a, SimNode &b) {
    SimPeer *pb = a.peer(b.name());
    SimPeer *pa = b.peer(a.name());
    if (pb == nullptr) {
        return "";
    }
    for (size_t i = 0; i < pb->path_count(); ++i) {
        const PathConn &x = pb->paths[i];
        if (x.state != PathState::kUp) {
            continue;
        }
        auto q = a.qps().find(x.local_qpn);
        if (q == a.qps().end() || q->second.retired || !q->second.connected ||
            q->second.remote_qpn != x.remote_qpn) {
            return util::format("node %llx path %zu is up on QP 0x%x, which is not live and "
                                "connected to 0x%x",
                                static_cast<unsigned long long>(a.name()), i, x.local_qpn,
                                x.remote_qpn);
        }
        const PathConn *y = (pa != nullptr && i < pa->path_count()) ? &pa->paths[i] : nullptr;
        if (y == nullptr || y->local_qpn != x.remote_qpn || y->remote_qpn != x.local_qpn ||
            (y->state != PathState::kUp && y->state != PathState::kAwaitRtu)) {
            return util::format("node %llx path %zu is up (0x%x -> 0x%x) but the other end is "
                                "%s (0x%x -> 0x%x)",
                                static_cast<unsigned long long>(a.name()), i, x.local_qpn,
                                x.remote_qpn, y ? to_string(y->state) : "missing",
                                y ? y->local_qpn : 0, y ? y->remote_qpn : 0);
        }
    }
    for (const auto &q : a.qps()) {
        if (q.second.retired) {
            continue;
        }
        SimPeer *p = a.peer(q.second.peer);
        bool used = false;
        for (size_t i = 0; p != nullptr && i < p->path_count(); ++i) {
            used = used || p->paths[i].local_qpn == q.first;
        }
        if (!used) {
            return util::format("node %llx leaks QP 0x%x (no path uses it)",
                                static_cast<unsigned long long>(a.name()), q.first);
        }
    }
    return "";
}

} // namespace

std::string check_pairing(SimNode &a, SimNode &b) {
    std::string s = check_side(a, b);
    return s.empty() ? check_side(b, a) : s;
}

} // namespace roce::btl::testing
