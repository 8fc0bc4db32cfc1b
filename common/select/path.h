// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "select/options.h"
#include "select/selection.h"
#include "topo/snapshot.h"

namespace roce::select {

/// One local RDMA port, by name: a path remembers where it was chosen, and
/// a later (newer) snapshot is searched for it again.
struct PortRef {
    std::string device; ///< "mlx5_bond_0"
    int port = 0;       ///< 1-based
};

/// The far end of a path as the peer described it: its GIDs in the peer's
/// order of preference (the modex advertisement; an address it was heard
/// sending from, put first, when it is newer than the modex), each with the
/// prefix length the peer itself advertised (modex or REQ). A prefix the peer
/// did not send stays -1 and then only our own address's prefix decides
/// reachability: select_path never assumes one.
struct PeerPort {
    Peer peer;
    /// The largest path MTU the peer's port takes (its advertised path MTU).
    ibv_mtu path_mtu = IBV_MTU_4096;
};

/// The addressing decision for one path (one peer port reached from one
/// local port), made once and kept as the path's only Selection.
struct PathDecision {
    /// Our side: device, port, GID slot/value/type/netdev, pkey, qkey, and
    /// the path MTU, which is min(what our GID's link carries, the peer's
    /// path_mtu) - the one MTU of the path. Set when a path could be chosen.
    std::optional<Selection> selection;
    std::array<uint8_t, 16> remote_gid{}; ///< the peer GID to address (set with selection)
    int remote_prefix_len = -1;           ///< as the peer advertised it; -1 not advertised
    std::string error;                    ///< why no path (empty on success)
    std::vector<std::string> why;         ///< one line per decision, success or not

    bool ok() const { return selection.has_value(); }
    /// The `why` lines joined with "; ".
    std::string explanation() const;
};

/// The addressing policy for one path, a pure function (no I/O, no
/// globals, thread-safe): select_port (selection.h) on `port` of
/// `snapshot` with `peer.peer`, which ranks only our GIDs that reach one of
/// the peer's addresses (by our prefix, or by the peer's advertised one),
/// then the remote GID: the first peer address, in the peer's order, that
/// our chosen GID reaches; with options.gid_index set and no peer address
/// reached (routed RoCE v2, asked for explicitly) the first one of the same
/// GID type and address family. The path MTU is the lower of the two sides'.
/// Refusals (error set, selection empty): the port is not in the snapshot,
/// select_port refuses (not RoCE, not active, nothing reaches the peer, a
/// bad override or qkey), the peer advertised no GID of our type and
/// family, or only link-local addresses connect the two while the peer
/// advertised routable ones that lie on no subnet of this port (its port is
/// on another network: every link has fe80::/64, so link-local proves
/// nothing; a rail reaching a peer only that way is not a rail to it) -
/// unless options.gid_index is set.
PathDecision select_path(const topo::Snapshot &snapshot, const PortRef &port,
                         const Options &options, const PeerPort &peer, bool privileged);

/// Whether `remote` is on the link of the local GID `local` chose, judged
/// as select_path judges it (same family and GID type, our prefix in
/// `snapshot` or the remote's advertised prefix contains the other, or both
/// link-local). For a peer heard from a new address: keep the selection
/// when true, select_path again when false. Pure.
bool on_link(const topo::Snapshot &snapshot, const Selection &local, const PeerAddress &remote);

/// What became of a Selection in a newer snapshot.
enum class Validity {
    kUnchanged, ///< everything it names is where it was
    kMoved,     ///< the same GID (value, type, netdev) or pkey is in another slot:
                ///< follow it (invisible to the peer)
    kReselect,  ///< something the peer relies on is gone or no longer fits: choose
                ///< again (select_path) and reconnect
};
/// "unchanged", "moved", "reselect" (for logs).
const char *to_string(Validity v) noexcept;

/// The verdict of revalidate() and the selection to keep using.
struct Revalidation {
    Validity validity = Validity::kUnchanged;
    /// The previous selection; for kMoved with gid_index / pkey_index
    /// pointing at the new slots.
    Selection selection;
    std::string why; ///< "" for kUnchanged; else what moved or what is gone
};

/// Checks `previous` (a select_path or select_port result) against
/// `snapshot`, in this order, a pure function (no I/O, thread-safe):
///  - the device and the port still exist (else kReselect);
///  - gid_index still holds the GID value and type (and netdev, when
///    `previous` names one); else the same GID in another slot (kMoved),
///    else kReselect naming what the slot holds now;
///  - pkey_index holds the pkey (when the table is known); else another slot
///    holding it (kMoved), else kReselect;
///  - path_mtu still fits the port's active MTU and the GID netdev's MTU
///    (a smaller MTU must be agreed with the peer: kReselect).
/// The port's state is not judged: a port that is down keeps its
/// addressing, and the QPs on it report their failure themselves. These are
/// the checks qp::preflight makes before each transition, so a kUnchanged or
/// followed kMoved selection passes preflight against the same snapshot.
Revalidation revalidate(const Selection &previous, const topo::Snapshot &snapshot);

/// The slot of `port` holding `sel`'s GID value and type (and netdev when
/// `sel` names one): gid_index when it still does, else the first slot
/// that does; nullptr when none. What revalidate and qp::preflight follow.
const topo::GidEntry *find_selected_gid(const topo::PortInfo &port, const Selection &sel);

} // namespace roce::select
