// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/rail_speed.h"

#include <vector>

#include "util/strings.h"

namespace roce::select {

namespace {

std::string gbps(uint32_t mbps) {
    return mbps % 1000 == 0 ? util::format("%u Gb/s", mbps / 1000)
                            : util::format("%.1f Gb/s", mbps / 1000.0);
}

bool usable_member(const topo::NetdevInfo *m) {
    return m != nullptr && m->operstate != topo::OperState::kDown &&
           m->operstate != topo::OperState::kLowerLayerDown &&
           m->operstate != topo::OperState::kNotPresent;
}

} // namespace

uint32_t ib_lane_mbps(uint32_t code, const char **name) noexcept {
    struct Row {
        uint32_t code;
        uint32_t mbps;
        const char *name;
    };
    // Data rates after 8b/10b (SDR..QDR) or 64b/66b coding, as Open MPI's
    // opal_common_verbs_port_bw; NDR and XDR (rdma-core's active_speed_ex,
    // IBV_SPEED_XDR = 256) continue the series.
    static const Row kRows[] = {{1, 2000, "SDR"},    {2, 4000, "DDR"},     {4, 8000, "QDR"},
                                {8, 10000, "FDR10"}, {16, 13636, "FDR"},   {32, 25000, "EDR"},
                                {64, 50000, "HDR"},  {128, 100000, "NDR"}, {256, 200000, "XDR"}};
    for (const Row &r : kRows) {
        if (r.code == code) {
            if (name != nullptr) {
                *name = r.name;
            }
            return r.mbps;
        }
    }
    return 0;
}

unsigned ib_width_lanes(uint32_t code) noexcept {
    // IBV_WIDTH_*: the codes are bits, 2X came last (16). Open MPI 4.1's
    // opal_common_verbs_port_bw multiplies 16 by 16; it is 2 lanes.
    switch (code) {
    case 1:
        return 1;
    case 16:
        return 2;
    case 2:
        return 4;
    case 4:
        return 8;
    case 8:
        return 12;
    default:
        return 0;
    }
}

RailBandwidth rail_bandwidth(const topo::Snapshot &snapshot, const std::string &netdev,
                             const PortSpeed &port) {
    RailBandwidth out;
    const topo::NetdevInfo *nd = snapshot.find_netdev(netdev);
    if (nd != nullptr && !nd->bond && nd->vlan_id >= 0 && !nd->parent.empty()) {
        if (const topo::NetdevInfo *parent = snapshot.find_netdev(nd->parent)) {
            nd = parent; // a VLAN runs at its parent's speed
        }
    }
    // Who carries the rail's traffic: the netdev, or the bond's members.
    std::vector<const topo::NetdevInfo *> members;
    bool spreads = false;
    if (nd != nullptr && nd->bond) {
        spreads = nd->bond->mode != topo::BondMode::kActiveBackup;
        for (const auto &name : nd->bond->slaves) {
            const topo::NetdevInfo *m = snapshot.find_netdev(name);
            if (usable_member(m)) {
                members.push_back(m);
            }
        }
        if (!spreads && members.size() > 1) {
            const topo::NetdevInfo *active = snapshot.find_netdev(nd->bond->active_slave);
            members = {usable_member(active) ? active : members.front()};
        }
    } else if (nd != nullptr) {
        members.push_back(nd);
    }

    // 1. Ethernet speeds.
    uint32_t sum = 0;
    size_t known = 0;
    uint32_t first = 0;
    bool equal = true;
    for (const auto *m : members) {
        if (m->speed_mbps > 0) {
            first = known == 0 ? static_cast<uint32_t>(m->speed_mbps) : first;
            equal = equal && static_cast<uint32_t>(m->speed_mbps) == first;
            sum += static_cast<uint32_t>(m->speed_mbps);
            ++known;
        }
    }
    if (known > 0) {
        out.mbps = sum;
        if (nd != nullptr && nd->bond) {
            std::string each =
                equal ? util::format("%zu member%s x %s", known, known == 1 ? "" : "s",
                                     gbps(first).c_str())
                      : util::format("%zu members, %s in all", known, gbps(sum).c_str());
            out.why = util::format("%s of %s, %s", each.c_str(), nd->name.c_str(),
                                   spreads ? "LAG spreads" : "active-backup uses one");
        } else {
            out.why = util::format("Ethernet speed of %s", members.front()->name.c_str());
        }
        return out;
    }

    // 2. The port's own codes, per member of a spreading LAG.
    const char *speed_name = nullptr;
    uint32_t lane = ib_lane_mbps(port.active_speed, &speed_name);
    unsigned lanes = ib_width_lanes(port.active_width);
    if (lane > 0 && lanes > 0) {
        unsigned n = spreads && members.size() > 1 ? static_cast<unsigned>(members.size()) : 1;
        out.mbps = lane * lanes * n;
        out.why =
            util::format("%uX %s (active_speed %u, active_width %u)%s", lanes, speed_name,
                         port.active_speed, port.active_width,
                         n > 1 ? util::format(" x %u LAG members, LAG spreads", n).c_str() : "");
        return out;
    }

    // 3. Nothing to go by.
    out.why = util::format("speed unknown (%s reports no Ethernet speed; active_speed %u, "
                           "active_width %u not known codes): keeping the default",
                           netdev.empty() ? "the port's netdev" : netdev.c_str(), port.active_speed,
                           port.active_width);
    return out;
}

} // namespace roce::select
