// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "synthetic_machine.h"

#include <string>
#include <vector>

#include "util/net.h"

namespace roce::bench {

std::array<uint8_t, 16> v4_gid(int a, int b, int c, int d) {
    return util::IpAddress::v4({static_cast<uint8_t>(a), static_cast<uint8_t>(b),
                                static_cast<uint8_t>(c), static_cast<uint8_t>(d)})
        .to_gid();
}

std::array<uint8_t, 16> link_local(int dev) {
    std::array<uint8_t, 16> g{};
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = 0x02;
    g[9] = 0x1a;
    g[10] = 0x2b;
    g[11] = 0xff;
    g[12] = 0xfe;
    g[15] = static_cast<uint8_t>(dev);
    return g;
}

topo::Snapshot synthetic_machine() {
    topo::Snapshot s;
    s.source = "synthetic";
    int ifindex = 2;
    for (int d = 0; d < kDevices; ++d) {
        std::string bond = "bond" + std::to_string(d);
        std::vector<std::string> members = {"ens" + std::to_string(d) + "f0np0",
                                            "ens" + std::to_string(d) + "f1np1"};
        for (const auto &m : members) {
            topo::NetdevInfo n;
            n.name = m;
            n.ifindex = ifindex++;
            n.mtu = 9000;
            n.operstate = topo::OperState::kUp;
            n.carrier = n.admin_up = true;
            n.master = bond;
            n.bond_slave = topo::BondSlaveInfo{};
            s.netdevs.push_back(n);
        }
        topo::DeviceInfo dev;
        dev.name = "mlx5_bond_" + std::to_string(d);
        dev.phys_port_cnt = 1;
        dev.num_lag_ports = 2;
        topo::PortInfo port;
        port.port = 1;
        port.state = topo::PortState::kActive;
        port.link_layer = topo::LinkLayer::kEthernet;
        port.active_mtu = 4096;
        port.gid_tbl_len = 256;
        port.pkey_tbl_len = 1;
        port.pkeys = {0xffff};
        for (int v = 0; v <= kVlans; ++v) {
            topo::NetdevInfo n;
            n.name = v == 0 ? bond : bond + "." + std::to_string(100 + v);
            n.ifindex = ifindex++;
            n.kind = v == 0 ? "bond" : "vlan";
            n.mtu = v % 2 == 0 ? 9000 : 1500;
            n.operstate = topo::OperState::kUp;
            n.carrier = n.admin_up = true;
            if (v == 0) {
                topo::BondInfo b;
                b.mode = topo::BondMode::k8023ad;
                b.slaves = members;
                b.xmit_hash_policy = "layer3+4";
                n.bond = b;
            } else {
                n.parent = bond;
                n.vlan_id = 100 + v;
            }
            auto ll = link_local(d);
            auto v4 = v4_gid(10, d, v, 11);
            n.addresses.push_back({util::IpAddress::from_gid(v4), 24});
            n.addresses.push_back({util::IpAddress::from_gid(ll), 64});
            int base = v * kGidsPerNetdev;
            int k = 0;
            for (const auto &gid : {ll, v4}) {
                for (auto type : {topo::GidType::kRoceV1, topo::GidType::kRoceV2}) {
                    topo::GidEntry g;
                    g.index = base + k++;
                    g.gid = gid;
                    g.type = type;
                    g.netdev = n.name;
                    g.netdev_ifindex = n.ifindex;
                    port.gids.push_back(g);
                }
            }
            s.netdevs.push_back(std::move(n));
        }
        dev.ports.push_back(std::move(port));
        s.devices.push_back(std::move(dev));
    }
    return s;
}

} // namespace roce::bench
