// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "opal/util/proc.h"

#include "btl_roce_addr.h"
#include "btl_roce_frag.h"
#include "credits.h"
#include "lag.h"
#include "qp/queue_pair.h"
#include "seq_window.h"
#include "verbs/handles.h"
#include "wire.h"

namespace roce::btl {

class Module;

/// Connection state of an endpoint, derived from its paths:
///  kClosed     nothing attempted yet (connections are made on first use);
///  kConnecting no path is up yet;
///  kConnected  at least one path is up (others may be reconnecting);
///  kFailed     no path could be (re)established before the deadline; pending
///              work completed with an error and the PML was told.
enum class EpState { kClosed, kConnecting, kConnected, kFailed };
const char *to_string(EpState s) noexcept;

/// State of one path (one RC QP) of an endpoint.
///  kIdle -> kConnecting (our REQ is out) -> kUp
///  kIdle -> kAwaitRtu (we answered the peer's REQ) -> kUp (RTU or first message)
///  kUp -> kDraining (an error completion: the QP is in error and its
///  remaining work requests flush back) -> kIdle (QP destroyed; reconnect)
enum class PathState { kIdle, kConnecting, kAwaitRtu, kUp, kDraining };
const char *to_string(PathState s) noexcept;

/// Counters of one path, printed at finalize (btl_roce_verbose >= 10).
struct PathStats {
    uint64_t bytes = 0;       ///< payload bytes sent (sends and RDMA)
    uint64_t messages = 0;    ///< sends and RDMA operations completed
    uint64_t retransmits = 0; ///< fragments resent after this path failed
    uint64_t failovers = 0;   ///< times this path failed while carrying traffic
    uint64_t reconnects = 0;  ///< times it was connected again after a failure
};

/// One RC queue pair to the peer, with its own credits.
struct Path {
    std::unique_ptr<qp::QueuePair> qp;
    std::unique_ptr<qp::QueuePair> loop_peer; ///< loopback only: where our sends arrive
    PathState state = PathState::kIdle;
    PathSpread spread;          ///< source port / flow label / predicted member
    uint32_t local_psn = 0;
    uint32_t remote_qpn = 0;
    uint32_t conn_id = 0;       ///< our REQ for this path (0: none pending)
    uint8_t batch_first = 0;    ///< the REQ covers paths [batch_first, +batch_count)
    uint8_t batch_count = 1;
    uint32_t peer_conn_id = 0;  ///< the peer's REQ we answered
    uint32_t abandoned_conn_id = 0; ///< our REQ that lost a race (its REP is stale)
    std::vector<uint8_t> last_reply; ///< REP we sent, resent on a duplicate REQ
    uint32_t sq_free = 0;       ///< free send-queue slots
    uint32_t outstanding = 0;   ///< work requests posted and not completed
    uint32_t chunks = 0;        ///< chunks of large reads/writes posted and not completed
    CreditLedger credits;
    double next_retry = 0;      ///< REQ retransmission (kConnecting)
    double retry_interval = 0;
    double reconnect_at = 0;    ///< kIdle after a failure: when to try again
    int tries = 0;
    bool ever_up = false;
    PathStats stats;

    uint32_t qpn() const { return qp ? qp->get()->qp_num : 0; }
};

/// One peer process as seen from one module (port). Owned by the Module;
/// Open MPI holds it as an opaque mca_btl_base_endpoint_t*. Every member is
/// protected by the module lock.
class Endpoint {
public:
    Endpoint(Module &module, opal_proc_t *proc, uint64_t peer_name, uint16_t peer_port_index,
             wire::PortAdvert peer_port, PathChoice path);
    ~Endpoint();

    Module &module() const { return *module_; }
    opal_proc_t *proc() const { return proc_; }
    uint64_t peer_name() const { return peer_name_; }
    uint16_t peer_port_index() const { return peer_port_index_; }
    const wire::PortAdvert &peer_port() const { return peer_port_; }
    const PathChoice &path() const { return path_; }
    EpState state() const { return state_; }
    bool is_self() const { return self_; }
    /// "rank 3 (node2, [[1234,1],3])" for messages.
    const std::string &label() const { return label_; }
    size_t path_count() const { return paths_.size(); }
    const Path &path_at(size_t i) const { return paths_[i]; }

    mca_btl_base_endpoint_t *as_opal() { return reinterpret_cast<mca_btl_base_endpoint_t *>(this); }
    static Endpoint *from(mca_btl_base_endpoint_t *ep) { return reinterpret_cast<Endpoint *>(ep); }

private:
    friend class Module;
    friend class EndpointTestPeer;

    Module *module_;
    opal_proc_t *proc_;
    uint64_t peer_name_;
    uint16_t peer_port_index_;
    wire::PortAdvert peer_port_;
    PathChoice path_;
    std::string label_;
    bool self_ = false;

    EpState state_ = EpState::kClosed;
    std::vector<Path> paths_;
    verbs::Ah ah_;              ///< UD address handle to the peer's UD QP
    bool dgid_learned_ = false; ///< path_.dgid came from the peer, not the modex
    /// The newest REQ of the peer that we ignored because ours won the race:
    /// the peer abandoned it, and copies still in flight are stale. (A peer's
    /// connection ids only grow, so every id up to this one is stale.)
    uint32_t peer_lost_conn_ = 0;
    SpreadModel spread_model_;  ///< how the bond spreads this peer's flows
    unsigned next_path_ = 0;    ///< round-robin cursor

    uint32_t next_seq_ = 0;     ///< next data fragment number
    SeqWindow completed_;       ///< our fragments completed (bounds next_seq_)
    SeqWindow received_;        ///< the peer's fragments received (drops copies)

    Frag *pending_head_ = nullptr; ///< sends waiting for a path, credits or a slot
    Frag *pending_tail_ = nullptr;
    uint32_t rdma_outstanding_ = 0;
    /// RDMA operations whose path failed, waiting to be posted again.
    RdmaOp *rdma_retry_ = nullptr;

    double deadline_ = 0;       ///< no path up by then: the endpoint fails
    std::string failure_;
};

} // namespace roce::btl
