// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

// An in-memory fabric for the btl's ConnectionManager: processes (SimNode,
// each a CmHost with its own manager), the datagrams between them with loss,
// duplication, reordering, delay and truncation, forged datagrams from an
// attacker, a simulated clock, and the QPs each node created, so that tests
// can check what the handshake did to them. Test code only.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "connection/manager.h"
#include "util/log.h"
#include "proto/wire.h"

namespace roce::btl::testing {

class SimFabric;

/// The peer as the node knows it from the modex.
class SimPeer final : public Peer {
public:
    size_t path_count() const override { return paths.size(); }
    PathConn &path_conn(size_t i) override { return paths.at(i); }
    void resize_paths(size_t n) override {
        if (n > paths.size()) {
            paths.resize(n);
        }
    }
    std::vector<PathConn> paths;
    wire::Gid gid{};          ///< where the node addresses this peer
};

/// One QP a node created for a path.
struct SimQp {
    uint64_t peer = 0;
    size_t path = 0;
    bool connected = false;   ///< RTR/RTS towards remote_qpn
    uint32_t remote_qpn = 0;
    bool retired = false;
};

/// What a node's host saw, in order, for the invariants.
struct SimEvent {
    enum class Kind { kUp, kLost, kFailed, kMoved } kind;
    uint64_t peer;
    size_t path;
    double time;
    std::string text;
};

/// Counts log lines by level (warnings are what the rate limit bounds).
class CountingSink final : public util::LogSink {
public:
    bool enabled(util::LogLevel) const noexcept override { return true; }
    void write(util::LogLevel level, std::string_view line) noexcept override;
    size_t warnings = 0;
    size_t errors = 0;
    std::vector<std::string> last; ///< the last 50 lines
};

class SimNode final : public CmHost {
public:
    SimNode(SimFabric &fabric, uint64_t name, uint64_t token, wire::Gid gid, size_t paths);

    ConnectionManager &cm() { return *cm_; }
    uint64_t name() const { return name_; }
    uint64_t token() const { return token_; }
    const wire::Gid &gid() const { return gid_; }
    /// Learns `other` as the modex would tell it (name, token, GID); a node
    /// that knows itself gets a loopback peer.
    SimPeer &know(const SimNode &other);
    SimPeer *peer(uint64_t name);
    /// Names (of the same job) that unknown_requester may add: as if Open
    /// MPI knew them but had not added them yet.
    void allow_lazy(const SimNode &other) { lazy_[other.name_] = &other; }

    /// QPs this node created that are not retired.
    size_t live_qps() const;
    const std::map<uint32_t, SimQp> &qps() const { return qps_; }
    const std::vector<SimEvent> &events() const { return events_; }
    CountingSink &log() { return log_; }
    size_t unknown_lookups() const { return unknown_lookups_; }
    size_t sent() const { return sent_; }

    // CmHost
    double now() const override;
    util::Status send_cm(Peer &peer, const std::vector<uint8_t> &bytes) override;
    void address(const Peer &peer, wire::CmMessage &m) const override;
    size_t paths_wanted(const Peer &peer) const override { return paths_; }
    util::Result<LocalQp> open_qp(Peer &peer, size_t i) override;
    util::Status accept_qps(Peer &peer, size_t first, const std::vector<wire::PathInfo> &remote,
                            std::vector<LocalQp> *local) override;
    util::Status connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) override;
    util::Status wire_loopback(Peer &peer, size_t i) override;
    void retire_qp(Peer &peer, size_t i) override;
    void path_up(Peer &peer, size_t i, uint32_t credits, bool reconnected) override;
    void path_lost(Peer &peer, size_t i) override;
    void peer_failed(Peer &peer, const std::string &why) override;
    void peer_moved(Peer &peer, const wire::Gid &from) override;
    bool revalidate(Peer &, bool) override { return false; }
    std::string route(const Peer &) const override { return "simulated route"; }
    Peer *find_peer(uint64_t name) override { return peer(name); }
    bool unknown_requester(uint64_t name) override;
    bool reached_elsewhere(const Peer &) const override { return elsewhere; }
    /// What reached_elsewhere answers: another rail of this node reaches
    /// every peer (issue 16).
    bool elsewhere = false;

    /// Makes the next `n` open_qp/accept_qps calls fail (resource exhaustion).
    void fail_qp_creation(int n) { fail_qps_ = n; }

private:
    uint32_t new_qp(uint64_t peer, size_t path);

    SimFabric &fabric_;
    uint64_t name_;
    uint64_t token_;
    wire::Gid gid_;
    size_t paths_;
    uint32_t next_qpn_ = 0x100;
    int fail_qps_ = 0;
    std::map<uint64_t, std::unique_ptr<SimPeer>> peers_;
    std::map<uint64_t, const SimNode *> lazy_;
    std::map<uint32_t, SimQp> qps_;
    std::map<uint32_t, uint32_t> loop_partner_; ///< loopback path QP -> its partner
    std::vector<SimEvent> events_;
    CountingSink log_;
    size_t unknown_lookups_ = 0;
    size_t sent_ = 0;
    std::unique_ptr<ConnectionManager> cm_;
};

/// Misbehaviour of the network between the nodes (probabilities per datagram).
struct Weather {
    double loss = 0;
    double duplicate = 0;
    double truncate = 0;
    double max_delay_s = 0.001; ///< each datagram takes [0.0001, max_delay] s: reordering
};

class SimFabric {
public:
    explicit SimFabric(uint64_t seed) : rng_(seed) {}

    SimNode &add_node(uint64_t name, uint64_t token, uint8_t addr_byte, size_t paths = 2);
    SimNode *node(uint64_t name);
    double now() const { return now_; }
    std::mt19937_64 &rng() { return rng_; }
    Weather weather;

    /// The node's process is gone: nothing reaches it or comes from it, its
    /// timers stop, and its QPs are gone for the RC paths of others.
    void kill(uint64_t name) { dead_.insert(name); }
    /// Queues `bytes` from `from` (its GID is what the GRH shows) to node `to`.
    void send(const wire::Gid &from, uint64_t to, std::vector<uint8_t> bytes);
    /// Delivers everything due by now + dt and runs every node's timers
    /// along the way (in steps of at most 10 ms).
    void advance(double dt);
    /// Runs until no datagram is in flight and no manager is busy, or `limit`
    /// simulated seconds pass. True when quiet.
    bool settle(double limit);
    size_t in_flight() const { return queue_.size(); }
    size_t delivered() const { return delivered_; }
    /// An up path whose peer QP is gone fails after this long (RC retries).
    double rc_retry_s = 2.0;

private:
    struct Datagram {
        double at;
        uint64_t seq;
        wire::Gid from;
        uint64_t to;
        std::vector<uint8_t> bytes;
    };
    void deliver(const Datagram &d);

    std::mt19937_64 rng_;
    double now_ = 0;
    uint64_t seq_ = 0;
    size_t delivered_ = 0;
    std::deque<Datagram> queue_;
    std::set<uint64_t> dead_;
    std::map<std::tuple<uint64_t, uint64_t, uint32_t>, double> orphaned_; ///< up paths with no peer QP
    std::map<uint64_t, std::unique_ptr<SimNode>> nodes_;
};

/// The GID of simulated address 198.18.0.N (IPv4-mapped).
wire::Gid sim_gid(uint8_t n);

/// Both ends of every path of a and b agree (each up path's remote QPN is
/// the other's live QP for the same path, which is up or awaiting its RTU),
/// and every live QP belongs to a path. "" when so, else what is wrong.
std::string check_pairing(SimNode &a, SimNode &b);

} // namespace roce::btl::testing
