// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internals of FakeVerbs shared by fake_verbs.cc (devices, resources,
// failure scripting) and fake_verbs_qp.cc (the QP state machine and the data
// path). Not for tests to include.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "fake_verbs.h"

namespace roce::testing {

/// The ibv_context handed out; the owner is found from it, so it must stay
/// standard-layout with the ibv_context first.
struct FakeContextObj {
    ibv_context ctx;
    FakeVerbs *owner;
    size_t device;      ///< index into State::devices
    /// ctx.async_fd is an eventfd (semaphore mode) that counts the queued
    /// async events, so it can be polled and made non-blocking like the real
    /// one; closed with the context.
    ~FakeContextObj();
};

struct FakeDeviceObj {
    ibv_device dev{};
    FakeDevice spec;
};

struct FakeCqObj {
    ibv_cq cq{};
    std::deque<ibv_wc> wcs;
    int users = 0;      ///< QPs and SRQs attached
};

struct FakeSrqObj {
    ibv_srq srq{};
    std::deque<PostedWr> posted;
    /// Receives consumed by a delivered message, by wr_id: what mlx5 gives
    /// back to the SRQ when it removes the completion (destroy_qp).
    std::map<uint64_t, PostedWr> taken;
    int users = 0;
};

struct FakeQpObj {
    /// The ibv_qp inside an ibv_qp_ex, as rdma-core lays out its QPs, so
    /// that ibv_qp_to_qp_ex(qp) is &ex and qp_ex->qp_base is the QP itself.
    ibv_qp_ex ex{};
    ibv_qp &qp = ex.qp_base;
    FakeQpKind kind = FakeQpKind::kRC;
    ibv_qp_attr attr{};
    int applied_mask = 0;
    bool sq_sig_all = false;
    uint32_t max_inline = 0; ///< cap.max_inline_data granted at create
    std::deque<PostedWr> rq;
    std::deque<PostedWr> sq; ///< sends in flight (auto-completion off)
    bool fail_next_send = false;
    uint8_t lag_port = 0;   ///< mlx5dv_modify_qp_lag_port; reset by any state change
    uint16_t udp_sport = 0; ///< mlx5dv_modify_qp_udp_sport
    ibv_wc_status next_status = IBV_WC_SUCCESS;
    uint32_t next_vendor_err = 0;
};

struct FakeDcQp; // fake_verbs_dc.cc

struct FakeMrObj {
    ibv_mr mr{};
    int access = 0; ///< IBV_ACCESS_* it was registered with
};
struct FakeAhObj {
    ibv_ah ah{};
    ibv_ah_attr attr{};
    /// The source GID, resolved when the AH was created: the kernel holds
    /// that GID entry (rdma_hold_gid_attr) for the AH's lifetime, so its
    /// datagrams keep that address even when the slot is emptied or reused.
    std::array<uint8_t, 16> sgid{};
};
struct FakePdObj {
    ibv_pd pd{};
    int users = 0;      ///< MRs, QPs, SRQs, AHs
};
struct FakeChannelObj {
    ibv_comp_channel ch{};
};

struct FakeVerbs::State {
    bool privileged = false;
    bool auto_complete = true;
    std::vector<std::unique_ptr<FakeDeviceObj>> devices;
    struct FailSpec {
        int err = 0;
        int skip = 0;
        int times = 0;
    };
    std::array<FailSpec, static_cast<size_t>(Call::kCount)> fail{};
    std::map<std::array<uint8_t, 16>, int> unreachable;
    std::map<const ibv_context *, std::unique_ptr<FakeContextObj>> contexts;
    std::map<const ibv_context *, std::deque<ibv_async_event>> events;
    std::map<const ibv_pd *, std::unique_ptr<FakePdObj>> pds;
    std::map<const ibv_mr *, std::unique_ptr<FakeMrObj>> mrs;
    std::map<const ibv_comp_channel *, std::unique_ptr<FakeChannelObj>> channels;
    std::map<const ibv_cq *, std::unique_ptr<FakeCqObj>> cqs;
    std::map<const ibv_srq *, std::unique_ptr<FakeSrqObj>> srqs;
    std::map<const ibv_qp *, std::unique_ptr<FakeQpObj>> qps;
    std::map<const ibv_ah *, std::unique_ptr<FakeAhObj>> ahs;
    /// DC state of the DCIs and DCTs (fake_verbs_dc.cc), by QP.
    std::map<const ibv_qp *, std::shared_ptr<FakeDcQp>> dc;
    bool wire = false;              ///< set_wire(): datagrams and RC work travel
    std::deque<FakeVerbs::Datagram> datagrams;
    uint32_t next_qpn = 0x100;
    uint32_t next_key = 0x1000;
    size_t busy_deregs = 0;
};

/// The VerbsApi entries. Each counts the call, applies a scripted failure
/// when one is due, then models the verb. Return conventions are
/// rdma-core's: int verbs return 0 or a positive errno (and set errno),
/// pointer verbs return NULL with errno set, query_gid_table returns a
/// negative errno.
struct FakeOps {
    static FakeVerbs *owner(const ibv_context *ctx);
    /// Counts the call; returns the scripted errno when this call must fail.
    static int enter(FakeVerbs &f, Call c);
    static FakeDevice &device_of(const ibv_context *ctx);
    /// EINVAL-style errno + message when `port` is not a port of the device.
    static bool port_valid(const ibv_context *ctx, int port);

    // fake_verbs.cc
    static ibv_device **get_device_list(FakeVerbs &f, int *n);
    static void free_device_list(ibv_device **list);
    static ibv_context *open_device(ibv_device *dev);
    static int close_device(ibv_context *ctx);
    static int query_device(ibv_context *ctx, ibv_device_attr *a);
    static int query_port(ibv_context *ctx, uint8_t port, ibv_port_attr *a);
    static int query_gid_ex(ibv_context *ctx, uint32_t port, uint32_t index, ibv_gid_entry *e,
                            uint32_t flags);
    static ssize_t query_gid_table(ibv_context *ctx, ibv_gid_entry *e, size_t n, uint32_t flags);
    static int query_pkey(ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
    static int get_async_event(ibv_context *ctx, ibv_async_event *e);
    /// Queues `e` on `ctx`'s async events and counts it on the eventfd.
    static void queue_event(FakeVerbs &f, ibv_context *ctx, const ibv_async_event &e);
    /// Drops the queued events whose element is `qp` (the kernel does that
    /// when the QP is destroyed: uverbs releases its uevent list).
    static void drop_qp_events(FakeVerbs &f, ibv_context *ctx, const ibv_qp *qp);
    static ibv_pd *alloc_pd(ibv_context *ctx);
    static int dealloc_pd(ibv_pd *pd);
    static ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t len, int access);
    static int dereg_mr(ibv_mr *mr);
    static ibv_comp_channel *create_comp_channel(ibv_context *ctx);
    static int destroy_comp_channel(ibv_comp_channel *ch);
    static ibv_cq *create_cq(ibv_context *ctx, int cqe, void *user, ibv_comp_channel *ch, int vec);
    static int destroy_cq(ibv_cq *cq);
    static int poll_cq(ibv_cq *cq, int n, ibv_wc *wc);
    static int req_notify_cq(ibv_cq *cq, int solicited);
    static ibv_srq *create_srq(ibv_pd *pd, ibv_srq_init_attr *attr);
    static int destroy_srq(ibv_srq *srq);
    static ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *attr);
    static int destroy_ah(ibv_ah *ah);
    static int mlx5dv_query_device(ibv_context *ctx, mlx5dv_context *attrs);
    /// The errno resolving `ah` would give (port, GRH, sgid, neighbour); 0 ok.
    static int check_av(FakeVerbs &f, const ibv_context *ctx, const ibv_ah_attr &ah,
                        std::string &why);

    // fake_verbs_qp.cc
    static ibv_qp *make_qp(FakeVerbs &f, ibv_pd *pd, const ibv_qp_init_attr &init,
                           FakeQpKind kind);
    static ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr);
    static ibv_qp *mlx5dv_create_qp(ibv_context *ctx, ibv_qp_init_attr_ex *attr,
                                    mlx5dv_qp_init_attr *dv);
    static int destroy_qp(ibv_qp *qp);
    static int modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask);
    static int mlx5dv_modify_qp_lag_port(ibv_qp *qp, uint8_t port);
    static int mlx5dv_query_qp_lag_port(ibv_qp *qp, uint8_t *port, uint8_t *active);
    static int mlx5dv_modify_qp_udp_sport(ibv_qp *qp, uint16_t sport);
    static int query_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init);
    static int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
    static int post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
    static int post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad);
};

// fake_verbs_qp.cc, shared with fake_verbs_wire.cc.
ibv_wc fake_wc(const FakeQpObj &q, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode op,
               uint32_t len);
ibv_wc_opcode fake_wc_opcode(ibv_wr_opcode op);
/// The QP enters ERR: receives and sends in flight flush, Last WQE Reached.
void fake_enter_error(FakeVerbs &f, FakeQpObj &q);
/// A UD send in wire mode: its datagram goes on the wire (fake_verbs_wire.cc).
void fake_send_datagram(FakeVerbs &f, const FakeQpObj &q, const ibv_send_wr &wr);

/// One work request of run_rc()/run_dc() executed against the responder.
enum class FakeStep { kDone, kWait, kFailed };
/// Executes q's oldest work request in flight against `r` (fake_verbs_wire.cc).
FakeStep fake_execute(FakeVerbs &f, FakeQpObj &q, FakeQpObj &r);
/// q's oldest work request in flight completes with `status`, q goes to ERR.
void fake_fail_front(FakeVerbs &f, FakeQpObj &q, ibv_wc_status status);
/// The extended work-request entries of the table (fake_verbs_dc.cc):
/// ibv_wr_post(3) and mlx5dv_wr_set_dc_addr on the QPs of any FakeVerbs.
struct FakeDcOps {
    static ibv_qp_ex *qp_to_qp_ex(ibv_qp *qp);
    static mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex *qp);
    static void wr_start(ibv_qp_ex *qp);
    static int wr_complete(ibv_qp_ex *qp);
    static void wr_abort(ibv_qp_ex *qp);
    static void wr_send(ibv_qp_ex *qp);
    static void wr_send_imm(ibv_qp_ex *qp, __be32 imm);
    static void wr_rdma_write(ibv_qp_ex *qp, uint32_t rkey, uint64_t addr);
    static void wr_rdma_read(ibv_qp_ex *qp, uint32_t rkey, uint64_t addr);
    static void wr_atomic_cmp_swp(ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, uint64_t compare,
                                  uint64_t swap);
    static void wr_atomic_fetch_add(ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, uint64_t add);
    static void wr_set_sge(ibv_qp_ex *qp, uint32_t lkey, uint64_t addr, uint32_t length);
    static void wr_set_sge_list(ibv_qp_ex *qp, size_t n, const ibv_sge *sg);
    static void wr_set_inline_data(ibv_qp_ex *qp, void *addr, size_t length);
    static void wr_set_dc_addr(mlx5dv_qp_ex *qp, ibv_ah *ah, uint32_t dctn, uint64_t key);
};
/// Forgets the DC state of a destroyed QP.
void fake_forget_dc(FakeVerbs &f, const ibv_qp *qp);

/// errno = err; return err (the int-verb convention).
inline int fail_with(int err) {
    errno = err;
    return err;
}

} // namespace roce::testing
