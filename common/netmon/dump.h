// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <chrono>

#include "netmon/model.h"
#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::netmon {

/// One-shot reader: opens its own NETLINK_ROUTE socket (no subscriptions),
/// dumps links and addresses of the caller's network namespace into a
/// fresh Model, and closes the socket. Redoes the dump when the kernel flags
/// it inconsistent. Blocking; any thread. Errors: kUnavailable when netlink
/// cannot be used, kTimeout when the kernel stays silent for `timeout`.
util::Result<Model> dump_model(std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// The same as a Snapshot (netdevs only, source "netlink"): the live netdev
/// reader for tools and for the addressing code's snapshots.
util::Result<topo::Snapshot>
read_netdevs(std::chrono::milliseconds timeout = std::chrono::seconds(5));

} // namespace roce::netmon
