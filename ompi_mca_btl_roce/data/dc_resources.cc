// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "data/dc_resources.h"

#include "connection/manager.h"
#include "qp/lag_port.h"
#include "util/strings.h"

namespace roce::btl {

using util::Result;
using util::Status;

Result<std::unique_ptr<DcResources>>
DcResources::create(const verbs::VerbsApi &api, Device &dev, const select::Selection &sel,
                    qp::SharedSnapshotSource snapshots, bool privileged,
                    const DcResourcesConfig &cfg, util::LogSink &log) {
    // The same 64 random bits, never 0, as a connection token: a peer that
    // does not hold our modex cannot guess the key.
    auto key = new_token();
    if (!key) {
        return key.status().with_context(sel.device + ": no DC access key");
    }
    auto dct = qp::DcTarget::create(api, dev.context(), dev.pd(), dev.cq(), dev.srq(), *key, sel,
                                    snapshots, privileged, &log);
    if (!dct) {
        return dct.status();
    }
    Status st = dct->activate(cfg.dct_params);
    if (!st) {
        return std::move(st).with_context("DC target on " + sel.device);
    }
    std::unique_ptr<DcResources> r(new DcResources(api, std::move(dct.value()), cfg));
    r->dcis_.reserve(cfg.dcis);
    for (uint32_t i = 0; i < cfg.dcis; ++i) {
        auto dci = qp::DcInitiator::create(api, dev.context(), dev.pd(), dev.cq(), cfg.caps, sel,
                                           snapshots, privileged, &log);
        if (!dci) {
            return dci.status().with_context(
                util::format("DC initiator %u of %u", i + 1, cfg.dcis));
        }
        st = dci->activate(cfg.dci_params);
        if (!st) {
            return std::move(st).with_context(
                util::format("DC initiator %u of %u (0x%x)", i + 1, cfg.dcis, dci->number()));
        }
        r->dcis_.push_back(std::make_unique<qp::DcInitiator>(std::move(dci.value())));
        r->lag_ports_.push_back(0);
        st = r->pin(i);
        if (!st) {
            return st;
        }
    }
    return r;
}

Status DcResources::pin(size_t i) {
    if (cfg_.lag_ports <= 1) {
        return Status::ok();
    }
    qp::DcInitiator &d = *dcis_.at(i);
    auto want = static_cast<uint8_t>(i % cfg_.lag_ports + 1);
    auto got = qp::set_lag_port(*api_, d.qp().get(), d.number(), want);
    if (!got) {
        return got.status().with_context(
            util::format("DC initiator %zu of %zu (0x%x)", i + 1, dcis_.size(), d.number()));
    }
    lag_ports_.at(i) = got->port;
    return Status::ok();
}

Status DcResources::recover(size_t i) {
    Status st = dcis_.at(i)->recover(cfg_.dci_params);
    return st ? pin(i) : st;
}

DcResources::~DcResources() {
    // Initiators first (last made, first gone), then the target: the
    // reverse of create, and no DCI outlives the DCT of its own port.
    while (!dcis_.empty()) {
        dcis_.pop_back();
    }
}

} // namespace roce::btl
