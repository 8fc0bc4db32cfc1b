// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::topo {

/// Readers of iproute2's JSON output, the netdev half of a capture:
///   ip -j -d link show  -> parse_ip_link_json: names, ifindex, kind
///       (linkinfo.info_kind), MTU, operstate, carrier (LOWER_UP), MAC,
///       master, VLAN parent ("link") and id, bond mode/active slave/
///       ad_info.num_ports/xmit_hash_policy/miimon; bond slaves are the
///       netdevs whose master is the bond, in ifindex order.
///   ip -j addr show     -> parse_ip_addr_json: addresses with prefix length.
/// Errors name the input ("ip-link.json") and what was wrong, with strings
/// from the input escaped (util::printable); a link entry without "ifname"
/// or "ifindex" fails the parse. Unknown fields are ignored; a field of the
/// wrong type reads as absent. Pure functions, thread-safe.

/// `what` names the input in messages (e.g. the file path).
util::Result<std::vector<NetdevInfo>> parse_ip_link_json(std::string_view text,
                                                         const std::string &what);

/// Addresses per netdev name (interface order of the input kept per name).
using AddressMap = std::map<std::string, std::vector<AddressInfo>>;
util::Result<AddressMap> parse_ip_addr_json(std::string_view text, const std::string &what);

/// Sets each netdev's addresses from `addresses` (netdevs absent from the
/// map keep none).
void attach_addresses(std::vector<NetdevInfo> &netdevs, const AddressMap &addresses);

} // namespace roce::topo
