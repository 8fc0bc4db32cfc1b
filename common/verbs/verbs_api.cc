// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "verbs/verbs_api.h"

#include <cerrno>

namespace roce::verbs {

namespace {

// Several rdma-core entry points are macros or static inline functions in
// verbs.h (ibv_query_port, ibv_query_gid_ex, ibv_poll_cq, ibv_post_send ...):
// captureless lambdas give them an address without changing their behaviour.
const VerbsApi kReal = {
    /*get_device_list=*/[](int *n) { return ibv_get_device_list(n); },
    /*free_device_list=*/[](ibv_device **l) { ibv_free_device_list(l); },
    /*get_device_name=*/[](ibv_device *d) { return ibv_get_device_name(d); },
    /*open_device=*/[](ibv_device *d) { return ibv_open_device(d); },
    /*close_device=*/[](ibv_context *c) { return ibv_close_device(c); },
    /*query_device=*/[](ibv_context *c, ibv_device_attr *a) { return ibv_query_device(c, a); },
    /*query_port=*/[](ibv_context *c, uint8_t p, ibv_port_attr *a) { return ibv_query_port(c, p, a); },
    /*query_gid_ex=*/
    [](ibv_context *c, uint32_t p, uint32_t i, ibv_gid_entry *e, uint32_t f) {
        return ibv_query_gid_ex(c, p, i, e, f);
    },
    /*query_gid_table=*/
    [](ibv_context *c, ibv_gid_entry *e, size_t n, uint32_t f) {
        return ibv_query_gid_table(c, e, n, f);
    },
    /*query_pkey=*/[](ibv_context *c, uint8_t p, int i, __be16 *k) { return ibv_query_pkey(c, p, i, k); },
    /*get_async_event=*/[](ibv_context *c, ibv_async_event *e) { return ibv_get_async_event(c, e); },
    /*ack_async_event=*/[](ibv_async_event *e) { ibv_ack_async_event(e); },
    /*alloc_pd=*/[](ibv_context *c) { return ibv_alloc_pd(c); },
    /*dealloc_pd=*/[](ibv_pd *pd) { return ibv_dealloc_pd(pd); },
    /*reg_mr=*/[](ibv_pd *pd, void *a, size_t l, int acc) { return ibv_reg_mr(pd, a, l, acc); },
    /*dereg_mr=*/[](ibv_mr *mr) { return ibv_dereg_mr(mr); },
    /*create_comp_channel=*/[](ibv_context *c) { return ibv_create_comp_channel(c); },
    /*destroy_comp_channel=*/[](ibv_comp_channel *ch) { return ibv_destroy_comp_channel(ch); },
    /*create_cq=*/
    [](ibv_context *c, int n, void *ctx, ibv_comp_channel *ch, int v) {
        return ibv_create_cq(c, n, ctx, ch, v);
    },
    /*destroy_cq=*/[](ibv_cq *cq) { return ibv_destroy_cq(cq); },
    /*poll_cq=*/[](ibv_cq *cq, int n, ibv_wc *wc) { return ibv_poll_cq(cq, n, wc); },
    /*req_notify_cq=*/[](ibv_cq *cq, int s) { return ibv_req_notify_cq(cq, s); },
    /*create_srq=*/[](ibv_pd *pd, ibv_srq_init_attr *a) { return ibv_create_srq(pd, a); },
    /*destroy_srq=*/[](ibv_srq *s) { return ibv_destroy_srq(s); },
    /*post_srq_recv=*/
    [](ibv_srq *s, ibv_recv_wr *wr, ibv_recv_wr **bad) { return ibv_post_srq_recv(s, wr, bad); },
    /*create_qp=*/[](ibv_pd *pd, ibv_qp_init_attr *a) { return ibv_create_qp(pd, a); },
    /*destroy_qp=*/[](ibv_qp *qp) { return ibv_destroy_qp(qp); },
    /*modify_qp=*/[](ibv_qp *qp, ibv_qp_attr *a, int m) { return ibv_modify_qp(qp, a, m); },
    /*query_qp=*/
    [](ibv_qp *qp, ibv_qp_attr *a, int m, ibv_qp_init_attr *i) { return ibv_query_qp(qp, a, m, i); },
    /*post_send=*/
    [](ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) { return ibv_post_send(qp, wr, bad); },
    /*post_recv=*/
    [](ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) { return ibv_post_recv(qp, wr, bad); },
    /*create_ah=*/[](ibv_pd *pd, ibv_ah_attr *a) { return ibv_create_ah(pd, a); },
    /*destroy_ah=*/[](ibv_ah *ah) { return ibv_destroy_ah(ah); },
    /*mlx5dv_is_supported=*/[](ibv_device *d) { return mlx5dv_is_supported(d); },
    /*mlx5dv_query_device=*/
    [](ibv_context *c, mlx5dv_context *a) { return mlx5dv_query_device(c, a); },
    /*mlx5dv_create_qp=*/
    [](ibv_context *c, ibv_qp_init_attr_ex *a, mlx5dv_qp_init_attr *m) {
        return mlx5dv_create_qp(c, a, m);
    },
    /*mlx5dv_modify_qp_lag_port=*/
    [](ibv_qp *qp, uint8_t p) { return mlx5dv_modify_qp_lag_port(qp, p); },
    /*mlx5dv_query_qp_lag_port=*/
    [](ibv_qp *qp, uint8_t *p, uint8_t *a) { return mlx5dv_query_qp_lag_port(qp, p, a); },
    /*mlx5dv_modify_qp_udp_sport=*/
    [](ibv_qp *qp, uint16_t s) { return mlx5dv_modify_qp_udp_sport(qp, s); },
    /*qp_to_qp_ex=*/[](ibv_qp *qp) { return ibv_qp_to_qp_ex(qp); },
    /*mlx5dv_qp_ex_from_ibv_qp_ex=*/[](ibv_qp_ex *q) { return mlx5dv_qp_ex_from_ibv_qp_ex(q); },
    /*wr_start=*/[](ibv_qp_ex *q) { ibv_wr_start(q); },
    /*wr_complete=*/[](ibv_qp_ex *q) { return ibv_wr_complete(q); },
    /*wr_abort=*/[](ibv_qp_ex *q) { ibv_wr_abort(q); },
    /*wr_send=*/[](ibv_qp_ex *q) { ibv_wr_send(q); },
    /*wr_send_imm=*/[](ibv_qp_ex *q, __be32 imm) { ibv_wr_send_imm(q, imm); },
    /*wr_rdma_write=*/
    [](ibv_qp_ex *q, uint32_t rkey, uint64_t addr) { ibv_wr_rdma_write(q, rkey, addr); },
    /*wr_rdma_read=*/
    [](ibv_qp_ex *q, uint32_t rkey, uint64_t addr) { ibv_wr_rdma_read(q, rkey, addr); },
    /*wr_atomic_cmp_swp=*/
    [](ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap) {
        ibv_wr_atomic_cmp_swp(q, rkey, addr, cmp, swap);
    },
    /*wr_atomic_fetch_add=*/
    [](ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add) {
        ibv_wr_atomic_fetch_add(q, rkey, addr, add);
    },
    /*wr_set_sge=*/
    [](ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t len) { ibv_wr_set_sge(q, lkey, addr, len); },
    /*wr_set_sge_list=*/
    [](ibv_qp_ex *q, size_t n, const ibv_sge *sg) { ibv_wr_set_sge_list(q, n, sg); },
    /*wr_set_inline_data=*/
    [](ibv_qp_ex *q, void *addr, size_t len) { ibv_wr_set_inline_data(q, addr, len); },
    /*mlx5dv_wr_set_dc_addr=*/
    [](mlx5dv_qp_ex *q, ibv_ah *ah, uint32_t dctn, uint64_t key) {
        mlx5dv_wr_set_dc_addr(q, ah, dctn, key);
    },
};

} // namespace

const VerbsApi &real_verbs() noexcept { return kReal; }

int normalize_rc(int rc, int saved_errno) noexcept {
    if (rc == 0) {
        return 0;
    }
    if (rc == -1) {
        return saved_errno > 0 ? saved_errno : EIO;
    }
    return rc < 0 ? -rc : rc;
}

} // namespace roce::verbs
