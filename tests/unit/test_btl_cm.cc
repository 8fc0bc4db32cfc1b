// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The btl's connection manager, two (or more) of them over the in-memory
// fabric of cm_sim.h: handshakes, races, loss, and datagrams forged by
// another process on the fabric (which knows names, QP numbers and the
// qkey, but not the tokens of the job's processes).
#include "catch.h"

#include "cm_sim.h"

#include <malloc.h>

#include <random>

using namespace roce::btl;
using namespace roce::btl::testing;

namespace {

constexpr uint64_t kA = (uint64_t{7} << 32) | 0; // jobid 7, vpid 0
constexpr uint64_t kB = (uint64_t{7} << 32) | 1; // vpid 1: A's REQ wins a race
constexpr uint64_t kTokenA = 0x1111aaaa2222bbbbull;
constexpr uint64_t kTokenB = 0x3333cccc4444ddddull;

struct Pair {
    explicit Pair(uint64_t seed = 1, size_t paths = 2) : fabric(seed) {
        a = &fabric.add_node(kA, kTokenA, 1, paths);
        b = &fabric.add_node(kB, kTokenB, 2, paths);
        pa = &a->know(*b);
        pb = &b->know(*a);
    }
    void connect() {
        a->cm().connect(*pa);
        REQUIRE(fabric.settle(60));
        REQUIRE(pa->state == EpState::kConnected);
        REQUIRE(pb->state == EpState::kConnected);
        REQUIRE(check_pairing(*a, *b).empty());
    }
    size_t lost(SimNode &n) const {
        size_t k = 0;
        for (const auto &e : n.events()) {
            k += e.kind == SimEvent::Kind::kLost ? 1 : 0;
        }
        return k;
    }
    size_t moved(SimNode &n) const {
        size_t k = 0;
        for (const auto &e : n.events()) {
            k += e.kind == SimEvent::Kind::kMoved ? 1 : 0;
        }
        return k;
    }
    /// The last log lines of both nodes, for failure messages.
    std::string logs() const {
        std::string out;
        for (SimNode *n : {a, b}) {
            for (const auto &l : n->log().last) {
                out += (n == a ? "A " : "B ") + l + "\n";
            }
        }
        return out;
    }
    SimFabric fabric;
    SimNode *a = nullptr;
    SimNode *b = nullptr;
    SimPeer *pa = nullptr; ///< B, as A knows it
    SimPeer *pb = nullptr; ///< A, as B knows it
};

/// A message as the forger writes it: it knows both names, B's QP numbers
/// and the addresses; it does not know any token.
wire::CmMessage forged(wire::CmType type, uint64_t src, uint64_t dst, uint32_t conn_id) {
    wire::CmMessage m;
    m.type = type;
    m.src_name = src;
    m.dst_name = dst;
    m.conn_id = conn_id;
    m.src_ud_qpn = 0x11;
    m.first_path = 0;
    m.path_mtu = 3;
    m.credits = 32;
    m.src_gid = sim_gid(66);
    m.dst_gid = sim_gid(1);
    m.paths = {{0xbad01, 0x123}, {0xbad02, 0x456}};
    return m;
}

bool all_up(SimPeer &p) {
    for (const auto &x : p.paths) {
        if (x.state != PathState::kUp) {
            return false;
        }
    }
    return !p.paths.empty();
}

} // namespace

TEST_CASE("cm: a connection comes up over a clean fabric", "[btl][cm]") {
    Pair p;
    p.connect();
    CHECK(all_up(*p.pa));
    CHECK(p.pa->paths.size() == 2);
    CHECK(p.a->live_qps() == 2);
    CHECK(p.b->live_qps() == 2);
}

TEST_CASE("cm: simultaneous connects end in one connection and no leaked QP", "[btl][cm]") {
    for (uint64_t seed = 1; seed <= 50; ++seed) {
        Pair p(seed);
        p.a->cm().connect(*p.pa);
        p.b->cm().connect(*p.pb);
        REQUIRE(p.fabric.settle(60));
        INFO("seed " << seed);
        CHECK(all_up(*p.pa));
        CHECK(all_up(*p.pb));
        CHECK(check_pairing(*p.a, *p.b) == "");
    }
}

TEST_CASE("cm: loss, duplicates, reordering and truncation still connect", "[btl][cm]") {
    for (uint64_t seed = 1; seed <= 50; ++seed) {
        Pair p(seed);
        p.fabric.weather = Weather{0.3, 0.3, 0.1, 0.3};
        p.a->cm().connect(*p.pa);
        if (seed % 2 == 0) {
            p.b->cm().connect(*p.pb);
        }
        p.fabric.advance(10);
        p.fabric.weather = Weather{};
        REQUIRE(p.fabric.settle(60));
        INFO("seed " << seed << "\n" << p.logs());
        CHECK(all_up(*p.pa));
        CHECK(all_up(*p.pb));
        CHECK(check_pairing(*p.a, *p.b) == "");
    }
}

TEST_CASE("cm: a failed path reconnects alone", "[btl][cm]") {
    Pair p;
    p.connect();
    uint32_t other = p.pa->paths[1].local_qpn;
    p.a->cm().path_failed(*p.pa, 0, "test: error completion");
    REQUIRE(p.fabric.settle(60));
    CHECK(all_up(*p.pa));
    CHECK(all_up(*p.pb));
    CHECK(p.pa->paths[1].local_qpn == other);
    CHECK(check_pairing(*p.a, *p.b) == "");
}

TEST_CASE("cm: a forged REQ naming the real peer does not tear down a live path",
          "[btl][cm][forged]") {
    Pair p;
    p.connect();
    uint32_t q0 = p.pa->paths[0].local_qpn, q1 = p.pa->paths[1].local_qpn;
    for (uint32_t id : {1u, 2u, 1000u, 0xffffffffu}) {
        auto m = forged(wire::CmType::kRequest, kB, kA, id);
        p.fabric.send(sim_gid(66), kA, wire::encode(m));
    }
    REQUIRE(p.fabric.settle(60));
    CHECK(p.lost(*p.a) == 0);
    CHECK(p.pa->paths[0].local_qpn == q0);
    CHECK(p.pa->paths[1].local_qpn == q1);
    CHECK(all_up(*p.pa));
    CHECK(check_pairing(*p.a, *p.b) == "");
}

TEST_CASE("cm: forged messages do not move the peer's address", "[btl][cm][forged]") {
    Pair p;
    p.connect();
    // The forger sends from its own address and claims it as B's.
    for (auto type : {wire::CmType::kRequest, wire::CmType::kReply}) {
        auto m = forged(type, kB, kA, 77);
        p.fabric.send(sim_gid(66), kA, wire::encode(m));
    }
    // A REQ while A connects again: it fits the state, but is not B's.
    p.a->cm().path_failed(*p.pa, 0, "test: error completion");
    auto rep = forged(wire::CmType::kReply, kB, kA, p.pa->paths[0].conn_id);
    p.fabric.send(sim_gid(66), kA, wire::encode(rep));
    REQUIRE(p.fabric.settle(60));
    CHECK(p.moved(*p.a) == 0);
    CHECK(p.pa->gid == sim_gid(2));
    CHECK(all_up(*p.pa));
    CHECK(check_pairing(*p.a, *p.b) == "");
}

TEST_CASE("cm: a forged conn_id 0xffffffff during a race does not make the peer stale forever",
          "[btl][cm][forged]") {
    Pair p;
    p.a->cm().connect(*p.pa);
    // While A's REQ is out, a "REQ from B" with the largest id arrives: A
    // wins the race by name and records B's id as abandoned.
    auto m = forged(wire::CmType::kRequest, kB, kA, 0xffffffffu);
    p.fabric.send(sim_gid(66), kA, wire::encode(m));
    REQUIRE(p.fabric.settle(60));
    REQUIRE(all_up(*p.pa));
    // B's path 0 fails later; B's new REQ must still be answered.
    p.b->cm().path_failed(*p.pb, 0, "test: error completion");
    REQUIRE(p.fabric.settle(60));
    CHECK(all_up(*p.pa));
    CHECK(all_up(*p.pb));
    CHECK(check_pairing(*p.a, *p.b) == "");
}

TEST_CASE("cm: a process of the job not added yet is looked up on its authenticated REQ",
          "[btl][cm]") {
    SimFabric fabric(3);
    SimNode &a = fabric.add_node(kA, kTokenA, 1);
    SimNode &b = fabric.add_node(kB, kTokenB, 2);
    SimPeer &pb = b.know(a); // B knows A from the modex; A has not added B yet
    a.allow_lazy(b);
    b.cm().connect(pb);
    REQUIRE(fabric.settle(60));
    CHECK(a.unknown_lookups() == 1);
    REQUIRE(a.peer(kB) != nullptr);
    CHECK(all_up(*a.peer(kB)));
    CHECK(all_up(pb));
    CHECK(check_pairing(a, b) == "");
}

TEST_CASE("cm: a peer that vanishes is failed cleanly, with every QP retired", "[btl][cm]") {
    Pair p;
    p.connect();
    p.fabric.kill(kB);
    // Its paths fail (RC retries exhausted), reconnection gets no answer,
    // and after connect_timeout the peer is failed.
    p.fabric.advance(60);
    REQUIRE(p.fabric.settle(120));
    CHECK(p.pa->state == EpState::kFailed);
    CHECK(p.a->live_qps() == 0);
    size_t failed = 0;
    for (const auto &e : p.a->events()) {
        failed += e.kind == SimEvent::Kind::kFailed ? 1 : 0;
    }
    CHECK(failed == 1);
    CHECK(p.lost(*p.a) == 2);
}

TEST_CASE("cm: a connected peer that another rail still reaches is not failed at its deadline; "
          "one no rail reaches is, and so is one never connected",
          "[btl][cm][rails]") {
    Pair p;
    p.connect();
    p.a->elsewhere = true; // A's other rail reaches B
    p.fabric.kill(kB);     // this rail's paths to B fail and get no answer
    p.fabric.advance(200);
    CHECK(p.pa->state == EpState::kConnecting); // still reconnecting
    CHECK(p.lost(*p.a) == 2);
    size_t reqs = p.a->sent();
    p.fabric.advance(10);
    CHECK(p.a->sent() >= reqs + 4); // REQs every 2 s at most, still
    CHECK(p.a->log().errors == 0);
    // The other rail lost B too: the timeout applies (within one more).
    p.a->elsewhere = false;
    p.fabric.advance(31);
    CHECK(p.pa->state == EpState::kFailed);
    CHECK(p.a->live_qps() == 0);

    // A peer never connected is failed at its deadline whatever other
    // rails reach (they would carry nothing for it: it was never up here).
    Pair q;
    q.a->elsewhere = true;
    q.fabric.kill(kB);
    q.a->cm().connect(*q.pa);
    q.fabric.advance(31);
    CHECK(q.pa->state == EpState::kFailed);
}

TEST_CASE("cm: a REQ whose REP was lost and whose answering path failed is started over",
          "[btl][cm]") {
    // B answers A's REQ, the REP is lost, B's path fails (the RTU wait
    // times out): A's retransmitted REQ is stale for B, which tells A to
    // start over instead of both waiting forever.
    Pair p(5, 1);
    p.a->cm().connect(*p.pa);  // the REQ is on its way
    p.fabric.weather.loss = 1; // and B's REP will be lost
    p.fabric.advance(0.01);
    REQUIRE(p.pb->paths.size() == 1);
    REQUIRE(p.pb->paths[0].state == PathState::kAwaitRtu);
    p.fabric.weather.loss = 0;
    p.b->cm().path_failed(*p.pb, 0, "test: readdressed");
    REQUIRE(p.fabric.settle(60));
    CHECK(all_up(*p.pa));
    CHECK(all_up(*p.pb));
    CHECK(check_pairing(*p.a, *p.b) == "");
}

TEST_CASE("cm: a loopback path is wired locally, and rewired locally after it fails",
          "[btl][cm]") {
    // Found by the VM tier (pml-two-ci): after a cable pull a rank's path to
    // itself was reconnected by a REQ to its own UD QP, which nobody
    // answers; 30 s later the endpoint failed and the job hung.
    SimFabric fabric(9);
    SimNode &a = fabric.add_node(kA, kTokenA, 1);
    SimPeer &self = a.know(a);
    a.cm().connect(self);
    REQUIRE(self.paths.size() == 1);
    CHECK(self.paths[0].state == PathState::kUp);
    CHECK(self.state == EpState::kConnected);
    a.cm().path_failed(self, 0, "test: the cable was pulled");
    CHECK(self.state == EpState::kConnecting);
    a.fail_qp_creation(1); // the first rewiring fails; it is tried again
    REQUIRE(fabric.settle(60));
    CHECK(self.paths[0].state == PathState::kUp);
    CHECK(self.state == EpState::kConnected);
    CHECK(a.sent() == 0); // no CM message, ever
    CHECK(a.live_qps() == 2);
    CHECK(a.log().errors == 0);
}

TEST_CASE("cm: requests from names outside the job are never looked up", "[btl][cm][forged]") {
    Pair p;
    p.connect();
    for (uint32_t jobid : {8u, 0xdeadu, 0xffffffffu}) {
        auto m = forged(wire::CmType::kRequest, (uint64_t{jobid} << 32) | 3, kA, 5);
        p.fabric.send(sim_gid(66), kA, wire::encode(m));
    }
    // Same job, not yet added: looked up only with A's token (see below).
    auto m = forged(wire::CmType::kRequest, (uint64_t{7} << 32) | 9, kA, 5);
    p.fabric.send(sim_gid(66), kA, wire::encode(m));
    REQUIRE(p.fabric.settle(60));
    CHECK(p.a->unknown_lookups() == 0);
}

TEST_CASE("cm: dropped datagrams are counted and warned about at a bounded rate",
          "[btl][cm][forged]") {
    Pair p;
    p.connect();
    size_t warned = p.a->log().warnings;
    for (int i = 0; i < 1000; ++i) {
        auto m = forged(wire::CmType::kRequest, kB, kA, 100 + i);
        p.fabric.send(sim_gid(66), kA, wire::encode(m));
        std::vector<uint8_t> junk = wire::encode(m);
        junk.resize(junk.size() / 2);
        p.fabric.send(sim_gid(66), kA, junk);
        p.fabric.advance(0.001);
    }
    REQUIRE(p.fabric.settle(60));
    CHECK(p.pa->drops.unauthenticated == 1000);
    CHECK(p.a->cm().drops().malformed == 1000);
    // One line per kind per 10 s interval, at most: the run took ~1 s.
    CHECK(p.a->log().warnings - warned <= 2);
    CHECK(p.lost(*p.a) == 0);
}

TEST_CASE("cm: a spray of forged datagrams does not grow the manager's memory",
          "[btl][cm][forged]") {
    // What tests/vm/src/cm-forge sends at a rank in the btl-forge VM group:
    // REQ/REP/RTU/REJECT naming the real peer (a quarter with a random job
    // id), guessed tokens and connection ids, a fifth truncated or with a
    // byte flipped. The VM group bounds the rank's VmRSS; this bounds what
    // the manager itself keeps (the heap in use, mallinfo2) per datagram.
    Pair p;
    p.connect();
    std::mt19937_64 rng(14);
    auto spray = [&](int n) {
        for (int i = 0; i < n; ++i) {
            uint64_t src = rng() % 4 == 0 ? (rng() & 0xffffffff00000000ull) | 1 : kB;
            auto m = forged(static_cast<wire::CmType>(1 + rng() % 4), src, kA,
                            rng() % 5 == 0 ? 0xffffffffu : static_cast<uint32_t>(rng()));
            m.src_token = rng() % 2 ? 0 : rng();
            m.dst_token = rng() % 2 ? 0 : rng();
            std::vector<uint8_t> b = wire::encode(m);
            if (rng() % 5 == 0) {
                if (rng() % 2) {
                    b.resize(rng() % b.size());
                } else {
                    b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
                }
            }
            p.fabric.send(sim_gid(66), kA, std::move(b));
            if (i % 100 == 99) {
                p.fabric.advance(0.1); // 1000 datagrams per second, as cm-forge
            }
        }
        REQUIRE(p.fabric.settle(60));
    };
    spray(2000); // warm-up: the rate limiter's entries, the log's last lines
    size_t before = mallinfo2().uordblks;
    spray(20000);
    size_t after = mallinfo2().uordblks;
    INFO("heap in use " << before << " -> " << after << " bytes");
    CHECK(after <= before + 20000); // < 1 byte per datagram
    CHECK(p.lost(*p.a) == 0);
    CHECK(p.moved(*p.a) == 0);
    CHECK(all_up(*p.pa));
}
