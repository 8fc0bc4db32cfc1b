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
#include "qp/queue_pair.h"
#include "verbs/handles.h"
#include "wire.h"

namespace roce::btl {

class Module;

/// Connection state of an endpoint.
///  kClosed -> kConnecting (we sent REQ) -> kConnected (REP arrived, RTU sent)
///  kClosed -> kAwaitRtu (peer's REQ arrived, REP sent) -> kConnected (RTU
///  or first RC message arrived)
///  any -> kFailed (timeout, reject, QP error): pending work completes with
///  an error and the PML is told through the error callback.
enum class EpState { kClosed, kConnecting, kAwaitRtu, kConnected, kFailed };
const char *to_string(EpState s) noexcept;

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
    std::unique_ptr<qp::QueuePair> qp_;           ///< the RC QP we send on
    std::unique_ptr<qp::QueuePair> self_peer_qp_; ///< loopback only: where our sends arrive
    verbs::Ah ah_;            ///< UD address handle to the peer's UD QP
    uint32_t local_psn_ = 0;
    uint32_t qpn() const { return qp_ ? qp_->get()->qp_num : 0; }
    uint32_t conn_id_ = 0;    ///< our current connection attempt
    uint32_t peer_conn_id_ = 0;
    uint32_t remote_qpn_ = 0;
    std::vector<uint8_t> last_reply_; ///< REP we sent, resent on a duplicate REQ

    CreditLedger credits_;
    Frag *pending_head_ = nullptr; ///< sends waiting for connection or credits
    Frag *pending_tail_ = nullptr;
    uint32_t sq_free_ = 0;         ///< free send-queue slots on qp_
    uint32_t rdma_outstanding_ = 0;

    // Connection retransmission.
    double next_retry_ = 0;
    double deadline_ = 0;
    double retry_interval_ = 0;
    int tries_ = 0;
    std::string failure_;
};

} // namespace roce::btl
