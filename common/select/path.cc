// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// One addressing decision per path, and what a newer snapshot does to it.
#include "select/path.h"

#include <algorithm>

#include "select/gid_rank.h"
#include "select/mtu.h"
#include "util/strings.h"

namespace roce::select {

using topo::GidEntry;
using topo::PortInfo;

namespace {

const PortInfo *find_port(const topo::Snapshot &snap, const PortRef &ref,
                          const topo::DeviceInfo **dev) {
    *dev = snap.find_device(ref.device);
    return *dev != nullptr ? (*dev)->find_port(ref.port) : nullptr;
}

bool same_gid(const GidEntry &g, const Selection &s) {
    return g.gid == s.gid && g.type == s.gid_type && (s.netdev.empty() || g.netdev == s.netdev);
}

std::string describe(const Selection &s) {
    return util::format("gid[%d] %s (%s, %s)", s.gid_index, topo::gid_to_string(s.gid).c_str(),
                        topo::to_string(s.gid_type), s.netdev.empty() ? "?" : s.netdev.c_str());
}

/// For a GID override that reaches no peer address: the first peer address
/// of the same type and family (routed RoCE v2).
int routed_address(const GidEntry &g, const Peer &peer) {
    util::IpAddress local = g.address();
    for (size_t i = 0; i < peer.addresses.size(); ++i) {
        const PeerAddress &pa = peer.addresses[i];
        if (pa.address.family() == local.family() && (!pa.type || *pa.type == g.type)) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

/// The peer's routable (not link-local) addresses, "a, b/24", or "" when it
/// advertised none. Called when only link-local reaches the peer: every
/// routable one then lies on no subnet of the chosen port (select_port
/// ranks link-local last).
std::string unreached_routable(const Peer &peer) {
    std::vector<std::string> out;
    for (const PeerAddress &pa : peer.addresses) {
        if (!pa.address.is_link_local() && !pa.address.empty() && !pa.address.is_zero()) {
            std::string a = pa.address.to_string();
            if (pa.prefix_len >= 0) {
                a += "/" + std::to_string(pa.prefix_len);
            }
            if (std::find(out.begin(), out.end(), a) == out.end()) {
                out.push_back(a);
            }
        }
    }
    return util::join(out, ", ");
}

/// The largest path MTU (bytes) `port` and `netdev` carry now; 0 unknown.
int mtu_limit(const topo::Snapshot &snap, const PortInfo &port, const std::string &netdev) {
    const topo::NetdevInfo *nd = snap.find_netdev(netdev);
    return carried_mtu_bytes(port.active_mtu, nd != nullptr ? nd->mtu : 0);
}

} // namespace

std::string PathDecision::explanation() const {
    return util::join(why, "; ");
}

const char *to_string(Validity v) noexcept {
    switch (v) {
    case Validity::kUnchanged:
        return "unchanged";
    case Validity::kMoved:
        return "moved";
    case Validity::kReselect:
        return "reselect";
    }
    return "?";
}

const GidEntry *find_selected_gid(const PortInfo &port, const Selection &sel) {
    if (const GidEntry *g = port.find_gid(sel.gid_index)) {
        if (same_gid(*g, sel)) {
            return g;
        }
    }
    for (const auto &g : port.gids) {
        if (same_gid(g, sel)) {
            return &g;
        }
    }
    return nullptr;
}

PathDecision select_path(const topo::Snapshot &snapshot, const PortRef &port,
                         const Options &options, const PeerPort &peer, bool privileged) {
    PathDecision d;
    const topo::DeviceInfo *dev = nullptr;
    const PortInfo *p = find_port(snapshot, port, &dev);
    if (p == nullptr) {
        d.error = util::format("%s:%d is not in the snapshot (%s)", port.device.c_str(), port.port,
                               dev == nullptr ? "no such device" : "no such port");
        return d;
    }
    PortChoice pc = select_port(snapshot, *dev, *p, options, &peer.peer, privileged);
    d.why = std::move(pc.why);
    if (!pc.ok()) {
        d.error = std::move(pc.error);
        return d;
    }
    Selection sel = *pc.selection;
    const GidEntry *g = p->find_gid(sel.gid_index);
    int prefix = g != nullptr ? local_prefix(snapshot, *g) : -1;
    std::string reason;
    int i = g != nullptr
                ? reaching_address(*g, prefix, snapshot.find_netdev(g->netdev), peer.peer, &reason)
                : -1;
    if (i < 0 && g != nullptr && options.gid_index >= 0) {
        i = routed_address(*g, peer.peer);
        reason = util::format("(routed: %sgid_index is set)", options.prefix.c_str());
    }
    if (i < 0) {
        d.error = util::format("selected %s but peer %s advertises no %s GID of that family on "
                               "its link",
                               describe(sel).c_str(), peer.peer.name.c_str(),
                               topo::to_string(sel.gid_type));
        return d;
    }
    const PeerAddress &remote = peer.peer.addresses[static_cast<size_t>(i)];
    if (options.gid_index < 0 && remote.address.is_link_local()) {
        if (std::string routable = unreached_routable(peer.peer); !routable.empty()) {
            d.error = util::format(
                "only link-local addresses connect %s:%d to peer %s (%s -> %s), while the peer's "
                "routable addresses (%s) are on no subnet of this port: its port is on another "
                "network, and a link-local GID cannot tell links apart, so this port does not "
                "reach it",
                port.device.c_str(), port.port, peer.peer.name.c_str(),
                topo::gid_to_string(sel.gid).c_str(), remote.address.to_string().c_str(),
                routable.c_str());
            return d;
        }
    }
    d.remote_gid = remote.address.to_gid();
    d.remote_prefix_len = remote.prefix_len;
    d.why.push_back(util::format(
        "remote: %s %s, prefix %s", remote.address.to_string().c_str(), reason.c_str(),
        remote.prefix_len >= 0 ? std::to_string(remote.prefix_len).c_str() : "not advertised"));
    if (mtu_valid(peer.path_mtu) && peer.path_mtu < sel.path_mtu) {
        d.why.push_back(util::format("path_mtu: %d, the peer's (ours allows %d)",
                                     mtu_bytes(peer.path_mtu), mtu_bytes(sel.path_mtu)));
        sel.path_mtu = peer.path_mtu;
    }
    d.selection = std::move(sel);
    return d;
}

bool on_link(const topo::Snapshot &snapshot, const Selection &local, const PeerAddress &remote) {
    GidEntry g;
    g.index = local.gid_index;
    g.gid = local.gid;
    g.type = local.gid_type;
    g.netdev = local.netdev;
    Peer p;
    p.addresses.push_back(remote);
    return reaching_address(g, local_prefix(snapshot, g), snapshot.find_netdev(local.netdev), p,
                            nullptr) == 0;
}

Revalidation revalidate(const Selection &previous, const topo::Snapshot &snapshot) {
    Revalidation r;
    r.selection = previous;
    const topo::DeviceInfo *dev = nullptr;
    const PortInfo *port = find_port(snapshot, {previous.device, previous.port}, &dev);
    if (port == nullptr) {
        r.validity = Validity::kReselect;
        r.why = dev == nullptr
                    ? previous.device + " is no longer present"
                    : util::format("%s has no port %d now", previous.device.c_str(), previous.port);
        return r;
    }
    std::vector<std::string> moved;
    const GidEntry *g = find_selected_gid(*port, previous);
    if (g == nullptr) {
        const GidEntry *now = port->find_gid(previous.gid_index);
        r.validity = Validity::kReselect;
        r.why = util::format("%s is no longer in the GID table of %s:%d (the slot %s)",
                             describe(previous).c_str(), previous.device.c_str(), previous.port,
                             now != nullptr ? ("holds " + topo::gid_to_string(now->gid) + " on " +
                                               (now->netdev.empty() ? "no netdev" : now->netdev))
                                                  .c_str()
                                            : "is empty");
        return r;
    }
    if (g->index != previous.gid_index) {
        moved.push_back(util::format("gid_index %d -> %d (%s moved)", previous.gid_index, g->index,
                                     topo::gid_to_string(previous.gid).c_str()));
        r.selection.gid_index = g->index;
    }
    const auto &keys = port->pkeys;
    auto at = static_cast<size_t>(std::max(previous.pkey_index, 0));
    if (!keys.empty() && (at >= keys.size() || keys[at] != previous.pkey)) {
        auto it = std::find(keys.begin(), keys.end(), previous.pkey);
        if (it == keys.end()) {
            r.validity = Validity::kReselect;
            r.why = util::format("no slot of the pkey table of %s:%d holds 0x%04x now",
                                 previous.device.c_str(), previous.port, previous.pkey);
            return r;
        }
        r.selection.pkey_index = static_cast<int>(it - keys.begin());
        moved.push_back(
            util::format("pkey_index %d -> %d", previous.pkey_index, r.selection.pkey_index));
    }
    int limit = mtu_limit(snapshot, *port, g->netdev);
    int bytes = mtu_bytes(previous.path_mtu);
    if (limit > 0 && bytes > limit) {
        r.selection = previous;
        r.validity = Validity::kReselect;
        r.why = util::format("path_mtu %d no longer fits: %s:%d and %s carry %d now", bytes,
                             previous.device.c_str(), previous.port, g->netdev.c_str(), limit);
        return r;
    }
    if (!moved.empty()) {
        r.validity = Validity::kMoved;
        r.why = util::join(moved, "; ");
    }
    return r;
}

} // namespace roce::select
