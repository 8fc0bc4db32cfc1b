// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The matching engine's building blocks: hash index, reorder ring, node pool.
#include <cstdint>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "catch.h"
#include "match/key_index.h"
#include "match/node_pool.h"
#include "match/reorder_ring.h"

using namespace roce::pml::match;
using namespace roce::pml::match::detail;

TEST_CASE("match internals: pack_key keeps every (source, tag) pair distinct", "[match]") {
    CHECK(pack_key(0, 1) != pack_key(1, 0));
    CHECK(pack_key(kAnySource, 5) != pack_key(5, kAnyTag));
    CHECK(pack_key(-1, -1) != KeyIndex<int>::kEmpty);
    CHECK(pack_key(0x7fffffff, -2147483647 - 1) != KeyIndex<int>::kEmpty);
    CHECK(pack_key(-2, 0) == KeyIndex<int>::kEmpty);
}

TEST_CASE("match internals: KeyIndex agrees with std::unordered_map under churn", "[match]") {
    KeyIndex<int> index;
    std::unordered_map<uint64_t, int *> model;
    std::vector<int> values(4096);
    std::mt19937_64 rng(12345);
    // Keys from a small space so inserts, erases and re-inserts collide a lot;
    // the sizes sweep up and down through several doublings.
    for (int round = 0; round < 200000; ++round) {
        int32_t source = static_cast<int32_t>(rng() % 40) - 1;
        int32_t tag = static_cast<int32_t>(rng() % 100) - 3;
        uint64_t key = pack_key(source, tag);
        bool grow_phase = (round / 20000) % 2 == 0;
        auto it = model.find(key);
        if (it == model.end()) {
            if (grow_phase || rng() % 4 == 0) {
                int *v = &values[rng() % values.size()];
                REQUIRE(index.insert(key, v));
                model.emplace(key, v);
            }
        } else if (!grow_phase || rng() % 4 == 0) {
            index.erase(key);
            model.erase(it);
        }
        REQUIRE(index.size() == model.size());
        REQUIRE(index.capacity() >= 2 * index.size()); // load <= 1/2 after growing or shrinking
        if (round % 97 == 0) {
            for (auto &[k, v] : model) {
                REQUIRE(index.find(k) == v);
            }
            std::size_t seen = 0;
            index.for_each([&](uint64_t k, int *v) {
                ++seen;
                REQUIRE(model.at(k) == v);
            });
            REQUIRE(seen == model.size());
        }
        REQUIRE(index.find(pack_key(source, tag)) ==
                (model.count(key) != 0 ? model[key] : nullptr));
    }
    CHECK(index.capacity() >= 2 * index.size());
    index.clear();
    CHECK(index.size() == 0);
    CHECK(index.find(pack_key(0, 0)) == nullptr);
}

TEST_CASE("match internals: KeyIndex keeps probe runs short for clustered keys", "[match]") {
    // 10,000 consecutive tags of one source, and one tag across 10,000
    // sources: the mixer must spread both.
    KeyIndex<int> index;
    int v = 0;
    for (int i = 0; i < 10000; ++i) {
        REQUIRE(index.insert(pack_key(3, i), &v));
        REQUIRE(index.insert(pack_key(i, 3 + 1000000), &v));
    }
    long worst = 0;
    double total = 0;
    for (int i = 0; i < 10000; ++i) {
        long d1 = index.probe_distance(pack_key(3, i));
        long d2 = index.probe_distance(pack_key(i, 3 + 1000000));
        REQUIRE(d1 >= 0);
        REQUIRE(d2 >= 0);
        worst = std::max(worst, std::max(d1, d2));
        total += static_cast<double>(d1 + d2);
    }
    double mean = total / 20000.0;
    INFO("mean probe distance " << mean << ", worst " << worst);
    CHECK(mean < 2.0);
    CHECK(worst < 64);
}

TEST_CASE("match internals: ReorderRing holds, finds and grows across the wrap", "[match]") {
    ReorderRing ring;
    CHECK(ring.find(0) == nullptr);
    Seq expected = 65530;
    // Distances 1..40 from 65530, crossing 65535 -> 0, in a scrambled order.
    std::vector<uint32_t> distances;
    for (uint32_t d = 1; d <= 40; ++d) {
        distances.push_back((d * 17) % 40 + 1);
    }
    std::set<uint32_t> unique(distances.begin(), distances.end());
    REQUIRE(unique.size() == 40);
    for (uint32_t d : distances) {
        REQUIRE(ring.reserve(d));
        Seq s = static_cast<Seq>(expected + d);
        REQUIRE(ring.find(s) == nullptr);
        ring.put(s, static_cast<int32_t>(d), reinterpret_cast<void *>(uintptr_t(d)));
    }
    CHECK(ring.count() == 40);
    CHECK(ring.capacity() == 64);
    for (uint32_t d = 1; d <= 40; ++d) {
        const ReorderRing::Entry *e = ring.find(static_cast<Seq>(expected + d));
        REQUIRE(e != nullptr);
        CHECK(e->tag == static_cast<int32_t>(d));
        CHECK(e->seq == static_cast<Seq>(expected + d));
    }
    // A sequence number sharing a slot (mod 64) but not held is not found.
    CHECK(ring.find(static_cast<Seq>(expected + 1 + 64)) == nullptr);
    for (uint32_t d = 1; d <= 40; ++d) {
        ring.remove(static_cast<Seq>(expected + d));
    }
    CHECK(ring.count() == 0);
    REQUIRE(ring.reserve(kMaxReorderDistance));
    CHECK(ring.capacity() == 32768);
    ring.put(static_cast<Seq>(expected + kMaxReorderDistance), 1, nullptr);
    int visited = 0;
    ring.for_each([&](const ReorderRing::Entry &e) {
        ++visited;
        CHECK(e.seq == static_cast<Seq>(expected + kMaxReorderDistance));
    });
    CHECK(visited == 1);
    ring.clear();
    CHECK(ring.count() == 0);
}

TEST_CASE("match internals: ReorderRing capacity always exceeds the reserved distance", "[match]") {
    // Capacity == distance would put seq expected+distance on the slot of the
    // expected message itself.
    for (uint32_t d : {1u, 15u, 16u, 17u, 31u, 32u, 33u, 1000u, 16384u, kMaxReorderDistance}) {
        ReorderRing ring;
        REQUIRE(ring.reserve(d));
        CHECK(ring.capacity() > d);
        CHECK((ring.capacity() & (ring.capacity() - 1)) == 0);
        ring.put(0, 1, nullptr);
        ring.put(static_cast<Seq>(d), 2, nullptr);
        REQUIRE(ring.find(0) != nullptr);
        CHECK(ring.find(0)->tag == 1);
        REQUIRE(ring.find(static_cast<Seq>(d)) != nullptr);
        CHECK(ring.find(static_cast<Seq>(d))->tag == 2);
    }
}

namespace {
struct TestNode {
    TestNode *next;
    uint32_t generation;
};
} // namespace

TEST_CASE("match internals: NodePool reuses freed nodes and keeps their other fields", "[match]") {
    NodePool<TestNode, &TestNode::next> pool;
    std::vector<TestNode *> nodes;
    for (int i = 0; i < 1000; ++i) {
        TestNode *n = pool.alloc();
        REQUIRE(n != nullptr);
        CHECK(n->generation == 0);
        n->generation = 7;
        nodes.push_back(n);
    }
    CHECK(pool.live() == 1000);
    std::size_t cap = pool.capacity();
    CHECK(cap >= 1000);
    std::set<TestNode *> distinct(nodes.begin(), nodes.end());
    CHECK(distinct.size() == 1000);
    for (TestNode *n : nodes) {
        pool.free(n);
    }
    CHECK(pool.live() == 0);
    for (int i = 0; i < 1000; ++i) {
        TestNode *n = pool.alloc();
        CHECK(distinct.count(n) == 1); // no new memory
        CHECK(n->generation == 7);
        CHECK(n->next == nullptr);
    }
    CHECK(pool.capacity() == cap);
}

TEST_CASE("match internals: NodePool with a limit fails like exhausted memory", "[match]") {
    NodePool<TestNode, &TestNode::next> pool;
    pool.set_limit(3);
    TestNode *a = pool.alloc();
    TestNode *b = pool.alloc();
    TestNode *c = pool.alloc();
    REQUIRE((a != nullptr && b != nullptr && c != nullptr));
    CHECK(pool.alloc() == nullptr);
    CHECK(pool.capacity() == 3);
    pool.free(b);
    CHECK(pool.alloc() == b);
}
