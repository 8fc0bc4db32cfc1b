// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/preflight.h"

#include <cerrno>
#include <cstring>

#include "select/mtu.h"
#include "select/options.h"
#include "select/path.h"
#include "util/strings.h"

namespace roce::qp {

using topo::GidEntry;
using topo::PortInfo;

namespace {

std::string where(const std::string &dev, int port) { return util::format("%s:%d", dev.c_str(), port); }

std::string describe(const GidEntry &g) {
    return util::format("%s (%s, %s)", topo::gid_to_string(g.gid).c_str(), topo::to_string(g.type),
                        g.netdev.empty() ? "no netdev" : g.netdev.c_str());
}

std::string describe_expected(const select::Selection &e) {
    return util::format("%s (%s, %s)", topo::gid_to_string(e.gid).c_str(),
                        topo::to_string(e.gid_type), e.netdev.empty() ? "?" : e.netdev.c_str());
}

bool same_gid(const GidEntry &g, const select::Selection &e) {
    return g.gid == e.gid && g.type == e.gid_type && (e.netdev.empty() || g.netdev == e.netdev);
}

void check_mask(const PreflightContext &ctx, const ModifyRequest &req, PreflightResult &r) {
    auto rule = transition_masks(ctx.type, ctx.transition);
    const char *tt = to_string(ctx.transition);
    if (!rule) {
        r.problems.push_back({"attr_mask", EINVAL,
                              util::format("a %s QP has no %s transition", to_string(ctx.type), tt),
                              "a bug in the caller: DC targets stop at RTR"});
        return;
    }
    int missing = rule->required & ~req.mask;
    int extra = req.mask & ~(rule->required | rule->optional);
    if (missing != 0 || extra != 0) {
        std::string what;
        if (missing != 0) {
            what += "missing " + mask_names(missing);
        }
        if (extra != 0) {
            what += std::string(what.empty() ? "" : ", ") + "not allowed " + mask_names(extra);
        }
        r.problems.push_back(
            {"attr_mask", EINVAL,
             util::format("attribute mask %s for %s %s: %s", mask_names(req.mask).c_str(),
                          to_string(ctx.type), tt, what.c_str()),
             util::format("a bug in the caller: %s %s requires %s and allows %s",
                          to_string(ctx.type), tt, mask_names(rule->required).c_str(),
                          mask_names(rule->optional).c_str())});
    }
    if ((req.mask & IBV_QP_STATE) && req.attr.qp_state != to_state(ctx.transition)) {
        r.problems.push_back({"qp_state", EINVAL,
                              util::format("qp_state %d does not match %s", req.attr.qp_state, tt),
                              "a bug in the caller"});
    }
}

/// The port the request addresses; nullptr (and a Problem) when missing.
const PortInfo *check_port(const topo::DeviceInfo &dev, int port, const char *attr,
                           PreflightResult &r) {
    const PortInfo *p = dev.find_port(port);
    if (p == nullptr) {
        r.problems.push_back(
            {attr, EINVAL,
             util::format("%s %d does not exist: %s has %d port%s%s", attr, port,
                          dev.name.c_str(), dev.phys_port_cnt, dev.phys_port_cnt == 1 ? "" : "s",
                          dev.phys_port_cnt == 1 ? " (a LAG device exposes one port for all its "
                                                   "members)"
                                                 : ""),
             util::format("use a port the device has (1..%d), e.g. btl_roce_if_include %s:1; an "
                          "old configuration naming port 2 predates the bond",
                          dev.phys_port_cnt, dev.name.c_str())});
    }
    return p;
}

void check_pkey(const PortInfo &port, const std::string &dev, const PreflightContext &ctx,
                ModifyRequest &req, PreflightResult &r) {
    if (port.pkeys.empty()) {
        return; // table unknown: nothing to check against
    }
    int index = req.attr.pkey_index;
    uint16_t want = ctx.expected.pkey;
    bool beyond = index >= static_cast<int>(port.pkeys.size());
    if (!beyond && port.pkeys[static_cast<size_t>(index)] == want) {
        return;
    }
    for (size_t i = 0; i < port.pkeys.size(); ++i) {
        if (port.pkeys[i] == want) {
            r.corrections.push_back(util::format(
                "pkey_index %d -> %zu: slot %zu holds the pkey 0x%04x (%s)", index, i, i, want,
                beyond ? "the requested index is beyond the table" : "the requested slot does not"));
            req.attr.pkey_index = static_cast<uint16_t>(i);
            return;
        }
    }
    std::string now = beyond ? util::format("is beyond the pkey table of %s (%zu entr%s)",
                                            where(dev, port.port).c_str(), port.pkeys.size(),
                                            port.pkeys.size() == 1 ? "y" : "ies")
                             : util::format("holds 0x%04x, not 0x%04x",
                                            port.pkeys[static_cast<size_t>(index)], want);
    r.problems.push_back({"pkey_index", beyond ? EINVAL : 0,
                          util::format("pkey_index %d %s, and no slot holds 0x%04x", index,
                                       now.c_str(), want),
                          "use pkey_index 0, which holds 0xffff on every RoCE port"});
}

void check_qkey(const PreflightContext &ctx, const ModifyRequest &req, PreflightResult &r) {
    if (!(req.attr.qkey & select::kControlledQkeyBit) || ctx.privileged) {
        return;
    }
    r.problems.push_back(
        {"qkey", EPERM,
         util::format("qkey %s has bit 31 set (a controlled qkey) and this process has neither "
                      "root nor CAP_NET_RAW (Linux >= 6.4 refuses it)",
                      util::hex32(req.attr.qkey).c_str()),
         util::format("use a qkey below 0x80000000 (btl_roce_qkey, default %s); or grant "
                      "CAP_NET_RAW; or, on Linux >= 6.7, `rdma system set privileged-qkey on`",
                      util::hex32(select::kDefaultQkey).c_str())});
}

/// The GID on `netdev` of the expected type that replaced the expected one,
/// for the message ("bond0 now has gid[9] ::ffff:198.18.0.21").
std::string successor(const PortInfo &port, const select::Selection &e) {
    for (const auto &g : port.gids) {
        if (g.netdev == e.netdev && g.type == e.gid_type &&
            g.address().family() == util::IpAddress::from_gid(e.gid).family() &&
            g.address().is_link_local() == util::IpAddress::from_gid(e.gid).is_link_local()) {
            return util::format("; %s now has gid[%d] %s", e.netdev.c_str(), g.index,
                                topo::gid_to_string(g.gid).c_str());
        }
    }
    return "; no GID of that kind is on " + (e.netdev.empty() ? std::string("its netdev") : e.netdev);
}

void check_sgid(const PortInfo &port, const std::string &dev, const select::Selection &e,
                ibv_ah_attr &ah, PreflightResult &r) {
    int idx = ah.grh.sgid_index;
    const GidEntry *g = port.find_gid(idx);
    if (g != nullptr && (e.gid_index < 0 || same_gid(*g, e))) {
        return;
    }
    std::string was = e.gid_index >= 0 ? describe_expected(e) : std::string("?");
    std::string state = idx >= port.gid_tbl_len
                            ? util::format("is beyond the GID table of %s (%d slots)",
                                           where(dev, port.port).c_str(), port.gid_tbl_len)
                        : g == nullptr ? "is an empty slot now"
                                       : "now holds " + describe(*g);
    if (e.gid_index >= 0) {
        if (const GidEntry *moved = select::find_selected_gid(port, e)) {
            r.corrections.push_back(util::format(
                "sgid_index %d -> %d: the GID %s moved there (sgid_index %d %s; the bond's GID "
                "table was rewritten by an address or VLAN change)",
                idx, moved->index, was.c_str(), idx, state.c_str()));
            ah.grh.sgid_index = static_cast<uint8_t>(moved->index);
            return;
        }
    }
    bool empty = g == nullptr;
    r.problems.push_back(
        {"sgid_index", empty ? ENODATA : 0,
         util::format("sgid_index %d %s; it was selected for %s, which is no longer in the GID "
                      "table of %s%s",
                      idx, state.c_str(), was.c_str(), where(dev, port.port).c_str(),
                      e.gid_index >= 0 ? successor(port, e).c_str() : ""),
         "a stale GID index after an address change: select the GID again (roce-doctor shows "
         "the current table) and reconnect, since the peer knows the old GID"});
}

void check_av(const topo::DeviceInfo &dev, const select::Selection &e, ibv_ah_attr &ah,
              PreflightResult &r) {
    const PortInfo *port = check_port(dev, ah.port_num, "ah_attr.port_num", r);
    if (port == nullptr) {
        return;
    }
    if (port->link_layer == topo::LinkLayer::kEthernet && !ah.is_global) {
        r.problems.push_back({"ah_attr.is_global", EINVAL,
                              "the address vector has no GRH, which RoCE requires",
                              "a bug in the caller: set is_global and the GRH"});
        return;
    }
    check_sgid(*port, dev.name, e, ah, r);
}

void check_mtu(const topo::Snapshot &fresh, const PortInfo &port, const std::string &dev,
               const select::Selection &e, const ModifyRequest &req, PreflightResult &r) {
    int mtu = req.attr.path_mtu;
    if (!select::mtu_valid(mtu)) {
        r.problems.push_back({"path_mtu", EINVAL,
                              util::format("path_mtu %d is not an IB MTU (IBV_MTU_256 = 1 .. "
                                           "IBV_MTU_4096 = 5)",
                                           mtu),
                              "use the selection's path MTU"});
        return;
    }
    int bytes = select::mtu_bytes(static_cast<ibv_mtu>(mtu));
    if (port.active_mtu > 0 && bytes > port.active_mtu) {
        r.problems.push_back(
            {"path_mtu", 0,
             util::format("path_mtu %d exceeds the active MTU %d of %s: larger packets would be "
                          "dropped",
                          bytes, port.active_mtu, where(dev, port.port).c_str()),
             util::format("reconnect with a path MTU of at most %d on both sides (did the "
                          "netdev MTU change?)",
                          port.active_mtu)});
        return;
    }
    const topo::NetdevInfo *nd = fresh.find_netdev(e.netdev);
    int limit = nd != nullptr && nd->mtu > 0 ? select::iboe_mtu_bytes(nd->mtu) : 0;
    if (limit > 0 && bytes > limit) {
        r.problems.push_back(
            {"path_mtu", 0,
             util::format("path_mtu %d exceeds what %s's MTU %d carries (%d after %d bytes of "
                          "RoCE headers)",
                          bytes, e.netdev.c_str(), nd->mtu, limit, select::kRoceHeaderBytes),
             util::format("reconnect with a path MTU of at most %d on both sides, or raise the "
                          "MTU of %s",
                          limit, e.netdev.c_str())});
    }
}

bool is_dc(QpType t) { return t == QpType::kDCI || t == QpType::kDCT; }

/// What a DC QP needs beyond the addressing: a port that carries traffic
/// (a DC target or initiator on a down port is accepted by the kernel and
/// then never answers or is never answered: every peer's requests time
/// out, unlike an RC QP that fails one connection), access flags a DC
/// target knows, and a min_rnr_timer the 5-bit field holds (mlx5 writes the
/// low 5 bits of it into the DCT/DCI context without a check).
void check_dc(const PortInfo &port, const std::string &dev, const PreflightContext &ctx,
              const ModifyRequest &req, PreflightResult &r) {
    if (port.state != topo::PortState::kActive && port.state != topo::PortState::kUnknown) {
        r.problems.push_back(
            {"port_state", 0,
             util::format("%s is %s: a DC %s on it serves every peer, and none would be "
                          "reached",
                          where(dev, port.port).c_str(), topo::to_string(port.state),
                          ctx.type == QpType::kDCT ? "target" : "initiator"),
             "bring the link up (ip link, the switch port) or leave this port out "
             "(btl_roce_if_exclude)"});
    }
    constexpr unsigned kDcAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if ((req.mask & IBV_QP_ACCESS_FLAGS) && (req.attr.qp_access_flags & ~kDcAccess) != 0) {
        r.problems.push_back(
            {"qp_access_flags", 0,
             util::format("access flags 0x%x carry bits 0x%x that a DC target does not take "
                          "(it knows LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC)",
                          req.attr.qp_access_flags, req.attr.qp_access_flags & ~kDcAccess),
             "a bug in the caller: pass only the remote access the target grants"});
    }
    if ((req.mask & IBV_QP_MIN_RNR_TIMER) && req.attr.min_rnr_timer > 31) {
        r.problems.push_back(
            {"min_rnr_timer", 0,
             util::format("min_rnr_timer %d does not fit the 5-bit field: the device would "
                          "use %d",
                          req.attr.min_rnr_timer, req.attr.min_rnr_timer & 31),
             "use an IB RNR timer code 0..31 (12 = 0.64 ms)"});
    }
}

} // namespace

PreflightResult preflight(const topo::Snapshot &fresh, const PreflightContext &ctx,
                          ModifyRequest &req) {
    PreflightResult r;
    check_mask(ctx, req, r);
    const select::Selection &e = ctx.expected;
    const topo::DeviceInfo *dev = fresh.find_device(e.device);
    if (dev == nullptr) {
        r.problems.push_back({"device", ENODEV,
                              e.device + " is no longer present (a LAG being created or "
                                         "destroyed re-registers the RDMA device)",
                              "open the device again and recreate the QP"});
        return r;
    }
    int port_num = (req.mask & IBV_QP_PORT) ? req.attr.port_num : e.port;
    const PortInfo *port = check_port(*dev, port_num, "port_num", r);
    if (port != nullptr && (req.mask & IBV_QP_PKEY_INDEX)) {
        check_pkey(*port, dev->name, ctx, req, r);
    }
    if (req.mask & IBV_QP_QKEY) {
        check_qkey(ctx, req, r);
    }
    if (req.mask & IBV_QP_AV) {
        check_av(*dev, e, req.attr.ah_attr, r);
    }
    if (port != nullptr && (req.mask & IBV_QP_PATH_MTU)) {
        check_mtu(fresh, *port, dev->name, e, req, r);
    }
    if (port != nullptr && is_dc(ctx.type)) {
        check_dc(*port, dev->name, ctx, req, r);
    }
    return r;
}

PreflightResult preflight_ah(const topo::Snapshot &fresh, const select::Selection &expected,
                             ibv_ah_attr &ah) {
    PreflightResult r;
    const topo::DeviceInfo *dev = fresh.find_device(expected.device);
    if (dev == nullptr) {
        r.problems.push_back({"device", ENODEV, expected.device + " is no longer present",
                              "open the device again"});
        return r;
    }
    check_av(*dev, expected, ah, r);
    return r;
}

} // namespace roce::qp
