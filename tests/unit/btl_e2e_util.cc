// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_e2e_util.h"

#include "opal/class/opal_bitmap.h"

#include "catch.h"

namespace roce::testing::e2e {

std::string msg(size_t i, size_t j, int n) {
    return "p" + std::to_string(i) + "->p" + std::to_string(j) + "#" + std::to_string(n);
}

std::vector<std::string> expected(size_t i, size_t j, int from, int to) {
    std::vector<std::string> v;
    for (int n = from; n < to; ++n) {
        v.push_back(msg(i, j, n));
    }
    return v;
}

std::vector<std::string> from(BtlFabric &f, size_t r, size_t s) {
    std::vector<std::string> v;
    std::string prefix = "p" + std::to_string(s) + "->";
    for (const auto &m : f.procs[r]->received) {
        if (m.rfind(prefix, 0) == 0) {
            v.push_back(m);
        }
    }
    return sorted(v);
}

void check_pairing(BtlFabric &f, size_t i, size_t j) {
    btl::Endpoint &a = f.ep(i, j);
    btl::Endpoint &b = f.ep(j, i);
    for (size_t k = 0; k < a.path_count(); ++k) {
        const btl::Path &p = a.path_at(k);
        if (p.state != btl::PathState::kUp) {
            continue;
        }
        CAPTURE(i, j, k);
        REQUIRE(p.qp);
        REQUIRE(k < b.path_count());
        const btl::Path &q = b.path_at(k);
        REQUIRE(q.qp);
        CHECK(f.fake.qp_attr(p.qp->get()).dest_qp_num == q.qpn());
        CHECK(f.fake.qp_attr(q.qp->get()).dest_qp_num == p.qpn());
        CHECK(f.fake.qp_state(p.qp->get()) == IBV_QPS_RTS);
    }
}

void connect_by_first_send(BtlFabric &f) {
    REQUIRE(f.send(0, 1, msg(0, 1, 0)) == OPAL_SUCCESS);
    REQUIRE(f.run_until([&] { return f.all_up(0, 1) && f.all_up(1, 0); }));
    f.run(5);
}

void teardown(BtlFabric &f) {
    f.advance(3.0); // past the 2 s LAST_WQE_REACHED wait of rxe
    f.run(3);
    for (size_t i = 0; i < f.procs.size(); ++i) {
        if (f.procs[i]->module) {
            CHECK(f.finalize(i) == OPAL_SUCCESS);
            CHECK_FALSE(f.procs[i]->module);
        }
    }
    CHECK(f.fake.live_objects() == 0);
    CHECK(f.fake.busy_deregs() == 0);
    CHECK(verbs::last_destroy_errno() == 0);
}

void rdma_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *,
               mca_btl_base_registration_handle_t *, void *context, void *, int status) {
    auto *r = static_cast<RdmaResult *>(context);
    ++r->calls;
    r->status = status;
}

btl::Module &rail(BtlFabric &f, size_t i, size_t r) {
    return r == 0 ? *f.procs[i]->module : *f.procs[i]->more_rails.at(r - 1);
}

std::vector<bool> add_on_rail(BtlFabric &f, size_t i, size_t r,
                              std::vector<mca_btl_base_endpoint_t *> &eps) {
    std::vector<opal_proc_t *> all;
    for (auto &p : f.procs) {
        all.push_back(&p->proc);
    }
    opal_bitmap_t reach;
    OBJ_CONSTRUCT(&reach, opal_bitmap_t);
    REQUIRE(opal_bitmap_init(&reach, static_cast<int>(all.size())) == OPAL_SUCCESS);
    eps.assign(all.size(), nullptr);
    mca_btl_base_module_t *b = rail(f, i, r).base();
    REQUIRE(b->btl_add_procs(b, all.size(), all.data(), eps.data(), &reach) == OPAL_SUCCESS);
    std::vector<bool> out;
    for (size_t j = 0; j < all.size(); ++j) {
        bool bit = opal_bitmap_is_set_bit(&reach, static_cast<int>(j));
        CHECK(bit == (eps[j] != nullptr)); // an endpoint exactly where the bit is set
        out.push_back(bit);
    }
    OBJ_DESTRUCT(&reach);
    return out;
}

} // namespace roce::testing::e2e
