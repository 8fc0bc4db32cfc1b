// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Fuzzing the connection managers' state machines, not just the parser:
// two managers over the in-memory fabric (cm_sim.h) with random weather
// (loss, duplicates, reordering, delays, truncation), random races, genuine
// path failures, and a forger who sends random, forged and malformed
// datagrams in between. After the storm the fabric calms down and the
// invariants are checked:
//  - a live connection is never torn down, nor the peer's address moved, by
//    a message that is not the peer's (the forger knows names, QP numbers
//    and addresses, and can spoof its source address, but not the tokens);
//  - both sides end connected (every path up and paired with the other
//    side's QP) or both cleanly failed; nothing is still in flight;
//  - no QP is leaked (every live QP belongs to a path), nothing grows
//    without bound (paths, the manager's timer list, the drop warnings).
// ROCE_FUZZ_SEED replays one seed; ROCE_FUZZ_ITER sets the number of runs.
#include <cstdlib>

#include "catch.h"

#include "cm_sim.h"
#include "util/strings.h"

using namespace roce::btl;
using namespace roce::btl::testing;

namespace {

constexpr uint64_t kJob = 7;
constexpr uint64_t kA = kJob << 32 | 0;
constexpr uint64_t kB = kJob << 32 | 1;

struct Forger {
    explicit Forger(uint64_t seed) : rng(seed) {}

    uint64_t pick(std::initializer_list<uint64_t> v) {
        return *(v.begin() + static_cast<long>(rng() % v.size()));
    }

    /// One forged or malformed datagram, as the forger can make them.
    std::vector<uint8_t> datagram(const SimNode &a, const SimNode &b) {
        (void)a.token(); // known to a and b only
        wire::CmMessage m;
        m.type = static_cast<wire::CmType>(1 + rng() % 4);
        uint64_t names[] = {a.name(), b.name(), kJob << 32 | (2 + rng() % 4),
                            (rng() % 0xffff) << 32 | (rng() % 8), rng()};
        m.src_name = names[rng() % 5];
        m.dst_name = rng() % 8 == 0 ? names[rng() % 5] : (rng() % 2 ? a.name() : b.name());
        // The forger does not know the tokens: none, or a guess.
        m.src_token = pick({0, rng(), ~uint64_t{0}});
        m.dst_token = pick({0, rng(), ~uint64_t{0}});
        m.conn_id = static_cast<uint32_t>(pick({0, 1, 2, 3, 0xffffffffu, rng()}));
        m.src_ud_qpn = 0x11;
        m.src_port = rng() % 8 == 0 ? 1 : 0;
        m.dst_port = rng() % 8 == 0 ? 1 : 0;
        size_t n = 1 + rng() % wire::kMaxPaths;
        m.first_path = static_cast<uint8_t>(rng() % (wire::kMaxPaths - n + 1));
        m.path_mtu = static_cast<uint8_t>(1 + rng() % 5);
        m.credits = static_cast<uint32_t>(1 + rng() % 64);
        m.superseded = static_cast<uint32_t>(pick({0, 0xffffffffu, rng()}));
        m.src_gid = rng() % 2 ? sim_gid(66) : b.gid();
        m.dst_gid = a.gid();
        for (size_t i = 0; i < n; ++i) {
            uint32_t qpn = rng() % 2 ? 0x100 + static_cast<uint32_t>(rng() % 16)
                                     : 1 + static_cast<uint32_t>(rng() % 0xfffffe);
            m.paths.push_back({qpn, static_cast<uint32_t>(rng() & 0xffffff)});
        }
        m.reason = static_cast<wire::RejectReason>(rng() % 7);
        m.text = std::string(rng() % 40, static_cast<char>(rng()));
        std::vector<uint8_t> bytes = wire::encode(m);
        switch (rng() % 6) {
        case 0: bytes.resize(rng() % (bytes.size() + 1)); break; // truncated
        case 1: bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng()); break; // corrupted
        default: break;
        }
        return bytes;
    }

    std::mt19937_64 rng;
};

uint64_t fuzz_runs(uint64_t dflt) {
    const char *env = std::getenv("ROCE_FUZZ_ITER");
    return env ? std::strtoull(env, nullptr, 10) : dflt;
}

std::pair<uint64_t, uint64_t> seed_range(uint64_t runs) {
    const char *env = std::getenv("ROCE_FUZZ_SEED");
    if (env != nullptr) {
        uint64_t s = std::strtoull(env, nullptr, 10);
        return {s, s + 1};
    }
    return {1, 1 + runs};
}

size_t count(const SimNode &n, SimEvent::Kind k) {
    size_t c = 0;
    for (const auto &e : n.events()) {
        c += e.kind == k ? 1 : 0;
    }
    return c;
}

bool all_up(SimPeer &p) {
    for (const auto &x : p.paths) {
        if (x.state != PathState::kUp) {
            return false;
        }
    }
    return !p.paths.empty();
}

std::string states(SimPeer &p) {
    std::string out = std::string(to_string(p.state)) + ":";
    for (const auto &x : p.paths) {
        out += roce::util::format(" [%s 0x%x->0x%x c%u pc%u]", to_string(x.state), x.local_qpn,
                                  x.remote_qpn, x.conn_id, x.peer_conn_id);
    }
    return out;
}

std::string logs(SimNode &a, SimNode &b) {
    std::string out;
    for (SimNode *n : {&a, &b}) {
        SimPeer *p = n->peer(n == &a ? b.name() : a.name());
        out += (n == &a ? "A " : "B ") + (p ? states(*p) : std::string("-")) + "\n";
    }
    for (SimNode *n : {&a, &b}) {
        for (const auto &l : n->log().last) {
            out += (n == &a ? "A " : "B ") + l + "\n";
        }
    }
    return out;
}

} // namespace

TEST_CASE("cm fuzz: forged traffic never tears down or moves a live connection",
          "[btl][cm][fuzz]") {
    auto [first, end] = seed_range(fuzz_runs(1000));
    for (uint64_t seed = first; seed < end; ++seed) {
        SimFabric f(seed);
        SimNode &a = f.add_node(kA, 0x5eed0000aaaa0000ull ^ seed, 1, 1 + seed % 4);
        SimNode &b = f.add_node(kB, 0x5eed0000bbbb0000ull ^ (seed << 7), 2, 1 + seed % 4);
        SimPeer &pa = a.know(b);
        SimPeer &pb = b.know(a);
        a.cm().connect(pa);
        REQUIRE(f.settle(60));
        REQUIRE(all_up(pa));
        Forger forger(seed * 7919);
        f.weather = Weather{0.1, 0.1, 0.05, 0.2};
        size_t forged = 0;
        for (int step = 0; step < 500; ++step) {
            int burst = static_cast<int>(forger.rng() % 4);
            for (int k = 0; k < burst; ++k) {
                uint64_t victim = forger.rng() % 2 ? kA : kB;
                f.send(forger.rng() % 2 ? sim_gid(66) : (victim == kA ? b.gid() : a.gid()),
                       victim, forger.datagram(victim == kA ? a : b, victim == kA ? b : a));
                ++forged;
            }
            f.advance(0.01);
        }
        f.weather = Weather{};
        bool quiet = f.settle(120);
        INFO("seed " << seed << " (ROCE_FUZZ_SEED=" << seed << "), " << forged << " forged\n"
                     << logs(a, b));
        REQUIRE(quiet);
        CHECK(count(a, SimEvent::Kind::kLost) == 0);
        CHECK(count(b, SimEvent::Kind::kLost) == 0);
        CHECK(count(a, SimEvent::Kind::kMoved) == 0);
        CHECK(count(b, SimEvent::Kind::kMoved) == 0);
        CHECK(a.unknown_lookups() == 0);
        CHECK(b.unknown_lookups() == 0);
        CHECK(all_up(pa));
        CHECK(all_up(pb));
        CHECK(check_pairing(a, b) == "");
        // Every forged datagram was counted as a drop somewhere.
        uint64_t dropped = a.cm().drops().total() + b.cm().drops().total() +
                           pa.drops.total() + pb.drops.total();
        CHECK(dropped >= forged - (forged / 10) * 3); // minus what the weather lost
        // Warnings: a few lines per kind and peer per 10 s, not one per datagram.
        CHECK(a.log().warnings + b.log().warnings <= 40);
    }
}

TEST_CASE("cm fuzz: handshakes under loss, races, failures and forgeries end in one agreed "
          "state with nothing leaked",
          "[btl][cm][fuzz]") {
    auto [first, end] = seed_range(fuzz_runs(1000));
    size_t connected = 0, failed = 0;
    for (uint64_t seed = first; seed < end; ++seed) {
        SimFabric f(seed);
        std::mt19937_64 rng(seed * 104729);
        size_t paths = 1 + rng() % 4;
        SimNode &a = f.add_node(kA, 0xa0a0a0a0ull + seed, 1, paths);
        SimNode &b = f.add_node(kB, 0xb0b0b0b0ull + seed, 2, paths);
        SimPeer &pa = a.know(b);
        SimPeer &pb = b.know(a);
        std::uniform_real_distribution<double> u(0, 1);
        f.weather = Weather{0.4 * u(rng), 0.3 * u(rng), 0.1 * u(rng), 0.001 + 0.5 * u(rng)};
        switch (rng() % 3) {
        case 0: a.cm().connect(pa); break;
        case 1: b.cm().connect(pb); break;
        default:
            a.cm().connect(pa);
            b.cm().connect(pb);
            break;
        }
        if (rng() % 8 == 0) {
            (rng() % 2 ? a : b).fail_qp_creation(1 + static_cast<int>(rng() % 3));
        }
        Forger forger(seed);
        bool forge = rng() % 2 == 0;
        int steps = 200 + static_cast<int>(rng() % 1800); // 2..20 s of storm
        for (int step = 0; step < steps; ++step) {
            if (forge && forger.rng() % 3 == 0) {
                uint64_t victim = forger.rng() % 2 ? kA : kB;
                f.send(sim_gid(66), victim,
                       forger.datagram(victim == kA ? a : b, victim == kA ? b : a));
            }
            if (rng() % 100 == 0) { // a genuine error completion on some path
                bool on_a = rng() % 2 == 0;
                SimPeer &p = on_a ? pa : pb;
                if (p.path_count() > 0) {
                    size_t i = rng() % p.path_count();
                    (on_a ? a : b).cm().path_failed(p, i, "fuzz: error completion");
                }
            }
            f.advance(0.01);
        }
        f.weather = Weather{};
        bool quiet = f.settle(200);
        size_t calm_sent = a.sent() + b.sent();
        f.advance(30); // and nothing more happens once quiet
        INFO("seed " << seed << " (ROCE_FUZZ_SEED=" << seed << ")\n" << logs(a, b));
        REQUIRE(quiet);
        CHECK(a.sent() + b.sent() == calm_sent);
        bool both_up = all_up(pa) && all_up(pb) && pa.state == EpState::kConnected &&
                       pb.state == EpState::kConnected;
        bool both_failed = pa.state == EpState::kFailed && pb.state == EpState::kFailed;
        CHECK((both_up || both_failed));
        connected += both_up ? 1 : 0;
        failed += both_failed ? 1 : 0;
        CHECK(check_pairing(a, b) == "");
        if (both_failed) {
            CHECK(a.live_qps() == 0);
            CHECK(b.live_qps() == 0);
        } else {
            CHECK(a.live_qps() == paths);
            CHECK(b.live_qps() == paths);
        }
        CHECK(pa.path_count() <= paths);
        CHECK(pb.path_count() <= paths);
        CHECK(!a.cm().busy());
        CHECK(!b.cm().busy());
        CHECK(count(a, SimEvent::Kind::kMoved) == 0);
        CHECK(count(b, SimEvent::Kind::kMoved) == 0);
    }
    // The storms are survivable: most runs must end connected.
    CHECK(connected >= (end - first) * 9 / 10);
    WARN("cm fuzz: " << connected << " runs ended connected, " << failed << " cleanly failed");
}
