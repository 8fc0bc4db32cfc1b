// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/cache_feed.h"

#include <infiniband/verbs.h>

namespace roce::netmon {

namespace {

bool device_event(int verbs_event) {
    switch (verbs_event) {
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_DEVICE_FATAL:
        return true;
    default:
        return false;
    }
}

} // namespace

void invalidate(topo::SnapshotCache &cache, const Event &e) {
    switch (e.kind) {
    case EventKind::kResync:
        cache.invalidate_all();
        return;
    case EventKind::kRdmaDeviceAppeared:
    case EventKind::kRdmaDeviceDisappeared:
    case EventKind::kRdmaNetdevsChanged:
        cache.invalidate_device(e.rdma_device);
        return;
    case EventKind::kVerbsAsync:
        if (device_event(e.verbs_event) && !e.rdma_device.empty()) {
            cache.invalidate_device(e.rdma_device);
        }
        return;
    case EventKind::kCount_:
        return;
    default:
        break;
    }
    cache.invalidate_netdevs();
    for (const auto &r : e.rdma) {
        cache.invalidate_device(r.device);
    }
}

topo::NetdevReader model_netdev_reader(const Monitor &m) {
    return [&m]() -> util::Result<std::vector<topo::NetdevInfo>> { return m.snapshot().netdevs; };
}

Subscription feed_cache(Monitor &m, topo::SnapshotCache &cache) {
    Subscription s =
        m.subscribe(EventFilter::all(), [&cache](const Event &e) { invalidate(cache, e); });
    if (m.mode() != MonitorMode::kBlind) {
        cache.set_monitored(true);
    }
    if (cache.generation() > 0) {
        cache.invalidate_all(); // what changed before the subscription went unseen
    }
    return s;
}

} // namespace roce::netmon
