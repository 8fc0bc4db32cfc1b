// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::netmon {

/// "RDMA port `device`:`port` has GID entries on netdev `netdev`": one row
/// per (device, port, netdev), taken from the GID table's netdev attributes.
struct RdmaBinding {
    std::string device;
    int port = 0;
    std::string netdev;
    int netdev_ifindex = 0; ///< 0 when the reader did not know it (match by name then)

    bool operator==(const RdmaBinding &o) const {
        return device == o.device && port == o.port && netdev == o.netdev &&
               netdev_ifindex == o.netdev_ifindex;
    }
};

/// The hook through which the monitor learns which RDMA port sits on which
/// netdev. The monitor calls it on its own thread at start, after a resync,
/// after verbs GID/port events, after changes under the RDMA device
/// directory, and when netdevs or addresses change (coalesced: at most once
/// per wakeup). It must be thread-safe with respect to the caller's other
/// uses of the same readers, must not block for long, and must not call
/// back into the Monitor. An error keeps the previous bindings and is logged.
///
/// Production wiring: a function that runs the live rdma-core topo reader
/// (issue 3) and passes its Snapshot to bindings_from_snapshot().
using RdmaBindingSource = std::function<util::Result<std::vector<RdmaBinding>>()>;

/// Every (device, port, netdev) that appears in the GID tables of `s`,
/// de-duplicated, sorted by device, port, netdev. GID entries without a
/// netdev (InfiniBand) are skipped.
std::vector<RdmaBinding> bindings_from_snapshot(const topo::Snapshot &s);

} // namespace roce::netmon
