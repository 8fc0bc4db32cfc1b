// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/readers.h"

#include <ifaddrs.h>
#include <linux/if_vlan.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "topo/fs.h"
#include "topo/live_reader.h"
#include "topo/sysfs_reader.h"
#include "util/strings.h"

namespace roce::topo {

using util::Code;
using util::Result;
using util::Status;

namespace {

int prefix_of(const sockaddr *mask) {
    if (mask == nullptr) {
        return 0;
    }
    const uint8_t *b = nullptr;
    size_t n = 0;
    if (mask->sa_family == AF_INET) {
        b = reinterpret_cast<const uint8_t *>(&reinterpret_cast<const sockaddr_in *>(mask)->sin_addr);
        n = 4;
    } else if (mask->sa_family == AF_INET6) {
        b = reinterpret_cast<const sockaddr_in6 *>(mask)->sin6_addr.s6_addr;
        n = 16;
    }
    int bits = 0;
    for (size_t i = 0; i < n; ++i) {
        bits += __builtin_popcount(b[i]);
    }
    return bits;
}

Result<Snapshot> assemble(std::vector<DeviceInfo> devices, std::vector<std::string> warnings,
                          const NetdevReader &netdevs, std::string source) {
    Snapshot snap;
    snap.devices = std::move(devices);
    snap.warnings = std::move(warnings);
    snap.source = std::move(source);
    auto nd = netdevs();
    if (!nd) {
        return nd.status();
    }
    snap.netdevs = std::move(nd.value());
    link_gid_netdevs(snap);
    return snap;
}

/// A capture is someone else's data: every string it contributes to the
/// snapshot is made printable (util::printable), so no report, message or
/// selection text built from it carries a control byte or a line break.
/// Names are escaped alike everywhere, so they still match each other.
void make_printable(Snapshot &s) {
    auto fix = [](std::string &v) { v = util::printable(v); };
    fix(s.source);
    for (auto &d : s.devices) {
        fix(d.name);
        for (auto &p : d.ports) {
            for (auto &g : p.gids) {
                fix(g.netdev);
            }
        }
    }
    for (auto &n : s.netdevs) {
        for (std::string *v : {&n.name, &n.kind, &n.mac, &n.master, &n.parent}) {
            fix(*v);
        }
        if (n.bond) {
            for (auto &m : n.bond->slaves) {
                fix(m);
            }
            for (std::string *v :
                 {&n.bond->active_slave, &n.bond->xmit_hash_policy, &n.bond->ad_partner_mac}) {
                fix(*v);
            }
        }
        if (n.bond_slave) {
            fix(n.bond_slave->perm_hwaddr);
        }
    }
}

} // namespace

Result<AddressMap> read_addresses_getifaddrs() {
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) {
        return Status::from_errno(errno, "getifaddrs");
    }
    AddressMap out;
    for (ifaddrs *a = list; a != nullptr; a = a->ifa_next) {
        if (a->ifa_addr == nullptr || a->ifa_name == nullptr) {
            continue;
        }
        util::IpAddress addr;
        if (a->ifa_addr->sa_family == AF_INET) {
            const auto *in = reinterpret_cast<const sockaddr_in *>(a->ifa_addr);
            const auto *b = reinterpret_cast<const uint8_t *>(&in->sin_addr);
            addr = util::IpAddress::v4({b[0], b[1], b[2], b[3]});
        } else if (a->ifa_addr->sa_family == AF_INET6) {
            const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(a->ifa_addr);
            std::array<uint8_t, 16> b{};
            std::copy(in6->sin6_addr.s6_addr, in6->sin6_addr.s6_addr + 16, b.begin());
            addr = util::IpAddress::v6(b);
        } else {
            continue;
        }
        out[a->ifa_name].push_back(AddressInfo{addr, prefix_of(a->ifa_netmask)});
    }
    freeifaddrs(list);
    return out;
}

namespace {

// A VLAN's id from the kernel (SIOCGIFVLAN, GET_VLAN_VID_CMD), which needs
// no privilege, unlike /proc/net/vlan/config (mode 0600). -1 when unknown.
int vlan_id_ioctl(const std::string &name) {
    vlan_ioctl_args args{};
    if (name.size() >= sizeof(args.device1)) {
        return -1;
    }
    args.cmd = GET_VLAN_VID_CMD;
    std::memcpy(args.device1, name.c_str(), name.size() + 1);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int rc = ioctl(fd, SIOCGIFVLAN, &args);
    close(fd);
    return rc == 0 ? args.u.VID : -1;
}

} // namespace

NetdevReader live_netdev_reader(std::string root) {
    return [root]() -> Result<std::vector<NetdevInfo>> {
        auto netdevs = read_netdevs_sysfs(fs::Tree(root, fs::Links::kFollow), nullptr);
        if (!netdevs) {
            return netdevs.status();
        }
        if (root == "/") {
            // Unprivileged processes cannot read /proc/net/vlan/config.
            for (auto &n : netdevs.value()) {
                if (n.kind == "vlan" && n.vlan_id < 0) {
                    n.vlan_id = vlan_id_ioctl(n.name);
                }
            }
        }
        auto addrs = read_addresses_getifaddrs();
        if (!addrs) {
            return addrs.status();
        }
        attach_addresses(netdevs.value(), *addrs);
        return netdevs;
    };
}

void link_gid_netdevs(Snapshot &snapshot) {
    for (auto &dev : snapshot.devices) {
        for (auto &port : dev.ports) {
            for (auto &g : port.gids) {
                if (g.netdev.empty() && g.netdev_ifindex > 0) {
                    if (const NetdevInfo *n = snapshot.find_netdev_by_index(g.netdev_ifindex)) {
                        g.netdev = n->name;
                    }
                } else if (!g.netdev.empty() && g.netdev_ifindex == 0) {
                    if (const NetdevInfo *n = snapshot.find_netdev(g.netdev)) {
                        g.netdev_ifindex = n->ifindex;
                    }
                }
            }
        }
    }
}

Result<Snapshot> read_live(const verbs::VerbsApi &api, const NetdevReader &netdevs) {
    std::vector<std::string> warnings;
    auto devices = read_rdma_verbs(api, &warnings);
    if (!devices) {
        return devices.status();
    }
    return assemble(std::move(devices.value()), std::move(warnings), netdevs, "live");
}

Result<Snapshot> read_sysfs(const std::string &root, const NetdevReader &netdevs) {
    std::vector<std::string> warnings;
    auto devices = read_rdma_sysfs(fs::Tree(root, fs::Links::kFollow), &warnings);
    if (!devices) {
        return devices.status();
    }
    return assemble(std::move(devices.value()), std::move(warnings), netdevs, "sysfs:" + root);
}

Result<Snapshot> read_capture(const std::string &dir) {
    // Someone else's files: no links below DIR are followed (fs.h).
    const fs::Tree tree(dir, fs::Links::kRefuse);
    if (dir.empty() || !tree.is_dir("")) {
        return Status(Code::kNotFound, "capture directory " + tree.shown("") +
                                           " does not exist or is not a directory");
    }
    const std::string link_json = "ip-link.json";
    const std::string addr_json = "ip-addr.json";
    for (const auto &p : {link_json, addr_json}) {
        if (!tree.exists(p)) {
            return Status(Code::kNotFound,
                          tree.shown("") + " is not a roce-doctor capture: " + tree.shown(p) +
                              " is missing (a capture holds sys/, ip-link.json and ip-addr.json; "
                              "make one with `roce-doctor --capture DIR`)");
        }
    }
    if (!tree.exists("sys")) {
        return Status(Code::kNotFound, tree.shown("") + " is not a roce-doctor capture: " +
                                           tree.shown("sys") + " is missing");
    }
    NetdevReader netdevs = [&]() -> Result<std::vector<NetdevInfo>> {
        auto link_text = tree.read_text(link_json);
        if (!link_text) {
            return link_text.status();
        }
        auto addr_text = tree.read_text(addr_json);
        if (!addr_text) {
            return addr_text.status();
        }
        auto links = parse_ip_link_json(*link_text, tree.shown(link_json));
        if (!links) {
            return links.status();
        }
        auto addrs = parse_ip_addr_json(*addr_text, tree.shown(addr_json));
        if (!addrs) {
            return addrs.status();
        }
        attach_addresses(links.value(), *addrs);
        // `ip -j link` has no speed: the captured sysfs attribute, where
        // there is one (a capture made before it was recorded has none).
        for (auto &n : links.value()) {
            const std::string rel = "sys/class/net/" + n.name + "/speed";
            if (!tree.exists(rel)) {
                continue;
            }
            auto text = tree.read_line(rel);
            auto v = text ? util::parse_int(*text) : std::nullopt;
            n.speed_mbps = v && *v > 0 && *v <= INT32_MAX ? static_cast<int>(*v) : -1;
        }
        return links;
    };
    std::vector<std::string> warnings;
    auto devices = read_rdma_sysfs(tree, &warnings);
    if (!devices) {
        return devices.status().with_context("capture " + tree.shown(""));
    }
    auto snap =
        assemble(std::move(devices.value()), std::move(warnings), netdevs, "capture:" + dir);
    if (snap) {
        make_printable(snap.value());
    }
    return snap;
}

} // namespace roce::topo
