// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/event.h"

#include "util/json.h"
#include "util/strings.h"

namespace roce::netmon {

const char *to_string(EventKind k) noexcept {
    switch (k) {
    case EventKind::kNetdevAdded:
        return "netdev-added";
    case EventKind::kNetdevRemoved:
        return "netdev-removed";
    case EventKind::kNetdevRenamed:
        return "netdev-renamed";
    case EventKind::kLinkUp:
        return "link-up";
    case EventKind::kLinkDown:
        return "link-down";
    case EventKind::kMtuChanged:
        return "mtu-changed";
    case EventKind::kAddressAdded:
        return "address-added";
    case EventKind::kAddressRemoved:
        return "address-removed";
    case EventKind::kBondMemberAdded:
        return "bond-member-added";
    case EventKind::kBondMemberRemoved:
        return "bond-member-removed";
    case EventKind::kBondMemberUp:
        return "bond-member-up";
    case EventKind::kBondMemberDown:
        return "bond-member-down";
    case EventKind::kActiveSlaveChanged:
        return "active-slave-changed";
    case EventKind::kLagMemberCountChanged:
        return "lag-member-count-changed";
    case EventKind::kRdmaDeviceAppeared:
        return "rdma-device-appeared";
    case EventKind::kRdmaDeviceDisappeared:
        return "rdma-device-disappeared";
    case EventKind::kRdmaNetdevsChanged:
        return "rdma-netdevs-changed";
    case EventKind::kVerbsAsync:
        return "verbs-async";
    case EventKind::kResync:
        return "resync";
    case EventKind::kCount_:
        break;
    }
    return "?";
}

namespace {

bool is_netdev_level(EventKind k) {
    switch (k) {
    case EventKind::kRdmaDeviceAppeared:
    case EventKind::kRdmaDeviceDisappeared:
    case EventKind::kRdmaNetdevsChanged:
    case EventKind::kVerbsAsync:
    case EventKind::kResync:
        return false;
    default:
        return true;
    }
}

std::string address_text(const topo::AddressInfo &a) {
    return a.address.to_string() + "/" + std::to_string(a.prefix_len);
}

} // namespace

bool EventFilter::matches(const Event &e) const noexcept {
    if ((kinds & (1u << static_cast<unsigned>(e.kind))) == 0) {
        return false;
    }
    return !rdma_only || !is_netdev_level(e.kind) || !e.rdma.empty();
}

std::string to_string(const Event &e) {
    std::string s =
        util::format("#%llu %s", static_cast<unsigned long long>(e.seq), to_string(e.kind));
    if (!e.netdev.empty()) {
        s += " " + e.netdev;
    }
    if (!e.bond.empty() && e.bond != e.netdev) {
        s += " (bond " + e.bond + ")";
    }
    switch (e.kind) {
    case EventKind::kAddressAdded:
    case EventKind::kAddressRemoved:
        s += " " + address_text(e.address);
        break;
    case EventKind::kMtuChanged:
    case EventKind::kLagMemberCountChanged:
        s += util::format(" %d -> %d", e.old_value, e.new_value);
        break;
    case EventKind::kNetdevRenamed:
    case EventKind::kActiveSlaveChanged:
        s += " '" + e.old_name + "' -> '" + e.new_name + "'";
        break;
    case EventKind::kVerbsAsync:
        s += util::format(" %s:%d %s", e.rdma_device.c_str(), e.rdma_port,
                          e.verbs_event_name.c_str());
        break;
    case EventKind::kRdmaDeviceAppeared:
    case EventKind::kRdmaDeviceDisappeared:
    case EventKind::kRdmaNetdevsChanged:
        s += util::format(" %s:%d", e.rdma_device.c_str(), e.rdma_port);
        break;
    default:
        break;
    }
    if (!e.rdma.empty()) {
        std::vector<std::string> ports;
        for (const auto &r : e.rdma) {
            ports.push_back(r.device + ":" + std::to_string(r.port));
        }
        s += " [" + util::join(ports, ",") + "]";
    }
    return s;
}

std::string to_json(const Event &e) {
    std::string s = util::format("{\"seq\":%llu,\"event\":\"%s\"",
                                 static_cast<unsigned long long>(e.seq), to_string(e.kind));
    auto str = [&s](const char *key, const std::string &v) {
        s += util::format(",\"%s\":", key) + util::Json(v).dump(); // quoted, escaped
    };
    if (e.ifindex != 0) {
        s += util::format(",\"ifindex\":%d", e.ifindex);
    }
    if (!e.netdev.empty()) {
        str("netdev", e.netdev);
    }
    if (!e.bond.empty()) {
        str("bond", e.bond);
    }
    if (!e.address.address.empty()) {
        str("address", address_text(e.address));
    }
    if (e.old_value != -1 || e.new_value != -1) {
        s += util::format(",\"old\":%d,\"new\":%d", e.old_value, e.new_value);
    }
    if (e.kind == EventKind::kNetdevRenamed || e.kind == EventKind::kActiveSlaveChanged) {
        str("old_name", e.old_name);
        str("new_name", e.new_name);
    }
    if (!e.rdma_device.empty()) {
        str("rdma_device", e.rdma_device);
        s += util::format(",\"rdma_port\":%d", e.rdma_port);
    }
    if (e.kind == EventKind::kVerbsAsync) {
        s += util::format(",\"verbs_event\":%d", e.verbs_event);
        str("verbs_event_name", e.verbs_event_name);
    }
    if (!e.rdma.empty()) {
        s += ",\"rdma\":[";
        for (size_t i = 0; i < e.rdma.size(); ++i) {
            s += i ? "," : "";
            s += util::Json(e.rdma[i].device + ":" + std::to_string(e.rdma[i].port)).dump();
        }
        s += "]";
    }
    s += "}";
    return s;
}

} // namespace roce::netmon
