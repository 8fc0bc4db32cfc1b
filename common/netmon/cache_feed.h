// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "netmon/event.h"
#include "netmon/monitor.h"
#include "topo/readers.h"
#include "topo/snapshot_cache.h"

namespace roce::netmon {

/// Marks in `cache` what `e` may have made stale; no I/O, so it may run in
/// a monitor callback:
///  - kResync: everything (the next use reads the whole machine);
///  - kRdmaDeviceAppeared / kRdmaDeviceDisappeared / kRdmaNetdevsChanged:
///    e.rdma_device;
///  - kVerbsAsync of a port or device (GID_CHANGE, PORT_ACTIVE, PORT_ERR,
///    PKEY_CHANGE, LID_CHANGE, CLIENT_REREGISTER, SM_CHANGE, DEVICE_FATAL):
///    e.rdma_device; QP, CQ and SRQ events: nothing;
///  - every netdev-level kind (addresses, links, MTU, bonds and their
///    members): the netdevs, and each RDMA device in e.rdma (whose GID
///    table or port state may follow the netdev).
void invalidate(topo::SnapshotCache &cache, const Event &e);

/// The monitor's netdev model as a cache's netdev reader: a copy taken
/// under the model's lock, no system call. `m` must outlive the reader.
topo::NetdevReader model_netdev_reader(const Monitor &m);

/// Feeds `m`'s events to `cache` (invalidate(), on the monitor thread) and,
/// unless the monitor runs blind (no netlink, no fallback: netdev changes
/// would go unseen), tells the cache it is monitored so nothing ages. Call
/// after m.start(); a cache that has read already is read again in full at
/// its next use (changes before the subscription went unseen). Both must outlive the returned
/// subscription; destroying it stops the feed (and the cache is unmonitored again only when the
/// owner says so: set_monitored(false)).
[[nodiscard]] Subscription feed_cache(Monitor &m, topo::SnapshotCache &cache);

} // namespace roce::netmon
