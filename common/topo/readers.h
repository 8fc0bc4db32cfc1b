// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "topo/ip_json.h"
#include "topo/snapshot.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::topo {

/// The three ways to obtain a Snapshot. All of them return the same shape;
/// GID netdev names and ifindexes are cross-resolved against the netdev view
/// (link_gid_netdevs), and Snapshot::source says where it came from.

/// The netdev half of a snapshot. Swappable: today sysfs + getifaddrs
/// (live_netdev_reader), later the netlink monitor's view, in tests a
/// fixture. Must return netdevs sorted by ifindex, with addresses.
using NetdevReader = std::function<util::Result<std::vector<NetdevInfo>>()>;

/// This machine's netdevs: structure from ROOT/sys/class/net (sysfs_reader.h)
/// and addresses from getifaddrs(3). `root` other than "/" only makes sense
/// in a private mount namespace; addresses always come from this process's
/// network namespace.
NetdevReader live_netdev_reader(std::string root = "/");

/// Addresses of this network namespace (getifaddrs), per netdev name.
util::Result<AddressMap> read_addresses_getifaddrs();

/// Live: RDMA devices through `api` (live_reader.h) + `netdevs`.
/// source = "live".
util::Result<Snapshot> read_live(const verbs::VerbsApi &api, const NetdevReader &netdevs);

/// sysfs below `root` (the kernel's tree: "/", or another root in a private
/// mount namespace; links are followed as sysfs needs, fs::Links::kFollow):
/// RDMA devices from ROOT/sys/class/infiniband + `netdevs`. source =
/// "sysfs:ROOT".
util::Result<Snapshot> read_sysfs(const std::string &root, const NetdevReader &netdevs);

/// A capture directory as `roce-doctor --capture DIR` writes it:
///   DIR/sys/class/infiniband/...  (the RDMA sysfs subtree)
///   DIR/ip-link.json              (`ip -j -d link show`: netdev structure)
///   DIR/ip-addr.json              (`ip -j addr show`: addresses)
/// DIR/sys/class/net/... is in captures too but not needed here. A capture
/// is someone else's data, read under fs::Links::kRefuse: regular files and
/// directories only, nothing below DIR followed if it is a link, FIFOs and
/// devices refused, each file at most 4 MiB (fs.h). Every string it puts in
/// the snapshot (names, kinds, MACs, source) is made printable
/// (util::printable), so reports and messages built from it carry no control
/// bytes. Errors: kNotFound when DIR (or "") or one of the two JSON files
/// is missing (naming it), kInvalidArgument when a file is malformed, a link,
/// not a regular file or numbers a slot the kernel cannot have (sysfs_reader.h),
/// kResourceExhausted for a file over the cap. source = "capture:DIR".
util::Result<Snapshot> read_capture(const std::string &dir);

/// Fills in, for every GID, the netdev name from its ifindex or the ifindex
/// from its name, whichever is missing, using snapshot.netdevs.
void link_gid_netdevs(Snapshot &snapshot);

} // namespace roce::topo
