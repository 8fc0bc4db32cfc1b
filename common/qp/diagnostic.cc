// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/diagnostic.h"

#include <cerrno>
#include <cstring>

#include "select/mtu.h"
#include "select/options.h"
#include "util/strings.h"

namespace roce::qp {

namespace {

std::string errno_text(int err) { return util::format("%s (%d)", std::strerror(err), err); }

LikelyCause einval_cause(Transition t, const ModifyRequest &req) {
    if (req.mask & (IBV_QP_PORT | IBV_QP_PKEY_INDEX)) {
        return {"an attribute is out of range for this device: a port_num beyond its ports (a LAG "
                "device such as mlx5_bond_0 has only port 1) or a pkey_index beyond its pkey "
                "table (mlx5 checks; RoCE tables have one entry), or the attribute mask does not "
                "fit this transition",
                "use port 1 and pkey_index 0 on a LAG device; roce-doctor shows the device's "
                "ports and tables"};
    }
    if (t == Transition::kInitToRtr) {
        return {"the address vector or the path MTU does not fit the port (RoCE needs a GRH; the "
                "MTU must be 256..4096 and not above the port's), or the attribute mask is not "
                "the one INIT->RTR takes",
                "check the request against `roce-doctor --check`, which runs the same "
                "transitions with the selected attributes"};
    }
    return {"an attribute or the attribute mask does not fit this QP type and transition",
            "compare the mask with the one the kernel requires (ib_modify_qp_is_ok)"};
}

/// After a failed call: what a preflight against the fresh snapshot says
/// explains this errno (e.g. the GID moved between our check and the call).
std::vector<Problem> post_mortem(const DiagnosticInput &in) {
    std::vector<Problem> out;
    if (in.fresh == nullptr || in.sel == nullptr || in.req == nullptr || in.verb != nullptr) {
        return out;
    }
    ModifyRequest copy = *in.req;
    // EPERM is only explained by the qkey if the process is unprivileged.
    PreflightContext ctx{in.type, in.transition, *in.sel, in.err != EPERM};
    for (auto &p : preflight(*in.fresh, ctx, copy).problems) {
        if (p.kernel_errno == in.err) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

const char *header_verb(const DiagnosticInput &in) {
    return in.verb != nullptr ? in.verb : "ibv_modify_qp";
}

/// The problems that explain `err` (all of them when none matches exactly).
std::vector<const Problem *> matching(const std::vector<Problem> &ps, int err) {
    std::vector<const Problem *> out;
    for (const auto &p : ps) {
        if (p.kernel_errno == err) {
            out.push_back(&p);
        }
    }
    if (out.empty()) {
        for (const auto &p : ps) {
            out.push_back(&p);
        }
    }
    return out;
}

} // namespace

LikelyCause likely_cause(int err, QpType type, Transition t, const ModifyRequest &req) {
    switch (err) {
    case EPERM:
    case EACCES:
        if ((req.mask & IBV_QP_QKEY) && (req.attr.qkey & select::kControlledQkeyBit)) {
            return {util::format("the qkey %s has bit 31 set (a controlled qkey) and the process "
                                 "lacks CAP_NET_RAW: Linux >= 6.4 refuses it",
                                 util::hex32(req.attr.qkey).c_str()),
                    util::format("use a qkey below 0x80000000 (btl_roce_qkey, default %s), or "
                                 "run with CAP_NET_RAW",
                                 util::hex32(select::kDefaultQkey).c_str())};
        }
        return {"the kernel requires a privilege (CAP_NET_RAW) for one of the attributes",
                "run the job without privileged attributes, or grant CAP_NET_RAW"};
    case EINVAL: return einval_cause(t, req);
    case ENODATA:
        return {util::format("sgid_index %d is an empty slot or beyond the GID table: a GID "
                             "index that went stale when the bond's or a VLAN's addresses "
                             "changed (the kernel moves entries to the first free slot)",
                             req.attr.ah_attr.grh.sgid_index),
                "select the GID again from the current table (roce-doctor) and reconnect"};
    case ETIMEDOUT:
        return {"resolving the peer's MAC address (ARP/ND for the destination GID over the "
                "source GID's netdev) timed out: the peer is not reachable in that subnet or "
                "VLAN, or its GID is wrong",
                "check that both sides chose GIDs in the same subnet (roce-doctor --peer ADDR) "
                "and that `ping -I NETDEV ADDR` reaches the peer"};
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EADDRNOTAVAIL:
        return {"there is no route from the source GID's netdev to the destination address",
                "choose a GID in the peer's subnet (roce-doctor --peer ADDR) or add the route"};
    case ENODEV:
    case ENXIO:
        return {"the RDMA device or the GID's netdev went away (creating or destroying a LAG "
                "re-registers the RDMA device; a VLAN may have been deleted)",
                "open the device again, take a new snapshot and recreate the QP"};
    case EOPNOTSUPP:
        if (type == QpType::kDCT && (req.mask & IBV_QP_ACCESS_FLAGS) &&
            (req.attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
            return {"the device has no atomics over DC: mlx5 refuses REMOTE_ATOMIC on a DC "
                    "target (mlx5_ib_modify_dct)",
                    "activate the target without REMOTE_ATOMIC and keep atomics on RC"};
        }
        return {util::format("the device does not support a %s QP or one of the attributes (DC "
                             "needs mlx5)",
                             to_string(type)),
                "use RC/UD on this device"};
    case ENOMEM:
    case EAGAIN:
        return {"the device or the kernel ran out of resources (QPs, memory, locked memory)",
                "raise `ulimit -l`, use fewer QPs, or check for leaked QPs"};
    case EBUSY:
        return {"the object is in use", "destroy dependent objects first"};
    case EIO:
        return {"the device is in a fatal error state (firmware or PCI error)",
                "check `dmesg` and the device's health; a reset of the driver may be needed"};
    case EFAULT:
        return {"the kernel could not read the request (a bug: bad pointer)", "report a bug"};
    default:
        return {"an error ibv_modify_qp does not usually return",
                "run `roce-doctor --check` and include its output in a bug report"};
    }
}

std::string describe_attributes(const DiagnosticInput &in) {
    const select::Selection empty;
    const select::Selection &s = in.sel != nullptr ? *in.sel : empty;
    const ModifyRequest none;
    const ModifyRequest &r = in.req != nullptr ? *in.req : none;
    int port = (r.mask & IBV_QP_PORT) ? r.attr.port_num : s.port;
    if (r.mask & IBV_QP_AV) {
        port = r.attr.ah_attr.port_num;
    }
    const topo::DeviceInfo *dev = in.fresh ? in.fresh->find_device(s.device) : nullptr;
    const topo::PortInfo *pi = dev ? dev->find_port(port) : nullptr;
    std::string out = util::format("on %s:%d", s.device.c_str(), port);

    int pkey_index = (r.mask & IBV_QP_PKEY_INDEX) ? r.attr.pkey_index : s.pkey_index;
    uint16_t pkey = s.pkey;
    if (pi != nullptr && pkey_index < static_cast<int>(pi->pkeys.size())) {
        pkey = pi->pkeys[static_cast<size_t>(pkey_index)];
    }
    bool pkey_known = pi == nullptr || pi->pkeys.empty() ||
                      pkey_index < static_cast<int>(pi->pkeys.size());
    out += util::format(" pkey_index %d (%s)", pkey_index,
                        pkey_known ? util::format("0x%04x", pkey).c_str() : "beyond the table");
    if (in.type == QpType::kUD) {
        uint32_t qkey = (r.mask & IBV_QP_QKEY) ? r.attr.qkey : s.qkey;
        out += " qkey " + util::hex32(qkey);
    }
    int gid_index = (r.mask & IBV_QP_AV) ? r.attr.ah_attr.grh.sgid_index : s.gid_index;
    if (gid_index >= 0) {
        const topo::GidEntry *g = pi ? pi->find_gid(gid_index) : nullptr;
        if (g != nullptr) {
            out += util::format(" gid[%d] %s (%s, %s)", gid_index,
                                topo::gid_to_string(g->gid).c_str(), topo::to_string(g->type),
                                g->netdev.c_str());
        } else if (pi != nullptr) {
            out += util::format(" gid[%d] (empty now; selected as %s)", gid_index,
                                topo::gid_to_string(s.gid).c_str());
        } else {
            out += util::format(" gid[%d] %s (%s, %s)", gid_index,
                                topo::gid_to_string(s.gid).c_str(), topo::to_string(s.gid_type),
                                s.netdev.c_str());
        }
    }
    int mtu = (r.mask & IBV_QP_PATH_MTU) ? r.attr.path_mtu : s.path_mtu;
    int bytes = select::mtu_bytes(static_cast<ibv_mtu>(mtu));
    out += bytes > 0 ? util::format(" mtu %d", bytes) : util::format(" mtu (invalid enum %d)", mtu);
    if (in.type == QpType::kDCI || in.type == QpType::kDCT) {
        // What a DC QP carries besides the addressing (the access key is
        // fixed at creation and is not an attribute of the transition).
        if (r.mask & IBV_QP_ACCESS_FLAGS) {
            out += " access " + access_names(r.attr.qp_access_flags);
        }
        if (r.mask & IBV_QP_MIN_RNR_TIMER) {
            out += util::format(" min_rnr_timer %d", r.attr.min_rnr_timer);
        }
    }
    return out;
}

std::string format_diagnostic(const DiagnosticInput &in) {
    std::string head =
        in.verb != nullptr
            ? util::format("%s(%s) ", header_verb(in), to_string(in.type))
            : util::format("%s(%s, %s) ", header_verb(in), to_string(in.type),
                           to_string(in.transition));
    head += describe_attributes(in);
    const ModifyRequest none;
    const ModifyRequest &req = in.req != nullptr ? *in.req : none;
    if (in.refused && in.problems != nullptr && !in.problems->empty()) {
        std::vector<std::string> what, fixes;
        int err = 0;
        for (const auto &p : *in.problems) {
            what.push_back(p.attribute + ": " + p.message);
            fixes.push_back(p.fix);
            err = err != 0 ? err : p.kernel_errno;
        }
        std::string outcome = err != 0 ? "the kernel would fail with " + errno_text(err)
                                       : "the kernel would accept it, but the QP would not work";
        return head + " refused before the call: " + util::join(what, "; ") + " (" + outcome +
               "); fix: " + util::join(fixes, "; ");
    }
    std::string cause, fix;
    std::vector<Problem> found = in.problems != nullptr ? *in.problems : post_mortem(in);
    if (!found.empty()) {
        std::vector<std::string> causes, fixes;
        for (const Problem *p : matching(found, in.err)) {
            causes.push_back(p->attribute + ": " + p->message);
            fixes.push_back(p->fix);
        }
        cause = util::join(causes, "; ");
        fix = util::join(fixes, "; ");
    } else {
        LikelyCause lc = likely_cause(in.err, in.type, in.transition, req);
        cause = lc.cause;
        fix = lc.fix;
    }
    return head + " failed: " + errno_text(in.err) + "; likely cause: " + cause + "; fix: " + fix;
}

} // namespace roce::qp
