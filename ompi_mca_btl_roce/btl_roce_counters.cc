// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Reading the module's counters for the MPI_T performance variables: the
// one place that walks a module's endpoints for them.
#include "btl_roce_module.h"

namespace roce::btl {

void Module::read_counters(BtlCounters &out) {
    OPAL_THREAD_LOCK(&lock_);
    add_drops(out.cm_drops, conn_->manager().drops());
    const RailStats &rs = dp_->rail_stats();
    RailCounters rc;
    rc.port_index = port_index_;
    rc.rerouted_sends = rs.rerouted_sends;
    rc.rerouted_bytes = rs.rerouted_bytes;
    rc.carried_sends = rs.carried_sends;
    rc.carried_bytes = rs.carried_bytes;
    rc.forwarded_received = rs.forwarded_received;
    rc.forwarded_duplicates = rs.forwarded_duplicates;
    rc.forwarded_refused = rs.forwarded_refused;
    rc.rerouted_rdma = rs.rerouted_rdma;
    rc.rerouted_rdma_bytes = rs.rerouted_rdma_bytes;
    rc.carried_rdma = rs.carried_rdma;
    rc.carried_rdma_bytes = rs.carried_rdma_bytes;
    rc.port_down_notices = rs.port_down_notices;
    out.rails.push_back(rc);
    for (const auto &ep : endpoints_.all) {
        add_drops(out.cm_drops, ep->drops);
        const uint32_t vpid = static_cast<uint32_t>(ep->name & 0xffffffffu);
        for (size_t i = 0; i < ep->path_count(); ++i) {
            const Path &p = ep->path_at(i);
            PathCounters c;
            c.peer_vpid = vpid;
            c.port_index = port_index_;
            c.path = static_cast<uint16_t>(i);
            c.state = p.state;
            c.bytes_sent = p.tx.stats.bytes;
            c.bytes_received = p.tx.stats.bytes_received;
            c.messages_sent = p.tx.stats.messages;
            c.messages_received = p.tx.stats.messages_received;
            c.rdma_reads = p.tx.stats.rdma_reads;
            c.rdma_writes = p.tx.stats.rdma_writes;
            c.retransmits = p.tx.stats.retransmits;
            c.failovers = p.tx.stats.failovers;
            c.reconnects = p.tx.stats.reconnects;
            c.credit_stalls = p.tx.stats.credit_stalls;
            out.paths.push_back(c);
        }
    }
    OPAL_THREAD_UNLOCK(&lock_);
}

} // namespace roce::btl
