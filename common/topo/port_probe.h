// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::topo {

/// What a cheap look at one RDMA port tells: enough to decide whether the
/// transport has anything to work with, before the full snapshot is read.
struct PortProbe {
    std::string device; ///< rdma-core device name, e.g. "mlx5_bond_0", "rxe_bond0"
    int port = 0;       ///< 1-based
    bool ethernet = false;
    bool active = false;
    std::string error;  ///< non-empty when the device or port could not be queried
};

/// Lists every port of every RDMA device through `api` (opens and closes each
/// device). An empty vector means no RDMA device at all. Never throws; a
/// device that cannot be opened or queried is reported with `error` set.
std::vector<PortProbe> probe_ports(const verbs::VerbsApi &api);

/// True for an ACTIVE port with an Ethernet link layer (RoCE).
inline bool usable(const PortProbe &p) { return p.error.empty() && p.ethernet && p.active; }

/// One line explaining why none of `ports` is usable, for verbose logs:
/// "no RDMA devices found (no RoCE NIC, or the rdma-core provider/kernel module is
/// not loaded)" or "2 RDMA ports but none is an active RoCE port: mlx5_0:1 (InfiniBand),
/// rxe0:1 (Ethernet, DOWN)". Empty when at least one port is usable.
std::string explain_unusable(const std::vector<PortProbe> &ports);

} // namespace roce::topo
