// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// QP retirement (connection/retire.h) over a btl Device on FakeVerbs: no
// receive completion of a retired QP is lost, teardown leaves nothing
// behind, and a device that never raises Last WQE Reached costs a bounded
// wait and one log line.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "btl_device_bench.h"
#include "btl_roce_frag.h"
#include "connection/retire.h"
#include "util/strings.h"
#include "verbs/handles.h"

using namespace roce;
using btl::Retirement;
using testing::DeviceBench;
using util::LogLevel;

namespace {

constexpr int kBatch = 16; // the module's poll batch

/// What the btl module does with a Retirement, reduced to its bookkeeping:
/// a qpn -> path map, the receives handed up, the sends that came back.
struct Owner {
    Owner(DeviceBench &bench, Retirement &retirement) : b(bench), r(retirement) {}

    /// One progress() call: poll once, hand out the completions, then (while
    /// QPs are retired) feed async events and reap. `after_poll` runs between
    /// the poll and the events, as a device writing a completion then would.
    int progress(double now, const std::function<void()> &after_poll = {}) {
        ibv_wc wc[kBatch];
        int n = b.dev->api().poll_cq(b.dev->cq(), kBatch, wc);
        for (int i = 0; i < n; ++i) {
            handle(wc[i]);
        }
        if (after_poll) {
            after_poll();
        }
        if (!r.empty()) {
            ibv_async_event e{};
            while (b.dev->next_async_event(&e)) {
                (void)r.on_async_event(e);
            }
            for (uint32_t qpn : r.reap(n, kBatch, now)) {
                CHECK(by_qpn.erase(qpn) == 1);
                destroyed.push_back(qpn);
            }
        }
        return n;
    }
    void handle(const ibv_wc &wc) {
        if ((wc.opcode & IBV_WC_RECV) != 0) {
            bool known = by_qpn.count(wc.qp_num) != 0 && wc.status == IBV_WC_SUCCESS;
            (known ? delivered : dropped).push_back(wc.wr_id);
            if (btl::wr_kind(wc.wr_id) == btl::WrKind::kSrqRecv) {
                (void)b.dev->post_srq_recv(static_cast<uint32_t>(btl::wr_index(wc.wr_id)));
            }
            return;
        }
        ++sends_back;
        if (r.retired(wc.qp_num)) {
            CHECK(r.on_send_flushed(wc.qp_num));
        }
    }

    DeviceBench &b;
    Retirement &r;
    std::map<uint32_t, int> by_qpn;
    std::vector<uint64_t> delivered, dropped;
    std::vector<uint32_t> destroyed;
    int sends_back = 0;
};

/// Posts `n` signaled sends on `qp` (they stay in flight: auto-completion off).
void post_sends(DeviceBench &b, ibv_qp *qp, int n) {
    for (int i = 0; i < n; ++i) {
        btl::Frag *f = b.dev->frags().get();
        REQUIRE(f != nullptr);
        ibv_sge sge{reinterpret_cast<uintptr_t>(f->buf), 64, f->lkey};
        ibv_send_wr wr{};
        wr.wr_id = btl::make_wr_id(f, btl::WrKind::kSend);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr *bad = nullptr;
        REQUIRE(b.dev->api().post_send(qp, &wr, &bad) == 0);
    }
}

/// A Device, a Retirement and its owner, declared so that they go in the
/// module's order: the owner's bookkeeping, the Retirement, the Device.
struct Scene {
    explicit Scene(const char *fixture_name, btl::RetirementConfig cfg = {})
        : b(fixture_name), r(b.log, cfg), o(b, r) {}
    /// A connected path QP, mapped by the owner; its number in `qpn`.
    std::unique_ptr<qp::QueuePair> path(uint32_t &qpn) {
        auto q = b.rc_in_rts();
        qpn = q->get()->qp_num;
        o.by_qpn[qpn] = 0;
        return q;
    }
    DeviceBench b;
    Retirement r;
    Owner o;
};

/// How many captured lines contain `needle`.
size_t count_lines(const util::CaptureSink &log, const std::string &needle) {
    size_t n = 0;
    for (const auto &l : log.lines()) {
        n += l.text.find(needle) != std::string::npos ? 1 : 0;
    }
    return n;
}

/// A receive completion as the device writes it for `qpn` into SRQ buffer
/// `index` (not through deliver_recv: the test chooses when it appears).
ibv_wc srq_receive(uint32_t qpn, uint32_t index) {
    ibv_wc wc{};
    wc.wr_id = btl::make_wr_id(index, btl::WrKind::kSrqRecv);
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qpn;
    wc.byte_len = 100;
    return wc;
}

} // namespace

TEST_CASE("Retirement: no receive of a retired QP is lost, not even one written after a poll",
          "[btl][retire]") {
    for (const char *fixture_name : {"mlx5_lag", "rxe_bond"}) {
        CAPTURE(fixture_name);
        const bool mlx5 = std::string(fixture_name) == "mlx5_lag";
        Scene sc(fixture_name);
        auto &[b, r, o] = sc;
        b.fake.set_auto_complete_sends(false);
        uint32_t qpn = 0;
        auto qp = sc.path(qpn);
        post_sends(b, qp->get(), 2);                  // in flight
        REQUIRE(b.fake.deliver_recv(qp->get(), 100)); // A: acknowledged to the sender
        ibv_wc a{};
        REQUIRE(b.dev->api().poll_cq(b.dev->cq(), 1, &a) == 1); // peek, then put back
        b.fake.push_completion(b.dev->cq(), a);

        r.retire(std::move(qp), 2, 0.0);
        CHECK(r.retired(qpn));
        // B: a receive the device was executing when the QP entered ERR,
        // completed after the owner's poll of the progress call in which the
        // QP's waits end (mlx5: the first, with Last WQE Reached; rxe: the
        // first after the 2 s bound).
        bool injected = false;
        double now = 0;
        for (int round = 0; round < 20 && !r.empty(); ++round) {
            now = round == 0 ? 0.01 : now + (mlx5 ? 0.01 : 1.0);
            bool waits_end = mlx5 ? round == 0 : now >= 2.0;
            o.progress(now, [&] {
                if (waits_end && !injected) { // (sc.b: a lambda cannot name a binding in C++17)
                    sc.b.fake.push_completion(sc.b.dev->cq(), srq_receive(qpn, 7));
                    injected = true;
                }
            });
        }
        REQUIRE(injected);
        CHECK(r.empty());
        CHECK(o.destroyed == std::vector<uint32_t>{qpn});
        CHECK(o.by_qpn.empty());
        CHECK(o.sends_back == 2); // both flushed back before the destroy
        CHECK(o.delivered == std::vector<uint64_t>{a.wr_id, srq_receive(qpn, 7).wr_id});
        CHECK(o.dropped.empty());
        CHECK(count_lines(b.log, "no IBV_EVENT_QP_LAST_WQE_REACHED") == (mlx5 ? 0u : 1u));
    }
}

TEST_CASE("Retirement: without Last WQE Reached a QP is destroyed after the bound, with one line",
          "[btl][retire][timeout]") {
    struct Case {
        const char *fixture;
        double bound;
    };
    for (Case c : {Case{"rxe_bond", 2.0}, Case{"mlx5_lag", 0.5}}) {
        CAPTURE(c.fixture, c.bound);
        btl::RetirementConfig cfg;
        cfg.last_wqe_timeout = c.bound;
        Scene sc(c.fixture, cfg);
        auto &[b, r, o] = sc;
        b.fake.device(b.sel.device).raises_last_wqe = false; // rxe on 6.1 never does
        uint32_t qpn = 0;
        r.retire(sc.path(qpn), 0, 100.0);
        for (double t : {100.0, 100.0 + c.bound / 2, 100.0 + c.bound * 0.99}) {
            o.progress(t);
            CHECK(r.retired(qpn)); // still waiting for the event
        }
        CHECK(b.fake.live_objects() > 0);
        o.progress(100.0 + c.bound); // the bound: its waits are over now...
        CHECK(r.retired(qpn));
        o.progress(100.0 + c.bound + 0.001); // ...and the CQ was polled empty since
        CHECK_FALSE(r.retired(qpn));
        CHECK(o.destroyed == std::vector<uint32_t>{qpn});
        REQUIRE(count_lines(b.log, "no IBV_EVENT_QP_LAST_WQE_REACHED") == 1);
        for (const auto &l : b.log.lines()) {
            if (l.text.find("LAST_WQE") != std::string::npos) {
                CHECK(l.level == LogLevel::kInfo);
                CHECK(l.text == util::format("%s:1: retired RC QP 0x%x: no "
                                             "IBV_EVENT_QP_LAST_WQE_REACHED within %.1f s after "
                                             "ERR (rdma_rxe on Linux 6.1 never raises it); "
                                             "destroying it once the CQ is drained",
                                             b.sel.device.c_str(), qpn, c.bound));
            }
        }
        for (int i = 0; i < 5; ++i) {
            o.progress(200.0 + i); // nothing more is said
        }
        CHECK(count_lines(b.log, "LAST_WQE") == 1);
    }
}

TEST_CASE("Retirement: torn down before the Device, nothing is left and no destroy fails",
          "[btl][retire][teardown]") {
    for (const char *fixture_name : {"mlx5_lag", "rxe_bond"}) {
        for (bool drain : {false, true}) {
            CAPTURE(fixture_name, drain);
            verbs::note_destroy_failure(0);
            DeviceBench b(fixture_name);
            b.fake.set_auto_complete_sends(false);
            auto r = std::make_unique<Retirement>(b.log);
            Owner o(b, *r);
            // A path with sends in flight and a receive in the CQ, a path
            // just retired (nothing polled since), one never connected, and
            // a live path the owner still holds.
            auto busy = b.rc_in_rts();
            post_sends(b, busy->get(), 3);
            REQUIRE(b.fake.deliver_recv(busy->get(), 64));
            auto quiet = b.rc_in_rts();
            auto raw = b.dev->create_rc_qp();
            REQUIRE(raw);
            auto fresh =
                std::make_unique<qp::QueuePair>(b.dev->api(), std::move(raw.value()),
                                                qp::QpType::kRC, b.sel, b.fresh(), false, &b.log);
            auto live = b.rc_in_rts();
            for (auto *q : {&busy, &quiet, &fresh, &live}) {
                o.by_qpn[(*q)->get()->qp_num] = 0;
            }
            r->retire(std::move(busy), 3, 0.0);
            r->retire(std::move(quiet), 0, 0.0);
            r->retire(std::move(fresh), 0, 0.0);
            REQUIRE(r->size() == 3);

            // The order the module uses: its QPs, then the Retirement, then
            // the Device.
            live.reset();
            if (drain) {
                double t = 0;
                auto clock = [&t] { return t += 0.05; };
                auto round = [&o] {
                    ibv_wc wc[kBatch];
                    int n = o.b.dev->api().poll_cq(o.b.dev->cq(), kBatch, wc);
                    for (int i = 0; i < n; ++i) {
                        o.handle(wc[i]);
                    }
                    ibv_async_event e{};
                    while (o.b.dev->next_async_event(&e)) {
                        (void)o.r.on_async_event(e);
                    }
                    return n >= 0 && n < kBatch;
                };
                auto destroyed = r->destroy_all(round, 1.0, clock);
                CHECK(destroyed.size() == 3);
                CHECK(o.sends_back == 3);
                CHECK(o.delivered.size() == 1);
                // mlx5 said Last WQE Reached for both: all drained in time.
                // rxe never does: 1 s < the 2 s bound, so two go early.
                CHECK(count_lines(b.log, "at teardown before") ==
                      (std::string(fixture_name) == "mlx5_lag" ? 0u : 1u));
            }
            r.reset();
            if (!drain) {
                CHECK(count_lines(b.log, "destroying 3 retired QPs at teardown before they "
                                         "drained") == 1);
            }
            b.dev.reset();
            CHECK(b.fake.live_objects() == 0);
            CHECK(verbs::last_destroy_errno() == 0);
            CHECK(b.fake.busy_deregs() == 0);
        }
    }
}

TEST_CASE("Retirement: failures are said, bounded, and never stop the teardown", "[btl][retire]") {
    SECTION("a failed destroy is logged with the verb, errno, QPN and device; the QP is let go") {
        Scene sc("mlx5_lag");
        auto &[b, r, o] = sc;
        uint32_t qpn = 0;
        r.retire(sc.path(qpn), 0, 0.0);
        b.fake.fail(testing::Call::kDestroyQp, EIO);
        o.progress(0.1);
        o.progress(0.2);
        CHECK(r.empty());
        CHECK(o.destroyed == std::vector<uint32_t>{qpn});
        CHECK(b.log.contains(util::format("mlx5_bond_0:1: retired RC QP 0x%x: ibv_destroy_qp(RC) "
                                          "on mlx5_bond_0 qpn 0x%x failed: Input/output error (5)",
                                          qpn, qpn)));
        CHECK(b.fake.live_objects() > 0); // the fake still has it: the kernel would reclaim it
    }
    SECTION("a QP that cannot be moved to ERR is retired anyway, within the bound") {
        Scene sc("mlx5_lag");
        auto &[b, r, o] = sc;
        uint32_t qpn = 0;
        auto qp = sc.path(qpn);
        b.fake.fail(testing::Call::kModifyQp, EIO);
        r.retire(std::move(qp), 0, 0.0);
        CHECK(b.log.contains(util::format("mlx5_bond_0:1: retired RC QP 0x%x: ibv_modify_qp(RC, "
                                          "RTS->ERR) on mlx5_bond_0 qpn 0x%x failed: "
                                          "Input/output error (5); retired anyway",
                                          qpn, qpn)));
        o.progress(1.0);
        CHECK(r.retired(qpn)); // no ERR, no Last WQE Reached: it waits the bound
        o.progress(2.0);
        o.progress(2.1);
        CHECK(r.empty());
    }
    SECTION("sends the owner counted but that never come back: one warning, then destroyed") {
        Scene sc("mlx5_lag");
        auto &[b, r, o] = sc;
        b.fake.set_auto_complete_sends(false);
        uint32_t qpn = 0;
        auto qp = sc.path(qpn);
        post_sends(b, qp->get(), 2);
        r.retire(std::move(qp), 3, 0.0); // one more than there are
        for (double t : {0.1, 5.0, 9.9}) {
            o.progress(t);
        }
        CHECK(o.sends_back == 2);
        CHECK(r.retired(qpn));
        o.progress(10.0);
        o.progress(10.1);
        CHECK(r.empty());
        CHECK(count_lines(b.log, "1 of its outstanding send completions did not come back within "
                                 "10.0 s") == 1);
    }
}

TEST_CASE("Retirement: what it ignores, and a QP still in RESET", "[btl][retire]") {
    Scene sc("mlx5_lag");
    auto &[b, r, o] = sc;
    r.retire(nullptr, 5, 0.0);
    CHECK(r.empty());
    CHECK_FALSE(r.on_send_flushed(0x1234));

    auto live = b.rc_in_rts();
    auto raw = b.dev->create_rc_qp();
    REQUIRE(raw);
    auto never = std::make_unique<qp::QueuePair>(b.dev->api(), std::move(raw.value()),
                                                 qp::QpType::kRC, b.sel, b.fresh(), false, &b.log);
    const uint32_t qpn = never->get()->qp_num;
    o.by_qpn[qpn] = 0;
    int modifies = b.fake.calls(testing::Call::kModifyQp);
    r.retire(std::move(never), 0, 0.0);
    CHECK(b.fake.calls(testing::Call::kModifyQp) == modifies); // RESET: no ERR to go to

    // Events that are not a held QP's Last WQE Reached are the caller's.
    ibv_async_event e{};
    e.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
    e.element.qp = live->get();
    CHECK_FALSE(r.on_async_event(e));
    e.event_type = IBV_EVENT_PORT_ERR;
    e.element.port_num = 1;
    CHECK_FALSE(r.on_async_event(e));

    CHECK(r.reap(0, kBatch, 0.1).empty());      // waits over now; destroyed at the next short poll
    CHECK(r.reap(kBatch, kBatch, 0.2).empty()); // that poll was full
    CHECK(r.reap(-EIO, kBatch, 0.2).empty());   // that one failed
    CHECK(r.reap(3, kBatch, 0.3) == std::vector<uint32_t>{qpn});
    CHECK(r.empty());
}

TEST_CASE("Retirement: a CQ that never comes back short drains after its capacity",
          "[btl][retire]") {
    for (uint32_t entries : {0u, 40u}) {
        CAPTURE(entries);
        btl::RetirementConfig cfg;
        cfg.cq_entries = entries;
        Scene sc("mlx5_lag", cfg);
        auto &[b, r, o] = sc;
        uint32_t qpn = 0;
        auto qp = sc.path(qpn);
        REQUIRE(qp->to_error().is_ok()); // already failed, its event read and dropped
        ibv_async_event e{};
        while (b.dev->next_async_event(&e)) {
        }
        r.retire(std::move(qp), 0, 0.0);
        CHECK(r.reap(kBatch, kBatch, 0.1).empty());
        CHECK(r.reap(kBatch, kBatch, 2.0).empty()); // the 2 s bound: waits over now
        CHECK(r.reap(kBatch, kBatch, 2.1).empty()); // 16 polled since
        CHECK(r.reap(kBatch, kBatch, 2.2).empty()); // 32
        auto third = r.reap(kBatch, kBatch, 2.3);   // 48 >= 40
        CHECK(third == (entries > 0 ? std::vector<uint32_t>{qpn} : std::vector<uint32_t>{}));
        CHECK(r.empty() == (entries > 0));
    }
}
