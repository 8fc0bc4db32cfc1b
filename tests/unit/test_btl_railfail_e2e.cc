// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Losing a whole rail during traffic (issue 16), end to end over FakeVerbs:
// two processes on the mlx5_two_bonds machine, one btl module per rail as
// the component makes them. Every cable of one rail's device is pulled
// (FakeDevice::link_down: its RC work fails with retry-exceeded, its
// datagrams are lost, in both processes, as a switch failure would): the
// sends the PML keeps giving that rail move to the other rail with nothing
// lost or delivered twice, the peer is not failed at connect_timeout, and
// when the cables are back the rail reconnects and carries its own traffic
// again. With both rails down the peer fails after the timeout as before.
// Forwarded fragments that name the wrong rail, the wrong sender port or a
// number the window has are refused.
#include <cstring>
#include <map>
#include <string>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"
#include "netmon/event.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using namespace roce::testing::e2e;

namespace {

/// Completions of our sends, per btl module (the btl the callback got).
std::map<const mca_btl_base_module_t *, int> g_done;
std::map<const mca_btl_base_module_t *, int> g_failed;

void send_done(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *,
               mca_btl_base_descriptor_t *, int status) {
    ++(status == OPAL_SUCCESS ? g_done : g_failed)[btl];
}

/// A payload of exactly `size` bytes that names its sender, rail and number.
std::string payload(size_t from, size_t rail_index, int n, size_t size) {
    std::string head = "p" + std::to_string(from) + "r" + std::to_string(rail_index) + "#" +
                       std::to_string(n) + ":";
    std::string s = head;
    for (size_t k = head.size(); k < size; ++k) {
        s.push_back(static_cast<char>('a' + (k * 7 + static_cast<size_t>(n)) % 26));
    }
    s.resize(size);
    return s;
}

struct Rig {
    explicit Rig(BtlFabric &f) : f(f) {
        for (size_t i = 0; i < 2; ++i) {
            for (size_t r = 0; r < 2; ++r) {
                CHECK(add_on_rail(f, i, r, eps[i][r]) == std::vector<bool>{true, true});
            }
        }
        f.procs[0]->eps = eps[0][0];
        f.procs[1]->eps = eps[1][0];
        g_done.clear();
        g_failed.clear();
    }
    btl::Endpoint &ep(size_t i, size_t r) {
        return *btl::Endpoint::from(eps[i][r][1 - i]);
    }
    /// alloc + send from i on rail r to the other process, with send_done.
    int send(size_t i, size_t r, const std::string &data) {
        mca_btl_base_module_t *b = rail(f, i, r).base();
        mca_btl_base_endpoint_t *e = eps[i][r][1 - i];
        mca_btl_base_descriptor_t *d =
            b->btl_alloc(b, e, MCA_BTL_NO_ORDER, data.size(), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        REQUIRE(d != nullptr);
        std::memcpy(d->des_segments[0].seg_addr.pval, data.data(), data.size());
        d->des_cbfunc = send_done;
        int rc = b->btl_send(b, e, d, BtlFabric::kTag);
        if (rc == OPAL_SUCCESS) {
            sent[1 - i].push_back(data);
        }
        return rc;
    }
    /// Sends of several sizes (up to the largest eager send) from both
    /// processes on rail r, numbered from `n`.
    void burst(size_t r, int n, int count) {
        const size_t sizes[] = {1, 17, 200, 777, rail(f, 0, r).base()->btl_max_send_size};
        for (int k = 0; k < count; ++k) {
            for (size_t i = 0; i < 2; ++i) {
                size_t size = sizes[static_cast<size_t>(k) % 5];
                REQUIRE(send(i, r, payload(i, r, n + k, size)) == OPAL_SUCCESS);
            }
        }
    }
    /// `count` sends each way on both rails, numbered from 0 (rail 0) and
    /// 100 (rail 1), all arrived, both rails up.
    void warm_up(int count) {
        burst(0, 0, count);
        burst(1, 100, count);
        REQUIRE(f.run_until([&] { return all_arrived() && rail_up(0) && rail_up(1); }));
    }
    bool all_arrived() {
        return f.procs[0]->received.size() == sent[0].size() &&
               f.procs[1]->received.size() == sent[1].size();
    }
    /// Everything sent arrived, each exactly once, with its bytes.
    void check_delivery() {
        for (size_t i = 0; i < 2; ++i) {
            CAPTURE(i);
            CHECK(roce::testing::sorted(f.procs[i]->received) == roce::testing::sorted(sent[i]));
        }
    }
    bool rail_up(size_t r) {
        return f.all_up(0, 1) && f.all_up(1, 0) && ep(0, r).state == btl::EpState::kConnected &&
               ep(1, r).state == btl::EpState::kConnected &&
               ep(0, r).path_at(0).state == btl::PathState::kUp &&
               ep(1, r).path_at(0).state == btl::PathState::kUp;
    }
    uint64_t path_bytes(size_t i, size_t r) {
        uint64_t n = 0;
        for (size_t k = 0; k < ep(i, r).path_count(); ++k) {
            n += ep(i, r).path_at(k).tx.stats.bytes;
        }
        return n;
    }
    btl::RailCounters counters(size_t i, size_t r) {
        btl::BtlCounters c;
        rail(f, i, r).read_counters(c);
        REQUIRE(c.rails.size() == 1);
        return c.rails[0];
    }

    BtlFabric &f;
    std::vector<mca_btl_base_endpoint_t *> eps[2][2]; ///< [process][rail]
    std::vector<std::string> sent[2];                 ///< what each process must receive
};

/// `seconds` of the fabric's clock pass in steps of 0.5 s, each with a
/// round of work and progress (the managers' timers run at least every 16th
/// progress call of a module).
void pass(BtlFabric &f, double seconds) {
    for (double t = 0; t < seconds; t += 0.5) {
        f.advance(0.5);
        f.run(1);
    }
}

FabricOptions two_rails() {
    FabricOptions o;
    o.fixture = "mlx5_two_bonds";
    o.procs = 2;
    o.all_rails = true;
    o.credits = 16;
    return o;
}

} // namespace

TEST_CASE("btl rails: a whole rail lost during traffic: its sends move to the other rail, "
          "nothing is lost or delivered twice, no peer fails, and the rail comes back",
          "[btl][e2e][rails][railfail]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    auto &dev1 = f.fake.device("mlx5_bond_1");

    // Both rails up, traffic over both with its bytes checked; RDMA too.
    g.burst(0, 0, 10);
    g.burst(1, 100, 10);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    REQUIRE(f.run_until([&] { return g.rail_up(0) && g.rail_up(1); }));
    g.check_delivery();
    const size_t len = 3000;
    std::vector<uint8_t> src(len), dst(len, 0);
    for (size_t k = 0; k < len; ++k) {
        src[k] = static_cast<uint8_t>(k * 11 + 3);
    }
    mca_btl_base_module_t *b1 = rail(f, 0, 1).base();
    auto *l_src = b1->btl_register_mem(b1, nullptr, src.data(), len, MCA_BTL_REG_FLAG_ACCESS_ANY);
    mca_btl_base_module_t *pb1 = rail(f, 1, 1).base();
    auto *r_dst =
        pb1->btl_register_mem(pb1, nullptr, dst.data(), len, MCA_BTL_REG_FLAG_ACCESS_ANY);
    REQUIRE((l_src && r_dst));
    RdmaResult put;
    REQUIRE(b1->btl_put(b1, g.eps[0][1][1], src.data(), reinterpret_cast<uint64_t>(dst.data()),
                        l_src, r_dst, len, 0, MCA_BTL_NO_ORDER, rdma_done, &put,
                        nullptr) == OPAL_SUCCESS);
    REQUIRE(f.run_until([&] { return put.calls == 1; }));
    CHECK(put.status == OPAL_SUCCESS);
    CHECK(dst == src);
    CHECK(g.counters(0, 1).rerouted_sends == 0);

    // Sends in flight on rail 1 when every cable of its device is pulled:
    // the sends queued on it (re-queued from its failed path, new ones the
    // PML keeps giving it) go over rail 0. The first two of process 0's in
    // flight reached process 1 but their ACKs were lost: carried again over
    // rail 0, they must be dropped there, not delivered twice.
    g.burst(1, 200, 10);
    REQUIRE(g.ep(0, 1).path_count() == 1);
    REQUIRE(g.ep(0, 1).path_at(0).tx.outstanding >= 2);
    f.fake.break_qp(g.ep(0, 1).path_at(0).qp->get(), IBV_WC_RETRY_EXC_ERR, 2);
    dev1.link_down = true;
    f.run(5);
    CHECK(g.ep(0, 1).state == btl::EpState::kConnecting);
    CHECK(g.ep(1, 1).state == btl::EpState::kConnecting);
    g.burst(1, 300, 10);
    uint64_t rail0_before = g.path_bytes(0, 0);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    CHECK(f.log.contains("mlx5_bond_1:1 lost every path to"));
    CHECK(f.log.contains("its traffic goes over mlx5_bond_0:1 until this rail returns"));
    for (size_t i = 0; i < 2; ++i) {
        CAPTURE(i);
        btl::RailCounters lost = g.counters(i, 1);
        btl::RailCounters carrier = g.counters(i, 0);
        CHECK(lost.rerouted_sends >= 10); // at least the ones sent after the cut
        CHECK(carrier.carried_sends >= lost.rerouted_sends);
        CHECK(carrier.carried_bytes == lost.rerouted_bytes);
        // The peer's rail-1 module delivered what came over rail 0.
        btl::RailCounters peer_lost = g.counters(1 - i, 1);
        CHECK(peer_lost.forwarded_received + peer_lost.forwarded_duplicates >=
              lost.rerouted_sends);
        CHECK(peer_lost.forwarded_refused == 0);
    }
    CHECK(g.path_bytes(0, 0) > rail0_before); // the bytes went over rail 0
    // The data among the two that had arrived (a credit message may be one
    // of them) came again over rail 0 and was dropped there.
    CHECK(g.counters(1, 1).forwarded_duplicates >= 1);
    CHECK(g.counters(1, 1).forwarded_duplicates <= 2);
    // Every send completed once, on the btl it was given to.
    CHECK(g_failed.empty());
    CHECK(g_done[rail(f, 0, 1).base()] == 30);
    CHECK(g_done[rail(f, 1, 1).base()] == 30);

    // A connect_timeout (30 s) and more pass with the rail down: rail 0
    // still reaches the peer, so rail 1 does not fail it; traffic goes on.
    for (int s = 0; s < 8; ++s) {
        pass(f, 10.0);
        g.burst(1, 400 + 10 * s, 2);
    }
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    CHECK(g.ep(0, 1).state == btl::EpState::kConnecting);
    CHECK(g.ep(1, 1).state == btl::EpState::kConnecting);
    CHECK(f.procs[0]->errors.empty());
    CHECK(f.procs[1]->errors.empty());
    CHECK_FALSE(f.log.contains("timed out"));

    // The cables are back: rail 1 reconnects (REQs every 2 s at most) and
    // its new traffic goes over it again, none over rail 0.
    dev1.link_down = false;
    REQUIRE(f.run_until([&] { return g.rail_up(1); }, 2000, 0.05));
    CHECK(f.log.contains("mlx5_bond_1:1 reaches"));
    CHECK(f.log.contains("again: its traffic is back on this rail"));
    f.run(5);
    uint64_t rerouted = g.counters(0, 1).rerouted_sends;
    uint64_t carried = g.counters(0, 0).carried_sends;
    uint64_t rail1_before = g.path_bytes(0, 1);
    g.burst(1, 600, 10);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    CHECK(g.counters(0, 1).rerouted_sends == rerouted);
    CHECK(g.counters(0, 0).carried_sends == carried);
    CHECK(g.path_bytes(0, 1) > rail1_before);
    // RDMA on rail 1 works again.
    std::fill(dst.begin(), dst.end(), 0);
    RdmaResult put2;
    REQUIRE(b1->btl_put(b1, g.eps[0][1][1], src.data(), reinterpret_cast<uint64_t>(dst.data()),
                        l_src, r_dst, len, 0, MCA_BTL_NO_ORDER, rdma_done, &put2,
                        nullptr) == OPAL_SUCCESS);
    REQUIRE(f.run_until([&] { return put2.calls == 1; }));
    CHECK(put2.status == OPAL_SUCCESS);
    CHECK(dst == src);
    CHECK(f.procs[0]->errors.empty());
    CHECK(f.procs[1]->errors.empty());
    CHECK(f.log.errors == 0);
    REQUIRE(b1->btl_deregister_mem(b1, l_src) == OPAL_SUCCESS);
    REQUIRE(pb1->btl_deregister_mem(pb1, r_dst) == OPAL_SUCCESS);
    teardown(f);
}

namespace {

/// What the monitor queues when the device reports its port down or up.
netmon::Event port_event(const std::string &device, ibv_event_type type) {
    netmon::Event e;
    e.kind = netmon::EventKind::kVerbsAsync;
    e.rdma_device = device;
    e.rdma_port = 1;
    e.verbs_event = type;
    e.verbs_event_name = type == IBV_EVENT_PORT_ERR ? "PORT_ERR" : "PORT_ACTIVE";
    return e;
}

} // namespace

TEST_CASE("btl rails: the port of a rail goes down (PORT_ERR): its paths fail at once and the "
          "traffic moves without waiting for the QPs' retries; PORT_ACTIVE brings it back at "
          "once",
          "[btl][e2e][rails][railfail][portdown]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    auto &dev1 = f.fake.device("mlx5_bond_1");
    g.warm_up(4);
    g.check_delivery();

    // The cables of rail 1 are pulled with sends in flight. On hardware
    // (and rxe) the QPs retry for ack_timeout x (retry_cnt + 1), seconds per
    // path: nothing completes, nothing moves, meanwhile.
    dev1.link_down = true;
    dev1.link_retrying = true;
    g.burst(1, 200, 10);
    f.run(20);
    CHECK_FALSE(g.all_arrived());
    CHECK(g.ep(0, 1).state == btl::EpState::kConnected);
    CHECK(g.ep(0, 1).path_at(0).tx.outstanding > 0);

    // The device reports the port down in both processes: every path of
    // rail 1 fails now (no retry-exceeded completion), and everything goes
    // over rail 0, once, with its bytes.
    for (size_t i = 0; i < 2; ++i) {
        rail(f, i, 1).net_events({port_event("mlx5_bond_1", IBV_EVENT_PORT_ERR)});
    }
    g.burst(1, 300, 10);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }, 200));
    g.check_delivery();
    CHECK(f.log.contains("mlx5_bond_1:1 went down (the device reported IBV_EVENT_PORT_ERR); the "
                         "paths to 1 peer(s) another rail reaches failed at once"));
    CHECK_FALSE(f.log.contains("retry counter exceeded"));
    for (size_t i = 0; i < 2; ++i) {
        CAPTURE(i);
        CHECK(g.ep(i, 1).state == btl::EpState::kConnecting);
        CHECK(g.counters(i, 1).rerouted_sends >= 10);
        CHECK(g.counters(i, 1).forwarded_refused == 0);
    }
    CHECK(g_failed.empty());
    // A second report of the same state is not warned about again.
    size_t warned = f.log.lines.size();
    rail(f, 0, 1).net_events({port_event("mlx5_bond_1", IBV_EVENT_PORT_ERR)});
    f.run(5);
    for (size_t k = warned; k < f.log.lines.size(); ++k) {
        CHECK(f.log.lines[k].find("went down") == std::string::npos);
    }

    // Down long enough for the reconnection back-off to reach its longest
    // (5 s between attempts), then back: PORT_ACTIVE makes the paths try at
    // once, so the rail is up within 0.2 s of the fabric's clock (REQs are
    // resent every 2 s at most, paths reopened every 3.2 s at most).
    // (Small steps: the managers' timers run every 16th progress call, so
    // they must see the clock as a busy progress loop does.)
    f.run_until([] { return false; }, 4000, 0.01);
    dev1.link_down = false;
    dev1.link_retrying = false;
    for (size_t i = 0; i < 2; ++i) {
        rail(f, i, 1).net_events({port_event("mlx5_bond_1", IBV_EVENT_PORT_ACTIVE)});
    }
    REQUIRE(f.run_until([&] { return g.rail_up(1); }, 20, 0.01));
    CHECK(
        f.log.contains("mlx5_bond_1:1 is active again (IBV_EVENT_PORT_ACTIVE): reconnecting now"));
    uint64_t rerouted = g.counters(0, 1).rerouted_sends;
    uint64_t rail1_before = g.path_bytes(0, 1);
    g.burst(1, 600, 10);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    CHECK(g.counters(0, 1).rerouted_sends == rerouted);
    CHECK(g.path_bytes(0, 1) > rail1_before);
    CHECK(f.procs[0]->errors.empty());
    CHECK(f.procs[1]->errors.empty());
    teardown(f);
}

TEST_CASE("btl rails: only one side sees its port go down (a switch between): the peer "
          "learns it from a notice over the other rail and moves its traffic at once",
          "[btl][e2e][rails][railfail][portdown]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    auto &dev1 = f.fake.device("mlx5_bond_1");
    g.warm_up(4);

    // Process 0's cable on rail 1 is pulled at the switch: its device
    // reports PORT_ERR, process 1's port stays up and its QPs would retry
    // for seconds before they found out.
    dev1.link_down = true;
    dev1.link_retrying = true;
    g.burst(1, 200, 6);
    f.run(5);
    rail(f, 0, 1).net_events({port_event("mlx5_bond_1", IBV_EVENT_PORT_ERR)});
    REQUIRE(f.run_until([&] { return g.ep(1, 1).state == btl::EpState::kConnecting; }, 50));
    CHECK(f.log.contains("mlx5_bond_1:1: rank 0 "));
    CHECK(f.log.contains("that its port went down: 1 path(s) to it failed at once"));
    CHECK(g.counters(1, 1).port_down_notices == 1);
    CHECK(g.counters(0, 1).port_down_notices == 0);
    // Both sides' rail-1 traffic, the sends in flight included, arrives
    // over rail 0, once; no QP ran out of retries.
    g.burst(1, 300, 6);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }, 200));
    g.check_delivery();
    CHECK_FALSE(f.log.contains("retry counter exceeded"));
    CHECK(g.counters(1, 1).rerouted_sends >= 6);
    CHECK(g.counters(0, 1).forwarded_refused == 0);
    CHECK(g.counters(1, 1).forwarded_refused == 0);
    CHECK(g_failed.empty());
    teardown(f);
}

TEST_CASE("btl rails: a port that goes down with no other rail to the peer keeps its QPs (a "
          "short flap heals by retransmission)",
          "[btl][e2e][rails][railfail][portdown]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    g.warm_up(4);
    // Rail 0 is gone for good first: rail 1 is the only way to the peer.
    auto &dev0 = f.fake.device("mlx5_bond_0");
    dev0.link_down = true;
    for (size_t i = 0; i < 2; ++i) {
        rail(f, i, 0).net_events({port_event("mlx5_bond_0", IBV_EVENT_PORT_ERR)});
    }
    f.run(10);
    REQUIRE(g.ep(0, 0).state == btl::EpState::kConnecting);
    // Now rail 1's port flaps: its paths are kept (still up) and the sends
    // in flight arrive when the link is back, without a reconnection.
    auto &dev1 = f.fake.device("mlx5_bond_1");
    dev1.link_down = true;
    dev1.link_retrying = true;
    g.burst(1, 200, 4);
    for (size_t i = 0; i < 2; ++i) {
        rail(f, i, 1).net_events({port_event("mlx5_bond_1", IBV_EVENT_PORT_ERR)});
    }
    f.run(10);
    CHECK(f.log.contains("mlx5_bond_1:1 went down (the device reported IBV_EVENT_PORT_ERR); no "
                         "other rail of this process reaches its peers: their paths stay and "
                         "retry (a short flap heals)"));
    CHECK(g.ep(0, 1).state == btl::EpState::kConnected);
    CHECK(g.ep(0, 1).path_at(0).state == btl::PathState::kUp);
    dev1.link_down = false;
    dev1.link_retrying = false;
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    CHECK(g.counters(0, 1).rerouted_sends == 0);
    CHECK(g.ep(0, 1).path_at(0).state == btl::PathState::kUp);
    teardown(f);
}

TEST_CASE("btl rails: with every rail down the peer fails after connect_timeout, as before",
          "[btl][e2e][rails][railfail]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    g.warm_up(4);
    f.fake.device("mlx5_bond_0").link_down = true;
    f.fake.device("mlx5_bond_1").link_down = true;
    f.run(5);
    REQUIRE(g.send(0, 0, payload(0, 0, 900, 50)) == OPAL_SUCCESS);
    REQUIRE(g.send(0, 1, payload(0, 1, 901, 50)) == OPAL_SUCCESS);
    // Nothing reaches the peer: within a timeout or two (a rail's deadline
    // may have been extended while the other still reached it) both fail.
    pass(f, 62.0);
    for (size_t r = 0; r < 2; ++r) {
        CAPTURE(r);
        CHECK(g.ep(0, r).state == btl::EpState::kFailed);
    }
    CHECK(f.log.contains("timed out after 30 s"));
    CHECK_FALSE(f.procs[0]->errors.empty());
    // The sends waiting on each rail failed (none was lost silently).
    CHECK(g_failed[rail(f, 0, 0).base()] == 1);
    CHECK(g_failed[rail(f, 0, 1).base()] == 1);
    teardown(f);
}

TEST_CASE("btl rails: forwarded fragments naming the wrong rail or sender port, or a number "
          "the window has, are refused",
          "[btl][e2e][rails][railfail]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    g.warm_up(3);
    g.check_delivery();
    const size_t before = f.procs[1]->received.size();

    // Process 0 sends forged kForward fragments over rail 0 (a connected,
    // authenticated peer: the check is on what the frame says).
    std::string body = "forged payload";
    btl::Frag origin{};
    origin.segments[0].seg_addr.pval = body.data();
    origin.segments[0].seg_len = body.size();
    origin.endpoint = &g.ep(0, 1);
    origin.seq = 0; // completed long ago on the sender: its window ignores it
    origin.has_seq = true;
    auto forge = [&](uint16_t src_port, uint16_t dst_port, uint32_t seq) {
        btl::wire::ForwardHeader h;
        h.tag = BtlFabric::kTag;
        h.origin_src_port = src_port;
        h.origin_dst_port = dst_port;
        h.seq = seq;
        // One error line per sender per 10 s: each forgery gets its own.
        f.advance(11.0);
        REQUIRE(rail(f, 0, 0).carry(f.procs[1]->name, h, origin, rail(f, 0, 1)).is_ok());
        f.run(5);
    };
    auto refused = [&] { return g.counters(1, 0).forwarded_refused + g.counters(1, 1).forwarded_refused; };

    forge(1, 7, 1000);  // our port 7: no rail of the receiver
    CHECK(refused() == 1);
    CHECK(f.log.contains("refused a forwarded fragment from"));
    CHECK(f.log.contains("it names our port 7, which is no rail of ours"));
    // Within 10 s of the first, a second from the same sender is counted,
    // not logged.
    f.advance(-11.0);
    forge(1, 7, 1001);
    CHECK(refused() == 2);
    CHECK(f.log.errors == 1);
    forge(1, 0, 1000);  // the rail it came on
    CHECK(refused() == 3);
    CHECK(f.log.contains("(2 such since the last report)"));
    CHECK(f.log.contains("it names the rail it came on"));
    forge(0, 1, 1000);  // rail 1 of the receiver, but sender port 0: not who it is there
    CHECK(refused() == 4);
    CHECK(f.log.contains("it names the sender's port 0; on mlx5_bond_1:1 the sender is port 1"));
    forge(1, 1, 0);     // the right rail, a number its window already delivered
    CHECK(refused() == 4);
    CHECK(g.counters(1, 1).forwarded_duplicates == 1);
    CHECK(g.counters(1, 1).forwarded_received == 0);
    forge(1, 1, 0x40000000u); // far beyond the window
    CHECK(refused() == 5);
    CHECK(f.log.contains("beyond the window"));
    // None of them reached the PML.
    CHECK(f.procs[1]->received.size() == before);
    CHECK(f.procs[1]->errors.empty());
    // The rails still carry traffic.
    g.burst(0, 50, 3);
    g.burst(1, 150, 3);
    REQUIRE(f.run_until([&] { return g.all_arrived(); }));
    g.check_delivery();
    teardown(f);
}

TEST_CASE("btl rails: the rail set finds a sibling that reaches the peer, never the asker",
          "[btl][rails]") {
    btl::Rails rails;
    int a_obj = 0, b_obj = 0, c_obj = 0; // stand-ins: Rails only compares the pointers
    auto *a = reinterpret_cast<btl::Module *>(&a_obj);
    auto *b = reinterpret_cast<btl::Module *>(&b_obj);
    auto *c = reinterpret_cast<btl::Module *>(&c_obj);
    rails.join(a, 0);
    rails.join(b, 1);
    rails.join(c, 2);
    CHECK(rails.at_port(1) == b);
    CHECK(rails.at_port(3) == nullptr);
    CHECK(rails.port_of(c) == 2);
    const uint64_t peer = 0x1234000000005ull;
    CHECK(rails.sibling(a, peer) == nullptr);
    rails.set_reach(a, peer, true);
    CHECK(rails.sibling(a, peer) == nullptr); // itself does not count
    CHECK(rails.sibling(b, peer) == a);
    rails.set_reach(c, peer, true);
    CHECK(rails.sibling(b, peer) == a); // the lowest port index first
    rails.set_reach(a, peer, false);
    CHECK(rails.sibling(b, peer) == c);
    CHECK(rails.sibling(b, peer + 1) == nullptr); // another peer
    rails.leave(c);
    CHECK(rails.sibling(b, peer) == nullptr);
    CHECK(rails.at_port(2) == nullptr);
    CHECK(rails.port_of(c) == -1);
}
