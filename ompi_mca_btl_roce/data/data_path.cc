// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The data path's lifetime, its QPN table, and what it does when the
// connection side brings a path up or gives a peer up.
#include "data/data_path.h"

namespace roce::btl {

using util::Result;
using util::Status;

DataPath::DataPath(DataPathHost &host, Device &dev, Retirement &retirement,
                   const DataPathConfig &cfg, mca_btl_base_module_t *btl, opal_mutex_t &lock,
                   const std::vector<std::unique_ptr<Endpoint>> &endpoints,
                   std::function<double()> clock, util::LogSink &log)
    : host_(host), dev_(dev), retirement_(retirement), cfg_(cfg), btl_(btl), lock_(lock),
      endpoints_(endpoints), clock_(std::move(clock)), log_(log) {
    spare_.reserve(4);
}

Result<std::unique_ptr<DataPath>>
DataPath::create(DataPathHost &host, Device &dev, Retirement &retirement, const DataPathConfig &cfg,
                 mca_btl_base_module_t *btl, opal_mutex_t &lock,
                 const std::vector<std::unique_ptr<Endpoint>> &endpoints,
                 std::function<double()> clock, util::LogSink &log) {
    std::unique_ptr<DataPath> dp(
        new DataPath(host, dev, retirement, cfg, btl, lock, endpoints, std::move(clock), log));
    Status s = dp->rdma_ops_.init(dev.api(), dev.pd(), cfg.max_rdma_ops, &log);
    if (!s) {
        return s;
    }
    // Signaled work requests in flight never exceed what the CQ was sized
    // for besides the posted receives (Device::create_queues).
    dp->max_inflight_ = static_cast<uint32_t>(dev.frags().size()) + cfg.max_rdma_ops;
    return dp;
}

DataPath::~DataPath() {
    rdma_ops_.reset();
}

void DataPath::map_qp(uint32_t qpn, Endpoint &ep, size_t i) {
    by_qpn_[qpn] = QpRef{&ep, i};
}

void DataPath::unmap_qp(uint32_t qpn) {
    by_qpn_.erase(qpn);
}

void DataPath::path_up(Endpoint &ep) {
    drain_pending(ep);
    retry_rdma(ep);
}

void DataPath::fail_endpoint(Endpoint &ep, const std::string &text) {
    while (ep.pending_head_ != nullptr) {
        Frag *f = ep.pending_head_;
        ep.pending_head_ = f->next;
        complete_frag(f, OPAL_ERR_UNREACH);
    }
    ep.pending_tail_ = nullptr;
    while (ep.rdma_retry_ != nullptr) {
        RdmaOp *op = ep.rdma_retry_;
        ep.rdma_retry_ = op->next_retry;
        rdma_done(op, OPAL_ERR_UNREACH);
    }
    Deferred &d = deferred_.emplace_back();
    d.kind = Deferred::Kind::kError;
    d.ep = &ep;
    d.text = text;
}

void DataPath::take_deferred(std::vector<Deferred> &todo) {
    if (deferred_.empty()) {
        return; // keep the buffer: `todo` stays without one
    }
    todo.swap(deferred_);
    if (!spare_.empty()) {
        deferred_.swap(spare_.back());
        spare_.pop_back();
    }
}

} // namespace roce::btl
