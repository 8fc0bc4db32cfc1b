// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "btl_roce_device.h"
#include "qp/dc.h"
#include "select/selection.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::btl {

/// What a module's DC resources are made with.
struct DcResourcesConfig {
    /// DCIs in the pool (btl_roce_dc_dcis, 1..kMaxDcis).
    uint32_t dcis = 8;
    /// Send queue of each DCI: work requests and SGEs
    /// (a send is a header and a payload plus, in place, the trailer that
    /// names the sender: 3).
    qp::DciCaps caps{128, 3, 0, false};
    /// The DCIs' RTS attributes (timeout, retry counts, max_rd_atomic) and
    /// the DCT's (access flags, min_rnr_timer): the module's RC values.
    qp::QpParams dci_params;
    qp::QpParams dct_params = qp::dct_params();
    /// The mlx5 LAG's ports when the DCIs are to be spread over them (queue
    /// affinity: DCI i on port i % lag_ports + 1); 0 or 1: not pinned.
    uint32_t lag_ports = 0;
};

/// The DC queues of one port (mlx5 DC, docs/architecture.md "DC"): one DC
/// target on the Device's SRQ and CQ, answering only initiators that
/// present its access key, and a pool of DC initiators on the same CQ.
/// Made by the module at create when its port chose DC, before its modex
/// advertisement is read (the DCT's number exists only once it is at RTR).
///
/// Destruction order (the destructor): the DCIs first, then the DCT; all
/// of them before the Device (they complete into its CQ and the DCT
/// consumes its SRQ), and before the address handles their work names (the
/// Connector's). The owner drains them first (DataPath::close_dc: what is
/// on a DCI completes, or flushes back in error once, before the DCIs go).
///
/// Not thread-safe: the owning Module serialises access (its lock).
class DcResources {
public:
    /// Draws a random access key (64 bits from getrandom(2), never 0),
    /// creates the DCT on `dev`'s PD, SRQ and CQ and activates it
    /// (RESET -> INIT -> RTR, preflighted against `sel`), then creates
    /// cfg.dcis DCIs and activates each to RTS; on an mlx5 LAG
    /// (cfg.lag_ports > 1) DCI i is then bound to LAG port i % lag_ports + 1
    /// (qp::set_lag_port, read back), so that the DCIs - and the peers
    /// hashed to them - spread over the bond's members. Errors: the key's
    /// (no entropy), or the first creation, transition or LAG binding that
    /// failed, its message naming the DCT or which DCI; whatever was made is
    /// destroyed again (in the destructor's order).
    static util::Result<std::unique_ptr<DcResources>>
    create(const verbs::VerbsApi &api, Device &dev, const select::Selection &sel,
           qp::SharedSnapshotSource snapshots, bool privileged, const DcResourcesConfig &cfg,
           util::LogSink &log);
    ~DcResources();
    DcResources(const DcResources &) = delete;
    DcResources &operator=(const DcResources &) = delete;

    /// The DCT's number (24 bits, never 0 once created): what peers address
    /// and what the modex advertises (wire::PortAdvert::dct_number).
    uint32_t dct_number() const { return dct_.number(); }
    /// The DCT's access key (never 0): published in the modex
    /// (wire::PortAdvert::dc_key); a work request with another key completes
    /// in error at its initiator.
    uint64_t access_key() const { return dct_.access_key(); }
    /// The target (its QueuePair's state, for tests and diagnostics).
    const qp::DcTarget &target() const { return dct_; }
    /// Brings DCI `i` back from ERR (qp::DcInitiator::recover with the
    /// parameters it was activated with, then its LAG port again: a
    /// transition may reset it); its work must have flushed.
    [[nodiscard]] util::Status recover(size_t i);
    /// The LAG port DCI `i` is bound to (1-based; 0: not pinned).
    uint8_t lag_port(size_t i) const { return lag_ports_.at(i); }
    /// Work requests one DCI takes at a time (its send queue).
    uint32_t dci_depth() const { return cfg_.caps.max_send_wr; }
    /// The pool: dcis() initiators, each at RTS after create.
    size_t dcis() const { return dcis_.size(); }
    qp::DcInitiator &dci(size_t i) { return *dcis_.at(i); }
    const qp::DcInitiator &dci(size_t i) const { return *dcis_.at(i); }

private:
    DcResources(const verbs::VerbsApi &api, qp::DcTarget dct, const DcResourcesConfig &cfg)
        : api_(&api), cfg_(cfg), dct_(std::move(dct)) {}
    /// Binds DCI `i` to its LAG port (cfg_.lag_ports > 1), read back.
    util::Status pin(size_t i);
    const verbs::VerbsApi *api_;
    DcResourcesConfig cfg_;
    std::vector<uint8_t> lag_ports_;
    qp::DcTarget dct_;
    std::vector<std::unique_ptr<qp::DcInitiator>> dcis_;
};

} // namespace roce::btl
