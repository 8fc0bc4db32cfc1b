// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/port_probe.h"

#include <cerrno>
#include <cstring>

#include "util/strings.h"
#include "verbs/handles.h"

namespace roce::topo {

namespace {

void probe_device(const verbs::VerbsApi &api, ibv_device *dev, std::vector<PortProbe> &out) {
    const char *name = api.get_device_name(dev);
    std::string dev_name = name ? name : "?";
    verbs::Context ctx(api.open_device(dev), verbs::ContextDeleter{&api});
    if (!ctx) {
        int err = errno;
        out.push_back({dev_name, 0, false, false,
                       util::format("ibv_open_device failed: %s (%d)", std::strerror(err), err)});
        return;
    }
    ibv_device_attr dattr{};
    int rc = verbs::normalize_rc(api.query_device(ctx.get(), &dattr), errno);
    if (rc != 0) {
        out.push_back({dev_name, 0, false, false,
                       util::format("ibv_query_device failed: %s (%d)", std::strerror(rc), rc)});
        return;
    }
    for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
        PortProbe probe{dev_name, p, false, false, {}};
        ibv_port_attr pattr{};
        rc = verbs::normalize_rc(api.query_port(ctx.get(), static_cast<uint8_t>(p), &pattr), errno);
        if (rc != 0) {
            probe.error = util::format("ibv_query_port failed: %s (%d)", std::strerror(rc), rc);
        } else {
            probe.ethernet = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
            probe.active = pattr.state == IBV_PORT_ACTIVE;
        }
        out.push_back(std::move(probe));
    }
}

} // namespace

std::vector<PortProbe> probe_ports(const verbs::VerbsApi &api) {
    std::vector<PortProbe> out;
    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    if (!list) {
        return out;
    }
    for (int i = 0; i < n; ++i) {
        probe_device(api, list[i], out);
    }
    return out;
}

std::string explain_unusable(const std::vector<PortProbe> &ports) {
    if (ports.empty()) {
        return "no RDMA devices found (no RoCE NIC here, or its rdma-core provider or kernel "
               "driver is not loaded; `ibv_devices` lists what rdma-core sees)";
    }
    std::vector<std::string> why;
    for (const auto &p : ports) {
        if (usable(p)) {
            return {};
        }
        std::string where = p.port ? util::format("%s:%d", p.device.c_str(), p.port) : p.device;
        if (!p.error.empty()) {
            why.push_back(where + " (" + p.error + ")");
        } else if (!p.ethernet) {
            why.push_back(where + " (InfiniBand link layer, not RoCE)");
        } else {
            why.push_back(where + " (Ethernet, port not ACTIVE)");
        }
    }
    return util::format("%zu RDMA port(s) but none is an active RoCE port: %s", ports.size(),
                        util::join(why, ", ").c_str());
}

} // namespace roce::topo
