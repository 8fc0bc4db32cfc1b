// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "proto/locality.h"

#include <hwloc.h>

#include <algorithm>
#include <fstream>

#include "util/strings.h"

namespace roce::btl {

std::vector<std::string> nearest_devices(const std::vector<DeviceLocality> &devices,
                                         const std::set<int> &process_nodes,
                                         std::string *why) {
    std::vector<std::string> near, all;
    uint32_t near_best = 0;
    bool near_known = true; // every near device's bandwidth is known
    for (const auto &d : devices) {
        all.push_back(d.device);
        if (d.numa_node >= 0 && process_nodes.count(d.numa_node) != 0) {
            near.push_back(d.device);
            near_best = std::max(near_best, d.mbps);
            near_known = near_known && d.mbps > 0;
        }
    }
    if (!near.empty() && near.size() < all.size()) {
        // Far rails that are faster than every near one stay: distance only
        // decides between equals.
        std::vector<std::string> keep, faster;
        for (const auto &d : devices) {
            bool is_near = std::find(near.begin(), near.end(), d.device) != near.end();
            if (!is_near && near_known && d.mbps > near_best) {
                faster.push_back(util::format("%s (NUMA node %d, %u Mb/s)", d.device.c_str(),
                                              d.numa_node, d.mbps));
            }
            if (is_near || (near_known && d.mbps > near_best)) {
                keep.push_back(d.device);
            }
        }
        if (why != nullptr) {
            size_t dropped = all.size() - near.size() - faster.size();
            *why = util::format("using %s: on the NUMA node(s) this process is bound to",
                                util::join(near, ", ").c_str());
            if (dropped > 0) {
                *why += util::format("; not using the other %zu device(s)", dropped);
            }
            if (!faster.empty()) {
                *why += util::format("; also using %s: faster than the local rails (%u Mb/s)",
                                     util::join(faster, ", ").c_str(), near_best);
            }
        }
        return keep;
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

std::set<int> process_numa_nodes(hwloc_topology_t topo) {
    std::set<int> nodes;
    if (topo == nullptr || hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) <= 1) {
        return nodes;
    }
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    hwloc_bitmap_t numa = hwloc_bitmap_alloc();
    if (cpus != nullptr && numa != nullptr &&
        hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) == 0) {
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
    return nodes;
}

} // namespace roce::btl
