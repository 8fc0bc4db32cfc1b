// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/snapshot.h"

#include <arpa/inet.h>

namespace roce::topo {

const char *to_string(GidType t) noexcept {
    switch (t) {
    case GidType::kIB: return "IB";
    case GidType::kRoceV1: return "RoCE v1";
    case GidType::kRoceV2: return "RoCE v2";
    }
    return "?";
}

const char *to_string(PortState s) noexcept {
    switch (s) {
    case PortState::kDown: return "DOWN";
    case PortState::kInit: return "INIT";
    case PortState::kArmed: return "ARMED";
    case PortState::kActive: return "ACTIVE";
    case PortState::kActiveDefer: return "ACTIVE_DEFER";
    case PortState::kUnknown: return "UNKNOWN";
    }
    return "?";
}

const char *to_string(LinkLayer l) noexcept {
    switch (l) {
    case LinkLayer::kInfiniBand: return "InfiniBand";
    case LinkLayer::kEthernet: return "Ethernet";
    case LinkLayer::kUnknown: return "unknown";
    }
    return "?";
}

const char *to_string(OperState s) noexcept {
    switch (s) {
    case OperState::kUnknown: return "UNKNOWN";
    case OperState::kNotPresent: return "NOTPRESENT";
    case OperState::kDown: return "DOWN";
    case OperState::kLowerLayerDown: return "LOWERLAYERDOWN";
    case OperState::kTesting: return "TESTING";
    case OperState::kDormant: return "DORMANT";
    case OperState::kUp: return "UP";
    }
    return "?";
}

const char *to_string(BondMode m) noexcept {
    switch (m) {
    case BondMode::kBalanceRr: return "balance-rr";
    case BondMode::kActiveBackup: return "active-backup";
    case BondMode::kBalanceXor: return "balance-xor";
    case BondMode::kBroadcast: return "broadcast";
    case BondMode::k8023ad: return "802.3ad";
    case BondMode::kBalanceTlb: return "balance-tlb";
    case BondMode::kBalanceAlb: return "balance-alb";
    case BondMode::kUnknown: return "unknown";
    }
    return "?";
}

std::string gid_to_string(const std::array<uint8_t, 16> &gid) {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
    return buf;
}

const GidEntry *PortInfo::find_gid(int index) const {
    for (const auto &g : gids) {
        if (g.index == index) {
            return &g;
        }
    }
    return nullptr;
}

const PortInfo *DeviceInfo::find_port(int port) const {
    for (const auto &p : ports) {
        if (p.port == port) {
            return &p;
        }
    }
    return nullptr;
}

const NetdevInfo *Snapshot::find_netdev_by_index(int ifindex) const {
    for (const auto &n : netdevs) {
        if (ifindex > 0 && n.ifindex == ifindex) {
            return &n;
        }
    }
    return nullptr;
}

const char *to_string(BondMiiStatus s) noexcept {
    switch (s) {
    case BondMiiStatus::kUp: return "up";
    case BondMiiStatus::kFail: return "going-down";
    case BondMiiStatus::kDown: return "down";
    case BondMiiStatus::kBack: return "going-back";
    case BondMiiStatus::kUnknown: return "unknown";
    }
    return "?";
}

const NetdevInfo *Snapshot::find_netdev(const std::string &name) const {
    for (const auto &n : netdevs) {
        if (n.name == name) {
            return &n;
        }
    }
    return nullptr;
}

const DeviceInfo *Snapshot::find_device(const std::string &name) const {
    for (const auto &d : devices) {
        if (d.name == name) {
            return &d;
        }
    }
    return nullptr;
}

} // namespace roce::topo
