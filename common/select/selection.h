// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "select/options.h"
#include "topo/snapshot.h"

namespace roce::select {

/// One address a peer advertised for its RoCE GID.
struct PeerAddress {
    util::IpAddress address;
    int prefix_len = -1;                  ///< -1: unknown (the local prefix decides)
    std::optional<topo::GidType> type;    ///< the peer's GID type when it said
    int vlan_id = -1;                     ///< the peer's VLAN id when known; -1 unknown
};

/// What is known about the peer a QP will talk to.
struct Peer {
    std::string name;                     ///< for messages: "198.19.0.12", "rank 3"
    std::vector<PeerAddress> addresses;
};

/// Everything a QP transition needs from the addressing decision.
struct Selection {
    std::string device;
    int port = 0;                         ///< 1-based, one the device really has
    int gid_index = -1;
    std::array<uint8_t, 16> gid{};
    topo::GidType gid_type = topo::GidType::kRoceV2;
    std::string netdev;                   ///< the GID's netdev ("bond0.3027")
    int pkey_index = 0;
    uint16_t pkey = 0xffff;
    uint32_t qkey = kDefaultQkey;         ///< bit 31 clear unless privileged and configured
    ibv_mtu path_mtu = IBV_MTU_1024;
};

/// How one GID slot fared, for the doctor's table ("=>" marks the choice).
struct GidVerdict {
    int index = 0;
    bool chosen = false;
    int rank = -1;                        ///< 0 best; -1 when not a candidate
    std::string why;                      ///< "" for the chosen one, else why not
};

/// The outcome for one device port (and one peer, when peers are given).
struct PortChoice {
    std::string device;
    int port = 0;
    std::string peer;                     ///< Peer::name, "" without a peer
    std::optional<Selection> selection;   ///< set when something could be chosen
    std::string error;                    ///< why nothing was chosen (empty on success)
    std::vector<std::string> why;         ///< one line per decision, success or not
    std::vector<GidVerdict> gids;         ///< every populated slot, ascending index

    bool ok() const { return selection.has_value(); }
    /// The `why` lines joined with "; ".
    std::string explanation() const;
};

struct SelectionReport {
    std::vector<PortChoice> ports;        ///< device order, then port, then peer
    std::vector<std::string> notes;       ///< about the options (entries naming nothing)
};

/// The addressing policy, a pure function (no I/O, no globals): for one
/// device port of `snapshot`, chooses the GID, pkey index, qkey and path MTU
/// under `options`, for `peer` when given, and says why; or refuses with the
/// reason. `privileged` says whether the process may use a controlled qkey
/// (root or CAP_NET_RAW; util::may_use_controlled_qkey()).
///
/// Rules (docs/addressing.md has the rationale):
///  - only Ethernet (RoCE) ports in state ACTIVE; include/exclude rules apply
///    to device[:port], the GID's netdev and its address (rules.h);
///  - GID ranking: link-local IPv6 only as a last resort; then RoCE v2 before
///    v1 (unless options.roce_version fixes one); then IPv4-mapped before
///    global or unique-local IPv6 (unless options.address_family fixes one);
///    then a GID on the port's own netdev or a VLAN directly on it before one
///    on an overlay or any other device (netdev_role.h); GIDs on netdevs
///    that are not up come after all others; the lowest index breaks ties;
///    `why` has a "decided by: ..." line naming the rule that separated the
///    choice from the runner-up, and a "... lost to ..." line per GID the
///    own-netdev rule put below it;
///  - with a peer: only GIDs whose subnet contains a peer address, or whose
///    address lies in a peer's advertised subnet (and on the peer's VLAN when
///    known); none -> "no reachable GID" naming both sides' subnets;
///  - options.gid_index >= 0: that slot, after checking that it exists, is
///    populated, is RoCE of the allowed version/family and its netdev is
///    allowed; never used blindly (a peer outside its subnet is only noted:
///    routed RoCE v2 is legitimate when asked for explicitly);
///  - pkey index: the slot holding the full-membership default pkey 0xffff;
///  - qkey: options.qkey; bit 31 set is refused unless `privileged`;
///  - path MTU: min(port active MTU, iboe MTU of the GID's netdev MTU).
PortChoice select_port(const topo::Snapshot &snapshot, const topo::DeviceInfo &device,
                       const topo::PortInfo &port, const Options &options, const Peer *peer,
                       bool privileged);

/// select_port for every port of every device (and every peer, when any;
/// without peers one choice per port). Pure.
SelectionReport select_all(const topo::Snapshot &snapshot, const Options &options,
                           const std::vector<Peer> &peers, bool privileged);

/// A Peer from a command-line style address: "198.19.0.12",
/// "198.19.0.12/24", "::ffff:198.19.0.12" or "2001:db8::12/64".
util::Result<Peer> parse_peer(const std::string &text);

} // namespace roce::select
