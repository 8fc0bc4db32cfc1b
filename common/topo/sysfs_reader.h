// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::topo {

/// Readers of the kernel's sysfs (and procfs) view below a configurable
/// root: "/" for this machine, a capture directory or a test fixture
/// otherwise (which holds the same tree under ROOT/sys/... ).
///
/// What they read:
///   ROOT/sys/class/infiniband/<dev>/ports/<p>/{state,link_layer,gids/N,
///        gid_attrs/types/N,gid_attrs/ndevs/N,pkeys/N}
///   ROOT/sys/class/net/<netdev>/{ifindex,mtu,operstate,carrier,address,
///        uevent,master,lower_*,bonding/*}
///   ROOT/proc/net/vlan/config (VLAN ids; optional)
///
/// Kernel facts they rely on: every slot of the GID table has a gids/N file
/// and empty slots read as all zeros; reading gid_attrs/types/N or ndevs/N of
/// an empty slot fails with EINVAL (so it is only read for populated slots);
/// a down netdev's carrier fails with EINVAL too. sysfs does not expose a
/// port's active MTU: PortInfo::active_mtu stays 0 (unknown) here.
///
/// Errors: a missing root, or a file whose content is malformed (a GID that
/// is not 8 groups of 4 hex digits, a pkey that is not 0xNNNN), fails the read
/// with kNotFound/kInvalidArgument naming the file. A populated GID whose type
/// cannot be read is skipped with a line in `warnings`. Never throws except
/// std::bad_alloc; thread-safe.

/// The RDMA devices under ROOT/sys/class/infiniband, sorted by name. No such
/// directory means no RDMA devices (an empty vector, not an error).
util::Result<std::vector<DeviceInfo>> read_rdma_sysfs(const std::string &root,
                                                      std::vector<std::string> *warnings);

/// The netdevs under ROOT/sys/class/net, sorted by ifindex, without
/// addresses (sysfs has none: see ip_json.h and readers.h).
util::Result<std::vector<NetdevInfo>> read_netdevs_sysfs(const std::string &root,
                                                         std::vector<std::string> *warnings);

/// Parses the sysfs GID text "fe80:0000:0000:0000:ba59:9fff:fe10:002a".
std::optional<std::array<uint8_t, 16>> parse_sysfs_gid(std::string_view text);
/// The sysfs GID text of `gid` (the inverse of parse_sysfs_gid).
std::string format_sysfs_gid(const std::array<uint8_t, 16> &gid);

/// Parses the content of gid_attrs/types/N: "RoCE v2" -> kRoceV2; "IB/RoCE
/// v1" -> kRoceV1 on an Ethernet port and kIB on an InfiniBand one.
std::optional<GidType> parse_sysfs_gid_type(std::string_view text, LinkLayer link_layer);

/// "4: ACTIVE" -> kActive (the number decides; unknown numbers -> kUnknown).
PortState parse_sysfs_port_state(std::string_view text);

/// Parses /proc/net/vlan/config lines "bond0.3027 | 3027 | bond0" into
/// (name, id) pairs; header lines and malformed lines are skipped.
std::vector<std::pair<std::string, int>> parse_proc_vlan_config(std::string_view text);

} // namespace roce::topo
