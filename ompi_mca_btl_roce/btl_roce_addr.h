// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qp/queue_pair.h"
#include "select/options.h"
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

/// How to reach one peer port: our GID slot, the peer's GID, the MTU.
struct PathChoice {
    int sgid_index = 0;
    wire::Gid sgid{};
    wire::Gid dgid{};
    uint8_t gid_type = 2;
    int path_mtu = 0;       ///< min of both sides, ibv_mtu enum
    std::string why;
    select::Selection selection; ///< the policy's choice for this peer (RC QPs)
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

/// Runs the selection policy for `peer`'s advertised GIDs and picks the
/// peer GID to address. kUnavailable naming both sides' subnets when no
/// local GID reaches the peer.
util::Result<PathChoice> choose_path(const PortPlan &plan, const wire::PortAdvert &peer);

/// Whether `peer` is on the link of `choice`'s local GID (by the prefix of
/// that address in `plan`'s snapshot).
bool on_link(const PortPlan &plan, const PathChoice &choice, const wire::Gid &peer);

/// The modex advertisement of a port.
wire::PortAdvert advertise(const PortPlan &plan, uint32_t ud_qpn);

} // namespace roce::btl
