// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

namespace roce::select {

/// Bytes of RoCE headers the kernel subtracts from a netdev MTU before
/// choosing the IB MTU (include/rdma/ib_addr.h iboe_get_mtu): GRH 40 +
/// UDP 8 + BTH 12 + XRC extension 4 + AtomicETH 28 + ICRC 4.
inline constexpr int kRoceHeaderBytes = 96;

/// The largest IB MTU (256..4096 bytes) that fits a netdev MTU once the RoCE
/// headers are taken off, as the kernel computes a RoCE port's active MTU:
/// 1500 -> 1024, 4200 -> 4096, 9000 -> 4096. 0 when not even 256 fits.
int iboe_mtu_bytes(int netdev_mtu) noexcept;

/// The largest path MTU in bytes that a port of active MTU `active_mtu`
/// and its netdev of MTU `netdev_mtu` both carry now: the smaller of the
/// active MTU and iboe_mtu_bytes(netdev_mtu), or the one that is known
/// (0 = unknown for either input); 0 when neither is known.
int carried_mtu_bytes(int active_mtu, int netdev_mtu) noexcept;

/// 256/512/1024/2048/4096 -> IBV_MTU_256..IBV_MTU_4096; any other value
/// rounds down to the next valid MTU (IBV_MTU_256 below 512; 0 -> IBV_MTU_256).
ibv_mtu mtu_enum(int bytes) noexcept;

/// IBV_MTU_1024 -> 1024; 0 for values outside the enum.
int mtu_bytes(ibv_mtu mtu) noexcept;

/// True for IBV_MTU_256..IBV_MTU_4096.
bool mtu_valid(int mtu_enum) noexcept;

/// "IBV_MTU_1024" ("invalid" outside the enum).
const char *mtu_name(ibv_mtu mtu) noexcept;

} // namespace roce::select
