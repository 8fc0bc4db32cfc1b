// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topo/fs.h"
#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::topo {

/// Readers of the kernel's sysfs (and procfs) view below a configurable
/// root: "/" for this machine, a capture directory or a test fixture
/// otherwise (which holds the same tree under ROOT/sys/... ). The root is an
/// fs::Tree: Links::kFollow for the kernel's own tree (sysfs is made of
/// links), Links::kRefuse for a tree a user handed us (a capture, a
/// fixture), where a link anywhere below the root is an error. Files are
/// read under fs.h's rules (regular files only, 4 MiB cap).
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
/// with kNotFound/kInvalidArgument naming the file; so does a slot or port
/// number the kernel cannot have (kMaxGidSlots, kMaxPkeySlots, kMaxPort).
/// File contents quoted in messages are escaped (util::printable). A
/// populated GID whose type cannot be read is skipped with a line in
/// `warnings`: unreadable attributes are tolerated where the kernel answers
/// with an errno (EINVAL, ENOENT), but a file the reading rules refuse (a
/// link, a FIFO, a file over the cap) fails the read wherever it is. Never
/// throws except std::bad_alloc; thread-safe.
///
/// Kernel limits on the numbered entries (sysfs creates gids/N, pkeys/N for
/// N < the table length, ports/N for each port):
///  - pkey tables: struct ib_port_attr::pkey_tbl_len and
///    ib_uverbs_query_port_resp.pkey_tbl_len are u16 (include/rdma/
///    ib_verbs.h, include/uapi/rdma/ib_user_verbs.h): at most 65535 slots.
///  - GID tables: the core's gid_tbl_len is an int, but every device
///    reports a 16-bit count: mlx5 RoCE copies the firmware's 16-bit
///    roce_address_table_size (include/linux/mlx5/mlx5_ifc.h), rxe has 1024
///    (RXE_PORT_GID_TBL_LEN, drivers/infiniband/sw/rxe/rxe_param.h); so at
///    most 65535 slots here too. (Only slots 0..255 can be put in a QP:
///    sgid_index is __u8 in struct ib_uverbs_global_route.)
///  - ports: 8 bits in the uAPI (ib_uverbs_query_port.port_num,
///    ibv_device_attr.phys_port_cnt): at most 255.
inline constexpr int kMaxGidSlots = 65535;
inline constexpr int kMaxPkeySlots = 65535;
inline constexpr int kMaxPort = 255;

/// The RDMA devices under ROOT/sys/class/infiniband, sorted by name. No such
/// directory means no RDMA devices (an empty vector, not an error).
util::Result<std::vector<DeviceInfo>> read_rdma_sysfs(const fs::Tree &root,
                                                      std::vector<std::string> *warnings);

/// The netdevs under ROOT/sys/class/net, sorted by ifindex, without
/// addresses (sysfs has none: see ip_json.h and readers.h).
util::Result<std::vector<NetdevInfo>> read_netdevs_sysfs(const fs::Tree &root,
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
