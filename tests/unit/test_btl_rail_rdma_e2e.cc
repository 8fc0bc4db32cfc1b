// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// A lost rail's RDMA (issue 16), end to end over FakeVerbs: two processes
// on the mlx5_two_bonds machine, one btl module per rail. Registering memory
// on one rail registers it on every rail of the process and the handle
// carries each rail's keys; when every cable of rail 1 is pulled, the puts
// and gets the PML keeps giving rail 1 (and the one in flight at the cut)
// are posted on rail 0's endpoint with rail 0's keys and complete, with the
// right bytes, to the caller as rail 1's; an atomic waits for rail 1 (NIC
// atomics are atomic per HCA only), as does a put whose remote handle has no
// key for the peer's rail 0; when the cables are back all of it completes
// and new RDMA goes over rail 1 again.
#include <cstring>
#include <string>
#include <vector>

#include "btl_e2e_util.h"
#include "btl_fabric.h"
#include "catch.h"

using namespace roce;
using roce::testing::BtlFabric;
using roce::testing::FabricOptions;
using namespace roce::testing::e2e;

namespace {

/// What one RDMA completion callback saw (each operation has its own).
struct Done {
    int calls = 0;
    int status = 1; ///< the last status (1: none yet)
    mca_btl_base_module_t *btl = nullptr;
    mca_btl_base_endpoint_t *ep = nullptr;
    void *local = nullptr;
    mca_btl_base_registration_handle_t *local_handle = nullptr;
    void *cbdata = nullptr;
};

void on_rdma(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, void *local,
             mca_btl_base_registration_handle_t *lh, void *context, void *cbdata, int status) {
    auto *d = static_cast<Done *>(context);
    ++d->calls;
    d->status = status;
    d->btl = btl;
    d->ep = ep;
    d->local = local;
    d->local_handle = lh;
    d->cbdata = cbdata;
}

constexpr size_t kChunk = 16 * 1024;

FabricOptions two_rails() {
    FabricOptions o;
    o.fixture = "mlx5_two_bonds";
    o.procs = 2;
    o.all_rails = true;
    o.credits = 16;
    o.tweak = [](btl::ModuleConfig &c) {
        c.rdma_chunk = kChunk;     // larger transfers go in chunks ...
        c.stripe_min = 2 * kChunk; // ... striped over the paths from here
        c.max_rdma_ops = 256;      // a 64-chunk operation and its carriers
    };
    return o;
}

/// Memory of one process for RDMA, registered through one of its rails.
struct Buf {
    std::vector<uint8_t> bytes;
    mca_btl_base_registration_handle_t *h = nullptr;
    mca_btl_base_module_t *b = nullptr;
    Buf(btl::Module &m, size_t len, uint8_t seed) : bytes(len), b(m.base()) {
        for (size_t k = 0; k < len; ++k) {
            bytes[k] = static_cast<uint8_t>(seed + k * 13 + k / 251);
        }
        h = b->btl_register_mem(b, nullptr, bytes.data(), len, MCA_BTL_REG_FLAG_ACCESS_ANY);
        REQUIRE(h != nullptr);
    }
    ~Buf() { CHECK(b->btl_deregister_mem(b, h) == OPAL_SUCCESS); }
    uint64_t addr(size_t off = 0) { return reinterpret_cast<uint64_t>(bytes.data() + off); }
};

struct Rig {
    explicit Rig(BtlFabric &f) : f(f) {
        for (size_t i = 0; i < 2; ++i) {
            for (size_t r = 0; r < 2; ++r) {
                CHECK(add_on_rail(f, i, r, eps[i][r]) == std::vector<bool>{true, true});
            }
        }
        f.procs[0]->eps = eps[0][0];
        f.procs[1]->eps = eps[1][0];
    }
    btl::Endpoint &ep(size_t i, size_t r) { return *btl::Endpoint::from(eps[i][r][1 - i]); }
    mca_btl_base_endpoint_t *opal_ep(size_t i, size_t r) { return eps[i][r][1 - i]; }
    /// alloc + send from i on rail r to the other process.
    void send(size_t i, size_t r, const std::string &data) {
        mca_btl_base_module_t *b = rail(f, i, r).base();
        mca_btl_base_descriptor_t *d = b->btl_alloc(b, opal_ep(i, r), MCA_BTL_NO_ORDER, data.size(),
                                                    MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        REQUIRE(d != nullptr);
        std::memcpy(d->des_segments[0].seg_addr.pval, data.data(), data.size());
        d->des_cbfunc = nullptr;
        REQUIRE(b->btl_send(b, opal_ep(i, r), d, BtlFabric::kTag) == OPAL_SUCCESS);
        ++sent[1 - i];
    }
    bool all_arrived() {
        return f.procs[0]->received.size() == sent[0] && f.procs[1]->received.size() == sent[1];
    }
    bool rail_up(size_t r) {
        return ep(0, r).state == btl::EpState::kConnected &&
               ep(1, r).state == btl::EpState::kConnected &&
               ep(0, r).path_at(0).state == btl::PathState::kUp &&
               ep(1, r).path_at(0).state == btl::PathState::kUp;
    }
    btl::RailCounters counters(size_t i, size_t r) {
        btl::BtlCounters c;
        rail(f, i, r).read_counters(c);
        REQUIRE(c.rails.size() == 1);
        return c.rails[0];
    }
    /// RDMA reads + writes posted on process 0's paths of rail r.
    uint64_t rdma_posted(size_t r, size_t path) {
        const btl::PathStats &s = ep(0, r).path_at(path).tx.stats;
        return s.rdma_reads + s.rdma_writes;
    }
    int put(size_t r, Buf &local, size_t off, Buf &remote, mca_btl_base_registration_handle_t *rh,
            size_t len, Done &d) {
        mca_btl_base_module_t *b = rail(f, 0, r).base();
        return b->btl_put(b, opal_ep(0, r), local.bytes.data() + off, remote.addr(off), local.h, rh,
                          len, 0, MCA_BTL_NO_ORDER, on_rdma, &d, &local);
    }
    int get(size_t r, Buf &local, size_t off, Buf &remote, mca_btl_base_registration_handle_t *rh,
            size_t len, Done &d) {
        mca_btl_base_module_t *b = rail(f, 0, r).base();
        return b->btl_get(b, opal_ep(0, r), local.bytes.data() + off, remote.addr(off), local.h, rh,
                          len, 0, MCA_BTL_NO_ORDER, on_rdma, &d, &local);
    }

    BtlFabric &f;
    std::vector<mca_btl_base_endpoint_t *> eps[2][2]; ///< [process][rail]
    size_t sent[2] = {0, 0};                          ///< what each process must receive
};

bool same(const Buf &a, const Buf &b, size_t off, size_t len) {
    return std::memcmp(a.bytes.data() + off, b.bytes.data() + off, len) == 0;
}

/// The MR behind `key` is on `m`'s PD and covers `buf` with `access`.
void check_key(BtlFabric &f, uint32_t key, bool remote, btl::Module &m, const Buf &buf) {
    int access = 0;
    const ibv_mr *mr = f.fake.mr_by_key(key, remote, &access);
    REQUIRE(mr != nullptr);
    CHECK(mr->pd == m.device().pd());
    auto base = reinterpret_cast<uint64_t>(mr->addr);
    auto want = reinterpret_cast<uint64_t>(buf.bytes.data());
    CHECK(base <= want);
    CHECK(base + mr->length >= want + buf.bytes.size());
    CHECK((access & IBV_ACCESS_REMOTE_WRITE) != 0);
    CHECK((access & IBV_ACCESS_REMOTE_READ) != 0);
}

} // namespace

TEST_CASE("btl rails: registering on one rail registers on every rail, the handle carries each "
          "rail's keys, and deregistration releases them all",
          "[btl][e2e][rails][rail_rdma]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    {
        uint32_t copies[4] = {};
        {
            Buf a(rail(f, 0, 1), 5000, 1);
            // Rail 1 (port 1) registered it; rail 0 (port 0) has its own copy.
            CHECK(a.h->rails == 0x3u);
            CHECK(a.h->rail_rkey[1] == a.h->rkey);
            CHECK(a.h->rail_lkey[1] == a.h->lkey);
            CHECK(a.h->rail_rkey[0] != a.h->rkey);
            check_key(f, a.h->rkey, true, rail(f, 0, 1), a);
            check_key(f, a.h->rail_rkey[0], true, rail(f, 0, 0), a);
            check_key(f, a.h->rail_lkey[0], false, rail(f, 0, 0), a);
            CHECK(a.h->reserved == 0);
            // Registered through rail 0, the table is the same, seen from there.
            Buf b(rail(f, 0, 0), 100, 2);
            CHECK(b.h->rails == 0x3u);
            CHECK(b.h->rail_rkey[0] == b.h->rkey);
            check_key(f, b.h->rail_rkey[1], true, rail(f, 0, 1), b);
            copies[0] = a.h->rail_rkey[0];
            copies[1] = a.h->rail_lkey[0];
            copies[2] = b.h->rail_rkey[1];
            copies[3] = b.h->rail_lkey[1];
        }
        // Both deregistered: their copies on the other rail are gone too.
        CHECK(f.fake.mr_by_key(copies[0], true) == nullptr);
        CHECK(f.fake.mr_by_key(copies[1], false) == nullptr);
        CHECK(f.fake.mr_by_key(copies[2], true) == nullptr);
        CHECK(f.fake.mr_by_key(copies[3], false) == nullptr);
        // The same in the other process; registered again, the table is
        // filled again.
        Buf c(rail(f, 1, 0), 64, 3);
        const uint32_t c_sibling = c.h->rail_rkey[1];
        REQUIRE(f.fake.mr_by_key(c_sibling, true) != nullptr);
        REQUIRE(rail(f, 1, 0).base()->btl_deregister_mem(rail(f, 1, 0).base(), c.h) ==
                OPAL_SUCCESS);
        CHECK(f.fake.mr_by_key(c_sibling, true) == nullptr); // the sibling's copy went too
        c.h = rail(f, 1, 0).base()->btl_register_mem(rail(f, 1, 0).base(), nullptr, c.bytes.data(),
                                                     64, MCA_BTL_REG_FLAG_ACCESS_ANY);
        REQUIRE(c.h != nullptr);
        CHECK(c.h->rails == 0x3u);
        // What the PML copies to the peer is the whole handle, table included.
        CHECK(sizeof(*c.h) == rail(f, 1, 0).base()->btl_registration_handle_size);
    } // the buffers are deregistered before the modules go
    teardown(f);
}

TEST_CASE("btl rails: a lost rail's puts and gets go over the other rail with the right bytes, "
          "complete once as its own, atomics and unkeyed memory wait, and RDMA comes back",
          "[btl][e2e][rails][railfail][rail_rdma]") {
    verbs::note_destroy_failure(0);
    BtlFabric f(two_rails());
    Rig g(f);
    auto &dev1 = f.fake.device("mlx5_bond_1");
    for (int n = 0; n < 3; ++n) {
        for (size_t i = 0; i < 2; ++i) {
            g.send(i, 0, "p" + std::to_string(i) + "r0#" + std::to_string(n));
            g.send(i, 1, "p" + std::to_string(i) + "r1#" + std::to_string(n));
        }
    }
    REQUIRE(f.run_until([&] { return g.all_arrived() && g.rail_up(0) && g.rail_up(1); }));
    REQUIRE(g.ep(0, 0).path_count() == 2); // the carrier stripes over two paths
    REQUIRE(g.ep(0, 1).path_count() == 1);
    btl::Module &r1 = rail(f, 0, 1);
    mca_btl_base_module_t *b1 = r1.base();

    {
        // Process 0's memory and process 1's, both registered through rail 1.
        const size_t kBig = 2 * 1024 * 1024; // 64 chunks of 32 KiB: each striped by the carrier
        Buf src(r1, kBig, 7), dst_local(r1, kBig, 0);
        Buf dst(rail(f, 1, 1), kBig, 0), src_remote(rail(f, 1, 1), kBig, 91);
        Buf word_local(r1, 8, 0), word(rail(f, 1, 1), 8, 0), other(r1, 256, 200);
        std::memset(word.bytes.data(), 0, 8);
        REQUIRE((src.h->rails == 3u && dst.h->rails == 3u));

        // Before the cut: rail 1 does its own RDMA.
        Done warm;
        REQUIRE(g.put(1, src, 0, dst, dst.h, 3000, warm) == OPAL_SUCCESS);
        REQUIRE(f.run_until([&] { return warm.calls == 1; }));
        CHECK(warm.status == OPAL_SUCCESS);
        CHECK(same(src, dst, 0, 3000));

        // In flight on rail 1 when its cables are pulled: a put (it fails with
        // retry-exceeded: re-issued, it is carried) and an atomic behind it
        // (flushed: it never ran, so it waits on the retry queue).
        Done inflight, atomic;
        REQUIRE(g.put(1, src, 4096, dst, dst.h, 5000, inflight) == OPAL_SUCCESS);
        REQUIRE(b1->btl_atomic_fop(b1, g.opal_ep(0, 1), word_local.bytes.data(), word.addr(),
                                   word_local.h, word.h, MCA_BTL_ATOMIC_ADD, 5, 0, MCA_BTL_NO_ORDER,
                                   on_rdma, &atomic, nullptr) == OPAL_SUCCESS);
        const uint64_t rail1_posted = g.rdma_posted(1, 0);
        const uint64_t rail0_posted = g.rdma_posted(0, 0) + g.rdma_posted(0, 1);
        dev1.link_down = true;
        f.run(5);
        REQUIRE(g.ep(0, 1).state == btl::EpState::kConnecting);
        REQUIRE(f.run_until([&] { return inflight.calls == 1; }));
        CHECK(inflight.status == OPAL_SUCCESS);
        CHECK(same(src, dst, 4096, 5000));
        CHECK(inflight.btl == b1);
        CHECK(inflight.ep == g.opal_ep(0, 1));
        CHECK(atomic.calls == 0);
        // Process 1 notices too (its sends on rail 1 are carried as before).
        for (size_t i = 0; i < 2; ++i) {
            g.send(i, 1, "p" + std::to_string(i) + "r1#cut");
        }

        // New puts and gets on rail 1 while it is lost: accepted (not sent back
        // to the PML), carried by rail 0, completed as rail 1's.
        struct Op {
            bool is_put;
            size_t off;
            size_t len;
            Done d;
        };
        std::vector<Op> ops;
        size_t off = 16384;
        for (size_t len : {size_t{1}, size_t{3000}, kChunk, size_t{50000}, size_t{200000}}) {
            ops.push_back(Op{true, off, len, {}});
            ops.push_back(Op{false, off, len, {}});
            off += len + 4096;
        }
        ops.push_back(
            Op{true, 0, kBig, {}}); // overlaps the others' puts: issued last, checked alone
        for (Op &o : ops) {
            CAPTURE(o.is_put, o.off, o.len);
            if (o.len == kBig) {
                // The carrier's first path breaks under what it carries (the
                // first in flight got through, its acknowledgement lost):
                // those go back to rail 1 and are carried again, never lost
                // nor completed twice.
                f.run(1);
                REQUIRE(g.ep(0, 0).path_at(0).tx.outstanding > 0);
                f.fake.break_qp(g.ep(0, 0).path_at(0).qp->get(), IBV_WC_RETRY_EXC_ERR, 1);
                REQUIRE(f.run_until([&] {
                    for (Op &p : ops) {
                        if (p.len != kBig && p.d.calls == 0) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            int rc = o.is_put ? g.put(1, src, o.off, dst, dst.h, o.len, o.d)
                              : g.get(1, dst_local, o.off, src_remote, src_remote.h, o.len, o.d);
            REQUIRE(rc == OPAL_SUCCESS);
        }
        // An atomic is not carried: the PML is told to retry.
        Done atomic2;
        CHECK(b1->btl_atomic_fop(b1, g.opal_ep(0, 1), word_local.bytes.data(), word.addr(),
                                 word_local.h, word.h, MCA_BTL_ATOMIC_ADD, 100, 0, MCA_BTL_NO_ORDER,
                                 on_rdma, &atomic2, nullptr) == OPAL_ERR_OUT_OF_RESOURCE);
        // A remote handle without the key of the peer's rail 0 (a copy, as the
        // PML's from the wire): it waits for rail 1.
        mca_btl_base_registration_handle_t unkeyed = *dst.h;
        unkeyed.rails &= ~1u;
        Done waits;
        REQUIRE(b1->btl_put(b1, g.opal_ep(0, 1), other.bytes.data() + 8, dst.addr(8), other.h,
                            &unkeyed, 100, 0, MCA_BTL_NO_ORDER, on_rdma, &waits,
                            nullptr) == OPAL_SUCCESS);

        REQUIRE(f.run_until([&] {
            for (Op &o : ops) {
                if (o.d.calls == 0) {
                    return false;
                }
            }
            return g.all_arrived();
        }));
        f.run(20);
        for (Op &o : ops) {
            CAPTURE(o.is_put, o.off, o.len);
            CHECK(o.d.calls == 1); // once
            CHECK(o.d.status == OPAL_SUCCESS);
            CHECK(o.d.btl == b1); // as rail 1's, with its endpoint and the caller's arguments
            CHECK(o.d.ep == g.opal_ep(0, 1));
            CHECK(o.d.local_handle == (o.is_put ? src.h : dst_local.h));
            CHECK(o.d.local == (o.is_put ? src.bytes.data() : dst_local.bytes.data()) + o.off);
            CHECK(o.d.cbdata == (o.is_put ? static_cast<void *>(&src) : &dst_local));
            if (o.is_put) {
                CHECK(same(src, dst, o.off, o.len));
            } else {
                CHECK(same(dst_local, src_remote, o.off, o.len));
            }
        }
        CHECK(g.ep(0, 1).state == btl::EpState::kConnecting); // all of it while rail 1 was down
        CHECK(g.rdma_posted(1, 0) == rail1_posted);           // nothing more on rail 1 ...
        CHECK(g.rdma_posted(0, 0) > rail0_posted);            // ... and on both paths of rail 0
        CHECK(g.rdma_posted(0, 1) > 0);
        const btl::RailCounters lost = g.counters(0, 1);
        const btl::RailCounters carrier = g.counters(0, 0);
        // The put in flight and 11 operations, the larger ones in chunks of rail
        // 1 (50000: 4, 200000: 13, 2 MiB: 64).
        const uint64_t items = 1 + 2 * (1 + 1 + 1 + 4 + 13) + 64;
        CHECK(lost.rerouted_rdma == items);
        // Those the broken path held were posted again: counted twice there.
        CHECK(carrier.carried_rdma > lost.rerouted_rdma);
        CHECK(g.ep(0, 0).path_at(0).tx.stats.failovers >= 1);
        uint64_t bytes = 5000 + kBig;
        for (const Op &o : ops) {
            bytes += o.len == kBig ? 0 : o.len;
        }
        CHECK(lost.rerouted_rdma_bytes == bytes);
        CHECK(carrier.carried_rdma_bytes > bytes);
        CHECK(lost.carried_rdma == 0);
        CHECK(carrier.rerouted_rdma == 0);
        // Waiting: the atomic and the put to memory unkeyed on rail 0.
        CHECK(atomic.calls == 0);
        CHECK(waits.calls == 0);
        CHECK(same(src, dst, 8, 100)); // the 2 MiB put's bytes, not yet those of `other`
        CHECK(f.log.contains("lost every path to"));

        // The cables are back: what waited completes over rail 1 (the atomic
        // once), and new RDMA goes over it again, none over rail 0.
        dev1.link_down = false;
        REQUIRE(f.run_until([&] { return g.rail_up(1) && atomic.calls == 1 && waits.calls == 1; },
                            4000, 0.05));
        CHECK(atomic.status == OPAL_SUCCESS);
        CHECK(atomic.btl == b1);
        uint64_t v = 0;
        std::memcpy(&v, word.bytes.data(), 8);
        CHECK(v == 5);
        CHECK(waits.status == OPAL_SUCCESS);
        CHECK(same(other, dst, 8, 100));
        const uint64_t carried = g.counters(0, 0).carried_rdma;
        const uint64_t rail1_back = g.rdma_posted(1, 0);
        std::memset(dst.bytes.data(), 0, kBig);
        Done again, again_get;
        REQUIRE(g.put(1, src, 0, dst, dst.h, 100000, again) == OPAL_SUCCESS);
        REQUIRE(g.get(1, dst_local, 0, src_remote, src_remote.h, 70000, again_get) == OPAL_SUCCESS);
        REQUIRE(f.run_until([&] { return again.calls == 1 && again_get.calls == 1; }));
        f.run(5);
        CHECK(again.calls == 1);
        CHECK(again.status == OPAL_SUCCESS);
        CHECK(again_get.status == OPAL_SUCCESS);
        CHECK(same(src, dst, 0, 100000));
        CHECK(same(dst_local, src_remote, 0, 70000));
        CHECK(g.counters(0, 0).carried_rdma == carried);
        CHECK(g.rdma_posted(1, 0) > rail1_back);
        for (const Op &o : ops) {
            CHECK(o.d.calls == 1); // still once
        }
        CHECK(inflight.calls == 1);
        CHECK(f.procs[0]->errors.empty());
        CHECK(f.procs[1]->errors.empty());
        CHECK(f.log.errors == 0);
    } // the buffers are deregistered before the modules go
    teardown(f);
}
