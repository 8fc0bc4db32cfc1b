// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/rate_limit.h"

/// The connection state of a peer and of its paths, as the connection
/// manager (manager.h) keeps it. Pure data: no verbs, no Open MPI. The btl's
/// Endpoint and Path derive from these, so the data path reads the same
/// state the manager writes.
namespace roce::btl {

/// Connection state of a peer, derived from its paths:
///  kClosed     nothing attempted yet (connections are made on first use);
///  kConnecting no path is up yet;
///  kConnected  at least one path is up (others may be reconnecting);
///  kFailed     no path could be (re)established before the deadline; pending
///              work completed with an error and the PML was told.
enum class EpState { kClosed, kConnecting, kConnected, kFailed };
const char *to_string(EpState s) noexcept;

/// State of one path (one RC QP) to the peer.
///  kIdle -> kConnecting (our REQ is out) -> kUp (REP arrived, RTU sent)
///  kIdle -> kAwaitRtu (we answered the peer's REQ) -> kUp (RTU or first RC message)
///  kUp / kAwaitRtu / kConnecting -> kIdle (QP retired; reconnect after a delay)
enum class PathState { kIdle, kConnecting, kAwaitRtu, kUp };
const char *to_string(PathState s) noexcept;

/// The handshake part of one path.
struct PathConn {
    PathState state = PathState::kIdle;
    uint32_t local_qpn = 0;     ///< our QP for this path (0: none)
    uint32_t local_psn = 0;
    uint32_t remote_qpn = 0;
    uint32_t peer_credits = 0;  ///< the receive window the peer granted (REQ/REP)
    uint32_t conn_id = 0;       ///< our REQ for this path (0: none pending); one REQ
                                ///< covers a run of adjacent paths with the same id
    uint32_t peer_conn_id = 0;  ///< the peer's REQ we answered
    uint32_t abandoned_conn_id = 0; ///< our REQ that lost a race (its REP is stale)
    std::vector<uint8_t> last_reply; ///< REP we sent, resent on a duplicate REQ
    double next_retry = 0;      ///< REQ retransmission (kConnecting)
    double retry_interval = 0;
    double await_until = 0;     ///< kAwaitRtu: no RTU by then, the path restarts
    double reconnect_at = 0;    ///< kIdle after a failure: when to try again
    int tries = 0;
    bool ever_up = false;
};

/// Messages from the fabric that a connection manager dropped, by reason.
/// Every drop is counted; warnings about them are rate-limited.
struct CmDrops {
    uint64_t malformed = 0;       ///< did not parse (truncated, bad magic/version/field)
    uint64_t misdirected = 0;     ///< for another process or port
    uint64_t unauthenticated = 0; ///< a token that is not the one of that peer (forged, or a stale job)
    uint64_t unknown_sender = 0;  ///< a name outside the jobs Open MPI told us about
    uint64_t unexpected = 0;      ///< authenticated, but fits no connection state (late copy, race)
    uint64_t total() const noexcept {
        return malformed + misdirected + unauthenticated + unknown_sender + unexpected;
    }
};

/// One peer process as the connection manager sees it: who it is, the
/// secret it proved at the modex, and the handshake state of its paths.
/// The owner (the btl's Endpoint, or a test) stores the paths and gives the
/// manager access through the three virtual functions; the manager never
/// keeps a path reference across a call to its host.
class Peer {
public:
    virtual ~Peer() = default;

    /// Paths currently allocated (0 until the first connection).
    virtual size_t path_count() const = 0;
    /// Path `i` < path_count().
    virtual PathConn &path_conn(size_t i) = 0;
    /// Grows (never shrinks below an index in use) the path array to `n`.
    virtual void resize_paths(size_t n) = 0;

    uint64_t name = 0;          ///< Open MPI process name (jobid << 32 | vpid)
    uint16_t port_index = 0;    ///< the peer's port (index into its modex address)
    uint64_t token = 0;         ///< the peer's connection token, from its modex
    std::string label;          ///< "rank 3 (node2, [[1234,1],3])" for messages
    /// This process itself: its one path is two QPs wired to each other
    /// (CmHost::wire_loopback), set up and replaced locally, never handshaken.
    bool loopback = false;

    EpState state = EpState::kClosed;
    double deadline = 0;        ///< kConnecting: no path up by then, the peer fails
    std::string failure;
    /// The newest REQ of the peer that we ignored because ours won the race:
    /// the peer abandoned it, and copies still in flight are stale. (A peer's
    /// connection ids only grow, so every id up to this one is stale.)
    uint32_t peer_lost_conn = 0;
    CmDrops drops;              ///< messages naming this peer that were dropped
    util::RateLimiter warn{10.0, 4}; ///< warnings about this peer's dropped messages
};

} // namespace roce::btl
