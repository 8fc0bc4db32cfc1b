// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The addressing policy: pure functions from a snapshot to a Selection and
// the reasons for it. GID ranking and reachability live in gid_rank.cc.

#include "select/gid_rank.h"
#include "select/mtu.h"
#include "select/rules.h"
#include "select/selection.h"
#include "util/strings.h"

namespace roce::select {

using topo::GidEntry;
using topo::PortInfo;

namespace {

constexpr uint16_t kDefaultPkey = 0xffff;

std::string port_name(const topo::DeviceInfo &d, const PortInfo &p) {
    return util::format("%s:%d", d.name.c_str(), p.port);
}

/// Port-level refusals: excluded, not RoCE, not active. "" when usable.
std::string port_problem(const topo::DeviceInfo &dev, const PortInfo &port, const RuleSet &rules) {
    std::string why = rules.port_verdict(dev.name, port.port);
    if (!why.empty()) {
        return why;
    }
    if (port.link_layer != topo::LinkLayer::kEthernet) {
        return util::format("link layer is %s, not Ethernet: ompi-roce uses RoCE ports only",
                            topo::to_string(port.link_layer));
    }
    if (port.state != topo::PortState::kActive) {
        return util::format("port state is %s, not ACTIVE (is the netdev or a bond member "
                            "down?)",
                            topo::to_string(port.state));
    }
    return {};
}

void choose_pkey(const PortInfo &port, PortChoice &c, Selection &s) {
    if (port.pkeys.empty()) {
        s.pkey_index = 0;
        s.pkey = kDefaultPkey;
        c.why.push_back("pkey: pkey_index 0 (0xffff) assumed: the pkey table was not readable; "
                        "RoCE ports hold the default pkey 0xffff at index 0");
        return;
    }
    for (size_t i = 0; i < port.pkeys.size(); ++i) {
        if (port.pkeys[i] == kDefaultPkey) {
            s.pkey_index = static_cast<int>(i);
            s.pkey = kDefaultPkey;
            c.why.push_back(util::format(
                "pkey: pkey_index %zu holds 0xffff, the default full-membership pkey (table of "
                "%zu entr%s)",
                i, port.pkeys.size(), port.pkeys.size() == 1 ? "y" : "ies"));
            return;
        }
    }
    std::vector<std::string> table;
    for (size_t i = 0; i < port.pkeys.size() && i < 8; ++i) {
        table.push_back(util::format("[%zu] 0x%04x", i, port.pkeys[i]));
    }
    c.error = util::format("no pkey slot holds the default full-membership pkey 0xffff (table: "
                           "%s%s); RoCE ports always have it at index 0, so this table is "
                           "damaged or not a RoCE port's",
                           util::join(table, ", ").c_str(), port.pkeys.size() > 8 ? ", ..." : "");
}

void choose_qkey(const Options &o, bool privileged, PortChoice &c, Selection &s) {
    s.qkey = o.qkey;
    if ((o.qkey & kControlledQkeyBit) == 0) {
        c.why.push_back(util::format("qkey: %s (bit 31 clear, so no privilege is needed)",
                                     util::hex32(o.qkey).c_str()));
        return;
    }
    if (privileged) {
        c.why.push_back(util::format("qkey: %s is a controlled qkey (bit 31 set); allowed "
                                     "because this process has root or CAP_NET_RAW",
                                     util::hex32(o.qkey).c_str()));
        return;
    }
    c.error = util::format(
        "%sqkey = %s has bit 31 set (a controlled qkey): ibv_modify_qp refuses it with "
        "EPERM (Operation not permitted) for a process without CAP_NET_RAW (Linux >= 6.4); "
        "use a qkey below 0x80000000, e.g. the default %s",
        o.prefix.c_str(), util::hex32(o.qkey).c_str(), util::hex32(kDefaultQkey).c_str());
}

void choose_mtu(const topo::Snapshot &snap, const PortInfo &port, PortChoice &c, Selection &s) {
    const topo::NetdevInfo *nd = snap.find_netdev(s.netdev);
    int netdev_mtu = nd != nullptr ? nd->mtu : 0;
    int iboe = netdev_mtu > 0 ? iboe_mtu_bytes(netdev_mtu) : 0;
    if (netdev_mtu > 0 && iboe == 0) {
        c.error = util::format("netdev %s has MTU %d, too small for RoCE (at least %d = 256 "
                               "bytes of payload + %d bytes of RoCE headers)",
                               s.netdev.c_str(), netdev_mtu, 256 + kRoceHeaderBytes,
                               kRoceHeaderBytes);
        return;
    }
    std::string port_part = port.active_mtu > 0
                                ? util::format("port active MTU %d", port.active_mtu)
                                : std::string("port active MTU unknown (sysfs does not show it)");
    std::string nd_part =
        netdev_mtu > 0 ? util::format("%s MTU %d -> %d after %d bytes of RoCE headers",
                                      s.netdev.c_str(), netdev_mtu, iboe, kRoceHeaderBytes)
                       : util::format("%s MTU unknown", s.netdev.c_str());
    int bytes = carried_mtu_bytes(port.active_mtu, netdev_mtu);
    if (bytes == 0) {
        s.path_mtu = IBV_MTU_1024;
        c.why.push_back("path_mtu: 1024 (IBV_MTU_1024): neither the port's active MTU nor the "
                        "netdev's MTU is known; 1024 fits every RoCE link of MTU 1500");
        return;
    }
    s.path_mtu = mtu_enum(bytes);
    c.why.push_back(util::format("path_mtu: %d (%s) = min(%s, %s)", mtu_bytes(s.path_mtu),
                                 mtu_name(s.path_mtu), port_part.c_str(), nd_part.c_str()));
}

void fill_gid(const GidEntry &g, Selection &s) {
    s.gid_index = g.index;
    s.gid = g.gid;
    s.gid_type = g.type;
    s.netdev = g.netdev;
}

} // namespace

std::string PortChoice::explanation() const { return util::join(why, "; "); }

PortChoice select_port(const topo::Snapshot &snapshot, const topo::DeviceInfo &device,
                       const PortInfo &port, const Options &options, const Peer *peer,
                       bool privileged) {
    PortChoice c;
    c.device = device.name;
    c.port = port.port;
    c.peer = peer != nullptr ? peer->name : "";
    RuleSet rules(options, snapshot);
    GidRanking ranking = rank_gids(snapshot, device, port, options, rules, peer);
    c.gids = ranking.verdicts;

    std::string problem = port_problem(device, port, rules);
    if (!problem.empty()) {
        c.error = port_name(device, port) + ": " + problem;
        return c;
    }
    c.why.push_back(util::format("port: %s port %d of %d (phys_port_cnt), %s, %s",
                                 device.name.c_str(), port.port, device.phys_port_cnt,
                                 topo::to_string(port.state), topo::to_string(port.link_layer)));
    Selection s;
    s.device = device.name;
    s.port = port.port;

    const GidEntry *chosen = options.gid_index >= 0
                                 ? check_gid_override(snapshot, port, options, rules, peer,
                                                      ranking, c)
                                 : pick_best_gid(port, ranking, options, peer, c);
    if (chosen == nullptr) {
        return c;
    }
    fill_gid(*chosen, s);
    for (auto &v : c.gids) {
        v.chosen = v.index == chosen->index;
        if (v.chosen) {
            v.why.clear();
        }
    }
    choose_pkey(port, c, s);
    if (!c.error.empty()) {
        return c;
    }
    choose_qkey(options, privileged, c, s);
    if (!c.error.empty()) {
        return c;
    }
    choose_mtu(snapshot, port, c, s);
    if (!c.error.empty()) {
        return c;
    }
    c.selection = s;
    return c;
}

SelectionReport select_all(const topo::Snapshot &snapshot, const Options &options,
                           const std::vector<Peer> &peers, bool privileged) {
    SelectionReport report;
    report.notes = RuleSet(options, snapshot).notes();
    for (const auto &dev : snapshot.devices) {
        for (const auto &port : dev.ports) {
            if (peers.empty()) {
                report.ports.push_back(
                    select_port(snapshot, dev, port, options, nullptr, privileged));
                continue;
            }
            for (const auto &peer : peers) {
                report.ports.push_back(select_port(snapshot, dev, port, options, &peer, privileged));
            }
        }
    }
    return report;
}

util::Result<Peer> parse_peer(const std::string &text) {
    std::string addr_text = text;
    int prefix = -1;
    size_t slash = text.find('/');
    if (slash != std::string::npos) {
        auto len = util::parse_uint(std::string_view(text).substr(slash + 1));
        if (!len || *len > 128) {
            return util::Status(util::Code::kInvalidArgument,
                                "peer '" + text + "': the prefix length after '/' must be 0..128");
        }
        prefix = static_cast<int>(*len);
        addr_text = text.substr(0, slash);
    }
    auto addr = util::IpAddress::parse(addr_text);
    if (!addr) {
        return util::Status(util::Code::kInvalidArgument,
                            "peer '" + text +
                                "' is not an IPv4 or IPv6 address (forms: 198.19.0.12, "
                                "198.19.0.12/24, ::ffff:198.19.0.12, 2001:db8::12/64)");
    }
    util::IpAddress a = addr->is_v6() ? util::IpAddress::from_gid(addr->to_gid()) : *addr;
    if (a.is_v4() && addr->is_v6() && prefix >= 96) {
        prefix -= 96; // ::ffff:a.b.c.d/120 is a.b.c.d/24
    }
    if (prefix > a.bits()) {
        return util::Status(util::Code::kInvalidArgument,
                            util::format("peer '%s': prefix length %d exceeds %d bits",
                                         text.c_str(), prefix, a.bits()));
    }
    Peer p;
    p.name = text;
    p.addresses.push_back(PeerAddress{a, prefix, std::nullopt, -1});
    return p;
}

} // namespace roce::select
