// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "opal/util/proc.h"

#include "btl_roce_addr.h"
#include "btl_roce_frag.h"
#include "connection/peer.h"
#include "proto/credits.h"
#include "proto/lag.h"
#include "qp/queue_pair.h"
#include "proto/seq_window.h"
#include "verbs/handles.h"
#include "proto/wire.h"

namespace roce::btl {

class Connector;
class DataPath;

/// Counters of one path, printed at finalize (btl_roce_verbose >= 10) and
/// published as MPI_T performance variables (btl_roce_pvars.cc).
struct PathStats {
    uint64_t bytes = 0;       ///< payload bytes sent (sends and RDMA)
    uint64_t messages = 0;    ///< sends and RDMA operations completed
    uint64_t bytes_received = 0;    ///< payload bytes of data fragments delivered
    uint64_t messages_received = 0; ///< data fragments delivered
    uint64_t rdma_reads = 0;        ///< RDMA reads posted (chunks of a striped get count once each)
    uint64_t rdma_writes = 0;       ///< RDMA writes posted (likewise)
    uint64_t credit_stalls = 0;     ///< sends queued because this endpoint's paths had no credit
    uint64_t retransmits = 0; ///< fragments resent after this path failed
    uint64_t failovers = 0;   ///< times this path failed while carrying traffic
    uint64_t reconnects = 0;  ///< times it was connected again after a failure
    uint64_t bad_credits = 0; ///< credits the peer returned beyond its window (refused)
};

/// The transmit half of a path: what the data path (send, RDMA, progress)
/// reads and writes. A new QP (install_qp) starts with a full send queue,
/// nothing outstanding and no credits until path_up sets the peer's window;
/// the counters (stats) are kept across reconnections. The connection half
/// reads only `outstanding` (handed to the Retirement with a retired QP)
/// and `spread` (the flow label of the QPs it connects).
struct PathTx {
    PathSpread spread;          ///< source port / flow label / predicted member
    uint32_t sq_free = 0;       ///< free send-queue slots
    uint32_t outstanding = 0;   ///< work requests posted and not completed
    uint32_t chunks = 0;        ///< chunks of large reads/writes posted and not completed
    CreditLedger credits;       ///< the peer's receive window on this path
    PathStats stats;            ///< kept across reconnections
};

/// One RC path to the peer. The connection half: its handshake state
/// (PathConn, the base, written by the connection manager) and its QPs
/// (created, connected and retired by the manager's host); the transmit
/// half: `tx`. Both are guarded by the module lock.
struct Path : PathConn {
    std::unique_ptr<qp::QueuePair> qp;
    std::unique_ptr<qp::QueuePair> loop_peer; ///< loopback only: where our sends arrive
    PathTx tx;

    uint32_t qpn() const { return qp ? qp->get()->qp_num : 0; }
};

/// How a module reaches a peer over DC (issue 19; set once at add_procs,
/// when both published a DC target: dc_with_peer). No connection: each
/// work request names the peer's DC target through these.
struct DcRoute {
    ibv_ah *ah = nullptr; ///< to the peer's GID, shared by the peers there (the Connector's)
    uint32_t dctn = 0;    ///< the peer's DCT number (its modex)
    uint64_t key = 0;     ///< the peer's DC access key (its modex)
    uint32_t dci = 0;     ///< our DCI for this peer (DataPath::add_dc_peer: a hash)
};

class Endpoint;

/// DC peers' handles (issue 19: flat per-peer memory). What add_procs
/// gives Open MPI for a peer reached over DC is not an object of ours but
/// the peer's opal_proc_t address with bit 0 set: Open MPI only stores the
/// handle and passes it back (bml, ob1, osc/rdma never dereference a btl's
/// endpoint), so a DC peer costs this module no memory until it is used -
/// then its Endpoint is made (Module::endpoint) and found by name. An
/// Endpoint's own address, and an opal_proc_t's, have bit 0 clear.
inline bool is_dc_handle(const mca_btl_base_endpoint_t *e) {
    return (reinterpret_cast<uintptr_t>(e) & 1u) != 0;
}
/// The handle of DC peer `proc`.
inline mca_btl_base_endpoint_t *dc_handle_of(opal_proc_t *proc) {
    static_assert(alignof(opal_proc_t) >= 2, "bit 0 of a proc's address marks a DC handle");
    return reinterpret_cast<mca_btl_base_endpoint_t *>(reinterpret_cast<uintptr_t>(proc) | 1u);
}
/// The process a DC handle names (is_dc_handle(e)).
inline opal_proc_t *dc_handle_proc(const mca_btl_base_endpoint_t *e) {
    return reinterpret_cast<opal_proc_t *>(reinterpret_cast<uintptr_t>(e) & ~uintptr_t{1});
}

/// One peer process as seen from one module (port). Owned by the Module;
/// Open MPI holds it as an opaque mca_btl_base_endpoint_t* (a DC peer's as
/// its DC handle, dc_handle_of). Its connection
/// state (Peer, PathConn; the paths' QPs, addressing) is written by the
/// module's ConnectionManager and Connector, its transmit state (PathTx,
/// sequence numbers and windows, the pending and retry queues) by the
/// module's DataPath; every member is protected by the module lock.
class Endpoint final : public Peer {
public:
    /// The endpoint of `proc` (named `peer_name`) at its port
    /// `peer_port_index`, addressed as `path` chooses; no path yet.
    /// `seq_span` bounds the data fragments in flight each way.
    Endpoint(uint32_t seq_span, opal_proc_t *proc, uint64_t peer_name, uint16_t peer_port_index,
             wire::PortAdvert peer_port, PathChoice path);
    ~Endpoint() override;

    opal_proc_t *proc() const { return proc_; }
    const wire::PortAdvert &peer_port() const { return peer_port_; }
    const PathChoice &path() const { return path_; }
    bool is_self() const { return loopback; }
    const Path &path_at(size_t i) const { return paths_[i]; }

    // Peer: the manager's view of the paths.
    size_t path_count() const override { return paths_.size(); }
    PathConn &path_conn(size_t i) override { return paths_[i]; }
    void resize_paths(size_t n) override {
        if (n > paths_.size()) {
            paths_.resize(n);
        }
    }

    /// Whether data to this peer goes over DC (a route was set), and the
    /// route. Only DataPath::add_dc_peer sets it; tests may corrupt the key
    /// (set_dc_route) to see a wrong key fail.
    bool dc() const { return dc_.ah != nullptr; }
    const DcRoute &dc_route() const { return dc_; }
    void set_dc_route(const DcRoute &r) { dc_ = r; }

    /// What Open MPI knows this peer by: its DC handle (set_opal_handle),
    /// else this endpoint's address.
    mca_btl_base_endpoint_t *as_opal() {
        return opal_ != nullptr ? opal_ : reinterpret_cast<mca_btl_base_endpoint_t *>(this);
    }
    /// The Endpoint of a handle of add_procs that is not a DC handle
    /// (nullptr for a DC handle: Module::endpoint resolves those).
    static Endpoint *from(mca_btl_base_endpoint_t *ep) {
        return is_dc_handle(ep) ? nullptr : reinterpret_cast<Endpoint *>(ep);
    }
    /// Open MPI knows this peer by `h` (a DC handle) from now on.
    void set_opal_handle(mca_btl_base_endpoint_t *h) { opal_ = h; }

private:
    friend class Connector; // the connection side: paths, QPs, addressing
    friend class DataPath;  // the transmit side: pending and retry queues, windows

    opal_proc_t *proc_;
    wire::PortAdvert peer_port_;
    PathChoice path_;

    std::vector<Path> paths_;
    verbs::Ah ah_;              ///< UD address handle to the peer's UD QP
    bool dgid_learned_ = false; ///< path_.dgid came from the peer, not the modex
    SpreadModel spread_model_;  ///< how the bond spreads this peer's flows
    unsigned next_path_ = 0;    ///< round-robin cursor

    uint32_t next_seq_ = 0;     ///< next data fragment number
    SeqWindow completed_;       ///< our fragments completed (bounds next_seq_)
    SeqWindow received_;        ///< the peer's fragments received (drops copies)

    Frag *pending_head_ = nullptr; ///< sends waiting for a path, credits or a slot
    Frag *pending_tail_ = nullptr;
    uint32_t rdma_outstanding_ = 0;
    DcRoute dc_; ///< set: the peer is reached over DC (no paths are used)
    mca_btl_base_endpoint_t *opal_ = nullptr; ///< a DC peer's handle, else nullptr
    /// DC: the last of the sends that a DCI error put back at the head of
    /// pending_ (the next one flushed goes after it, keeping their order).
    Frag *dc_requeued_ = nullptr;
    /// RDMA operations whose path failed, waiting to be posted again.
    RdmaOp *rdma_retry_ = nullptr;
};

/// A module's endpoints: owned here, found by process name (jobid << 32 |
/// vpid). Endpoints live until the module is finalized (a peer that
/// reconnects, or a late fragment, must still find its state). Guarded by
/// the module lock; written by the Connector, read by the DataPath and the
/// Module.
struct EndpointTable {
    std::vector<std::unique_ptr<Endpoint>> all;
    std::unordered_map<uint64_t, Endpoint *> by_name;
};

} // namespace roce::btl
