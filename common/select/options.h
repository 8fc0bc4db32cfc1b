// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/net.h"
#include "util/status.h"

namespace roce::select {

/// The qkey used when none is configured. Bit 31 is clear: a "controlled"
/// qkey (bit 31 set) is refused with EPERM for unprivileged processes since
/// Linux 6.4 - the intermittent failure this project exists to end.
inline constexpr uint32_t kDefaultQkey = 0x1ee7a330;
inline constexpr uint32_t kControlledQkeyBit = 0x80000000u;

/// Largest GID index accepted before the table is known (gid_tbl_len is a
/// 16-bit quantity on every device we know).
inline constexpr int kMaxGidIndex = 65535;

/// Which RoCE version to use. kAuto prefers v2 and falls back to v1.
enum class RoceVersion { kAuto = 0, kV1 = 1, kV2 = 2 };
/// Which GID address family to use. kAuto: IPv4-mapped, then global IPv6,
/// then link-local IPv6 as a last resort.
enum class AddressFamily { kAuto = 0, kIPv4 = 4, kIPv6 = 6 };

const char *to_string(RoceVersion v) noexcept;
const char *to_string(AddressFamily f) noexcept;

/// One entry of an include or exclude list, as the user wrote it:
///  - "mlx5_bond_0"     an RDMA device or a netdev of that name (kName)
///  - "mlx5_bond_0:1"   one port of an RDMA device (kDevicePort)
///  - "198.18.0.0/24"   GIDs whose address lies in that subnet (kSubnet)
struct InterfaceRule {
    enum class Kind { kName, kDevicePort, kSubnet };
    Kind kind = Kind::kName;
    std::string name;    ///< device or netdev name (kName, kDevicePort)
    int port = 0;        ///< 1-based port (kDevicePort)
    util::Subnet subnet; ///< kSubnet
    std::string text;    ///< the entry as written, for messages
};

/// Parses a comma-separated list of rules. The error names `param`, the
/// offending entry and the accepted forms.
util::Result<std::vector<InterfaceRule>> parse_rules(std::string_view param,
                                                     std::string_view text);

/// Unvalidated user settings, as they arrive from MCA parameters or a
/// command line. `prefix` is prepended to parameter names in messages
/// ("btl_roce_" gives "btl_roce_gid_index").
struct RawOptions {
    std::string prefix;
    std::string if_include;
    std::string if_exclude;
    int64_t gid_index = -1;
    int64_t roce_version = 0;   ///< 0 auto, 1, 2
    int64_t address_family = 0; ///< 0 auto, 4, 6
    int64_t qkey = kDefaultQkey;
};

/// Validated settings for the selection policy: a plain snapshot, passed in
/// at init (never read from the environment by the policy itself).
struct Options {
    std::vector<InterfaceRule> include; ///< empty: every device/netdev/subnet
    std::vector<InterfaceRule> exclude;
    int gid_index = -1;                 ///< -1: automatic
    RoceVersion roce_version = RoceVersion::kAuto;
    AddressFamily address_family = AddressFamily::kAuto;
    uint32_t qkey = kDefaultQkey;
    /// Parameter-name prefix for messages ("btl_roce_"), from RawOptions.
    std::string prefix = "btl_roce_";
};

/// Validates every field and returns the first problem, naming the parameter,
/// the value and what is allowed. `privileged` says whether the process may
/// use a controlled qkey (bit 31 set): root or CAP_NET_RAW.
util::Result<Options> parse_options(const RawOptions &raw, bool privileged);

} // namespace roce::select
