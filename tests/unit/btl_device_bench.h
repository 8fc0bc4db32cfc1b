// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// A btl Device opened over FakeVerbs on a fixture machine, for the tests of
// the Device and of QP retirement (test_btl).
#pragma once

#include <functional>
#include <memory>

#include "btl_roce_device.h"
#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "qp/queue_pair.h"
#include "select/selection.h"
#include "topo/readers.h"
#include "util/log.h"

namespace roce::testing {

/// The selection of the fixture's first port (automatic GID choice).
inline select::Selection first_port_selection(const char *fixture_name) {
    const topo::Snapshot &s = fixture(fixture_name);
    auto pc = select::select_port(s, s.devices[0], s.devices[0].ports[0], select::Options{},
                                  nullptr, false);
    REQUIRE(pc.ok());
    return *pc.selection;
}

/// Small queues: the tests look at teardown, not at throughput.
inline btl::DeviceConfig small_device_config() {
    btl::DeviceConfig c;
    c.srq_size = 16;
    c.recv_slot = 512;
    c.send_frags = 16;
    c.sq_depth = 16;
    c.ud_bufs = 8;
    return c;
}

/// FakeVerbs built from a fixture, and a Device opened on its first port
/// through `table` (the fake's, after `tweak` if one is given). Members in
/// creation order: the Device goes before the fake. Tests that check
/// teardown reset `dev` themselves.
struct DeviceBench {
    explicit DeviceBench(const char *fixture_name,
                         const std::function<void(verbs::VerbsApi &)> &tweak = {})
        : name(fixture_name), fake(fixture(fixture_name)), table(fake.api()),
          sel(first_port_selection(fixture_name)) {
        if (tweak) {
            tweak(table);
        }
        auto d = btl::Device::open(table, sel, qp::shared_snapshot_source(fresh()), false,
                                   small_device_config(), log);
        if (!d) {
            FAIL("Device::open: " << d.status().to_string());
        }
        dev = std::move(d.value());
    }
    /// Fresh snapshots read live through the fake, as the btl reads them.
    qp::SnapshotSource fresh() {
        return [this]() -> util::Result<topo::Snapshot> {
            const topo::Snapshot &cap = fixture(name);
            return topo::read_live(
                fake.api(),
                [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> { return cap.netdevs; });
        };
    }
    /// A new RC QP of the Device (attached to its CQ and SRQ) driven to RTS
    /// towards a made-up peer.
    std::unique_ptr<qp::QueuePair> rc_in_rts() {
        auto raw = dev->create_rc_qp();
        REQUIRE(raw);
        auto q = std::make_unique<qp::QueuePair>(dev->api(), std::move(raw.value()),
                                                 qp::QpType::kRC, sel, fresh(), false, &log);
        qp::RemoteEnd peer{sel.gid, 0x77, 0};
        REQUIRE(q->to_init().is_ok());
        REQUIRE(q->to_rtr(&peer).is_ok());
        REQUIRE(q->to_rts().is_ok());
        return q;
    }

    const char *name;
    FakeVerbs fake;
    verbs::VerbsApi table;
    util::CaptureSink log;
    select::Selection sel;
    std::unique_ptr<btl::Device> dev;
};

} // namespace roce::testing
