// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace roce::verbs {

/// The table of rdma-core entry points that ompi-roce uses. common/verbs is
/// the only code that calls ibv_* / mlx5dv_* directly; everything else calls
/// through a `const VerbsApi &` handed to it at init, so tests can pass a
/// fake that models the hardware (tests/unit/fake_verbs.h) instead.
///
/// Conventions are rdma-core's, unchanged: functions returning int return 0
/// or an errno value (some providers return -1 and set errno: use
/// verbs::normalize_rc() on the result); functions returning pointers return
/// NULL and set errno. Entries may be called from any thread, as rdma-core's.
struct VerbsApi {
    // Devices
    ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(ibv_device **list);
    const char *(*get_device_name)(ibv_device *device);
    ibv_context *(*open_device)(ibv_device *device);
    int (*close_device)(ibv_context *context);
    int (*query_device)(ibv_context *context, ibv_device_attr *attr);
    int (*query_port)(ibv_context *context, uint8_t port, ibv_port_attr *attr);
    int (*query_gid_ex)(ibv_context *context, uint32_t port, uint32_t index,
                        ibv_gid_entry *entry, uint32_t flags);
    ssize_t (*query_gid_table)(ibv_context *context, ibv_gid_entry *entries, size_t max_entries,
                               uint32_t flags);
    int (*query_pkey)(ibv_context *context, uint8_t port, int index, __be16 *pkey);
    int (*get_async_event)(ibv_context *context, ibv_async_event *event);
    void (*ack_async_event)(ibv_async_event *event);

    // Protection domains, memory, completion queues
    ibv_pd *(*alloc_pd)(ibv_context *context);
    int (*dealloc_pd)(ibv_pd *pd);
    ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(ibv_mr *mr);
    ibv_comp_channel *(*create_comp_channel)(ibv_context *context);
    int (*destroy_comp_channel)(ibv_comp_channel *channel);
    ibv_cq *(*create_cq)(ibv_context *context, int cqe, void *cq_context,
                         ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(ibv_cq *cq);
    int (*poll_cq)(ibv_cq *cq, int num_entries, ibv_wc *wc);
    int (*req_notify_cq)(ibv_cq *cq, int solicited_only);

    // Queue pairs, shared receive queues, address handles
    ibv_srq *(*create_srq)(ibv_pd *pd, ibv_srq_init_attr *attr);
    int (*destroy_srq)(ibv_srq *srq);
    int (*post_srq_recv)(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad_wr);
    ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
    int (*destroy_qp)(ibv_qp *qp);
    int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int attr_mask);
    int (*query_qp)(ibv_qp *qp, ibv_qp_attr *attr, int attr_mask, ibv_qp_init_attr *init_attr);
    int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad_wr);
    int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad_wr);
    ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
    int (*destroy_ah)(ibv_ah *ah);

    // mlx5 direct verbs. Call mlx5dv_is_supported() first: the others are
    // only meaningful on mlx5 devices (elsewhere they fail with EOPNOTSUPP).
    bool (*mlx5dv_is_supported)(ibv_device *device);
    /// Fills the fields selected by attrs->comp_mask (e.g.
    /// MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS -> num_lag_ports).
    int (*mlx5dv_query_device)(ibv_context *context, mlx5dv_context *attrs);
    /// DC initiators/targets (DCI/DCT) and other mlx5-only QPs.
    ibv_qp *(*mlx5dv_create_qp)(ibv_context *context, ibv_qp_init_attr_ex *attr,
                                mlx5dv_qp_init_attr *mlx5_attr);
    /// Queue-affinity LAG: the LAG port (1..num_lag_ports) a QP transmits
    /// on. EOPNOTSUPP when the device is not in LAG mode. A later state
    /// change may reconfigure it: set it again after RTS.
    int (*mlx5dv_modify_qp_lag_port)(ibv_qp *qp, uint8_t port_num);
    /// The configured and the active LAG port of a QP.
    int (*mlx5dv_query_qp_lag_port)(ibv_qp *qp, uint8_t *port_num, uint8_t *active_port_num);
    /// Hash-mode LAG: the RoCE v2 UDP source port of an RC QP (in RTR/RTS).
    int (*mlx5dv_modify_qp_udp_sport)(ibv_qp *qp, uint16_t udp_sport);

    // Extended work-request posting (ibv_wr_post(3)), which DC initiators
    // need: a DCI has no ibv_post_send, only this API plus
    // mlx5dv_wr_set_dc_addr (mlx5dv_wr_post(3)).
    //
    // A batch is wr_start; then per work request: set qp->wr_id and
    // qp->wr_flags (IBV_SEND_SIGNALED, IBV_SEND_INLINE, ...), one builder
    // (wr_send ... wr_atomic_fetch_add), then its setters (for a DCI:
    // mlx5dv_wr_set_dc_addr, then the local data with wr_set_sge /
    // wr_set_sge_list / wr_set_inline_data - for an atomic, the 8-byte
    // buffer the old value lands in); then wr_complete,
    // which posts the whole batch (0) or none of it (an errno, e.g. ENOMEM
    // when the send queue overflows), or wr_abort. The builders and setters
    // report nothing: errors surface at wr_complete. One thread per QP
    // between wr_start and wr_complete/wr_abort (rdma-core holds the SQ
    // lock across them).

    /// The extended QP of `qp`; NULL when it was created without
    /// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (errno is not set).
    ibv_qp_ex *(*qp_to_qp_ex)(ibv_qp *qp);
    /// The mlx5 view of an extended QP. Only for a QP created by
    /// mlx5dv_create_qp on an mlx5 device (rdma-core does not check: on
    /// anything else the result is undefined).
    mlx5dv_qp_ex *(*mlx5dv_qp_ex_from_ibv_qp_ex)(ibv_qp_ex *qp);
    void (*wr_start)(ibv_qp_ex *qp);
    /// 0, or the errno of the batch (nothing of it was posted).
    int (*wr_complete)(ibv_qp_ex *qp);
    void (*wr_abort)(ibv_qp_ex *qp);
    void (*wr_send)(ibv_qp_ex *qp);
    void (*wr_send_imm)(ibv_qp_ex *qp, __be32 imm_data);
    void (*wr_rdma_write)(ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr);
    void (*wr_rdma_read)(ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr);
    void (*wr_atomic_cmp_swp)(ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr,
                              uint64_t compare, uint64_t swap);
    void (*wr_atomic_fetch_add)(ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr,
                                uint64_t add);
    void (*wr_set_sge)(ibv_qp_ex *qp, uint32_t lkey, uint64_t addr, uint32_t length);
    void (*wr_set_sge_list)(ibv_qp_ex *qp, size_t num_sge, const ibv_sge *sg_list);
    void (*wr_set_inline_data)(ibv_qp_ex *qp, void *addr, size_t length);
    /// The destination of the current DCI work request: the address handle
    /// of the target's GID, its DCT number and its DC access key. A key
    /// that is not the DCT's is not refused here: the target drops the
    /// request (see tests/unit/fake_verbs_dc.cc for what the initiator sees).
    void (*mlx5dv_wr_set_dc_addr)(mlx5dv_qp_ex *qp, ibv_ah *ah, uint32_t remote_dctn,
                                  uint64_t remote_dc_key);
};

/// The real rdma-core table (static storage; valid for the whole process).
const VerbsApi &real_verbs() noexcept;

/// rdma-core functions return either 0/errno or -1 with errno set; this
/// turns any of those into 0 or a positive errno value.
int normalize_rc(int rc, int saved_errno) noexcept;

} // namespace roce::verbs
