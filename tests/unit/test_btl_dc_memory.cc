// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// What a DC peer costs at add_procs (issue 19): a DcSlot and a share of its
// node's address handle, measured as heap growth over FakeVerbs with
// thousands of fake peers (dc_memory_rig.h), against a bound made of the
// sizes of the structures involved; its Endpoint only on first use.
#include <malloc.h>

#include <cstdint>

#include "btl_roce_module.h"
#include "catch.h"
#include "dc_memory_rig.h"

using namespace roce;
using namespace roce::testing;

namespace {

int64_t heap_in_use() {
    struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks) + static_cast<int64_t>(mi.hblkhd);
}

/// Heap growth of add_procs of `peers` fake peers, 64 to a node.
int64_t add_procs_growth(bool dc, size_t peers, size_t *reached, size_t *dc_peers,
                         size_t *dc_endpoints, size_t *dests) {
    DcMemoryRig rig(dc, peers, 64);
    int64_t before = heap_in_use();
    *reached = rig.add_all();
    int64_t after = heap_in_use();
    *dc_peers = rig.module().dc_peers();
    *dc_endpoints = rig.module().dc_endpoints();
    *dests = rig.module().dc_dests();
    return after - before;
}

// What one more DC peer may cost: its slot in the data path's table (an
// unordered_map node: the slot, the key, the next pointer, malloc's chunk
// header) and, at worst, two bucket pointers (the table doubles), plus its
// share of its node's destination (the address handle, FakeVerbs' object
// behind it, the addressing; bounded by 2 KiB) among 64 peers.
constexpr int64_t kDcPeerBound = static_cast<int64_t>(sizeof(btl::DcSlot) + sizeof(uint64_t) +
                                                      sizeof(void *) + 16 + 2 * sizeof(void *)) +
                                 2048 / 64;

} // namespace

TEST_CASE("btl dc memory: a DC peer costs its slot at add_procs, not an endpoint; flat from 64 "
          "to 4096 peers",
          "[btl][dc][memory]") {
    size_t reached = 0, peers = 0, eps = 0, dests = 0;
    int64_t small = add_procs_growth(true, 64, &reached, &peers, &eps, &dests);
    CHECK(reached == 64);
    CHECK(peers == 64);
    CHECK(eps == 0);
    CHECK(dests == 2); // peers 1..63 on node 0, peer 64 on node 1
    int64_t large = add_procs_growth(true, 4096, &reached, &peers, &eps, &dests);
    CHECK(reached == 4096);
    CHECK(peers == 4096);
    CHECK(eps == 0); // nothing used yet: no Endpoint at all
    CHECK(dests == 4097 / 64 + 1);
    const int64_t per_peer = (large - small) / (4096 - 64);
    INFO("DC: heap growth " << small << " bytes at 64 peers, " << large << " at 4096: "
                            << per_peer << " bytes per peer, bound " << kDcPeerBound
                            << " (sizeof(DcSlot) " << sizeof(btl::DcSlot) << ", sizeof(Endpoint) "
                            << sizeof(btl::Endpoint) << ")");
    CHECK(per_peer > 0);
    CHECK(per_peer <= kDcPeerBound);
}

TEST_CASE("btl dc memory: an RC peer still gets its endpoint at add_procs (the measurement sees "
          "one)",
          "[btl][dc][memory]") {
    size_t reached = 0, peers = 0, eps = 0, dests = 0;
    int64_t small = add_procs_growth(false, 64, &reached, &peers, &eps, &dests);
    int64_t large = add_procs_growth(false, 4096, &reached, &peers, &eps, &dests);
    CHECK(reached == 4096);
    CHECK(peers == 0);
    const int64_t per_peer = (large - small) / (4096 - 64);
    INFO("RC: " << per_peer << " bytes per peer");
    // The Endpoint and its two sequence windows (seq_span 8192 bits each).
    CHECK(per_peer >= static_cast<int64_t>(sizeof(btl::Endpoint) + 2 * 8192 / 8));
}

TEST_CASE("btl dc memory: a DC peer's endpoint is made once, at its first use, for that peer "
          "alone",
          "[btl][dc][memory]") {
    DcMemoryRig rig(true, 256, 64);
    REQUIRE(rig.add_all() == 256);
    btl::Module &m = rig.module();
    REQUIRE(m.dc_endpoints() == 0);
    mca_btl_base_endpoint_t *h = rig.handle(7);
    btl::Endpoint *ep = m.endpoint(h);
    REQUIRE(ep != nullptr);
    CHECK(m.dc_endpoints() == 1);
    CHECK(ep->dc());
    CHECK(ep->as_opal() == h); // callbacks name the peer as add_procs did
    CHECK(m.endpoint(h) == ep);
    CHECK(btl::Endpoint::from(h) == ep);
    CHECK(m.dc_endpoints() == 1);
    CHECK(ep->dc_route().dctn == 0x100 + 7);
    CHECK(ep->dc_route().key == (0xdc00000000000000ull | 8));
    // Adding the process again gives the handle it got before.
    opal_proc_t *p = ep->proc();
    mca_btl_base_endpoint_t *again = nullptr;
    mca_btl_base_module_t *b = m.base();
    REQUIRE(b->btl_add_procs(b, 1, &p, &again, nullptr) == OPAL_SUCCESS);
    CHECK(again == h);
    CHECK(m.dc_endpoints() == 1);
    // Peers on one node share one address handle.
    btl::Endpoint *other = m.endpoint(rig.handle(8));
    CHECK(other->dc_route().ah == ep->dc_route().ah);
    btl::Endpoint *far = m.endpoint(rig.handle(200));
    CHECK(far->dc_route().ah != ep->dc_route().ah);
    CHECK(m.dc_endpoints() == 3);
}
