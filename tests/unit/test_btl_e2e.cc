// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl end to end over FakeVerbs: two and N Modules in one process, their
// UD (connection setup) and RC (data) queue pairs wired through the fake,
// driven through the module's C function table and progress, as Open MPI
// drives them (btl_fabric.h).
#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"
#include "ompi_series.h"
#include "util/strings.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using roce::testing::sorted;
using namespace roce::testing::e2e;

TEST_CASE("btl e2e: lazy connect on first send, both directions, every path paired", "[btl][e2e]") {
    for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
        CAPTURE(fx);
        verbs::note_destroy_failure(0);
        FabricOptions o;
        o.fixture = fx;
        BtlFabric f(o);
        f.add_all();
        // The module adds remote completion (5.0; 0 under 4.1) to the
        // registered flags (btl::module_flags).
        CHECK((f.procs[0]->btl()->btl_flags & ROCE_BTL_FLAGS_REMOTE_COMPLETION) ==
              ROCE_BTL_FLAGS_REMOTE_COMPLETION);
        CHECK(f.ep(0, 1).state == btl::EpState::kClosed); // nothing before first use
        CHECK(f.fake.datagrams().empty());
        REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
        CHECK(f.ep(0, 1).state == btl::EpState::kConnecting);
        CHECK(f.fake.datagrams().size() == 1); // the REQ
        REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }));
        f.run(5);
        CHECK(from(f, 1, 0) == expected(0, 1, 0, 1));
        CHECK(f.ep(0, 1).path_count() == 2); // one path per LAG member
        for (int n = 0; n < 20; ++n) {
            REQUIRE(f.send(1, 0, msg(1, 0, n)) == OPAL_SUCCESS);
            REQUIRE(f.send(0, 1, msg(0, 1, n + 1)) == OPAL_SUCCESS);
        }
        f.run(20);
        CHECK(from(f, 0, 1) == sorted(expected(1, 0, 0, 20)));
        CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 21)));
        check_pairing(f, 0, 1);
        check_pairing(f, 1, 0);
        CHECK(f.log.errors == 0);
        teardown(f);
    }
}

TEST_CASE("btl e2e: fragments up to the QPs' max_inline_data go inline, larger ones from the "
          "registered slot",
          "[btl][e2e]") {
    for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
        CAPTURE(fx);
        FabricOptions o;
        o.fixture = fx;
        BtlFabric f(o);
        f.add_all();
        // The module asks for 128 bytes of inline data (DeviceConfig) and
        // learns what it got from query_qp; the btl's header takes some.
        const size_t room = 128 - btl::wire::kFragHeaderSize;
        std::string small(100, 's'), edge(room, 'e'), large(room + 1, 'l'), big(1000, 'b');
        for (const std::string *m : {&small, &edge, &large, &big}) {
            REQUIRE(f.send(0, 1, *m) == OPAL_SUCCESS);
        }
        REQUIRE(f.run_until([&] { return f.procs[1]->received.size() == 4; }));
        CHECK(sorted(f.procs[1]->received) ==
              sorted(std::vector<std::string>{small, edge, large, big}));
        size_t inline_sends = 0, gathered = 0;
        for (const roce::testing::PostedWr &wr : f.fake.sends()) {
            if (wr.ah != nullptr || wr.opcode != IBV_WR_SEND) {
                continue; // UD (connection setup)
            }
            bool inl = (wr.send_flags & IBV_SEND_INLINE) != 0;
            CAPTURE(wr.length);
            CHECK(inl == (wr.length <= 128));
            (inl ? inline_sends : gathered) += 1;
        }
        CHECK(inline_sends >= 2); // small, edge (and credit messages)
        CHECK(gathered == 2);     // large, big
        CHECK(f.log.errors == 0);
        teardown(f);
    }
}

TEST_CASE("btl e2e: the receive buffers of one progress call go back to the SRQ as one list",
          "[btl][e2e]") {
    FabricOptions o;
    o.fixture = "rxe_bond";
    BtlFabric f(o);
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(f.procs[1]->received.size() == 1);
    // Eight fragments wait in process 1's CQ; one progress call hands them
    // to the PML and reposts their eight buffers in one ibv_post_srq_recv.
    for (int n = 1; n <= 8; ++n) {
        REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
    }
    while (f.fake.run_rc() != 0) {
    }
    const int posts = f.fake.calls(roce::testing::Call::kPostSrqRecv);
    const size_t recvs = f.fake.recvs().size();
    f.procs[1]->module->progress();
    CHECK(f.procs[1]->received.size() == 9);
    CHECK(f.fake.calls(roce::testing::Call::kPostSrqRecv) == posts + 1);
    CHECK(f.fake.recvs().size() == recvs + 8); // every buffer is back
    f.run(20);
    CHECK(from(f, 1, 0) == expected(0, 1, 0, 9));
    CHECK(f.log.errors == 0);
    teardown(f);
}

namespace {

/// Both processes start sending to each other with no connection, in an
/// order the schedule picks; the UD wire and the RC queues are then run by
/// `choose`, an option per step: a send not made yet (p0's, p1's), deliver
/// datagram k, deliver a copy of datagram k and keep it on the wire (at
/// most `max_dups`: the original then arrives late), or let the RC queues
/// run with every process progressing (at most `max_rc_steps`: RC traffic
/// can overtake an RTU). Finally everything settles. Returns what went
/// wrong, empty when the outcome is right: both connected, every path
/// paired, every message received exactly once, and - nothing was lost -
/// no path ever failed.
std::string simultaneous_connect(const FabricOptions &o,
                                 const std::function<size_t(size_t)> &choose, int max_rc_steps,
                                 int max_dups) {
    BtlFabric f(o);
    f.add_all();
    bool sent[2] = {false, false};
    int rc_steps = 0, dups = 0;
    for (int step = 0; step < 64 && (!sent[0] || !sent[1] || !f.fake.datagrams().empty()); ++step) {
        std::vector<std::function<void()>> options;
        for (size_t i = 0; i < 2; ++i) {
            if (!sent[i]) {
                options.push_back([&, i] {
                    sent[i] = true;
                    REQUIRE(f.send(i, 1 - i, msg(i, 1 - i, 0)) == OPAL_SUCCESS);
                });
            }
        }
        size_t n = f.fake.datagrams().size();
        for (size_t k = 0; k < n; ++k) {
            options.push_back([&f, k] { (void)f.deliver(k); });
        }
        for (size_t k = 0; dups < max_dups && k < n; ++k) {
            options.push_back([&f, &dups, k] {
                ++dups;
                (void)f.fake.deliver_datagram(f.fake.datagrams()[k]);
                f.progress_all();
            });
        }
        if (rc_steps < max_rc_steps) {
            options.push_back([&] {
                ++rc_steps;
                f.fake.run_rc();
                f.progress_all();
            });
        }
        options[choose(options.size())]();
    }
    bool up = f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }, 3000, 0.02);
    f.run(10);
    std::string why;
    if (!up) {
        why += util::format("not connected: p0 %s, p1 %s; ", btl::to_string(f.ep(0, 1).state),
                            btl::to_string(f.ep(1, 0).state));
    }
    if (from(f, 1, 0) != expected(0, 1, 0, 1) || from(f, 0, 1) != expected(1, 0, 0, 1)) {
        why += util::format("received p0 %zu p1 %zu messages (want 1 each); ",
                            f.procs[0]->received.size(), f.procs[1]->received.size());
    }
    for (size_t i = 0; i < 2; ++i) {
        btl::Endpoint &e = f.ep(i, 1 - i);
        for (size_t k = 0; k < e.path_count(); ++k) {
            const btl::Path &p = e.path_at(k);
            if (p.tx.stats.failovers != 0 || p.tx.stats.reconnects != 0) {
                why += util::format("p%zu path %zu failed %llu times, reconnected %llu times; ", i,
                                    k, static_cast<unsigned long long>(p.tx.stats.failovers),
                                    static_cast<unsigned long long>(p.tx.stats.reconnects));
            }
        }
    }
    for (size_t k = 0; up && k < f.ep(0, 1).path_count(); ++k) {
        const btl::Path &p = f.ep(0, 1).path_at(k);
        const btl::Path &q = f.ep(1, 0).path_at(k);
        if (!p.qp || !q.qp || f.fake.qp_attr(p.qp->get()).dest_qp_num != q.qpn() ||
            f.fake.qp_attr(q.qp->get()).dest_qp_num != p.qpn()) {
            why += util::format("path %zu not paired; ", k);
        }
    }
    // Afterwards the connection carries traffic both ways.
    if (up) {
        for (int n = 1; n < 6; ++n) {
            (void)f.send(0, 1, msg(0, 1, n));
            (void)f.send(1, 0, msg(1, 0, n));
        }
        f.run(20);
        if (from(f, 1, 0) != sorted(expected(0, 1, 0, 6)) ||
            from(f, 0, 1) != sorted(expected(1, 0, 0, 6))) {
            why += "traffic after the race lost or duplicated; ";
        }
    }
    if (f.log.errors != 0) {
        why += "errors logged: " + f.log.lines.back() + "; ";
    }
    teardown(f);
    return why;
}

} // namespace

TEST_CASE("btl e2e: simultaneous connect, every interleaving of REQ/REP/RTU and the first data",
          "[btl][e2e][race]") {
    // Systematic: every schedule of deliveries (and up to two rounds of RC
    // traffic, which can overtake the RTU), enumerated depth first by
    // replaying a prefix of choices and taking the first option after it.
    FabricOptions o;
    o.fixture = "mlx5_lag";
    o.tweak = [](btl::ModuleConfig &c) { c.num_paths = 1; };
    std::vector<size_t> choices, widths;
    size_t schedules = 0;
    std::set<std::string> failures;
    for (;;) {
        size_t depth = 0;
        widths.clear();
        auto choose = [&](size_t width) {
            size_t k = depth < choices.size() ? choices[depth] : 0;
            if (depth >= choices.size()) {
                choices.push_back(0);
            }
            widths.push_back(width);
            ++depth;
            return std::min(k, width - 1);
        };
        std::string why = simultaneous_connect(o, choose, 1, 1);
        ++schedules;
        if (!why.empty()) {
            std::string s;
            for (size_t d = 0; d < depth; ++d) {
                s += std::to_string(choices[d]) + "/" + std::to_string(widths[d]) + " ";
            }
            failures.insert("schedule [" + s + "]: " + why);
        }
        choices.resize(depth);
        // The next schedule: the last choice that has an untried option.
        while (!choices.empty() && choices.back() + 1 >= widths[choices.size() - 1]) {
            choices.pop_back();
        }
        if (choices.empty()) {
            break;
        }
        ++choices.back();
        REQUIRE(schedules < 50000);
    }
    INFO(schedules << " schedules");
    for (const auto &s : failures) {
        UNSCOPED_INFO(s);
    }
    CHECK(failures.empty());
    CHECK(schedules > 20); // the race really branched
}

TEST_CASE("btl e2e: simultaneous connect over two LAG paths, randomized schedules",
          "[btl][e2e][race]") {
    FabricOptions o;
    o.fixture = "rxe_bond";
    std::set<std::string> failures;
    for (uint32_t seed = 1; seed <= 60; ++seed) {
        std::mt19937 rng(seed);
        auto choose = [&](size_t width) {
            return std::uniform_int_distribution<size_t>(0, width - 1)(rng);
        };
        std::string why = simultaneous_connect(o, choose, 3, 2);
        if (!why.empty()) {
            failures.insert("seed " + std::to_string(seed) + ": " + why);
        }
    }
    for (const auto &s : failures) {
        UNSCOPED_INFO(s);
    }
    CHECK(failures.empty());
}

TEST_CASE("btl e2e: lost, duplicated, reordered and late connection messages", "[btl][e2e][cm]") {
    // Seeded chaos on the UD wire while both sides connect and send; then
    // the wire heals. Retransmission (REQ backoff, the RTU wait) must bring
    // both up with every message delivered exactly once.
    std::set<std::string> failures;
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        std::mt19937 rng(seed);
        FabricOptions o;
        o.fixture = seed % 2 ? "rxe_bond" : "mlx5_lag";
        BtlFabric f(o);
        f.add_all();
        REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
        if (seed % 3 != 0) {
            REQUIRE(f.send(1, 0, msg(1, 0, 0)) == OPAL_SUCCESS);
        }
        size_t lost = 0, copies = 0;
        std::vector<testing::FakeVerbs::Datagram> late;
        const double start = f.now();
        for (int step = 0; step < 200; ++step) {
            auto &w = f.fake.datagrams();
            int action = std::uniform_int_distribution<int>(0, 9)(rng);
            if (!w.empty() && action < 3) { // lost
                size_t k = std::uniform_int_distribution<size_t>(0, w.size() - 1)(rng);
                w.erase(w.begin() + static_cast<std::ptrdiff_t>(k));
                ++lost;
            } else if (!w.empty() && action < 5) { // duplicated: a copy arrives now
                size_t k = std::uniform_int_distribution<size_t>(0, w.size() - 1)(rng);
                (void)f.fake.deliver_datagram(w[k]);
                ++copies;
                f.progress_all();
            } else if (!w.empty() && action < 6) { // late: held back, delivered later
                size_t k = std::uniform_int_distribution<size_t>(0, w.size() - 1)(rng);
                late.push_back(w[k]);
                w.erase(w.begin() + static_cast<std::ptrdiff_t>(k));
            } else if (!w.empty() && action < 9) { // delivered, any order
                size_t k = std::uniform_int_distribution<size_t>(0, w.size() - 1)(rng);
                (void)f.deliver(k);
            } else { // time passes (up to 10 s in all, well within the connect
                     // timeout); RC traffic runs; a late one may arrive
                if (f.now() - start < 10.0) {
                    f.advance(std::uniform_real_distribution<double>(0.05, 0.6)(rng));
                }
                f.fake.run_rc();
                f.progress_all();
                if (!late.empty() && action == 9) {
                    (void)f.fake.deliver_datagram(late.front());
                    late.erase(late.begin());
                    f.progress_all();
                }
            }
        }
        double chaos_end = f.now();
        size_t ud_sent = 0;
        for (const auto &wr : f.fake.sends()) {
            ud_sent += wr.ah != nullptr ? 1 : 0;
        }
        for (const auto &d : late) { // the latest copies, after the fact
            (void)f.fake.deliver_datagram(d);
            f.progress_all();
        }
        bool up = f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }, 3000, 0.05);
        f.run(10);
        std::string why;
        if (!up) {
            why += util::format("not connected (chaos over at +%.1f s, %zu datagrams sent by "
                                "then); ",
                                chaos_end - start, ud_sent);
        }
        if (from(f, 1, 0) != expected(0, 1, 0, 1)) {
            why += util::format("p1 got %zu from p0; ", from(f, 1, 0).size());
        }
        if (seed % 3 != 0 && from(f, 0, 1) != expected(1, 0, 0, 1)) {
            why += util::format("p0 got %zu from p1; ", from(f, 0, 1).size());
        }
        for (size_t i = 0; i < 2; ++i) {
            for (const auto &e : f.procs[i]->errors) {
                why += util::format("p%zu: the PML was told: %s; ", i, e.c_str());
            }
        }
        if (!why.empty()) {
            size_t n = f.log.lines.size();
            for (size_t k = n > 12 ? n - 12 : 0; k < n; ++k) {
                why += "\n    " + f.log.lines[k];
            }
            failures.insert(util::format("seed %u (%zu lost, %zu copies): ", seed, lost, copies) +
                            why);
        }
        teardown(f);
    }
    for (const auto &s : failures) {
        UNSCOPED_INFO(s);
    }
    CHECK(failures.empty());
}

TEST_CASE("btl e2e: a peer that never answers fails after the connect timeout; the PML is told",
          "[btl][e2e][cm]") {
    FabricOptions o;
    o.connect_timeout_s = 5;
    BtlFabric f(o);
    f.add_all();
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    // Every REQ is lost.
    for (int k = 0; k < 400 && f.ep(0, 1).state != btl::EpState::kFailed; ++k) {
        f.fake.datagrams().clear();
        f.advance(0.05);
        f.progress_all();
    }
    CHECK(f.ep(0, 1).state == btl::EpState::kFailed);
    REQUIRE(f.procs[0]->errors.size() == 1);
    CHECK(f.procs[0]->errors[0].find("REQs from") != std::string::npos);
    // The user sees it once, under the help topic of its cause.
    REQUIRE(f.reports.size() == 1);
    CHECK(f.reports[0].first == "connection failed");
    CHECK(f.reports[0].second.find("connection to rank 1") != std::string::npos);
    CHECK(f.procs[1]->received.empty());
    // Sends to a failed peer are refused at once.
    CHECK(f.send(0, 1, msg(0, 1, 1)) == OPAL_ERR_UNREACH);
    teardown(f);
}

namespace {
// The completion callback of a descriptor its caller owns: counts into the
// int its des_context points at.
void count_send_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *,
                     mca_btl_base_descriptor_t *des, int status) {
    CHECK(status == OPAL_SUCCESS);
    ++*static_cast<int *>(des->des_context);
}
} // namespace

// Open MPI 5.0's active-message RDMA (opal/mca/btl/base/btl_base_am_rdma.c)
// keeps the descriptor of an operation larger than one send (no
// BTL_OWNERSHIP, SEND_ALWAYS_CALLBACK) and, from its completion callback,
// refills and sends that same descriptor again for the next part. Each send
// is a new message: it must not keep the number of the one before, which the
// receiver has delivered already and would drop as a duplicate (the
// two-guest osc/rdma hang under 5.0.7: the second part of a get never
// arrived, so its response never came).
TEST_CASE("btl e2e: a descriptor its caller owns, sent again after its completion, arrives "
          "again",
          "[btl][e2e]") {
    for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
        CAPTURE(fx);
        FabricOptions o;
        o.fixture = fx;
        BtlFabric f(o);
        f.add_all();
        connect_by_first_send(f);
        REQUIRE(f.procs[1]->received.size() == 1);
        mca_btl_base_module_t *b = f.procs[0]->btl();
        mca_btl_base_endpoint_t *e = f.procs[0]->eps[1];
        mca_btl_base_descriptor_t *d =
            b->btl_alloc(b, e, MCA_BTL_NO_ORDER, 64, MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
        REQUIRE(d != nullptr);
        int done = 0;
        d->des_cbfunc = count_send_done;
        d->des_context = &done;
        std::vector<std::string> sent;
        for (int n = 0; n < 6; ++n) {
            std::string part = "part " + std::to_string(n) + std::string(static_cast<size_t>(n), '+');
            std::memcpy(d->des_segments[0].seg_addr.pval, part.data(), part.size());
            d->des_segments[0].seg_len = part.size();
            int rc = b->btl_send(b, e, d, BtlFabric::kTag);
            REQUIRE((rc == OPAL_SUCCESS || rc == 1));
            sent.push_back(part);
            REQUIRE(f.run_until([&] { return done == n + 1; }));
        }
        f.run(10);
        std::vector<std::string> got(f.procs[1]->received.begin() + 1, f.procs[1]->received.end());
        CHECK(got == sent); // every part once, in order
        CHECK(done == 6);
        b->btl_free(b, d);
        CHECK(f.log.errors == 0);
        teardown(f);
    }
}

TEST_CASE("btl e2e: credits run out, sends wait, credit-only messages bring them back",
          "[btl][e2e][credits]") {
    FabricOptions o;
    o.fixture = "mlx5_lag";
    o.credits = 4;
    o.tweak = [](btl::ModuleConfig &c) { c.num_paths = 1; };
    BtlFabric f(o);
    f.add_all();
    connect_by_first_send(f);
    REQUIRE(from(f, 1, 0).size() == 1);
    const btl::Path &p = f.ep(0, 1).path_at(0);
    const btl::Path &q = f.ep(1, 0).path_at(0);
    uint32_t pq = p.qpn(), qq = q.qpn();
    auto rc_sends = [&](uint32_t qpn, bool header_only) {
        size_t n = 0;
        for (const auto &wr : f.fake.sends()) {
            if (wr.qp_num == qpn && wr.opcode == IBV_WR_SEND &&
                (wr.length == btl::wire::kFragHeaderSize) == header_only) {
                ++n;
            }
        }
        return n;
    };
    size_t before = rc_sends(pq, false);
    // p1 does not progress: its receive buffers are not reposted, no
    // credits come back. p0 posts at most its window (one credit stays in
    // reserve for a credit-only message); the rest waits, accepted.
    for (int n = 1; n <= 12; ++n) {
        REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
        f.fake.run_rc();
        f.procs[0]->module->progress();
    }
    size_t posted = rc_sends(pq, false) - before;
    CHECK(posted >= 1);
    CHECK(posted <= o.credits - 1);
    CHECK(p.tx.credits.available() <= p.tx.credits.reserve());
    {
        // The sends that waited for credits are counted (MPI_T credit_stalls).
        btl::BtlCounters c;
        f.procs[0]->module->read_counters(c);
        CHECK(c.total(&btl::PathCounters::credit_stalls) >= 1);
        CHECK(c.total(&btl::PathCounters::bytes_sent) > 0);
        CHECK(c.paths_up() == 1);
    }
    // p1 consumes them and, with nothing to send, returns the credits in
    // credit-only messages; p0's waiting sends go out.
    size_t credit_only_before = rc_sends(qq, true);
    f.run(40);
    CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 13)));
    CHECK(rc_sends(qq, true) > credit_only_before);
    CHECK(rc_sends(qq, false) == 0); // p1 sent no data
    // Both directions saturated at once: the reserve keeps them moving.
    for (int n = 0; n < 30; ++n) {
        REQUIRE(f.send(0, 1, msg(0, 1, 13 + n)) == OPAL_SUCCESS);
        REQUIRE(f.send(1, 0, msg(1, 0, n)) == OPAL_SUCCESS);
    }
    f.run(60);
    CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 43)));
    CHECK(from(f, 0, 1) == sorted(expected(1, 0, 0, 30)));
    CHECK(p.tx.stats.bad_credits == 0);
    CHECK(q.tx.stats.bad_credits == 0);
    teardown(f);
}

namespace {

/// The path of i's endpoint for j that has work in flight on its QP.
size_t busy_path(BtlFabric &f, size_t i, size_t j) {
    btl::Endpoint &e = f.ep(i, j);
    for (size_t k = 0; k < e.path_count(); ++k) {
        if (e.path_at(k).tx.outstanding > 0) {
            return k;
        }
    }
    return e.path_count();
}

} // namespace

TEST_CASE("btl e2e: a path fails with sends and RDMA in flight: no loss, no duplicate; it "
          "reconnects and carries traffic again (failover and failback)",
          "[btl][e2e][failover]") {
    for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
        CAPTURE(fx);
        verbs::note_destroy_failure(0);
        FabricOptions o;
        o.fixture = fx;
        o.credits = 16;
        BtlFabric f(o);
        f.add_all();
        connect_by_first_send(f);
        REQUIRE(f.ep(0, 1).path_count() == 2);

        // Memory for a put (p0 -> p1) and a get (p1 -> p0), 64 KiB each.
        const size_t len = 64 * 1024;
        std::vector<uint8_t> src(len), dst(len, 0), remote_src(len), got(len, 0);
        for (size_t k = 0; k < len; ++k) {
            src[k] = static_cast<uint8_t>(k * 7 + 1);
            remote_src[k] = static_cast<uint8_t>(k * 13 + 5);
        }
        auto *l_src = f.reg(0, src.data(), len);
        auto *l_got = f.reg(0, got.data(), len);
        auto *r_dst = f.reg(1, dst.data(), len);
        auto *r_src = f.reg(1, remote_src.data(), len);
        REQUIRE((l_src && l_got && r_dst && r_src));
        uint64_t counter = 40;
        auto *r_ctr = f.reg(1, &counter, sizeof(counter));
        REQUIRE(r_ctr);

        mca_btl_base_module_t *b = f.procs[0]->btl();
        mca_btl_base_endpoint_t *e = f.procs[0]->eps[1];
        RdmaResult put, get, add;
        for (int n = 1; n <= 10; ++n) {
            REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
        }
        REQUIRE(b->btl_put(b, e, src.data(), reinterpret_cast<uint64_t>(dst.data()), l_src, r_dst,
                           len, 0, MCA_BTL_NO_ORDER, rdma_done, &put, nullptr) == OPAL_SUCCESS);
        REQUIRE(b->btl_get(b, e, got.data(), reinterpret_cast<uint64_t>(remote_src.data()), l_got,
                           r_src, len, 0, MCA_BTL_NO_ORDER, rdma_done, &get,
                           nullptr) == OPAL_SUCCESS);
        REQUIRE(b->btl_atomic_op(b, e, reinterpret_cast<uint64_t>(&counter), r_ctr,
                                 MCA_BTL_ATOMIC_ADD, 2, 0, MCA_BTL_NO_ORDER, rdma_done, &add,
                                 nullptr) == OPAL_SUCCESS);
        // A cable is pulled under one path: the first two of its work
        // requests reached p1 but their ACKs are lost, the rest never left.
        size_t k = busy_path(f, 0, 1);
        REQUIRE(k < 2);
        const btl::Path &failing = f.ep(0, 1).path_at(k);
        uint32_t old_qpn = failing.qpn();
        f.fake.break_qp(failing.qp->get(), IBV_WC_RETRY_EXC_ERR, 2);
        f.run(30);
        CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 11))); // each once
        CHECK(put.calls == 1);
        CHECK(put.status == OPAL_SUCCESS);
        CHECK(get.calls == 1);
        CHECK(get.status == OPAL_SUCCESS);
        CHECK(dst == src);
        CHECK(got == remote_src);
        // The atomic ran once (its ACK was lost only if it was among the
        // first two: then it is not repeated, and it reports an error).
        CHECK(add.calls == 1);
        if (add.status == OPAL_SUCCESS) {
            CHECK(counter == 42);
        } else {
            CHECK(counter <= 42);
        }
        CHECK(f.procs[0]->errors.empty());
        const btl::Path &p = f.ep(0, 1).path_at(k);
        CHECK(p.tx.stats.failovers == 1);

        // Failback: the path reconnects (a new QP) and carries traffic again.
        REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }, 2000, 0.05));
        CHECK(p.qpn() != old_qpn);
        CHECK(p.tx.stats.reconnects == 1);
        check_pairing(f, 0, 1);
        size_t sends_before = f.fake.sends().size();
        for (int n = 11; n < 31; ++n) {
            REQUIRE(f.send(0, 1, msg(0, 1, n)) == OPAL_SUCCESS);
        }
        f.run(20);
        CHECK(from(f, 1, 0) == sorted(expected(0, 1, 0, 31)));
        size_t on_new = 0;
        for (size_t s = sends_before; s < f.fake.sends().size(); ++s) {
            on_new += f.fake.sends()[s].qp_num == p.qpn() ? 1 : 0;
        }
        CHECK(on_new > 0); // round robin uses the reconnected path
        REQUIRE(b->btl_deregister_mem(b, l_src) == OPAL_SUCCESS);
        REQUIRE(b->btl_deregister_mem(b, l_got) == OPAL_SUCCESS);
        teardown(f);
    }
}

TEST_CASE("btl e2e: N processes, all to all", "[btl][e2e]") {
    FabricOptions o;
    o.procs = 5;
    BtlFabric f(o);
    f.add_all();
    for (size_t i = 0; i < o.procs; ++i) {
        for (size_t j = 0; j < o.procs; ++j) {
            if (i != j) {
                for (int n = 0; n < 3; ++n) {
                    REQUIRE(f.send(i, j, msg(i, j, n)) == OPAL_SUCCESS);
                }
            }
        }
    }
    REQUIRE(f.run_until([&] {
        for (size_t i = 0; i < o.procs; ++i) {
            if (f.procs[i]->received.size() != 3 * (o.procs - 1)) {
                return false;
            }
        }
        return true;
    }));
    for (size_t i = 0; i < o.procs; ++i) {
        for (size_t j = 0; j < o.procs; ++j) {
            if (i != j) {
                CAPTURE(i, j);
                CHECK(from(f, j, i) == expected(i, j, 0, 3));
                check_pairing(f, i, j);
            }
        }
    }
    teardown(f);
}

TEST_CASE("btl e2e: teardown in every connection state leaves nothing behind",
          "[btl][e2e][teardown]") {
    enum class At { kClosed, kReqOut, kAwaitRtu, kConnected, kPathFailed, kPeerFailed };
    for (At at : {At::kClosed, At::kReqOut, At::kAwaitRtu, At::kConnected, At::kPathFailed,
                  At::kPeerFailed}) {
        for (const char *fx : {"rxe_bond", "mlx5_lag"}) {
            CAPTURE(static_cast<int>(at), fx);
            verbs::note_destroy_failure(0);
            FabricOptions o;
            o.fixture = fx;
            o.connect_timeout_s = 2;
            BtlFabric f(o);
            f.add_all();
            if (at != At::kClosed) {
                REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
            }
            switch (at) {
            case At::kClosed:
            case At::kReqOut:
                break;
            case At::kAwaitRtu:
                REQUIRE(f.deliver(0)); // the REQ; p1 answers; the REP stays on the wire
                CHECK(f.ep(1, 0).path_at(0).state == btl::PathState::kAwaitRtu);
                break;
            case At::kConnected:
                REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }));
                break;
            case At::kPathFailed: {
                REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }));
                REQUIRE(f.send(0, 1, msg(0, 1, 1)) == OPAL_SUCCESS);
                size_t k = busy_path(f, 0, 1);
                REQUIRE(k < f.ep(0, 1).path_count());
                f.fake.break_qp(f.ep(0, 1).path_at(k).qp->get());
                f.procs[0]->module->progress(); // retired, reconnect pending
                break;
            }
            case At::kPeerFailed:
                for (int k = 0; k < 400 && f.ep(0, 1).state != btl::EpState::kFailed; ++k) {
                    f.fake.datagrams().clear(); // every REQ lost
                    f.advance(0.05);
                    f.progress_all();
                }
                REQUIRE(f.ep(0, 1).state == btl::EpState::kFailed);
                break;
            }
            // With work still in flight: finalize both, in order.
            for (size_t i = 0; i < 2; ++i) {
                CHECK(f.finalize(i) == OPAL_SUCCESS);
            }
            CHECK(f.fake.live_objects() == 0);
            CHECK(f.fake.busy_deregs() == 0);
            CHECK(verbs::last_destroy_errno() == 0);
        }
    }
}
