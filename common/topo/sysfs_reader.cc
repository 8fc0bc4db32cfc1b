// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/sysfs_reader.h"

#include <algorithm>
#include <map>

#include "topo/fs.h"
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

/// Numeric directory entries ("0", "1", ...) in ascending order.
std::vector<int> numeric_entries(const std::vector<std::string> &names) {
    std::vector<int> out;
    for (const auto &n : names) {
        auto v = util::parse_uint(n);
        if (v && *v < 1u << 20 && n.find_first_not_of("0123456789") == std::string::npos) {
            out.push_back(static_cast<int>(*v));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
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

Status read_gid_slot(const std::string &port_dir, int index, LinkLayer ll, PortInfo &port,
                     std::vector<std::string> *warnings) {
    std::string gid_path = fs::join(port_dir, "gids/" + std::to_string(index));
    auto text = fs::read_line(gid_path);
    if (!text) {
        warn(warnings, text.status().message() + "; slot skipped");
        return Status::ok();
    }
    auto gid = parse_sysfs_gid(*text);
    if (!gid) {
        return Status(Code::kInvalidArgument,
                      gid_path + ": '" + *text +
                          "' is not a GID (expected 8 groups of 4 hex digits separated by ':')");
    }
    if (all_zero(*gid)) {
        return Status::ok(); // an empty slot
    }
    std::string type_path = fs::join(port_dir, "gid_attrs/types/" + std::to_string(index));
    auto type_text = fs::read_line(type_path);
    if (!type_text) {
        warn(warnings, type_text.status().message() + "; gid[" + std::to_string(index) + "] " +
                           gid_to_string(*gid) + " skipped because its type is unknown");
        return Status::ok();
    }
    auto type = parse_sysfs_gid_type(*type_text, ll);
    if (!type) {
        return Status(Code::kInvalidArgument,
                      type_path + ": '" + *type_text +
                          "' is not a GID type (expected 'IB/RoCE v1' or 'RoCE v2')");
    }
    GidEntry e;
    e.index = index;
    e.gid = *gid;
    e.type = *type;
    auto ndev = fs::read_line(fs::join(port_dir, "gid_attrs/ndevs/" + std::to_string(index)));
    if (ndev) {
        e.netdev = *ndev;
    } else if (ll == LinkLayer::kEthernet) {
        warn(warnings, ndev.status().message() + "; gid[" + std::to_string(index) +
                           "] has no known netdev");
    }
    port.gids.push_back(std::move(e));
    return Status::ok();
}

Result<PortInfo> read_port(const std::string &port_dir, int port_num,
                           std::vector<std::string> *warnings) {
    PortInfo port;
    port.port = port_num;
    auto state = fs::read_line(fs::join(port_dir, "state"));
    port.state = state ? parse_sysfs_port_state(*state) : PortState::kUnknown;
    auto ll = fs::read_line(fs::join(port_dir, "link_layer"));
    port.link_layer = ll ? parse_link_layer(*ll) : LinkLayer::kUnknown;

    auto gid_names = fs::list_dir(fs::join(port_dir, "gids"));
    if (!gid_names) {
        return gid_names.status();
    }
    std::vector<int> slots = numeric_entries(*gid_names);
    port.gid_tbl_len = slots.empty() ? 0 : slots.back() + 1;
    for (int index : slots) {
        Status st = read_gid_slot(port_dir, index, port.link_layer, port, warnings);
        if (!st) {
            return st;
        }
    }

    auto pkey_names = fs::list_dir(fs::join(port_dir, "pkeys"));
    std::vector<int> pkey_slots = pkey_names ? numeric_entries(*pkey_names) : std::vector<int>{};
    port.pkey_tbl_len = pkey_slots.empty() ? 0 : pkey_slots.back() + 1;
    port.pkeys.assign(static_cast<size_t>(port.pkey_tbl_len), 0);
    for (int index : pkey_slots) {
        std::string path = fs::join(port_dir, "pkeys/" + std::to_string(index));
        auto text = fs::read_line(path);
        if (!text) {
            warn(warnings, text.status().message() + "; pkey slot read as 0x0000");
            continue;
        }
        auto v = util::parse_uint(*text);
        if (!v || *v > 0xffff) {
            return Status(Code::kInvalidArgument,
                          path + ": '" + *text + "' is not a pkey (expected 0x0000..0xffff)");
        }
        port.pkeys[static_cast<size_t>(index)] = static_cast<uint16_t>(*v);
    }
    return port;
}

Result<DeviceInfo> read_device(const std::string &dev_dir, const std::string &name,
                               std::vector<std::string> *warnings) {
    DeviceInfo dev;
    dev.name = name;
    auto port_names = fs::list_dir(fs::join(dev_dir, "ports"));
    if (!port_names) {
        return port_names.status().with_context("RDMA device " + name);
    }
    for (int p : numeric_entries(*port_names)) {
        auto port = read_port(fs::join(dev_dir, "ports/" + std::to_string(p)), p, warnings);
        if (!port) {
            return port.status().with_context("RDMA device " + name + " port " +
                                               std::to_string(p));
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

int read_int(const std::string &path, int fallback) {
    auto text = fs::read_line(path);
    if (!text) {
        return fallback;
    }
    auto v = util::parse_int(*text);
    return v ? static_cast<int>(*v) : fallback;
}

BondInfo read_bond(const std::string &dir) {
    BondInfo b;
    auto mode = fs::read_line(fs::join(dir, "bonding/mode"));
    b.mode = mode ? parse_bond_mode(*mode) : BondMode::kUnknown;
    auto slaves = fs::read_line(fs::join(dir, "bonding/slaves"));
    if (slaves) {
        for (auto &s : util::split_list(*slaves, ' ')) {
            b.slaves.push_back(s);
        }
    }
    auto active = fs::read_line(fs::join(dir, "bonding/active_slave"));
    b.active_slave = active ? *active : "";
    b.ad_num_ports = read_int(fs::join(dir, "bonding/ad_num_ports"), -1);
    auto hash = fs::read_line(fs::join(dir, "bonding/xmit_hash_policy"));
    b.xmit_hash_policy = hash ? hash->substr(0, hash->find(' ')) : "";
    b.miimon_ms = read_int(fs::join(dir, "bonding/miimon"), -1);
    return b;
}

std::string devtype_from_uevent(const std::string &dir) {
    auto text = fs::read_text(fs::join(dir, "uevent"));
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

NetdevInfo read_netdev(const std::string &dir, const std::string &name,
                       const std::map<std::string, int> &vlan_ids) {
    NetdevInfo n;
    n.name = name;
    n.ifindex = read_int(fs::join(dir, "ifindex"), 0);
    n.mtu = read_int(fs::join(dir, "mtu"), 0);
    auto oper = fs::read_line(fs::join(dir, "operstate"));
    n.operstate = oper ? parse_operstate(*oper) : OperState::kUnknown;
    n.carrier = read_int(fs::join(dir, "carrier"), 0) == 1;
    auto mac = fs::read_line(fs::join(dir, "address"));
    n.mac = mac ? *mac : "";
    auto master = fs::link_name(fs::join(dir, "master"));
    n.master = master ? *master : "";
    std::string devtype = devtype_from_uevent(dir);
    if (fs::is_dir(fs::join(dir, "bonding"))) {
        n.kind = "bond";
        n.bond = read_bond(dir);
    } else if (devtype == "vlan" || devtype == "macvlan") {
        n.kind = devtype;
        auto entries = fs::list_dir(dir);
        for (const auto &e : entries ? *entries : std::vector<std::string>{}) {
            if (e.rfind("lower_", 0) == 0) {
                n.parent = e.substr(6);
            }
        }
        auto id = vlan_ids.find(name);
        if (devtype == "vlan" && id != vlan_ids.end()) {
            n.vlan_id = id->second;
        }
    } else if (!devtype.empty()) {
        n.kind = devtype;
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

Result<std::vector<DeviceInfo>> read_rdma_sysfs(const std::string &root,
                                                std::vector<std::string> *warnings) {
    if (!fs::is_dir(root)) {
        return Status(Code::kNotFound, "sysfs root " + root + " is not a directory");
    }
    std::string dir = fs::join(root, "sys/class/infiniband");
    std::vector<DeviceInfo> devices;
    if (!fs::is_dir(dir)) {
        return devices;
    }
    auto names = fs::list_dir(dir);
    if (!names) {
        return names.status();
    }
    for (const auto &name : *names) {
        auto dev = read_device(fs::join(dir, name), name, warnings);
        if (!dev) {
            return dev.status();
        }
        devices.push_back(std::move(dev.value()));
    }
    return devices;
}

Result<std::vector<NetdevInfo>> read_netdevs_sysfs(const std::string &root,
                                                   std::vector<std::string> *warnings) {
    std::string dir = fs::join(root, "sys/class/net");
    auto names = fs::list_dir(dir);
    if (!names) {
        return names.status().with_context("reading netdevs");
    }
    std::map<std::string, int> vlan_ids;
    auto vlan_text = fs::read_text(fs::join(root, "proc/net/vlan/config"));
    if (vlan_text) {
        for (auto &[name, id] : parse_proc_vlan_config(*vlan_text)) {
            vlan_ids[name] = id;
        }
    }
    std::vector<NetdevInfo> out;
    for (const auto &name : *names) {
        if (!fs::is_dir(fs::join(dir, name))) {
            continue; // bonding_masters and other plain files
        }
        out.push_back(read_netdev(fs::join(dir, name), name, vlan_ids));
        const NetdevInfo &n = out.back();
        if (n.kind == "vlan" && n.vlan_id < 0) {
            warn(warnings, "VLAN " + name + ": id unknown (no entry in proc/net/vlan/config)");
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const NetdevInfo &a, const NetdevInfo &b) { return a.ifindex < b.ifindex; });
    return out;
}

} // namespace roce::topo
