// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/sysfs_reader.h"

#include <algorithm>
#include <map>

#include "util/strings.h"

namespace roce::topo {

using util::Code;
using util::Result;
using util::Status;

namespace {

void warn(std::vector<std::string> *warnings, std::string line) {
    if (warnings != nullptr) {
        warnings->push_back(std::move(line));
    }
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/// The tree being read, for one read_rdma_sysfs() / read_netdevs_sysfs()
/// call. A read that fails with an errno is the kernel's answer and the
/// caller's to tolerate where sysfs does that (EINVAL for an empty slot's
/// type or a down netdev's carrier, ENOENT for an attribute an older kernel
/// lacks). A file the reading rules refuse - a link, a FIFO, a file over the
/// cap: an error without an errno (fs.h) - is never the kernel's answer: the
/// first one is kept in `refused` and fails the whole read.
struct Attrs {
    const fs::Tree &tree;
    Status refused;

    template <typename T>
    Result<T> keep(Result<T> r) {
        if (!r && r.status().sys_errno() == 0 && refused.is_ok()) {
            refused = r.status();
        }
        return r;
    }
    Result<std::string> line(const std::string &rel) { return keep(tree.read_line(rel)); }
    Result<std::string> text(const std::string &rel) { return keep(tree.read_text(rel)); }
    Result<std::vector<std::string>> dir(const std::string &rel) {
        return keep(tree.list_dir(rel));
    }
    Result<std::string> link(const std::string &rel) { return keep(tree.link_name(rel)); }
};

/// The numbered entries of directory REL ("0", "1", ...; the kernel writes
/// them with "%d": no sign, no leading zero) in ascending order; other names
/// are not slots and are left alone. A number above `max` is an error: the
/// kernel cannot have made it (see the limits in sysfs_reader.h).
Result<std::vector<int>> numbered(const fs::Tree &t, const std::string &rel,
                                  const std::vector<std::string> &names, int max, const char *what,
                                  const char *limit) {
    std::vector<int> out;
    for (const auto &n : names) {
        if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos ||
            (n.size() > 1 && n[0] == '0')) {
            continue;
        }
        auto v = util::parse_uint(n);
        if (!v || *v > static_cast<uint64_t>(max)) {
            return Status(Code::kInvalidArgument,
                          util::format("%s: %s %s is beyond the kernel's limit (%s)",
                                       t.shown(rel + "/" + n).c_str(), what, n.c_str(), limit));
        }
        out.push_back(static_cast<int>(*v));
    }
    std::sort(out.begin(), out.end());
    return out;
}

Result<std::vector<int>> gid_slots(const fs::Tree &t, const std::string &rel,
                                   const std::vector<std::string> &names) {
    return numbered(t, rel, names, kMaxGidSlots - 1, "GID slot",
                    "a GID table has at most 65535 slots, 0..65534");
}

Result<std::vector<int>> pkey_slots(const fs::Tree &t, const std::string &rel,
                                    const std::vector<std::string> &names) {
    return numbered(t, rel, names, kMaxPkeySlots - 1, "pkey slot",
                    "a pkey table has at most 65535 slots, 0..65534");
}

LinkLayer parse_link_layer(const std::string &s) {
    if (s == "Ethernet") {
        return LinkLayer::kEthernet;
    }
    if (s == "InfiniBand") {
        return LinkLayer::kInfiniBand;
    }
    return LinkLayer::kUnknown;
}

bool all_zero(const std::array<uint8_t, 16> &g) {
    return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}

Status read_gid_slot(Attrs &a, const std::string &port_dir, int index, LinkLayer ll, PortInfo &port,
                     std::vector<std::string> *warnings) {
    const std::string slot = std::to_string(index);
    const std::string gid_rel = port_dir + "/gids/" + slot;
    auto text = a.line(gid_rel);
    if (!text) {
        warn(warnings, text.status().message() + "; slot skipped");
        return Status::ok();
    }
    auto gid = parse_sysfs_gid(*text);
    if (!gid) {
        return Status(Code::kInvalidArgument,
                      a.tree.shown(gid_rel) + ": '" + util::printable(*text) +
                          "' is not a GID (expected 8 groups of 4 hex digits separated by ':')");
    }
    if (all_zero(*gid)) {
        return Status::ok(); // an empty slot
    }
    const std::string type_rel = port_dir + "/gid_attrs/types/" + slot;
    auto type_text = a.line(type_rel);
    if (!type_text) {
        warn(warnings, type_text.status().message() + "; gid[" + slot + "] " + gid_to_string(*gid) +
                           " skipped because its type is unknown");
        return Status::ok();
    }
    auto type = parse_sysfs_gid_type(*type_text, ll);
    if (!type) {
        return Status(Code::kInvalidArgument,
                      a.tree.shown(type_rel) + ": '" + util::printable(*type_text) +
                          "' is not a GID type (expected 'IB/RoCE v1' or 'RoCE v2')");
    }
    GidEntry e;
    e.index = index;
    e.gid = *gid;
    e.type = *type;
    auto ndev = a.line(port_dir + "/gid_attrs/ndevs/" + slot);
    if (ndev) {
        e.netdev = *ndev;
    } else if (ll == LinkLayer::kEthernet) {
        warn(warnings, ndev.status().message() + "; gid[" + slot + "] has no known netdev");
    }
    port.gids.push_back(std::move(e));
    return Status::ok();
}

Result<PortInfo> read_port(Attrs &a, const std::string &port_dir, int port_num,
                           std::vector<std::string> *warnings) {
    PortInfo port;
    port.port = port_num;
    auto state = a.line(port_dir + "/state");
    port.state = state ? parse_sysfs_port_state(*state) : PortState::kUnknown;
    auto ll = a.line(port_dir + "/link_layer");
    port.link_layer = ll ? parse_link_layer(*ll) : LinkLayer::kUnknown;

    auto gid_names = a.dir(port_dir + "/gids");
    if (!gid_names) {
        return gid_names.status();
    }
    auto slots = gid_slots(a.tree, port_dir + "/gids", *gid_names);
    if (!slots) {
        return slots.status();
    }
    port.gid_tbl_len = slots->empty() ? 0 : slots->back() + 1;
    for (int index : *slots) {
        Status st = read_gid_slot(a, port_dir, index, port.link_layer, port, warnings);
        if (!st) {
            return st;
        }
    }

    auto pkey_names = a.dir(port_dir + "/pkeys");
    auto pslots = pkey_slots(a.tree, port_dir + "/pkeys",
                             pkey_names ? *pkey_names : std::vector<std::string>{});
    if (!pslots) {
        return pslots.status();
    }
    port.pkey_tbl_len = pslots->empty() ? 0 : pslots->back() + 1;
    port.pkeys.assign(static_cast<size_t>(port.pkey_tbl_len), 0);
    for (int index : *pslots) {
        const std::string rel = port_dir + "/pkeys/" + std::to_string(index);
        auto text = a.line(rel);
        if (!text) {
            warn(warnings, text.status().message() + "; pkey slot read as 0x0000");
            continue;
        }
        auto v = util::parse_uint(*text);
        if (!v || *v > 0xffff) {
            return Status(Code::kInvalidArgument, a.tree.shown(rel) + ": '" +
                                                      util::printable(*text) +
                                                      "' is not a pkey (expected 0x0000..0xffff)");
        }
        port.pkeys[static_cast<size_t>(index)] = static_cast<uint16_t>(*v);
    }
    return port;
}

Result<DeviceInfo> read_device(Attrs &a, const std::string &dev_dir, const std::string &name,
                               std::vector<std::string> *warnings) {
    DeviceInfo dev;
    dev.name = name;
    const std::string what = "RDMA device " + util::printable(name);
    auto port_names = a.dir(dev_dir + "/ports");
    if (!port_names) {
        return port_names.status().with_context(what);
    }
    auto ports = numbered(a.tree, dev_dir + "/ports", *port_names, kMaxPort, "port",
                          "port numbers are 8 bits, at most 255");
    if (!ports) {
        return ports.status().with_context(what);
    }
    for (int p : *ports) {
        auto port = read_port(a, dev_dir + "/ports/" + std::to_string(p), p, warnings);
        if (!port) {
            return port.status().with_context(what + " port " + std::to_string(p));
        }
        dev.ports.push_back(std::move(port.value()));
    }
    dev.phys_port_cnt = static_cast<int>(dev.ports.size());
    return dev;
}

BondMode parse_bond_mode(const std::string &text) {
    // sysfs: "802.3ad 4"; ip -j: "802.3ad". The name decides.
    std::string name = text.substr(0, text.find(' '));
    for (int m = 0; m <= 6; ++m) {
        if (name == to_string(static_cast<BondMode>(m))) {
            return static_cast<BondMode>(m);
        }
    }
    return BondMode::kUnknown;
}

OperState parse_operstate(const std::string &text) {
    std::string up;
    for (char c : text) {
        up += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    for (int s = 0; s <= 6; ++s) {
        if (up == to_string(static_cast<OperState>(s))) {
            return static_cast<OperState>(s);
        }
    }
    return OperState::kUnknown;
}

int read_int(Attrs &a, const std::string &rel, int fallback) {
    auto text = a.line(rel);
    if (!text) {
        return fallback;
    }
    auto v = util::parse_int(*text);
    return v ? static_cast<int>(*v) : fallback;
}

BondInfo read_bond(Attrs &a, const std::string &dir) {
    BondInfo b;
    auto mode = a.line(dir + "/bonding/mode");
    b.mode = mode ? parse_bond_mode(*mode) : BondMode::kUnknown;
    auto slaves = a.line(dir + "/bonding/slaves");
    if (slaves) {
        for (auto &s : util::split_list(*slaves, ' ')) {
            b.slaves.push_back(s);
        }
    }
    auto active = a.line(dir + "/bonding/active_slave");
    b.active_slave = active ? *active : "";
    b.ad_num_ports = read_int(a, dir + "/bonding/ad_num_ports", -1);
    auto hash = a.line(dir + "/bonding/xmit_hash_policy");
    b.xmit_hash_policy = hash ? hash->substr(0, hash->find(' ')) : "";
    b.miimon_ms = read_int(a, dir + "/bonding/miimon", -1);
    return b;
}

std::string devtype_from_uevent(Attrs &a, const std::string &dir) {
    auto text = a.text(dir + "/uevent");
    if (!text) {
        return "";
    }
    for (const auto &line : util::split_list(*text, '\n')) {
        if (line.rfind("DEVTYPE=", 0) == 0) {
            return line.substr(8);
        }
    }
    return "";
}

/// The netdev a stacked device sits on (its lower_* entry), or "".
std::string lower_of(Attrs &a, const std::string &dir) {
    std::string lower;
    auto entries = a.dir(dir);
    for (const auto &e : entries ? *entries : std::vector<std::string>{}) {
        if (e.rfind("lower_", 0) == 0) {
            lower = e.substr(6);
        }
    }
    return lower;
}

NetdevInfo read_netdev(Attrs &a, const std::string &dir, const std::string &name,
                       const std::map<std::string, int> &vlan_ids) {
    NetdevInfo n;
    n.name = name;
    n.ifindex = read_int(a, dir + "/ifindex", 0);
    n.mtu = read_int(a, dir + "/mtu", 0);
    auto oper = a.line(dir + "/operstate");
    n.operstate = oper ? parse_operstate(*oper) : OperState::kUnknown;
    n.carrier = read_int(a, dir + "/carrier", 0) == 1;
    // EINVAL when down, -1 or absent on virtual devices: unknown.
    int speed = read_int(a, dir + "/speed", -1);
    n.speed_mbps = speed > 0 ? speed : -1;
    auto mac = a.line(dir + "/address");
    n.mac = mac ? *mac : "";
    auto master = a.link(dir + "/master");
    n.master = master ? *master : "";
    std::string devtype = devtype_from_uevent(a, dir);
    if (a.tree.is_dir(dir + "/bonding")) {
        n.kind = "bond";
        n.bond = read_bond(a, dir);
    } else if (devtype == "vlan" || devtype == "macvlan") {
        n.kind = devtype;
        n.parent = lower_of(a, dir);
        auto id = vlan_ids.find(name);
        if (devtype == "vlan" && id != vlan_ids.end()) {
            n.vlan_id = id->second;
        }
    } else if (!devtype.empty()) {
        n.kind = devtype; // vxlan, geneve, bridge, ... (the driver's device type)
    } else if (!a.tree.exists(dir + "/device")) {
        // macvlan, ipvlan and team set no DEVTYPE: sysfs cannot name their
        // kind, but a software device (no `device` link) with a lower_*
        // link is stacked on that netdev, which is what the policy needs.
        n.parent = lower_of(a, dir);
    }
    return n;
}

} // namespace

std::optional<std::array<uint8_t, 16>> parse_sysfs_gid(std::string_view text) {
    text = util::trim(text);
    if (text.size() != 39) {
        return std::nullopt;
    }
    std::array<uint8_t, 16> g{};
    size_t byte = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (i % 5 == 4) {
            if (text[i] != ':') {
                return std::nullopt;
            }
            continue;
        }
        int hi = hex_digit(text[i]);
        int lo = i + 1 < text.size() ? hex_digit(text[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
            return std::nullopt;
        }
        g[byte++] = static_cast<uint8_t>(hi << 4 | lo);
        ++i;
    }
    return g;
}

std::string format_sysfs_gid(const std::array<uint8_t, 16> &gid) {
    std::string out;
    for (size_t i = 0; i < 16; i += 2) {
        out += util::format("%s%02x%02x", i ? ":" : "", gid[i], gid[i + 1]);
    }
    return out;
}

std::optional<GidType> parse_sysfs_gid_type(std::string_view text, LinkLayer link_layer) {
    text = util::trim(text);
    if (text == "RoCE v2") {
        return GidType::kRoceV2;
    }
    if (text == "IB/RoCE v1" || text == "RoCE v1" || text == "IB") {
        if (text == "IB" || link_layer == LinkLayer::kInfiniBand) {
            return GidType::kIB;
        }
        return GidType::kRoceV1;
    }
    return std::nullopt;
}

PortState parse_sysfs_port_state(std::string_view text) {
    auto num = util::parse_uint(util::trim(text.substr(0, text.find(':'))));
    if (!num) {
        return PortState::kUnknown;
    }
    switch (*num) {
    case 1: return PortState::kDown;
    case 2: return PortState::kInit;
    case 3: return PortState::kArmed;
    case 4: return PortState::kActive;
    case 5: return PortState::kActiveDefer;
    default: return PortState::kUnknown;
    }
}

std::vector<std::pair<std::string, int>> parse_proc_vlan_config(std::string_view text) {
    std::vector<std::pair<std::string, int>> out;
    for (const auto &line : util::split_list(text, '\n')) {
        auto cols = util::split_list(line, '|');
        if (cols.size() != 3) {
            continue;
        }
        auto id = util::parse_uint(cols[1]);
        if (id && *id < 4096) {
            out.emplace_back(cols[0], static_cast<int>(*id));
        }
    }
    return out;
}

Result<std::vector<DeviceInfo>> read_rdma_sysfs(const fs::Tree &root,
                                                std::vector<std::string> *warnings) {
    if (!root.is_dir("")) {
        return Status(Code::kNotFound, "sysfs root " + root.shown("") + " is not a directory");
    }
    const std::string dir = "sys/class/infiniband";
    std::vector<DeviceInfo> devices;
    if (!root.exists(dir)) {
        return devices;
    }
    auto names = root.list_dir(dir);
    if (!names) {
        return names.status();
    }
    for (const auto &name : *names) {
        Attrs a{root, Status::ok()};
        auto dev = read_device(a, dir + "/" + name, name, warnings);
        if (!dev) {
            return dev.status();
        }
        if (!a.refused.is_ok()) {
            return a.refused;
        }
        devices.push_back(std::move(dev.value()));
    }
    return devices;
}

Result<std::vector<NetdevInfo>> read_netdevs_sysfs(const fs::Tree &root,
                                                   std::vector<std::string> *warnings) {
    const std::string dir = "sys/class/net";
    auto names = root.list_dir(dir);
    if (!names) {
        return names.status().with_context("reading netdevs");
    }
    Attrs a{root, Status::ok()};
    std::map<std::string, int> vlan_ids;
    auto vlan_text = a.text("proc/net/vlan/config");
    if (vlan_text) {
        for (auto &[name, id] : parse_proc_vlan_config(*vlan_text)) {
            vlan_ids[name] = id;
        }
    }
    std::vector<NetdevInfo> out;
    for (const auto &name : *names) {
        const std::string rel = dir + "/" + name;
        if (!root.is_dir(rel)) {
            // bonding_masters and other plain files are not netdevs; in a
            // capture, a link is not followed and says so.
            if (root.links() == fs::Links::kRefuse && root.is_link(rel)) {
                warn(warnings, root.list_dir(rel).status().message() + "; netdev left out");
            }
            continue;
        }
        out.push_back(read_netdev(a, rel, name, vlan_ids));
        if (!a.refused.is_ok()) {
            return a.refused;
        }
        const NetdevInfo &n = out.back();
        if (n.kind == "vlan" && n.vlan_id < 0) {
            warn(warnings, "VLAN " + util::printable(name) +
                               ": id unknown (no entry in proc/net/vlan/config)");
        }
    }
    if (!a.refused.is_ok()) {
        return a.refused; // proc/net/vlan/config
    }
    std::stable_sort(out.begin(), out.end(), [](const NetdevInfo &x, const NetdevInfo &y) {
        return x.ifindex < y.ifindex;
    });
    return out;
}

} // namespace roce::topo
