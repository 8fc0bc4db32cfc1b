// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "topo/snapshot.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::topo {

/// Reads every RDMA device through `api` (rdma-core, or a fake in tests):
///  - ibv_query_device: phys_port_cnt;
///  - mlx5dv_query_device(MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) on mlx5 devices:
///    num_lag_ports (0 elsewhere);
///  - ibv_query_port per port: state, link layer, active MTU, table sizes;
///  - ibv_query_gid_table (one call for the device), falling back to
///    ibv_query_gid_ex per slot when the kernel lacks it: GID, type and the
///    netdev ifindex of each populated slot (GidEntry::netdev stays "" here;
///    readers.h resolves names against the netdev view);
///  - ibv_query_pkey per slot.
/// Each device is opened and closed again (RAII). A device that cannot be
/// opened or queried is left out with a line in `warnings` naming the verb
/// and errno, so one broken device does not hide the others. No device at all
/// is an empty vector, not an error. Thread-safe if `api` is.
util::Result<std::vector<DeviceInfo>> read_rdma_verbs(const verbs::VerbsApi &api,
                                                      std::vector<std::string> *warnings);

/// One RDMA device by name, read as read_rdma_verbs reads each device (one
/// ibv_get_device_list, then only this device opened and queried). Errors:
/// kNotFound when no device has that name (it was removed, or a LAG
/// re-registered it under another name); the errno of the failing verb
/// otherwise. Thread-safe if `api` is.
util::Result<DeviceInfo> read_rdma_device(const verbs::VerbsApi &api, const std::string &name,
                                          std::vector<std::string> *warnings);

/// IB MTU enum value (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5) -> bytes; 0 for
/// anything else.
int mtu_enum_to_bytes(int mtu_enum) noexcept;

} // namespace roce::topo
