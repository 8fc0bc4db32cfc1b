// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "select/rules.h"
#include "select/selection.h"

namespace roce::select {

/// Internals of the policy (selection.h), exposed for the policy's own files
/// and tests. Pure.

/// A GID that passed every filter, with what ranking needs.
struct RankedGid {
    const topo::GidEntry *gid = nullptr;
    int prefix = -1;                      ///< local prefix length; -1 unknown
    const topo::NetdevInfo *netdev = nullptr;
    /// {netdev not up, link-local, RoCE v1, IPv6, not the port's own netdev,
    /// subnet, index}: lower is better. `subnet` (only with a peer) is the
    /// local address's network number: among GIDs that all reach the peer,
    /// both ends pick the same subnet - which the slot index, local to each
    /// host, cannot promise. Link-local means fe80::/10 only: unique-local
    /// IPv6 (fc00::/7) is routable and ranks with global IPv6.
    std::array<int64_t, 7> key{};
    /// netdev_role(): "the port's own netdev", "a VXLAN overlay: ...";
    /// set only where the explanation needs it (rank_gids): for a candidate
    /// that lost to the best on this rule, and then for the best.
    std::string role;
    std::string reached;                  ///< "198.19.0.12 (in 198.19.0.0/24)" with a peer
};

struct GidRanking {
    std::vector<RankedGid> candidates;    ///< usable (and reaching the peer), best first
    std::vector<RankedGid> unreachable;   ///< usable, but reaching no peer address
    std::vector<GidVerdict> verdicts;     ///< every populated slot, ascending index
};

/// Filters (type, version, family, include/exclude, peer) and ranks the
/// populated GIDs of `port`.
GidRanking rank_gids(const topo::Snapshot &snapshot, const topo::DeviceInfo &device,
                     const topo::PortInfo &port, const Options &options, const RuleSet &rules,
                     const Peer *peer);

/// The automatic choice: the best candidate, with its reasons appended to
/// c.why; nullptr (and c.error set) when there is none.
const topo::GidEntry *pick_best_gid(const topo::PortInfo &port, const GidRanking &ranking,
                                    const Options &options, const Peer *peer, PortChoice &c);

/// options.gid_index validated against the table; nullptr (and c.error
/// set) when it is out of range, empty, not RoCE, of the wrong version or
/// family, or on a netdev that is not allowed.
const topo::GidEntry *check_gid_override(const topo::Snapshot &snapshot,
                                         const topo::PortInfo &port, const Options &options,
                                         const RuleSet &rules, const Peer *peer,
                                         const GidRanking &ranking, PortChoice &c);

/// The first of `peer`'s addresses (in its order) that the local GID `g`
/// reaches: same family, both link-local or neither, the same GID type and
/// VLAN when the peer said, and our subnet (`prefix`, -1 unknown) or the
/// peer's advertised one containing the other; both link-local counts as the
/// same link. Its index in peer.addresses, or -1. `why` (optional) receives
/// "(in 198.18.0.0/24)" or the like.
int reaching_address(const topo::GidEntry &g, int prefix, const topo::NetdevInfo *nd,
                     const Peer &peer, std::string *why);

/// "gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0, 198.18.0.11/24)"; the prefix
/// part is left out when unknown (prefix < 0).
std::string describe_gid(const topo::GidEntry &g, int prefix);

/// The prefix length of the GID's address on its netdev; -1 when the netdev
/// or the address is not in the snapshot.
int local_prefix(const topo::Snapshot &snapshot, const topo::GidEntry &g);

} // namespace roce::select
