// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qp/queue_pair.h"
#include "select/options.h"
#include "select/path.h"
#include "select/selection.h"
#include "topo/snapshot.h"
#include "util/status.h"
#include "proto/wire.h"

namespace roce::btl {

/// One local GID the port may use, with what a peer needs to judge it.
struct LocalGid {
    int index = 0;
    wire::Gid gid{};
    uint8_t type = 0;       ///< 0 IB, 1 RoCE v1, 2 RoCE v2
    uint8_t prefix_len = 0;
    std::string netdev;
};

/// The addressing of one port, decided by the selection policy before the
/// module exists: device and port, pkey slot, qkey, path MTU, the GIDs the
/// policy allows (best first, advertised to peers) and why. It keeps the
/// snapshot and options so each peer is later chosen by the same policy.
struct PortPlan {
    std::string device;
    int port = 1;
    int pkey_index = 0;
    uint16_t pkey = 0xffff;
    uint32_t qkey = 0;
    int path_mtu = 0;       ///< ibv_mtu enum
    int lag_members = 1;
    std::vector<LocalGid> gids;
    std::string explanation;
    select::Selection selection; ///< the port's choice without a peer (UD QP)

    std::shared_ptr<const topo::Snapshot> snapshot;
    select::Options options;
    bool privileged = false;
};

/// How to reach one peer port; every path of an endpoint uses it.
struct PathChoice {
    /// Our side as select::select_path chose it: device, port, GID
    /// slot/value/type/netdev, pkey, qkey, and the path MTU (the lower of
    /// both sides'). The endpoint's one Selection: when preflight follows
    /// our GID to another slot, gid_index is updated here and nowhere else.
    select::Selection selection;
    wire::Gid dgid{};           ///< the peer GID addressed
    int remote_prefix_len = -1; ///< as the peer advertised it; -1 not advertised
    std::string why;            ///< one line: our GID -> the peer's, the MTU

    int sgid_index() const { return selection.gid_index; }
    const wire::Gid &sgid() const { return selection.gid; }
    uint8_t gid_type() const { return static_cast<uint8_t>(selection.gid_type); }
    int path_mtu() const { return static_cast<int>(selection.path_mtu); } ///< ibv_mtu enum
};

/// The Linux bond a GID's netdev sits on (directly, or as a VLAN on it).
struct BondView {
    std::string bond;         ///< "" when not on a bond
    unsigned members = 1;     ///< members the bond spreads over (1 for active-backup)
    std::string hash_policy;  ///< xmit_hash_policy, "" when unknown
    topo::BondMode mode = topo::BondMode::kUnknown;
};
BondView bond_view(const topo::Snapshot &snapshot, const std::string &netdev);

/// Plans every usable RoCE port of `snapshot` under `options`. Ports that
/// cannot be used are listed in `skipped` with the policy's reason.
std::vector<PortPlan> plan_ports(std::shared_ptr<const topo::Snapshot> snapshot,
                                 const select::Options &options, bool privileged,
                                 std::vector<std::string> *skipped);

/// `peer` as select::select_path takes it: its GIDs in its order with
/// their types and advertised prefixes (0 on the wire, "not advertised",
/// becomes -1: only our own prefix then judges reachability), and its path
/// MTU.
select::PeerPort peer_port_of(const wire::PortAdvert &peer);

/// select::select_path for `peer` from `plan`'s port as `snapshot` shows it,
/// under the plan's options: our Selection, the peer GID and the MTU, with
/// one `why` line. kUnavailable with the policy's reason (it names both
/// sides' addresses) when no local GID reaches the peer, or when the port
/// is gone from `snapshot`.
util::Result<PathChoice> choose_path(const PortPlan &plan, const topo::Snapshot &snapshot,
                                     const wire::PortAdvert &peer);

/// Whether the peer address `peer` (with the prefix it advertised, -1 when
/// none) is on the link of `choice`'s local GID in `snapshot`
/// (select::on_link).
bool on_link(const topo::Snapshot &snapshot, const PathChoice &choice, const wire::Gid &peer,
             int peer_prefix_len);

/// The modex advertisement of a port.
wire::PortAdvert advertise(const PortPlan &plan, uint32_t ud_qpn);

} // namespace roce::btl
