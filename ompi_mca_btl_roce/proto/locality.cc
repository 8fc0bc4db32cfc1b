// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "proto/locality.h"

#include <hwloc.h>

#include <fstream>

#include "util/strings.h"

namespace roce::btl {

std::vector<std::string> nearest_devices(const std::vector<DeviceLocality> &devices,
                                         const std::set<int> &process_nodes,
                                         std::string *why) {
    std::vector<std::string> near, all;
    for (const auto &d : devices) {
        all.push_back(d.device);
        if (d.numa_node >= 0 && process_nodes.count(d.numa_node) != 0) {
            near.push_back(d.device);
        }
    }
    if (!near.empty() && near.size() < all.size()) {
        if (why != nullptr) {
            *why = util::format("using %s: on the NUMA node(s) this process is bound to; not "
                                "using the other %zu device(s)",
                                util::join(near, ", ").c_str(), all.size() - near.size());
        }
        return near;
    }
    if (why != nullptr) {
        *why = all.size() <= 1 ? "one RDMA device" :
               near.empty()    ? "no device is local to this process's binding: using all"
                               : "every device is local to this process's binding";
    }
    return all;
}

int read_device_numa_node(const std::string &device, const std::string &root) {
    std::string base = root == "/" ? "" : root;
    std::ifstream f(base + "/sys/class/infiniband/" + device + "/device/numa_node");
    int node = -1;
    if (!(f >> node)) {
        return -1;
    }
    return node;
}

std::set<int> process_numa_nodes() {
    std::set<int> nodes;
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) {
        return nodes;
    }
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    hwloc_bitmap_t numa = hwloc_bitmap_alloc();
    if (hwloc_topology_load(topo) == 0 && cpus != nullptr && numa != nullptr &&
        hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) == 0 &&
        hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) > 1) {
        hwloc_cpuset_to_nodeset(topo, cpus, numa);
        for (int i = hwloc_bitmap_first(numa); i >= 0; i = hwloc_bitmap_next(numa, i)) {
            nodes.insert(i);
        }
    }
    if (numa != nullptr) {
        hwloc_bitmap_free(numa);
    }
    if (cpus != nullptr) {
        hwloc_bitmap_free(cpus);
    }
    hwloc_topology_destroy(topo);
    return nodes;
}

} // namespace roce::btl
