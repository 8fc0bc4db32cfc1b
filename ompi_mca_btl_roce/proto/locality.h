// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <hwloc.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace roce::btl {

/// Where one RDMA device sits, for choosing the device nearest to a process.
struct DeviceLocality {
    std::string device;
    int numa_node = -1; ///< -1: unknown (virtual devices such as rxe, or no NUMA)
    uint32_t mbps = 0;  ///< the rail's bandwidth (select::rail_bandwidth), 0 unknown
};

/// Which devices to use, given the NUMA nodes the process is bound to:
///  - devices on a NUMA node the process runs on come first: when rails are
///    equal, only they are used when there is at least one; a farther
///    device is kept only when its bandwidth is known and above that of
///    every near one (a faster rail is worth the distance);
///  - otherwise (process not bound, bound across every node, or no device
///    local to it) every device is used, since none is nearer;
///  - devices whose node is unknown count as neither near nor far.
/// Ties are all kept: the BML spreads traffic over them by bandwidth. The
/// result keeps the input order. `why` (optional) gets one line saying why.
std::vector<std::string> nearest_devices(const std::vector<DeviceLocality> &devices,
                                         const std::set<int> &process_nodes,
                                         std::string *why = nullptr);

/// The NUMA node of an RDMA device from sysfs (ROOT/sys/class/infiniband/DEV/
/// device/numa_node), -1 when unknown.
int read_device_numa_node(const std::string &device, const std::string &root = "/");

/// The NUMA nodes covering this process's CPU binding in `topology`, an
/// already loaded hwloc topology (the btl passes Open MPI's own,
/// opal_hwloc_topology: no second topology is loaded per rank); empty when
/// unknown, when `topology` is null, or when the machine has a single node.
/// Does not modify `topology`.
std::set<int> process_numa_nodes(hwloc_topology_t topology);

} // namespace roce::btl
