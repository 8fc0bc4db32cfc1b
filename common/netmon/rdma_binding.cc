// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/rdma_binding.h"

#include <algorithm>
#include <tuple>

namespace roce::netmon {

std::vector<RdmaBinding> bindings_from_snapshot(const topo::Snapshot &s) {
    std::vector<RdmaBinding> out;
    for (const auto &dev : s.devices) {
        for (const auto &port : dev.ports) {
            for (const auto &gid : port.gids) {
                if (gid.netdev.empty() && gid.netdev_ifindex == 0) {
                    continue;
                }
                std::string name = gid.netdev;
                if (name.empty()) {
                    for (const auto &n : s.netdevs) {
                        if (n.ifindex == gid.netdev_ifindex) {
                            name = n.name;
                        }
                    }
                }
                out.push_back({dev.name, port.port, name, gid.netdev_ifindex});
            }
        }
    }
    auto key = [](const RdmaBinding &b) {
        return std::tie(b.device, b.port, b.netdev, b.netdev_ifindex);
    };
    std::sort(out.begin(), out.end(),
              [&key](const RdmaBinding &a, const RdmaBinding &b) { return key(a) < key(b); });
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

} // namespace roce::netmon
