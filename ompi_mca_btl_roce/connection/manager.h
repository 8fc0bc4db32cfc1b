// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "connection/peer.h"
#include "util/log.h"
#include "util/rate_limit.h"
#include "util/status.h"
#include "proto/wire.h"

namespace roce::btl {

/// A QP the host created for a path: its number and first packet sequence number.
struct LocalQp {
    uint32_t qpn = 0;
    uint32_t psn = 0;
};

/// What the connection manager needs from its surroundings: the verbs side
/// of a connection (QPs, the UD send) and the data path's reactions. The
/// btl's Module implements it over rdma-core; tests implement it in memory.
/// Every call is made with the host's lock held (the manager has none) and
/// must not call back into the manager, except where noted.
class CmHost {
public:
    virtual ~CmHost() = default;

    /// Seconds on a monotonic clock.
    virtual double now() const = 0;
    /// Sends one encoded CM message to the peer's UD QP. kResourceExhausted
    /// when no send slot is free (the retransmission timers cover it); any
    /// other error means the peer cannot be addressed from here.
    virtual util::Status send_cm(Peer &peer, const std::vector<uint8_t> &bytes) = 0;
    /// The addressing fields of a REQ or REP to `peer`: src_gid, dst_gid, path_mtu.
    virtual void address(const Peer &peer, wire::CmMessage &m) const = 0;
    /// How many paths a connection to `peer` has (1..wire::kMaxPaths).
    virtual size_t paths_wanted(const Peer &peer) const = 0;
    /// Requester: a new QP for path `i`, in INIT. The path has no QP (a
    /// previous one was retired).
    virtual util::Result<LocalQp> open_qp(Peer &peer, size_t i) = 0;
    /// Responder: QPs for paths [first, first + remote.size()), each
    /// connected (RTR, RTS) to the requester's QP of the same index. On
    /// failure no path of the range has a QP. May retire QPs those paths had.
    virtual util::Status accept_qps(Peer &peer, size_t first,
                                    const std::vector<wire::PathInfo> &remote,
                                    std::vector<LocalQp> *local) = 0;
    /// A loopback peer: path `i` gets two new QPs wired to each other (RTS),
    /// the sends of one arriving at the other; local_qpn/local_psn/remote_qpn
    /// of the path are set. On failure the path has no QP.
    virtual util::Status wire_loopback(Peer &peer, size_t i) = 0;
    /// Requester: path `i`'s QP (in INIT) to RTR and RTS towards `remote`.
    virtual util::Status connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) = 0;
    /// Takes path `i`'s QP out of service (error state; destroyed once its
    /// work has flushed). Nothing when the path has no QP.
    virtual void retire_qp(Peer &peer, size_t i) = 0;
    /// Path `i` carries traffic from now on, with the peer's window of
    /// `credits` receive buffers; `reconnected` when it had been up before.
    virtual void path_up(Peer &peer, size_t i, uint32_t credits, bool reconnected) = 0;
    /// Path `i` was up and is not any more (its QP is already retired).
    virtual void path_lost(Peer &peer, size_t i) = 0;
    /// No path of `peer` came up before its deadline: fail what waits for it.
    virtual void peer_failed(Peer &peer, const std::string &why) = 0;
    /// An authenticated message that fits the connection state came from
    /// `from`, which is not where `peer` is addressed: address it there.
    virtual void peer_moved(Peer &peer, const wire::Gid &from) = 0;
    /// Before a path is connected: true when our own address for `peer` is
    /// gone and its addressing was chosen anew (the manager then reconnects
    /// the paths that were up, from the new address). `thorough`: look at a
    /// fresh view of the machine; otherwise only act on what is already
    /// known to be stale (an address handle that preflight refused).
    virtual bool revalidate(Peer &peer, bool thorough) = 0;
    /// Where the REQs to `peer` go, for the message of a connection timeout
    /// ("REQs from mlx5_bond_0:1 gid[3] 10.0.0.1 to 10.0.0.2, UD qpn 0x11; check ...").
    virtual std::string route(const Peer &peer) const = 0;
    /// The peer with this name, if one exists.
    virtual Peer *find_peer(uint64_t name) = 0;
    /// Whether another rail of this process (another host, another manager)
    /// reaches `peer` now: then a peer that was connected and lost every
    /// path here is not failed at its deadline - its traffic goes over that
    /// rail - and this manager keeps reconnecting it (issue 16). Default:
    /// no other rail.
    virtual bool reached_elsewhere(const Peer &peer) const {
        (void)peer;
        return false;
    }
    /// A REQ came, with this process's token, from `name`, for which no peer
    /// exists. The host may look it up (if Open MPI told it about that
    /// name's job) so that the requester's next retransmission finds a peer;
    /// it must not block and must not allocate for names outside its jobs.
    /// Returns false when the name is outside the jobs it knows.
    virtual bool unknown_requester(uint64_t name) = 0;
};

/// Timing of connection setup (MCA parameters).
struct CmConfig {
    double connect_timeout_s = 30.0; ///< no path up for this long: the peer fails
    double connect_retry_s = 0.2;    ///< first REQ retransmission; doubles up to 2 s
    double reconnect_delay_s = 0.05; ///< after a path fails, before its new REQ
    uint32_t credits = 32;           ///< receive window we grant each path
    double warn_interval_s = 10.0;   ///< one warning per peer (and per kind) per interval
};

/// Who this process is on the fabric.
struct CmIdentity {
    uint64_t name = 0;     ///< our Open MPI process name
    uint64_t token = 0;    ///< our connection token (published in the modex)
    uint16_t port_index = 0; ///< our port, as the peers index our modex address
    uint32_t ud_qpn = 0;   ///< our UD QP
};

/// The REQ/REP/RTU/REJECT handshake that connects a peer's paths over the
/// UD QP, and everything that makes it safe on a shared fabric.
///
///   A (requester)                        B (responder)
///   open QPs (INIT)
///   REQ {paths[first..]: qpn, psn}  -->  accept: QPs to RTS
///                                   <--  REP {paths[first..]: qpn, psn}
///   connect (RTR, RTS), up; RTU     -->  up (or on the first RC message)
///
/// The first handshake covers every path; a path that fails later is
/// handshaken again alone. REQs are retransmitted with exponential backoff;
/// a duplicate REQ gets the stored REP again. When both sides connect at
/// once, the request of the process with the smaller name wins; late copies
/// of the loser are ignored, and a REP to an abandoned REQ gets a kStale
/// REJECT instead of an RTU.
///
/// Trust: a datagram changes nothing unless it parses, is addressed to this
/// process and port, carries this process's token and the sender's token as
/// published in the sender's modex, and fits the state of the connection it
/// names. Only then is the peer's GID learned from it. Everything else is
/// dropped before any state changes, counted (drops()) and warned about at
/// most once per peer (or per kind) per interval. A name with no peer is
/// handed to CmHost::unknown_requester only when the message carries our
/// token.
///
/// Not thread-safe: the host serialises every call (its lock).
class ConnectionManager {
public:
    /// `host` and `log` must outlive the manager.
    ConnectionManager(CmHost &host, const CmIdentity &me, const CmConfig &cfg,
                      util::LogSink &log);

    /// A datagram from the UD QP. `from` is the sender's address as the GRH
    /// shows it (nullptr when the GRH held none).
    void on_datagram(const wire::Gid *from, const uint8_t *data, size_t len);

    /// Starts connecting a kClosed peer (first use): the handshake, or for a
    /// loopback peer a local wiring. No-op in other states.
    void connect(Peer &peer);
    /// The data path found path `i` broken (an error completion, a failed
    /// post) or replaced: retire its QP, reconnect after a delay. A path
    /// that was up is warned about, unless `quiet` (its cause is warned
    /// about once elsewhere, as for a port that went down): then at debug
    /// level.
    void path_failed(Peer &peer, size_t i, const std::string &why, bool quiet = false);
    /// Our port went down (its device said so): every path of `peer` that
    /// has a QP fails now, quietly (path_failed), instead of when each QP's
    /// retries run out (ack_timeout x retry_cnt: seconds per path, paid
    /// again at every hop of a protocol). Returns how many paths failed.
    size_t port_down(Peer &peer, const std::string &why);
    /// Our port is active again: paths of `peer` waiting to reconnect, or
    /// waiting to resend a REQ, try now with their back-off reset.
    void port_up(Peer &peer);
    /// An RC message arrived on path `i`: if it awaited the RTU, it is up.
    void on_rc_message(Peer &peer, size_t i);
    /// Marks path `i` up (after a handshake, an RTU, or a local wiring).
    void path_up(Peer &peer, size_t i);
    /// Fails the peer now (no path could be made): every path retired.
    void fail(Peer &peer, const std::string &why);
    /// Our addressing of `peer` changed (our GID vanished): paths that are
    /// up reconnect from the new address.
    void readdressed(Peer &peer);

    /// Retransmissions, reconnections and deadlines due at `now`.
    void run_timers(double now);
    /// True while some peer has a handshake, reconnection or deadline running.
    bool busy() const noexcept { return !watch_.empty(); }
    /// The peer is going away: no timer refers to it any more.
    void forget(Peer &peer);

    /// Drops not attributable to a known peer (per-peer drops are in Peer::drops).
    const CmDrops &drops() const noexcept { return drops_; }
    const CmIdentity &identity() const noexcept { return me_; }
    void set_identity(const CmIdentity &me) { me_ = me; }

private:
    double await_rtu_timeout() const;
    wire::CmMessage message(const Peer &peer, wire::CmType type) const;
    wire::CmMessage handshake(Peer &peer, wire::CmType type, uint32_t conn_id, size_t first,
                              size_t count) const;
    util::Status send(Peer &peer, const wire::CmMessage &m);
    void reject(Peer &peer, uint32_t conn_id, uint8_t first_path, wire::RejectReason reason,
                const std::string &text);
    void request_paths(Peer &peer, size_t first, size_t count);
    void reconnect_path(Peer &peer, size_t i);
    /// A loopback path: wired by the host, up at once, or retried later.
    void wire_loopback(Peer &peer, size_t i);
    void schedule_reconnect(Peer &peer, size_t i);
    void retire(Peer &peer, size_t i);
    void update_state(Peer &peer);
    void watch(Peer &peer);
    void learn_address(Peer &peer, const wire::Gid *from, const wire::CmMessage &m);

    void on_request(Peer &peer, const wire::Gid *from, const wire::CmMessage &m);
    void on_reply(Peer &peer, const wire::Gid *from, const wire::CmMessage &m);
    void on_rtu(Peer &peer, const wire::CmMessage &m);
    void on_reject(Peer &peer, const wire::CmMessage &m);
    void run_peer_timers(Peer &peer, double now);

    /// Counts a drop and warns (rate-limited) about it.
    void drop_unattributed(uint64_t CmDrops::*counter, const std::string &key,
                           const std::string &what);
    void drop_for_peer(Peer &peer, uint64_t CmDrops::*counter, const std::string &what);

    CmHost &host_;
    CmIdentity me_;
    CmConfig cfg_;
    util::LogSink &log_;
    uint32_t next_conn_id_ = 1;
    std::vector<Peer *> watch_; ///< peers with a handshake, reconnection or deadline running
    CmDrops drops_;
    util::RateLimiter warn_;
};

/// Connection tokens: 64 random bits from getrandom(2), never 0 (0 means
/// "no token" on the wire). kUnavailable when the kernel has no entropy
/// source to give.
util::Result<uint64_t> new_token();

/// Compares two tokens in time independent of where they differ.
bool same_token(uint64_t a, uint64_t b) noexcept;

} // namespace roce::btl
