// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// What the bond/netlink monitor (common/netmon) tells a module. The monitor
// thread queues events about the netdevs under this port; progress() sees
// them with one atomic load and calls on_net_events() under the module lock.
//
// The btl does not act on a member going down: the bond moves the traffic,
// and a QP that the kernel kills in the process reports it through its
// completions (then the path reconnects). The port itself going down
// (IBV_EVENT_PORT_ERR: every member of its bond gone, the cable of a plain
// port pulled) is another matter when another rail of ours reaches the
// peers: their paths fail at once and their traffic moves to that rail,
// instead of waiting for each QP's retries to run out (seconds per path, and
// again at every hop of a rendezvous); PORT_ACTIVE brings them back at once
// (Connector::port_down, port_up). What it must know before the next
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
    std::vector<netmon::Event> events;
    netq_->drain(&events);
    handle_net_events(events);
}

void Module::net_events(const std::vector<netmon::Event> &events) {
    OPAL_THREAD_LOCK(&lock_);
    handle_net_events(events);
    OPAL_THREAD_UNLOCK(&lock_);
}

void Module::handle_net_events(const std::vector<netmon::Event> &events) {
    using netmon::EventKind;
    bool readdress = false;
    int port = 0; // the last word of the device on our port: -1 down, 1 active
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
            if (e.rdma_port == plan_.port && e.verbs_event == IBV_EVENT_PORT_ERR) {
                port = -1;
            } else if (e.rdma_port == plan_.port && e.verbs_event == IBV_EVENT_PORT_ACTIVE) {
                port = 1;
            }
            break;
        default:
            break;
        }
    }
    if (port < 0) {
        std::string why = rail_name_ + " went down (the device reported IBV_EVENT_PORT_ERR)";
        std::vector<Endpoint *> failed = conn_->port_down(why);
        // Their side may not see it (a switch between us): tell them over
        // the rail that now carries their traffic (progress, unlocked).
        for (const Endpoint *ep : failed) {
            notify_down_.push_back(PortDownNotice{ep->name, ep->port_index});
        }
        if (!port_down_ && !failed.empty()) {
            log_.write(LogLevel::kWarn,
                       util::format("%s; the paths to %zu peer(s) another rail reaches failed "
                                    "at once, their traffic moves there until this port is "
                                    "back",
                                    why.c_str(), failed.size()));
        } else if (!port_down_) {
            log_.write(LogLevel::kWarn,
                       why + "; no other rail of this process reaches its peers: their paths "
                             "stay and retry (a short flap heals)");
        }
        port_down_ = true;
    } else if (port > 0 && port_down_) {
        port_down_ = false;
        conn_->port_up();
        log_.write(LogLevel::kInfo,
                   rail_name_ + " is active again (IBV_EVENT_PORT_ACTIVE): reconnecting now");
    }
    if (readdress) {
        // An address replacement is a removal, then an addition (and GID
        // table events in between): act once the burst is over, so the new
        // address is there to be chosen.
        readdress_at_ = clock() + kReaddressDelay;
    }
}

} // namespace roce::btl
