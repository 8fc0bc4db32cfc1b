// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The data path's part of a lost rail's RDMA (issue 16): while a module's
// endpoint has no live path to its peer, its puts and gets wait on the
// endpoint's retry queue; the Module (btl_roce_rails.cc) takes them from
// there and has a sibling rail that still reaches the peer post each as a
// proxy operation of its own, with the keys of the same memory registered on
// that rail (ours from the local handle's table, the peer's from the remote
// handle's, as the operation copied them). The proxy's completion comes back
// to the origin, which completes the caller's operation as if it had posted
// it, or puts it back on its queue. Atomics are never carried: a NIC's
// atomics are atomic only among those of the same HCA, and another rail
// reaches the target word through another one. docs/architecture.md,
// "Losing a rail", has the whole contract.
#include "data/data_path.h"

#include <algorithm>
#include <iterator>

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Status;

namespace {

bool is_data(const RdmaOp &op) {
    return op.opcode == IBV_WR_RDMA_READ || op.opcode == IBV_WR_RDMA_WRITE;
}

// The operation's whole size: a proxy carries one queued item (a whole
// operation or one chunk), which is its scatter/gather entry.
size_t op_bytes(const RdmaOp &op) {
    return op.sge.length;
}

} // namespace

void DataPath::take_for_carrying(Endpoint &ep, size_t max, std::vector<RdmaOp *> &out) {
    if (ep.state == EpState::kConnected || ep.state == EpState::kFailed) {
        return;
    }
    // Unlink what may be carried; atomics and what must stay keep their
    // places (RDMA is unordered: nothing depends on the queue's order).
    RdmaOp **link = &ep.rdma_retry_;
    while (*link != nullptr && out.size() < max) {
        RdmaOp *op = *link;
        if (!is_data(*op) || op->stay) {
            link = &op->next_retry;
            continue;
        }
        *link = op->next_retry;
        op->next_retry = nullptr;
        op->path = -1; // posted nowhere of ours while another rail has it
        out.push_back(op);
    }
}

void DataPath::give_back_rdma(Endpoint &ep, const std::vector<RdmaOp *> &ops, size_t from) {
    for (size_t k = ops.size(); k > from; --k) {
        RdmaOp *op = ops[k - 1];
        op->next_retry = ep.rdma_retry_;
        ep.rdma_retry_ = op;
    }
    if (ep.state == EpState::kConnected) {
        retry_rdma(ep); // the rail came back meanwhile
    }
}

Status DataPath::carry_rdma(Endpoint &ep, uint16_t local_port, const RdmaOp &origin,
                            mca_btl_base_rdma_completion_fn_t cb, void *cbcontext, void *cbdata) {
    const size_t size = op_bytes(origin);
    // The keys on this rail: ours for the local memory, the peer's for its
    // port our endpoint is connected to. A table without them (memory
    // registered before the rail joined, a port beyond the table, a peer
    // whose handle has no table): this rail cannot carry it.
    const uint16_t remote_port = ep.port_index;
    bool local_ok =
        size == 0 || (local_port < kHandleRails && ((origin.lkey_rails >> local_port) & 1u) != 0);
    bool remote_ok = remote_port < kHandleRails && ((origin.rkey_rails >> remote_port) & 1u) != 0;
    if (!is_data(origin) || !local_ok || !remote_ok) {
        return Status(Code::kNotFound,
                      util::format("carrying RDMA to %s: %s", ep.label.c_str(),
                                   !is_data(origin) ? "atomics are never carried"
                                   : !local_ok      ? "our memory has no key on this rail"
                                                    : "the peer's handle has no key for its "
                                                      "port this rail reaches"));
    }
    OPAL_THREAD_LOCK(&lock_);
    if (ep.state != EpState::kConnected) {
        OPAL_THREAD_UNLOCK(&lock_);
        return retry_later();
    }
    RdmaOp *op = rdma_ops_.get();
    if (op == nullptr) {
        OPAL_THREAD_UNLOCK(&lock_);
        return retry_later();
    }
    op->cbfunc = cb;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->local_address = origin.local_address;
    op->ep = &ep;
    op->opcode = origin.opcode;
    op->sge = origin.sge;
    op->sge.lkey = size > 0 ? origin.rail_lkey[local_port] : 0;
    op->remote_address = origin.remote_address;
    op->rkey = origin.rail_rkey[remote_port];
    // Our chunks of it take these (and a rail that carries one of them on).
    std::copy(std::begin(origin.rail_lkey), std::end(origin.rail_lkey), std::begin(op->rail_lkey));
    std::copy(std::begin(origin.rail_rkey), std::end(origin.rail_rkey), std::begin(op->rail_rkey));
    op->lkey_rails = origin.lkey_rails;
    op->rkey_rails = origin.rkey_rails;
    op->carried = const_cast<RdmaOp *>(&origin);
    Status s = issue(ep, op, size); // gives `op` back unless posted
    if (s) {
        ++rail_stats_.carried_rdma;
        rail_stats_.carried_rdma_bytes += size;
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return s;
}

void DataPath::carried_rdma_done(RdmaOp *op, int status) {
    Endpoint &ep = *op->ep;
    if (status == OPAL_SUCCESS) {
        ++rail_stats_.rerouted_rdma;
        rail_stats_.rerouted_rdma_bytes += op_bytes(*op);
        rdma_done(op, OPAL_SUCCESS);
        return;
    }
    if (ep.state == EpState::kFailed) {
        rdma_done(op, OPAL_ERR_UNREACH);
        return;
    }
    // Not known to be done: it waits again, for our own path or a carrier.
    give_back_rdma(ep, std::vector<RdmaOp *>{op}, 0);
}

} // namespace roce::btl
