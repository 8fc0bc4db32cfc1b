// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// What the bond/netlink monitor (common/netmon) tells a module. The monitor
// thread queues events about the netdevs under this port; progress() sees
// them with one atomic load and calls on_net_events() under the module lock.
//
// The btl does not act on a member going down: the bond moves the traffic,
// and a QP that the kernel kills in the process reports it through its
// completions (then the path reconnects). What it must know before the next
// connection is the addressing: an address replaced on the bond or its VLAN,
// or a GID table rewritten at an active-backup failover, makes the snapshot
// the policy chose from stale. So: the monitor marks the snapshot cache
// (netmon::feed_cache), new connections choose from its current view, and
// endpoints whose GID vanished choose again now and reconnect
// (Connector::readdress, once the burst of events is over).
#include "btl_roce_module.h"

#include "netmon/event.h"
#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

namespace {
constexpr double kReaddressDelay = 0.5; ///< seconds after the last address event
} // namespace

void Module::follow(netmon::Monitor &m) {
    using netmon::EventKind;
    netmon::EventFilter f = netmon::EventFilter::only(
        {EventKind::kAddressAdded, EventKind::kAddressRemoved, EventKind::kLinkUp,
         EventKind::kLinkDown, EventKind::kMtuChanged, EventKind::kBondMemberUp,
         EventKind::kBondMemberDown, EventKind::kActiveSlaveChanged,
         EventKind::kLagMemberCountChanged, EventKind::kRdmaNetdevsChanged,
         EventKind::kRdmaDeviceDisappeared, EventKind::kVerbsAsync, EventKind::kResync});
    f.rdma_only = true;
    netq_ = std::make_unique<netmon::EventQueue>();
    netq_->attach(m, f);
}

void Module::on_net_events() {
    using netmon::EventKind;
    std::vector<netmon::Event> events;
    netq_->drain(&events);
    bool readdress = false;
    for (const auto &e : events) {
        bool ours = e.rdma_device.empty() || e.rdma_device == plan_.device;
        if (!ours) {
            continue;
        }
        log_.write(LogLevel::kDebug, "netmon: " + netmon::to_string(e));
        switch (e.kind) {
        case EventKind::kAddressAdded:
        case EventKind::kAddressRemoved:
        case EventKind::kActiveSlaveChanged:
        case EventKind::kRdmaNetdevsChanged:
        case EventKind::kMtuChanged:
        case EventKind::kResync:
            readdress = true;
            break;
        case EventKind::kVerbsAsync:
            readdress = readdress || e.verbs_event == IBV_EVENT_GID_CHANGE;
            break;
        default:
            break;
        }
    }
    if (readdress) {
        // An address replacement is a removal, then an addition (and GID
        // table events in between): act once the burst is over, so the new
        // address is there to be chosen.
        readdress_at_ = clock() + kReaddressDelay;
    }
}

} // namespace roce::btl
