// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's addressing end to end over FakeVerbs: every QP transition,
// address handle and new endpoint reads the process's snapshot cache, never
// the whole machine; a change of the machine (our GID rewritten into another
// slot, as rdma_rxe does at an active-backup failover) costs one re-read of
// that device, and the paths that reconnect follow it.
#include <string>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"
#include "util/strings.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using roce::testing::sorted;
using namespace roce::testing::e2e;

namespace {

/// Every process has received `n` messages from every other one.
bool all_received(BtlFabric &f, size_t n) {
    for (const auto &p : f.procs) {
        if (p->received.size() != n * (f.procs.size() - 1)) {
            return false;
        }
    }
    return true;
}

} // namespace

TEST_CASE("btl e2e: connecting N processes reads the machine once, their QP transitions nothing",
          "[btl][e2e][cache]") {
    for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
        CAPTURE(fx);
        verbs::note_destroy_failure(0);
        FabricOptions o;
        o.fixture = fx;
        o.procs = 5;
        o.monitored = true; // the netlink monitor feeds the cache: nothing ages
        BtlFabric f(o);
        const topo::CacheStats start = f.cache->stats();
        CHECK(start.machine_reads == 1); // planning, before the modules existed
        const int modify0 = f.fake.calls(testing::Call::kModifyQp);
        const int ah0 = f.fake.calls(testing::Call::kCreateAh);

        f.add_all();
        for (size_t i = 0; i < o.procs; ++i) {
            for (size_t j = 0; j < o.procs; ++j) {
                for (int n = 0; i != j && n < 3; ++n) {
                    REQUIRE(f.send(i, j, msg(i, j, n)) == OPAL_SUCCESS);
                }
            }
        }
        REQUIRE(f.run_until([&] { return all_received(f, 3); }));

        size_t rc_qps = 0;
        for (size_t i = 0; i < o.procs; ++i) {
            for (size_t j = 0; j < o.procs; ++j) {
                if (i != j) {
                    CHECK(from(f, j, i) == expected(i, j, 0, 3));
                    rc_qps += f.ep(i, j).path_count();
                }
            }
        }
        const int transitions = f.fake.calls(testing::Call::kModifyQp) - modify0;
        const int ahs = f.fake.calls(testing::Call::kCreateAh) - ah0;
        const topo::CacheStats end = f.cache->stats();
        // Every RC QP went INIT, RTR, RTS (some spares of the LAG pairing too),
        // every endpoint made an address handle, each preflighted.
        CHECK(transitions >= static_cast<int>(3 * rc_qps));
        CHECK(ahs >= static_cast<int>(o.procs * (o.procs - 1)));
        CHECK(end.machine_reads == 1);
        CHECK(f.machine_reads == 1); // nothing read the machine around the cache either
        CHECK(end.device_reads == 0);
        CHECK(end.netdev_reads == 0);
        CHECK(end.generation == start.generation);
        WARN(util::format("%s: %zu RC QPs, %d QP transitions and %d address handles "
                          "preflighted: %llu machine reads, %llu device reads",
                          fx, rc_qps, transitions, ahs,
                          static_cast<unsigned long long>(end.machine_reads),
                          static_cast<unsigned long long>(end.device_reads)));
        teardown(f);
    }
}

TEST_CASE("btl e2e: our GID moves to another slot: one device re-read, the reconnecting path "
          "follows it, nothing is lost",
          "[btl][e2e][cache][readdress]") {
    verbs::note_destroy_failure(0);
    FabricOptions o;
    o.fixture = "rxe_bond";
    o.monitored = true;
    BtlFabric f(o);
    f.add_all();
    connect_by_first_send(f);

    // rdma_rxe rewrites the bond's GID table when the active member changes:
    // our address comes back in another slot.
    const select::Selection sel = f.ep(0, 1).path().selection;
    const int old_slot = sel.gid_index;
    testing::FakePort &port =
        f.fake.device(sel.device).ports.at(static_cast<size_t>(sel.port) - 1);
    int new_slot = old_slot + 1;
    while (port.gids.count(new_slot) != 0) {
        ++new_slot;
    }
    REQUIRE(new_slot < port.gid_tbl_len);
    port.gids[new_slot] = port.gids.at(old_slot);
    port.gids.erase(old_slot);
    // The monitor's GID_CHANGE event marks the device (netmon::invalidate).
    const topo::CacheStats before = f.cache->stats();
    f.cache->invalidate_device(sel.device);

    // And the cable under path 0 goes: its next send fails, it reconnects.
    const uint32_t old_qpn = f.ep(0, 1).path_at(0).qpn();
    f.fake.break_qp(f.ep(0, 1).path_at(0).qp->get());
    for (int n = 1; n <= 10; ++n) {
        REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
    }
    REQUIRE(f.run_until(
        [&] {
            return f.all_up(0, 1) && f.all_up(1, 0) && f.ep(0, 1).path_at(0).qpn() != old_qpn &&
                   from(f, 1, 0).size() == 11;
        },
        2000, 0.05));
    CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 11))); // each once
    CHECK(f.procs[0]->errors.empty());

    const topo::CacheStats after = f.cache->stats();
    CHECK(after.device_reads == before.device_reads + 1);
    CHECK(after.machine_reads == before.machine_reads);
    CHECK(f.machine_reads == 1);
    CHECK(after.netdev_reads == before.netdev_reads);
    // The endpoint's one Selection followed the GID; the new QPs on both
    // sides address it in its new slot (p1's by preflight's correction).
    CHECK(f.ep(0, 1).path().sgid_index() == new_slot);
    CHECK(f.ep(0, 1).path().sgid() == sel.gid);
    const btl::Path &p0 = f.ep(0, 1).path_at(0);
    const btl::Path &p1 = f.ep(1, 0).path_at(0);
    CHECK(f.fake.qp_attr(p0.qp->get()).ah_attr.grh.sgid_index == new_slot);
    CHECK(f.fake.qp_attr(p1.qp->get()).ah_attr.grh.sgid_index == new_slot);
    CHECK(p0.tx.stats.reconnects == 1);
    CHECK(f.log.contains("moved"));
    check_pairing(f, 0, 1);
    teardown(f);
}
