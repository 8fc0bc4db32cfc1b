// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// What a DC peer costs at add_procs (issue 19): nothing of its own - a
// handle that is its proc's address, tagged - and a share of its node's
// address handle, measured as heap growth over FakeVerbs with thousands of
// fake peers (dc_memory_rig.h) against a bound made of the sizes involved;
// its Endpoint only on first use.
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's (sanitizer/allocator_interface.h, which Debian's
// gcc does not install).
extern "C" size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include <cstdint>

#include "btl_roce_module.h"
#include "catch.h"
#include "dc_memory_rig.h"
#include "qp/memory_model.h"

using namespace roce;
using namespace roce::testing;

namespace {

/// Bytes the program has allocated and not freed: glibc's count, or under
/// AddressSanitizer (whose allocator glibc's mallinfo2 does not see: it
/// reads 0 there) the sanitizer's own.
int64_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
    return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
    struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks) + static_cast<int64_t>(mi.hblkhd);
#endif
}

struct Growth {
    int64_t bytes = 0;
    size_t reached = 0, dc_peers = 0, dests = 0;
};

/// Heap growth of add_procs of `peers` fake peers, 64 to a node.
Growth add_procs_growth(bool dc, size_t peers) {
    DcMemoryRig rig(dc, peers, 64);
    Growth g;
    int64_t before = heap_in_use();
    g.reached = rig.add_all();
    g.bytes = heap_in_use() - before;
    g.dc_peers = rig.module().dc_peers();
    g.dests = rig.module().dc_dests();
    return g;
}

// What one more remote node may cost a DC module: its destination (the
// addressing chosen for its GID, the address handle: at most 2 KiB with
// FakeVerbs' object behind it and the two tables' entries); shared by its
// 64 peers. A peer itself: nothing.
constexpr int64_t kNodeBound = 2048;
constexpr int64_t kDcPeerBound = kNodeBound / 64;

} // namespace

TEST_CASE("btl dc memory: a DC peer costs nothing of its own at add_procs, only a share of its "
          "node's address handle; flat from 64 to 4096 peers",
          "[btl][dc][memory]") {
    Growth small = add_procs_growth(true, 64);
    CHECK(small.reached == 64);
    CHECK(small.dc_peers == 0); // nothing used: no Endpoint at all
    CHECK(small.dests == 2);    // peers 1..63 on node 0, peer 64 on node 1
    Growth large = add_procs_growth(true, 4096);
    CHECK(large.reached == 4096);
    CHECK(large.dc_peers == 0);
    CHECK(large.dests == 4097 / 64 + 1);
    const int64_t per_peer = (large.bytes - small.bytes) / (4096 - 64);
    INFO("DC: heap growth " << small.bytes << " bytes at 64 peers, " << large.bytes
                            << " at 4096: " << per_peer << " bytes per peer, bound " << kDcPeerBound
                            << " (sizeof(Endpoint) " << sizeof(btl::Endpoint) << ")");
    CHECK(per_peer <= kDcPeerBound);
}

TEST_CASE("btl dc memory: an RC peer still gets its endpoint at add_procs (the measurement sees "
          "one)",
          "[btl][dc][memory]") {
    Growth small = add_procs_growth(false, 64);
    Growth large = add_procs_growth(false, 4096);
    CHECK(large.reached == 4096);
    CHECK(large.dc_peers == 0);
    CHECK(large.dests == 0);
    const int64_t per_peer = (large.bytes - small.bytes) / (4096 - 64);
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
    REQUIRE(m.dc_peers() == 0);
    mca_btl_base_endpoint_t *h = rig.handle(7);
    CHECK(btl::is_dc_handle(h));
    CHECK(btl::Endpoint::from(h) == nullptr); // not an object of ours
    btl::Endpoint *ep = m.endpoint(h);
    REQUIRE(ep != nullptr);
    CHECK(m.dc_peers() == 1);
    CHECK(ep->dc());
    CHECK(ep->as_opal() == h); // callbacks name the peer as add_procs did
    CHECK(m.endpoint(h) == ep);
    CHECK(m.dc_peers() == 1);
    CHECK(ep->dc_route().dctn == 0x100 + 7);
    CHECK(ep->dc_route().key == (0xdc00000000000000ull | 8));
    // Adding the process again gives the handle it got before.
    opal_proc_t *p = ep->proc();
    mca_btl_base_endpoint_t *again = nullptr;
    mca_btl_base_module_t *b = m.base();
    REQUIRE(b->btl_add_procs(b, 1, &p, &again, nullptr) == OPAL_SUCCESS);
    CHECK(again == h);
    CHECK(m.dc_peers() == 1);
    // Peers on one node share one address handle.
    btl::Endpoint *other = m.endpoint(rig.handle(8));
    CHECK(other->dc_route().ah == ep->dc_route().ah);
    btl::Endpoint *far = m.endpoint(rig.handle(200));
    CHECK(far->dc_route().ah != ep->dc_route().ah);
    CHECK(m.dc_peers() == 3);
    CHECK(m.dc_dests() == 257 / 64 + 1);
}
