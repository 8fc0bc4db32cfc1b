// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "render.h"

#include <algorithm>
#include <sstream>

#include "select/gid_rank.h"
#include "select/mtu.h"
#include "util/strings.h"

namespace roce::doctor {

using util::Json;

namespace {

std::string addresses(const topo::NetdevInfo &n) {
    std::vector<std::string> out;
    for (const auto &a : n.addresses) {
        out.push_back(a.address.to_string() + "/" + std::to_string(a.prefix_len));
    }
    return out.empty() ? "no addresses" : util::join(out, ", ");
}

std::string netdev_line(const topo::Snapshot &s, const topo::NetdevInfo &n) {
    std::string kind;
    if (n.kind == "vlan") {
        kind = n.vlan_id >= 0 ? util::format("VLAN %d on %s; ", n.vlan_id, n.parent.c_str())
                             : util::format("VLAN (id unknown) on %s; ", n.parent.c_str());
    } else if (n.bond) {
        std::vector<std::string> members;
        for (const auto &m : n.bond->slaves) {
            const topo::NetdevInfo *mn = s.find_netdev(m);
            members.push_back(m + " (" + (mn ? topo::to_string(mn->operstate) : "?") + ")");
        }
        kind = util::format("bond %s (%s%s%s) over %s", topo::to_string(n.bond->mode),
                            n.bond->xmit_hash_policy.empty() ? "hash ?"
                                                             : n.bond->xmit_hash_policy.c_str(),
                            n.bond->miimon_ms >= 0
                                ? util::format(", miimon %d ms", n.bond->miimon_ms).c_str()
                                : "",
                            n.bond->active_slave.empty()
                                ? ""
                                : (", active " + n.bond->active_slave).c_str(),
                            members.empty() ? "no members" : util::join(members, ", ").c_str());
        if (n.bond->ad_num_ports >= 0) {
            kind += util::format(", %d in the active aggregator", n.bond->ad_num_ports);
        }
        kind += "; ";
    } else if (!n.kind.empty()) {
        kind = n.kind + "; ";
    }
    return util::format("%s: %sMTU %d; %s; %s", n.name.c_str(), kind.c_str(), n.mtu,
                        topo::to_string(n.operstate), addresses(n).c_str());
}

/// The netdevs behind a port's GIDs, each followed by its parents (VLAN ->
/// bond), each once.
std::vector<const topo::NetdevInfo *> port_netdevs(const topo::Snapshot &s,
                                                   const topo::PortInfo &p) {
    std::vector<const topo::NetdevInfo *> out;
    auto add = [&](const topo::NetdevInfo *n) {
        if (n != nullptr && std::find(out.begin(), out.end(), n) == out.end()) {
            out.push_back(n);
        }
    };
    for (const auto &g : p.gids) {
        const topo::NetdevInfo *n = s.find_netdev(g.netdev);
        for (int depth = 0; n != nullptr && depth < 4; ++depth) {
            add(n);
            n = !n->parent.empty() ? s.find_netdev(n->parent) : nullptr;
        }
    }
    return out;
}

std::string lag_line(const topo::Snapshot &s, const topo::DeviceInfo &d, const topo::PortInfo &p,
                     const topo::NetdevInfo &bond) {
    std::string line = util::format(
        "LAG: %s:%d carries %s (%s over %zu member%s: %s)", d.name.c_str(), p.port,
        bond.name.c_str(), topo::to_string(bond.bond->mode), bond.bond->slaves.size(),
        bond.bond->slaves.size() == 1 ? "" : "s", util::join(bond.bond->slaves, ", ").c_str());
    if (s.source != "live") {
        return line + "; num_lag_ports is not recorded in sysfs or captures";
    }
    if (d.num_lag_ports > 0) {
        return line + util::format("; mlx5dv num_lag_ports %d: one RDMA port, %d physical ports",
                                   d.num_lag_ports, d.num_lag_ports);
    }
    return line + "; no hardware LAG ports reported (not an mlx5 LAG device): the bond spreads "
                  "flows by its hash policy";
}

std::string settings_line(const select::Options &o) {
    std::vector<std::string> parts;
    parts.push_back(o.gid_index < 0 ? "automatic GID" : util::format("gid_index %d", o.gid_index));
    parts.push_back(std::string("RoCE version ") +
                    (o.roce_version == select::RoceVersion::kAuto ? "auto (v2 preferred)"
                                                                  : to_string(o.roce_version)));
    parts.push_back(std::string("address family ") + to_string(o.address_family));
    parts.push_back("qkey " + util::hex32(o.qkey));
    auto list = [](const std::vector<select::InterfaceRule> &rules) {
        std::vector<std::string> t;
        for (const auto &r : rules) {
            t.push_back(r.text);
        }
        return util::join(t, ",");
    };
    if (!o.include.empty()) {
        parts.push_back("if_include " + list(o.include));
    }
    if (!o.exclude.empty()) {
        parts.push_back("if_exclude " + list(o.exclude));
    }
    return util::join(parts, "; ");
}

/// "btl_roce_gid_index = 3 (from OMPI_MCA_btl_roce_gid_index; overrides
/// /etc/openmpi/openmpi-mca-params.conf:12)".
std::string setting_line(const Setting &s) {
    std::string from = "from " + s.source;
    if (!s.shadows.empty()) {
        from += "; overrides " + util::join(s.shadows, ", ");
    }
    return s.name + " = " + s.value + " (" + from + ")";
}

void config_text(std::ostringstream &o, const McaConfig &c) {
    for (const auto &[name, s] : c.settings) {
        o << "setting: " << setting_line(s) << "\n";
    }
    if (!c.files.empty()) {
        o << "mca-params files: " << util::join(c.files, ", ") << "\n";
    }
    for (const auto &n : c.notes) {
        o << "note: " << n << "\n";
    }
}

Json config_json(const McaConfig &c) {
    Json j = Json::object();
    Json settings = Json::array();
    for (const auto &[name, s] : c.settings) {
        Json sj = Json::object();
        sj["name"] = s.name;
        sj["value"] = s.value;
        sj["source"] = s.source;
        Json sh = Json::array();
        for (const auto &x : s.shadows) {
            sh.push(x);
        }
        sj["shadows"] = std::move(sh);
        settings.push(std::move(sj));
    }
    j["settings"] = std::move(settings);
    Json files = Json::array();
    for (const auto &f : c.files) {
        files.push(f);
    }
    j["files"] = std::move(files);
    Json notes = Json::array();
    for (const auto &n : c.notes) {
        notes.push(n);
    }
    j["notes"] = std::move(notes);
    return j;
}

/// The "decided by: ..." line of a choice, without its label; "" when none.
std::string decided_by(const select::PortChoice &c) {
    const std::string label = "decided by: ";
    for (const auto &w : c.why) {
        if (w.rfind(label, 0) == 0) {
            return w.substr(label.size());
        }
    }
    return {};
}

std::string selection_line(const select::Selection &s) {
    return util::format("gid[%d] %s (%s, %s) port %d pkey_index %d (0x%04x) qkey %s path_mtu %d "
                        "(%s)",
                        s.gid_index, topo::gid_to_string(s.gid).c_str(),
                        topo::to_string(s.gid_type), s.netdev.c_str(), s.port, s.pkey_index,
                        s.pkey, util::hex32(s.qkey).c_str(), select::mtu_bytes(s.path_mtu),
                        select::mtu_name(s.path_mtu));
}

std::vector<const select::PortChoice *> choices_for(const select::SelectionReport &r,
                                                    const std::string &dev, int port) {
    std::vector<const select::PortChoice *> out;
    for (const auto &c : r.ports) {
        if (c.device == dev && c.port == port) {
            out.push_back(&c);
        }
    }
    return out;
}

void gid_table(std::ostringstream &o, const topo::Snapshot &s, const topo::PortInfo &p,
               const std::vector<const select::PortChoice *> &choices) {
    o << util::format("  GID table (%zu of %d slots populated):\n", p.gids.size(), p.gid_tbl_len);
    o << util::format("        %-5s %-28s %-8s %-12s %-28s %s\n", "idx", "gid", "type", "netdev",
                      "address", "verdict");
    for (const auto &g : p.gids) {
        std::vector<std::string> chosen_for;
        for (const auto *c : choices) {
            if (c->ok() && c->selection->gid_index == g.index) {
                chosen_for.push_back(c->peer.empty() ? "" : c->peer);
            }
        }
        std::string verdict;
        const bool is_chosen = !chosen_for.empty();
        if (is_chosen) {
            chosen_for.erase(std::remove(chosen_for.begin(), chosen_for.end(), ""),
                             chosen_for.end());
            verdict = chosen_for.empty() ? "chosen" : "chosen for " + util::join(chosen_for, ", ");
        } else if (!choices.empty()) {
            for (const auto &v : choices.front()->gids) {
                if (v.index == g.index) {
                    verdict = v.why;
                }
            }
        }
        int prefix = select::local_prefix(s, g);
        std::string addr = g.address().to_string() + (prefix >= 0 ? "/" + std::to_string(prefix) : "");
        o << util::format("     %s [%d]%*s %-28s %-8s %-12s %-28s %s\n",
                          is_chosen ? "=>" : "  ",
                          g.index, g.index < 10 ? 2 : g.index < 100 ? 1 : 0, "",
                          topo::gid_to_string(g.gid).c_str(), topo::to_string(g.type),
                          g.netdev.c_str(), addr.c_str(), verdict.c_str());
    }
}

void port_text(std::ostringstream &o, const Report &r, const topo::DeviceInfo &d,
               const topo::PortInfo &p) {
    const topo::Snapshot &s = *r.snapshot;
    std::vector<std::string> pkeys;
    for (auto k : p.pkeys) {
        pkeys.push_back(util::format("0x%04x", k));
    }
    o << util::format("\n%s port %d: %s, %s, %d GID slots, pkey table [%s], active MTU %s\n",
                      d.name.c_str(), p.port, topo::to_string(p.state),
                      topo::to_string(p.link_layer), p.gid_tbl_len, util::join(pkeys, ", ").c_str(),
                      p.active_mtu > 0 ? std::to_string(p.active_mtu).c_str()
                                       : "unknown (not in sysfs)");
    for (const auto &line : topology_lines(s, d, p)) {
        o << "  " << line << "\n";
    }
    auto choices = choices_for(*r.selection, d.name, p.port);
    gid_table(o, s, p, choices);
    for (const auto *c : choices) {
        std::string who = c->peer.empty() ? "" : " for peer " + c->peer;
        if (c->ok()) {
            o << "  selection" << who << ": " << selection_line(*c->selection) << "\n";
            std::string rule = decided_by(*c);
            if (!rule.empty()) {
                o << "  decided by: " << rule << "\n";
            }
        } else {
            o << "  selection" << who << ": none: " << c->error << "\n";
        }
        if (!c->why.empty()) {
            o << "  why:\n";
            for (const auto &w : c->why) {
                o << "    - " << w << "\n";
            }
        }
    }
}

Json selection_json(const select::PortChoice &c) {
    Json j = Json::object();
    j["device"] = c.device;
    j["port"] = c.port;
    j["peer"] = c.peer.empty() ? Json() : Json(c.peer);
    const select::Selection *s = c.ok() ? &*c.selection : nullptr;
    j["gid_index"] = s ? Json(s->gid_index) : Json();
    j["gid"] = s ? Json(topo::gid_to_string(s->gid)) : Json();
    j["gid_type"] = s ? Json(topo::to_string(s->gid_type)) : Json();
    j["netdev"] = s ? Json(s->netdev) : Json();
    j["pkey_index"] = s ? Json(s->pkey_index) : Json();
    j["pkey"] = s ? Json(util::format("0x%04x", s->pkey)) : Json();
    j["qkey"] = s ? Json(s->qkey) : Json();
    j["qkey_hex"] = s ? Json(util::hex32(s->qkey)) : Json();
    j["path_mtu"] = s ? Json(select::mtu_bytes(s->path_mtu)) : Json();
    j["path_mtu_enum"] = s ? Json(select::mtu_name(s->path_mtu)) : Json();
    j["explanation"] = c.explanation();
    std::string rule = decided_by(c);
    j["decided_by"] = rule.empty() ? Json() : Json(rule);
    if (!c.ok()) {
        j["error"] = c.error;
    }
    Json gids = Json::array();
    for (const auto &v : c.gids) {
        Json g = Json::object();
        g["index"] = v.index;
        g["chosen"] = v.chosen;
        g["verdict"] = v.chosen ? "chosen" : v.why;
        gids.push(std::move(g));
    }
    j["gids"] = std::move(gids);
    return j;
}

Json device_json(const topo::Snapshot &s, const topo::DeviceInfo &d) {
    Json dj = Json::object();
    dj["name"] = d.name;
    dj["phys_port_cnt"] = d.phys_port_cnt;
    dj["num_lag_ports"] = d.num_lag_ports;
    Json ports = Json::array();
    for (const auto &p : d.ports) {
        Json pj = Json::object();
        pj["port"] = p.port;
        pj["state"] = topo::to_string(p.state);
        pj["link_layer"] = topo::to_string(p.link_layer);
        pj["active_mtu"] = p.active_mtu > 0 ? Json(p.active_mtu) : Json();
        pj["gid_tbl_len"] = p.gid_tbl_len;
        Json pk = Json::array();
        for (auto k : p.pkeys) {
            pk.push(util::format("0x%04x", k));
        }
        pj["pkeys"] = std::move(pk);
        Json gids = Json::array();
        for (const auto &g : p.gids) {
            Json gj = Json::object();
            gj["index"] = g.index;
            gj["gid"] = topo::gid_to_string(g.gid);
            gj["type"] = topo::to_string(g.type);
            gj["netdev"] = g.netdev;
            gids.push(std::move(gj));
        }
        pj["gids"] = std::move(gids);
        Json topo_lines = Json::array();
        for (const auto &l : topology_lines(s, d, p)) {
            topo_lines.push(l);
        }
        pj["topology"] = std::move(topo_lines);
        ports.push(std::move(pj));
    }
    dj["ports"] = std::move(ports);
    return dj;
}

Json netdev_json(const topo::NetdevInfo &n) {
    Json j = Json::object();
    j["name"] = n.name;
    j["ifindex"] = n.ifindex;
    j["kind"] = n.kind;
    j["mtu"] = n.mtu;
    j["operstate"] = topo::to_string(n.operstate);
    j["master"] = n.master.empty() ? Json() : Json(n.master);
    j["parent"] = n.parent.empty() ? Json() : Json(n.parent);
    j["vlan_id"] = n.vlan_id >= 0 ? Json(n.vlan_id) : Json();
    if (n.bond) {
        Json b = Json::object();
        b["mode"] = topo::to_string(n.bond->mode);
        Json slaves = Json::array();
        for (const auto &sl : n.bond->slaves) {
            slaves.push(sl);
        }
        b["slaves"] = std::move(slaves);
        b["active_slave"] = n.bond->active_slave.empty() ? Json() : Json(n.bond->active_slave);
        b["ad_num_ports"] = n.bond->ad_num_ports >= 0 ? Json(n.bond->ad_num_ports) : Json();
        b["xmit_hash_policy"] = n.bond->xmit_hash_policy;
        j["bond"] = std::move(b);
    }
    Json addrs = Json::array();
    for (const auto &a : n.addresses) {
        addrs.push(a.address.to_string() + "/" + std::to_string(a.prefix_len));
    }
    j["addresses"] = std::move(addrs);
    return j;
}

} // namespace

std::vector<std::string> topology_lines(const topo::Snapshot &s, const topo::DeviceInfo &d,
                                        const topo::PortInfo &p) {
    std::vector<std::string> out;
    const topo::NetdevInfo *bond = nullptr;
    for (const auto *n : port_netdevs(s, p)) {
        out.push_back(netdev_line(s, *n));
        if (n->bond && bond == nullptr) {
            bond = n;
        }
    }
    if (bond != nullptr) {
        out.push_back(lag_line(s, d, p, *bond));
    } else if (d.num_lag_ports > 1) {
        out.push_back(util::format("LAG: mlx5dv num_lag_ports %d", d.num_lag_ports));
    }
    return out;
}

std::string render_text(const Report &r) {
    const topo::Snapshot &s = *r.snapshot;
    std::ostringstream o;
    o << util::format("roce-doctor %s - %s: %zu RDMA device%s, %zu netdevs\n", ROCE_VERSION,
                      s.source.c_str(), s.devices.size(), s.devices.size() == 1 ? "" : "s",
                      s.netdevs.size());
    o << "settings: " << settings_line(*r.options) << "\n";
    if (r.config != nullptr) {
        config_text(o, *r.config);
    }
    for (const auto &n : r.selection->notes) {
        o << "note: " << n << "\n";
    }
    for (const auto &w : s.warnings) {
        o << "warning: " << w << "\n";
    }
    for (const auto &d : s.devices) {
        for (const auto &p : d.ports) {
            port_text(o, r, d, p);
        }
    }
    if (r.checked) {
        o << "\ncheck (real QP transitions with the selected attributes):\n";
        if (r.checks.empty()) {
            o << "  nothing to check: no port has a selection\n";
        }
        for (const auto &c : r.checks) {
            // A skipped check's detail is "SKIP: <why>" (qp/check.h).
            o << util::format("  %s:%d %s: %s%s\n", c.device.c_str(), c.port,
                              qp::to_string(c.outcome.type),
                              c.outcome.skipped  ? ""
                              : c.outcome.passed ? "pass - "
                                                 : "FAIL - ",
                              c.outcome.detail.c_str());
        }
    }
    // Names come from the machine (a live netdev may be named with an
    // escape sequence); the line breaks are ours.
    return util::printable(o.str(), true);
}

Json render_json(const Report &r) {
    const topo::Snapshot &s = *r.snapshot;
    Json j = Json::object();
    j["tool"] = "roce-doctor";
    j["version"] = ROCE_VERSION;
    j["source"] = s.source;
    j["settings"] = settings_line(*r.options);
    if (r.config != nullptr) {
        j["configuration"] = config_json(*r.config);
    }
    Json ports = Json::array();
    for (const auto &c : r.selection->ports) {
        ports.push(selection_json(c));
    }
    j["ports"] = std::move(ports);
    Json notes = Json::array();
    for (const auto &n : r.selection->notes) {
        notes.push(n);
    }
    j["notes"] = std::move(notes);
    Json warnings = Json::array();
    for (const auto &w : s.warnings) {
        warnings.push(w);
    }
    j["warnings"] = std::move(warnings);
    Json devices = Json::array();
    for (const auto &d : s.devices) {
        devices.push(device_json(s, d));
    }
    j["devices"] = std::move(devices);
    Json netdevs = Json::array();
    for (const auto &n : s.netdevs) {
        netdevs.push(netdev_json(n));
    }
    j["netdevs"] = std::move(netdevs);
    if (r.checked) {
        Json checks = Json::array();
        for (const auto &c : r.checks) {
            Json cj = Json::object();
            cj["device"] = c.device;
            cj["port"] = c.port;
            cj["type"] = qp::to_string(c.outcome.type);
            cj["passed"] = c.outcome.passed;
            cj["skipped"] = c.outcome.skipped;
            cj["detail"] = c.outcome.detail;
            checks.push(std::move(cj));
        }
        j["checks"] = std::move(checks);
    }
    return j;
}

} // namespace roce::doctor
