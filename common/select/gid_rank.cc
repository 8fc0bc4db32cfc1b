// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/gid_rank.h"

#include <algorithm>
#include <map>

#include "select/netdev_role.h"
#include "util/strings.h"

namespace roce::select {

using topo::GidEntry;
using topo::GidType;
using topo::PortInfo;

namespace {

enum KeyPart { kDown = 0, kLinkLocal, kVersion, kFamily, kOwn, kSubnet, kIndex };

/// The link-local part of the key: 1 for fe80::/10 (the last resort), 0 for
/// everything routable - IPv4, global IPv6 and unique-local IPv6 (fc00::/7).
/// A ULA is not global, but it is routed within the site, and an IPv6-only
/// RoCE fabric (bnxt_re clusters) may have nothing else: demoting it with
/// link-local left GID 0 as the choice, and every operation failing with
/// retry-exceeded, in another stack.
int link_local_rank(const util::IpAddress &addr) { return addr.is_link_local() ? 1 : 0; }

/// "global IPv6" or "unique-local IPv6 (fc00::/7, routed within the site)".
std::string ipv6_kind(const util::IpAddress &addr) {
    return addr.is_unique_local() ? "unique-local IPv6 (fc00::/7, routed within the site)"
                                  : "global IPv6";
}

bool netdev_up(const topo::NetdevInfo *nd) {
    if (nd == nullptr) {
        return true; // unknown: do not demote
    }
    return nd->operstate == topo::OperState::kUp || nd->operstate == topo::OperState::kUnknown;
}

/// "" when `g` may be used under the options; otherwise why not.
std::string basic_verdict(const GidEntry &g, const Options &o, const RuleSet &rules) {
    const std::string &p = o.prefix;
    util::IpAddress addr = g.address();
    if (g.type == GidType::kIB) {
        return "an IB GID, not RoCE";
    }
    if (o.roce_version == RoceVersion::kV2 && g.type != GidType::kRoceV2) {
        return "RoCE v1, but " + p + "roce_version = 2 requires RoCE v2";
    }
    if (o.roce_version == RoceVersion::kV1 && g.type != GidType::kRoceV1) {
        return "RoCE v2, but " + p + "roce_version = 1 requires RoCE v1";
    }
    if (o.address_family == AddressFamily::kIPv4 && !addr.is_v4()) {
        return "IPv6, but " + p + "address_family = ipv4";
    }
    if (o.address_family == AddressFamily::kIPv6 && !addr.is_v6()) {
        return "IPv4-mapped, but " + p + "address_family = ipv6";
    }
    return rules.gid_verdict(g.netdev, addr);
}

/// The peer address this GID reaches ("" when none), with the subnet why.
std::string reaches(const GidEntry &g, int prefix, const topo::NetdevInfo *nd, const Peer &peer) {
    std::string why;
    int i = reaching_address(g, prefix, nd, peer, &why);
    return i < 0 ? std::string()
                 : peer.addresses[static_cast<size_t>(i)].address.to_string() + " " + why;
}

// An order on subnets both ends of a connection compute alike: the first
// 8 bytes of the network address (IPv4: its 4 bytes), as a non-negative
// number. Without a known prefix, the address itself.
int64_t subnet_number(const util::IpAddress &addr, int prefix) {
    util::IpAddress net = prefix >= 0 ? util::Subnet::of(addr, prefix).address : addr;
    const uint8_t *b = net.bytes();
    uint64_t v = 0;
    size_t n = addr.is_v4() ? 4 : 8;
    for (size_t i = 0; i < n; ++i) {
        v = v << 8 | b[i];
    }
    return static_cast<int64_t>(v >> 1);
}

/// The first key part in which `r` and `best` differ (kIndex + 1 when none).
int first_difference(const RankedGid &r, const RankedGid &best) {
    for (int i = kDown; i <= kIndex; ++i) {
        if (r.key[static_cast<size_t>(i)] != best.key[static_cast<size_t>(i)]) {
            return i;
        }
    }
    return kIndex + 1;
}

/// Which rule put the best candidate above the runner-up, for the doctor:
/// "the port's own netdev or a VLAN on it before other devices (gid[2] on
/// vxlan100 ranked next)".
std::string decided_by(const GidRanking &ranking) {
    if (ranking.candidates.size() == 1) {
        return "the only usable GID";
    }
    const RankedGid &best = ranking.candidates[0];
    const RankedGid &next = ranking.candidates[1];
    std::string loser = util::format(" (gid[%d] on %s ranked next)", next.gid->index,
                                     next.gid->netdev.c_str());
    switch (first_difference(next, best)) {
    case kDown: return "a netdev that is up before one that is not" + loser;
    case kLinkLocal: {
        std::string ula = best.gid->address().is_unique_local() ? "unique-local IPv6 is routable, "
                                                                : "";
        return ula + "link-local only as a last resort" + loser;
    }
    case kVersion: return "RoCE v2 before v1" + loser;
    case kFamily: return "IPv4-mapped before IPv6" + loser;
    case kOwn: return "the port's own netdev or a VLAN on it before other devices" + loser;
    case kSubnet: return "the numerically lower subnet of those reaching the peer" + loser;
    default: return "the lowest index, a tie" + loser;
    }
}

std::string rank_reason(const RankedGid &r, const RankedGid &best) {
    for (int i = kDown; i <= kIndex; ++i) {
        if (r.key[static_cast<size_t>(i)] == best.key[static_cast<size_t>(i)]) {
            continue;
        }
        switch (i) {
        case kDown: return "netdev " + r.gid->netdev + " is not up";
        case kLinkLocal: return "link-local, a last resort";
        case kVersion: return "RoCE v1 ranks below v2";
        case kFamily: return "IPv6 ranks below IPv4-mapped";
        case kOwn:
            return "on " + r.gid->netdev + " (" + r.role + "), below " +
                   util::format("gid[%d] on %s", best.gid->index, best.gid->netdev.c_str());
        case kSubnet:
            return util::format("reaches the peer too; gid[%d]'s subnet is numerically lower "
                                "(the rule both ends apply)",
                                best.gid->index);
        default: return util::format("same rank as gid[%d], higher index", best.gid->index);
        }
    }
    return "same rank";
}

GidVerdict *verdict_of(std::vector<GidVerdict> &vs, int index) {
    for (auto &v : vs) {
        if (v.index == index) {
            return &v;
        }
    }
    return nullptr;
}

std::string peer_addresses(const Peer &peer) {
    std::vector<std::string> out;
    for (const auto &pa : peer.addresses) {
        out.push_back(pa.prefix_len >= 0
                          ? util::Subnet::of(pa.address, pa.prefix_len).to_string() + " (" +
                                pa.address.to_string() + ")"
                          : pa.address.to_string() + " (prefix not advertised)");
    }
    return util::join(out, ", ");
}

/// "198.18.0.0/24 (bond0: gid[2], gid[3]), ..." for the unreachable error.
std::string local_subnets(const std::vector<RankedGid> &gids) {
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    for (const auto &r : gids) {
        std::string subnet = r.prefix >= 0
                                 ? util::Subnet::of(r.gid->address(), r.prefix).to_string()
                                 : r.gid->address().to_string() + " (prefix unknown)";
        subnet += " on " + r.gid->netdev;
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const auto &g) { return g.first == subnet; });
        if (it == groups.end()) {
            groups.push_back({subnet, {}});
            it = groups.end() - 1;
        }
        it->second.push_back(util::format("gid[%d]", r.gid->index));
    }
    std::vector<std::string> out;
    for (const auto &g : groups) {
        out.push_back(g.first + " (" + util::join(g.second, ", ") + ")");
    }
    return util::join(out, ", ");
}

/// "others: gid[0], gid[2]: RoCE v1 ranks below v2; gid[1]: link-local, ..."
std::string others_line(const std::vector<GidVerdict> &verdicts, int chosen) {
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    for (const auto &v : verdicts) {
        if (v.index == chosen) {
            continue;
        }
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const auto &g) { return g.first == v.why; });
        if (it == groups.end()) {
            groups.push_back({v.why, {}});
            it = groups.end() - 1;
        }
        it->second.push_back(util::format("gid[%d]", v.index));
    }
    std::vector<std::string> parts;
    for (const auto &g : groups) {
        parts.push_back(util::join(g.second, ", ") + ": " + g.first);
    }
    return parts.empty() ? std::string() : "others: " + util::join(parts, "; ");
}

} // namespace

int reaching_address(const GidEntry &g, int prefix, const topo::NetdevInfo *nd, const Peer &peer,
                     std::string *why) {
    util::IpAddress local = g.address();
    for (size_t i = 0; i < peer.addresses.size(); ++i) {
        const PeerAddress &pa = peer.addresses[i];
        if (pa.address.family() != local.family() ||
            pa.address.is_link_local() != local.is_link_local()) {
            continue;
        }
        if (pa.type && *pa.type != g.type) {
            continue; // RoCE v1 and v2 do not talk to each other
        }
        if (pa.vlan_id >= 0 && (nd != nullptr ? nd->vlan_id : -1) != pa.vlan_id) {
            continue;
        }
        std::string reason;
        if (local.is_link_local()) {
            reason = "(both link-local: same link assumed)";
        } else if (prefix >= 0 && util::Subnet::of(local, prefix).contains(pa.address)) {
            reason = "(in " + util::Subnet::of(local, prefix).to_string() + ")";
        } else if (pa.prefix_len >= 0 &&
                   util::Subnet::of(pa.address, pa.prefix_len).contains(local)) {
            reason = "(its subnet " + util::Subnet::of(pa.address, pa.prefix_len).to_string() +
                     " holds " + local.to_string() + ")";
        } else {
            continue;
        }
        if (why != nullptr) {
            *why = reason;
        }
        return static_cast<int>(i);
    }
    return -1;
}

int local_prefix(const topo::Snapshot &snapshot, const GidEntry &g) {
    const topo::NetdevInfo *nd = snapshot.find_netdev(g.netdev);
    if (nd == nullptr) {
        return -1;
    }
    util::IpAddress addr = g.address();
    for (const auto &a : nd->addresses) {
        if (a.address == addr) {
            return a.prefix_len;
        }
    }
    return -1;
}

std::string describe_gid(const GidEntry &g, int prefix) {
    std::string extra;
    if (prefix >= 0) {
        extra = util::format(", %s/%d", g.address().to_string().c_str(), prefix);
    }
    return util::format("gid[%d] %s (%s, %s%s)", g.index, topo::gid_to_string(g.gid).c_str(),
                        topo::to_string(g.type), g.netdev.empty() ? "no netdev" : g.netdev.c_str(),
                        extra.c_str());
}

GidRanking rank_gids(const topo::Snapshot &snapshot, const topo::DeviceInfo &device,
                     const PortInfo &port, const Options &options, const RuleSet &rules,
                     const Peer *peer) {
    (void)device;
    GidRanking out;
    const std::string own = port_netdev(port);
    for (const auto &g : port.gids) {
        GidVerdict v;
        v.index = g.index;
        v.why = basic_verdict(g, options, rules);
        if (v.why.empty()) {
            RankedGid r;
            r.gid = &g;
            r.prefix = local_prefix(snapshot, g);
            r.netdev = snapshot.find_netdev(g.netdev);
            util::IpAddress addr = g.address();
            r.key = {netdev_up(r.netdev) ? 0 : 1, link_local_rank(addr),
                     g.type == GidType::kRoceV2 ? 0 : 1, addr.is_v4() ? 0 : 1,
                     carries_port_roce(snapshot, own, g.netdev) ? 0 : 1,
                     peer != nullptr ? subnet_number(addr, r.prefix) : 0, g.index};
            if (peer != nullptr) {
                r.reached = reaches(g, r.prefix, r.netdev, *peer);
                if (r.reached.empty()) {
                    v.why = "does not reach peer " + peer->name;
                    out.unreachable.push_back(r);
                    out.verdicts.push_back(v);
                    continue;
                }
            }
            out.candidates.push_back(r);
        }
        out.verdicts.push_back(v);
    }
    std::sort(out.candidates.begin(), out.candidates.end(),
              [](const RankedGid &a, const RankedGid &b) { return a.key < b.key; });
    // The roles in words, only where the explanation uses them: the GIDs
    // that lost to the best on this rule, and the best. (For every GID it
    // doubled the allocations of a connection: 256 slots x 3 strings.)
    bool own_decided = false;
    for (size_t i = 1; i < out.candidates.size(); ++i) {
        RankedGid &r = out.candidates[i];
        if (first_difference(r, out.candidates[0]) == kOwn) {
            r.role = netdev_role(snapshot, own, r.gid->netdev).why;
            own_decided = true;
        }
    }
    if (own_decided) {
        out.candidates[0].role = netdev_role(snapshot, own, out.candidates[0].gid->netdev).why;
    }
    for (size_t i = 0; i < out.candidates.size(); ++i) {
        GidVerdict *v = verdict_of(out.verdicts, out.candidates[i].gid->index);
        v->rank = static_cast<int>(i);
        v->why = i == 0 ? "" : rank_reason(out.candidates[i], out.candidates[0]);
    }
    return out;
}

const GidEntry *pick_best_gid(const PortInfo &port, const GidRanking &ranking,
                              const Options &options, const Peer *peer, PortChoice &c) {
    std::string where = util::format("%s:%d", c.device.c_str(), port.port);
    if (ranking.candidates.empty()) {
        if (peer != nullptr && !ranking.unreachable.empty()) {
            c.error = util::format("no reachable GID on %s for peer %s: local subnets %s; peer "
                                   "%s. Put both sides in one subnet (or VLAN), or set "
                                   "%sgid_index if the fabric routes RoCE v2 between them",
                                   where.c_str(), peer->name.c_str(),
                                   local_subnets(ranking.unreachable).c_str(),
                                   peer_addresses(*peer).c_str(), options.prefix.c_str());
        } else if (port.gids.empty()) {
            c.error = util::format("the GID table of %s is empty: its netdev has no IP address "
                                   "and no link-local address (is it up?)",
                                   where.c_str());
        } else {
            c.error = util::format("no usable GID on %s: %s", where.c_str(),
                                   others_line(ranking.verdicts, -1).substr(8).c_str());
        }
        return nullptr;
    }
    const RankedGid &best = ranking.candidates.front();
    std::string line = "gid: " + describe_gid(*best.gid, best.prefix);
    line += util::format(": best of %zu usable GID%s (link-local only as a last resort, RoCE v2 "
                         "before v1, IPv4-mapped before IPv6, the port's own netdev or a VLAN on "
                         "it before overlays and other devices, lowest index on ties)",
                         ranking.candidates.size(), ranking.candidates.size() == 1 ? "" : "s");
    if (peer != nullptr) {
        line += "; reaches peer " + best.reached;
    }
    c.why.push_back(line);
    c.why.push_back("decided by: " + decided_by(ranking));
    if (best.key[kDown]) {
        c.why.push_back("warning: netdev " + best.gid->netdev + " is not up, and no GID on an "
                        "up netdev is usable");
    } else if (best.key[kLinkLocal]) {
        c.why.push_back("only link-local GIDs are usable: link-local is the last resort (not "
                        "routable, and VLANs on one bond share the same address)");
    } else if (best.key[kVersion]) {
        c.why.push_back("no usable RoCE v2 GID: using RoCE v1");
    } else if (best.key[kFamily]) {
        c.why.push_back("no usable IPv4-mapped GID: using " + ipv6_kind(best.gid->address()));
    }
    for (size_t i = 1; i < ranking.candidates.size(); ++i) {
        const RankedGid &r = ranking.candidates[i];
        if (first_difference(r, best) == kOwn) {
            c.why.push_back(util::format("gid[%d] on %s (%s) lost to gid[%d] on %s%s%s",
                                         r.gid->index, r.gid->netdev.c_str(), r.role.c_str(),
                                         best.gid->index, best.gid->netdev.c_str(),
                                         best.role.empty() ? "" : ", ", best.role.c_str()));
        }
    }
    for (size_t i = 1; i < ranking.candidates.size(); ++i) {
        const RankedGid &r = ranking.candidates[i];
        if (std::equal(r.key.begin(), r.key.begin() + kIndex, best.key.begin())) {
            c.why.push_back(util::format(
                "tie: gid[%d] (%s) ranks the same%s and the lower index won; %s%sif_include "
                "to choose by subnet or netdev",
                r.gid->index, r.gid->netdev.c_str(), peer ? " and reaches the peer too" : "",
                peer ? "use " : "give a peer address or ", options.prefix.c_str()));
        }
    }
    std::string others = others_line(ranking.verdicts, best.gid->index);
    if (!others.empty()) {
        c.why.push_back(others);
    }
    return best.gid;
}

const GidEntry *check_gid_override(const topo::Snapshot &snapshot, const PortInfo &port,
                                   const Options &options, const RuleSet &rules, const Peer *peer,
                                   const GidRanking &ranking, PortChoice &c) {
    const int idx = options.gid_index;
    std::string param = util::format("%sgid_index = %d", options.prefix.c_str(), idx);
    std::string where = util::format("%s:%d", c.device.c_str(), port.port);
    std::string instead;
    if (!ranking.candidates.empty()) {
        const RankedGid &b = ranking.candidates.front();
        instead = "; the automatic choice would be " + describe_gid(*b.gid, b.prefix) +
                  " (unset " + options.prefix + "gid_index to use it)";
    }
    if (idx >= port.gid_tbl_len) {
        c.error = util::format("%s is out of range: %s has %d GID slots (0..%d)%s", param.c_str(),
                               where.c_str(), port.gid_tbl_len, port.gid_tbl_len - 1,
                               instead.c_str());
        return nullptr;
    }
    const GidEntry *g = port.find_gid(idx);
    if (g == nullptr) {
        c.error = util::format("%s: slot %d of %s is empty (an address change frees and moves "
                               "GID slots)%s",
                               param.c_str(), idx, where.c_str(), instead.c_str());
        return nullptr;
    }
    int prefix = local_prefix(snapshot, *g);
    std::string why = basic_verdict(*g, options, rules);
    if (why.empty() && g->type == GidType::kRoceV1 && options.roce_version == RoceVersion::kAuto) {
        c.why.push_back("note: " + describe_gid(*g, prefix) + " is RoCE v1 (v2 would be "
                        "preferred)");
    }
    if (!why.empty()) {
        c.error = util::format("%s: %s is not usable: %s%s", param.c_str(),
                               describe_gid(*g, prefix).c_str(), why.c_str(), instead.c_str());
        return nullptr;
    }
    c.why.push_back("gid: " + describe_gid(*g, prefix) + ", set by " + param +
                    " and checked: the slot is populated, RoCE, of the allowed version and "
                    "family, on an allowed netdev");
    c.why.push_back("decided by: " + param + ", set explicitly (the automatic ranking was not "
                    "used)");
    NetdevRole role = netdev_role(snapshot, port_netdev(port), g->netdev);
    if (!role.own) {
        c.why.push_back("note: " + g->netdev + " is " + role.why + "; used because " + param +
                        " was set explicitly");
    }
    if (peer != nullptr) {
        std::string reached = reaches(*g, prefix, snapshot.find_netdev(g->netdev), *peer);
        c.why.push_back(reached.empty()
                            ? "note: peer " + peer->name + " is outside its subnet; used because " +
                                  param + " was set explicitly (routed RoCE v2)"
                            : "reaches peer " + reached);
    }
    for (auto &v : c.gids) {
        if (v.index != idx && v.rank >= 0) {
            v.why = "not the configured " + param;
        }
    }
    return g;
}

} // namespace roce::select
