// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/live_reader.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/strings.h"
#include "verbs/handles.h"

namespace roce::topo {

using util::Result;
using util::Status;

namespace {

std::string errno_text(int err) {
    return util::format("%s (%d)", std::strerror(err), err);
}

PortState port_state_of(ibv_port_state s) {
    switch (s) {
    case IBV_PORT_DOWN: return PortState::kDown;
    case IBV_PORT_INIT: return PortState::kInit;
    case IBV_PORT_ARMED: return PortState::kArmed;
    case IBV_PORT_ACTIVE: return PortState::kActive;
    case IBV_PORT_ACTIVE_DEFER: return PortState::kActiveDefer;
    default: return PortState::kUnknown;
    }
}

GidType gid_type_of(uint32_t t) {
    switch (t) {
    case IBV_GID_TYPE_ROCE_V1: return GidType::kRoceV1;
    case IBV_GID_TYPE_ROCE_V2: return GidType::kRoceV2;
    default: return GidType::kIB;
    }
}

GidEntry entry_of(const ibv_gid_entry &e) {
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::memcpy(g.gid.data(), e.gid.raw, 16);
    g.type = gid_type_of(e.gid_type);
    g.netdev_ifindex = static_cast<int>(e.ndev_ifindex);
    return g;
}

/// Slot-by-slot fallback for kernels without the GID table ioctl.
void read_gids_by_slot(const verbs::VerbsApi &api, ibv_context *ctx, const std::string &dev,
                       PortInfo &port, std::vector<std::string> *warnings) {
    for (int i = 0; i < port.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        int rc = verbs::normalize_rc(
            api.query_gid_ex(ctx, static_cast<uint32_t>(port.port), static_cast<uint32_t>(i), &e, 0),
            errno);
        if (rc == ENODATA) {
            continue; // an empty slot
        }
        if (rc != 0) {
            if (warnings) {
                warnings->push_back(util::format("ibv_query_gid_ex(%s:%d, index %d) failed: %s; "
                                                 "slot skipped",
                                                 dev.c_str(), port.port, i,
                                                 errno_text(rc).c_str()));
            }
            continue;
        }
        port.gids.push_back(entry_of(e));
    }
}

void read_gids(const verbs::VerbsApi &api, ibv_context *ctx, const std::string &dev,
               std::vector<PortInfo> &ports, std::vector<std::string> *warnings) {
    size_t total = 0;
    for (const auto &p : ports) {
        total += static_cast<size_t>(std::max(p.gid_tbl_len, 0));
    }
    std::vector<ibv_gid_entry> entries(std::max<size_t>(total, 1));
    ssize_t n = api.query_gid_table(ctx, entries.data(), entries.size(), 0);
    if (n >= 0) {
        for (ssize_t i = 0; i < n; ++i) {
            const auto &e = entries[static_cast<size_t>(i)];
            for (auto &p : ports) {
                if (static_cast<uint32_t>(p.port) == e.port_num) {
                    p.gids.push_back(entry_of(e));
                }
            }
        }
    } else {
        for (auto &p : ports) {
            read_gids_by_slot(api, ctx, dev, p, warnings);
        }
    }
    for (auto &p : ports) {
        std::sort(p.gids.begin(), p.gids.end(),
                  [](const GidEntry &a, const GidEntry &b) { return a.index < b.index; });
    }
}

void read_pkeys(const verbs::VerbsApi &api, ibv_context *ctx, const std::string &dev,
                PortInfo &port, std::vector<std::string> *warnings) {
    port.pkeys.assign(static_cast<size_t>(std::max(port.pkey_tbl_len, 0)), 0);
    for (int i = 0; i < port.pkey_tbl_len; ++i) {
        __be16 key = 0;
        int rc = verbs::normalize_rc(api.query_pkey(ctx, static_cast<uint8_t>(port.port), i, &key),
                                     errno);
        if (rc != 0) {
            if (warnings) {
                warnings->push_back(util::format("ibv_query_pkey(%s:%d, index %d) failed: %s",
                                                 dev.c_str(), port.port, i,
                                                 errno_text(rc).c_str()));
            }
            continue;
        }
        port.pkeys[static_cast<size_t>(i)] = ntohs(key);
    }
}

int lag_ports(const verbs::VerbsApi &api, ibv_device *device, ibv_context *ctx) {
    if (api.mlx5dv_is_supported == nullptr || !api.mlx5dv_is_supported(device)) {
        return 0;
    }
    mlx5dv_context dv{};
    dv.comp_mask = MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS;
    if (api.mlx5dv_query_device(ctx, &dv) != 0 ||
        !(dv.comp_mask & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS)) {
        return 0;
    }
    return dv.num_lag_ports;
}

Result<DeviceInfo> read_device(const verbs::VerbsApi &api, ibv_device *device,
                               std::vector<std::string> *warnings) {
    DeviceInfo dev;
    const char *name = api.get_device_name(device);
    dev.name = name ? name : "?";
    verbs::Context ctx(api.open_device(device), verbs::ContextDeleter{&api});
    if (!ctx) {
        return Status::from_errno(errno, "ibv_open_device(" + dev.name + ")");
    }
    ibv_device_attr dattr{};
    int rc = verbs::normalize_rc(api.query_device(ctx.get(), &dattr), errno);
    if (rc != 0) {
        return Status::from_errno(rc, "ibv_query_device(" + dev.name + ")");
    }
    dev.phys_port_cnt = dattr.phys_port_cnt;
    dev.num_lag_ports = lag_ports(api, device, ctx.get());
    for (int p = 1; p <= dev.phys_port_cnt; ++p) {
        ibv_port_attr pattr{};
        rc = verbs::normalize_rc(api.query_port(ctx.get(), static_cast<uint8_t>(p), &pattr), errno);
        if (rc != 0) {
            return Status::from_errno(rc, util::format("ibv_query_port(%s, %d)", dev.name.c_str(), p));
        }
        PortInfo port;
        port.port = p;
        port.state = port_state_of(pattr.state);
        port.link_layer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet
                          : pattr.link_layer == IBV_LINK_LAYER_INFINIBAND
                              ? LinkLayer::kInfiniBand
                              : LinkLayer::kUnknown;
        port.active_mtu = mtu_enum_to_bytes(pattr.active_mtu);
        port.gid_tbl_len = pattr.gid_tbl_len;
        port.pkey_tbl_len = pattr.pkey_tbl_len;
        read_pkeys(api, ctx.get(), dev.name, port, warnings);
        dev.ports.push_back(std::move(port));
    }
    read_gids(api, ctx.get(), dev.name, dev.ports, warnings);
    return dev;
}

} // namespace

int mtu_enum_to_bytes(int mtu_enum) noexcept {
    return mtu_enum >= IBV_MTU_256 && mtu_enum <= IBV_MTU_4096 ? 128 << mtu_enum : 0;
}

Result<std::vector<DeviceInfo>> read_rdma_verbs(const verbs::VerbsApi &api,
                                                std::vector<std::string> *warnings) {
    std::vector<DeviceInfo> out;
    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    if (!list) {
        int err = errno;
        // rdma-core returns NULL with ENOSYS when the kernel has no uverbs
        // support at all: that is "no RDMA devices", not a failure.
        if (err == ENOSYS || err == ENOENT || err == 0) {
            return out;
        }
        return Status::from_errno(err, "ibv_get_device_list");
    }
    for (int i = 0; i < n; ++i) {
        auto dev = read_device(api, list[i], warnings);
        if (!dev) {
            if (warnings) {
                warnings->push_back(dev.status().message() + "; device left out");
            }
            continue;
        }
        out.push_back(std::move(dev.value()));
    }
    std::sort(out.begin(), out.end(),
              [](const DeviceInfo &a, const DeviceInfo &b) { return a.name < b.name; });
    return out;
}

Result<DeviceInfo> read_rdma_device(const verbs::VerbsApi &api, const std::string &name,
                                    std::vector<std::string> *warnings) {
    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    if (!list) {
        int err = errno;
        if (err != ENOSYS && err != ENOENT && err != 0) {
            return Status::from_errno(err, "ibv_get_device_list");
        }
        n = 0; // no uverbs at all: no such device
    }
    for (int i = 0; i < n; ++i) {
        const char *dev = api.get_device_name(list[i]);
        if (dev != nullptr && name == dev) {
            return read_device(api, list[i], warnings);
        }
    }
    return Status(util::Code::kNotFound, "RDMA device " + name + " is not present");
}

} // namespace roce::topo
