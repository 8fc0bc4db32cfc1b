// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

// FakeVerbs: a VerbsApi that models an RDMA device well enough to test the
// code above it without hardware. It is test code only (tests/unit); it
// never ships in the components.
//
// What it models, and where each behaviour comes from:
//  - devices, ports, GID tables (with type and netdev), pkey tables, mlx5dv
//    num_lag_ports; built from a topo::Snapshot or scripted directly;
//  - the QP state machine RESET->INIT->RTR->RTS (and ->ERR/RESET) for UD,
//    RC, UC and mlx5 DC (DCI/DCT), with the required and optional attribute
//    masks of each transition as the kernel checks them (ib_modify_qp_is_ok
//    in drivers/infiniband/core/verbs.c; mlx5's modify_dci_qp_is_ok and
//    mlx5_ib_modify_dct for DC);
//  - the kernel's errno for bad attributes, in the kernel's order
//    (uverbs modify_qp, then the core, then the driver):
//      EINVAL  IB_QP_PORT or the AV's port beyond the device's ports
//      EPERM   IB_QP_QKEY with bit 31 set, without CAP_NET_RAW (set_privileged)
//      EINVAL  RoCE AV without GRH
//      ENODATA AV sgid_index empty or beyond the GID table
//      ETIMEDOUT (or what set_unreachable says) resolving the dgid's MAC
//      EINVAL  a transition or attribute mask the table does not allow
//      EINVAL  pkey_index beyond the pkey table (mlx5; rxe does not check:
//              FakeDevice::checks_pkey_index)
//      EINVAL  path_mtu outside IBV_MTU_256..4096 or above the port's max
//  - post_send (only in RTS) / post_recv / post_srq_recv, recorded with
//    copies of the work requests; IBV_SEND_INLINE data is copied at post
//    (the buffer may be reused at once, no lkey is looked at), up to the
//    QP's cap.max_inline_data (granted as asked at create, reported by
//    query_qp): more fails the post with rxe's EINVAL (validate_send_wr)
//    or mlx5's ENOMEM (set_data_inl_seg), as does inline on an RDMA read
//    or atomic; signaled sends complete with success on
//    the send CQ unless fail_next_send() scripts an error completion (the QP
//    then goes to ERR and later WRs flush, as hardware does), or stay in
//    flight until complete_sends() or a flush (set_auto_complete_sends); deliver_recv()
//    completes the oldest posted receive; push_completion() adds any CQE;
//  - EBUSY when a CQ/PD/SRQ still in use is destroyed, and when a context
//    is closed while anything created from it lives. (rdma-core's close
//    succeeds and the kernel then destroys the children, leaving every
//    handle to them dangling: a later ibv_destroy_qp through one is a
//    use-after-free. The fake refuses instead, so a test sees the wrong
//    order as last_destroy_errno() == EBUSY and live_objects() > 0);
//  - what QP teardown depends on:
//      * a QP attached to an SRQ that enters ERR (modify_qp, or an error
//        completion) queues IBV_EVENT_QP_LAST_WQE_REACHED on its context
//        (IBA o11-5.2.5: raised when the QP is in ERR and no more SRQ WQEs
//        will be consumed by it; the fake delivers a message at once, so
//        that is at the transition). mlx5 raises it (firmware event
//        MLX5_EVENT_TYPE_SRQ_LAST_WQE, mapped in mlx5_ib's QP event
//        handler). rdma_rxe on Linux 6.1 never does: its responder only
//        drains (rxe_drain_req_pkts in rxe_resp.c); the event came with
//        "RDMA/rxe: Send last wqe reached event on qp cleanup" (June 2023,
//        flush_recv_queue). FakeDevice::raises_last_wqe: on for mlx5 names,
//        off for the others (rxe as in Debian 12);
//      * destroy_qp on mlx5 removes the QP's completions still in its CQs
//        (rdma-core providers/mlx5/verbs.c mlx5_destroy_qp ->
//        __mlx5_cq_clean in providers/mlx5/cq.c, for user QPs; the kernel's
//        destroy_qp_common -> __mlx5_ib_cq_clean does the same for kernel
//        QPs) and gives each consumed SRQ receive back to the SRQ: the
//        message is gone although the sender got its RC ACK. rxe leaves them
//        (FakeDevice::cleans_cq_on_destroy);
//      * destroying a QP drops its queued async events (uverbs does);
//      * each context's async_fd is a real fd (an eventfd counting the
//        queued events) that can be made non-blocking and polled;
//      * busy_deregs(): MRs deregistered while a posted receive still
//        pointed into them;
//  - mlx5 DC (fake_verbs_dc.cc, where each rule cites its source): DCIs and
//    DCTs created with mlx5dv_create_qp and rdma-core's/the kernel's errno
//    (EOPNOTSUPP off mlx5 or without the dct capability, FakeDevice::dc);
//    a DCT attached to an SRQ, keyed at creation, numbered at RTR, never
//    leaving RTR (no ERR/RESET); DCIs posted through the extended
//    work-request API (ibv_wr_* with mlx5dv_wr_set_dc_addr; wr_complete is
//    all or nothing: ENOMEM on overflow, EINVAL on an unfinished request);
//    in wire mode run_dc() carries DCI work to the DCT its address handle,
//    DCT number and key name, and a wrong key is dropped and counted at the
//    target (dct_key_violations) and retried out at the initiator
//    (IBV_WC_RETRY_EXC_ERR, the DCI to ERR); mlx5dv_query_device answers
//    the DC ODP caps;
//  - any call can be made to fail on demand (fail());
//  - in wire mode (set_wire), the QPs of one FakeVerbs reach each other:
//    UD datagrams wait on the wire for the test to deliver (or lose,
//    duplicate, reorder) them; RC work requests are executed by run_rc()
//    against the connected QP - sends into its receive queue or SRQ, RDMA
//    and atomics against registered memory - with the RC error semantics
//    (retry exceeded when nobody answers, remote access errors, RNR waits).
//
// Thread safety: none; one test thread at a time. Up to 8 FakeVerbs may
// exist at once (get_device_list has no context argument, so each instance
// gets its own trampoline slot).

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "topo/snapshot.h"
#include "verbs/verbs_api.h"

namespace roce::testing {

/// Every VerbsApi entry that fail() can target.
enum class Call {
    kGetDeviceList, kOpenDevice, kCloseDevice, kQueryDevice, kQueryPort, kQueryGidEx,
    kQueryGidTable, kQueryPkey, kGetAsyncEvent, kAllocPd, kDeallocPd, kRegMr, kDeregMr,
    kCreateCompChannel, kDestroyCompChannel, kCreateCq, kDestroyCq, kPollCq, kReqNotifyCq,
    kCreateSrq, kDestroySrq, kPostSrqRecv, kCreateQp, kDestroyQp, kModifyQp, kQueryQp,
    kPostSend, kPostRecv, kCreateAh, kDestroyAh, kMlx5dvQueryDevice, kMlx5dvCreateQp,
    kMlx5dvModifyQpLagPort, kMlx5dvQueryQpLagPort, kMlx5dvModifyQpUdpSport,
    kWrComplete, ///< the extended work-request API's post (fake_verbs_dc.cc)
    kCount
};
const char *call_name(Call c) noexcept;

struct FakeGid {
    std::array<uint8_t, 16> gid{};
    uint32_t type = IBV_GID_TYPE_ROCE_V2; ///< IBV_GID_TYPE_*
    uint32_t ndev_ifindex = 0;
};

struct FakePort {
    ibv_port_state state = IBV_PORT_ACTIVE;
    uint8_t link_layer = IBV_LINK_LAYER_ETHERNET;
    ibv_mtu active_mtu = IBV_MTU_1024;
    ibv_mtu max_mtu = IBV_MTU_4096;
    int gid_tbl_len = 0;
    std::map<int, FakeGid> gids;    ///< populated slots
    std::vector<uint16_t> pkeys;    ///< host order; size = pkey_tbl_len
    uint8_t active_width = 2;       ///< IBV_WIDTH_4X
    uint8_t active_speed = 64;      ///< IBV_SPEED_HDR
};

struct FakeDevice {
    std::string name;
    bool mlx5 = false;              ///< mlx5dv_* work; DC QPs can be created (if dc)
    bool dc = true;                 ///< the HCA's dct capability (mlx5 only): without
                                    ///< it mlx5dv_create_qp(DCI/DCT) fails EOPNOTSUPP
    uint32_t dc_odp_caps = 0;       ///< mlx5dv_query_device's DC ODP caps (IBV_ODP_SUPPORT_*)
    bool dc_atomics = true;         ///< a DCT may take REMOTE_ATOMIC (else EOPNOTSUPP)
    int num_lag_ports = 0;          ///< reported by mlx5dv_query_device; > 1: LAG mode
    int lag_port_down = 0;          ///< a LAG port (1-based) whose link is down: QPs
                                    ///< configured for it are active on another one
    /// Wire mode: every cable of the device is pulled beyond its ports (both
    /// bond members at the switch, or the switch itself): nothing it sends
    /// arrives and nothing reaches it. Its RC work requests, and those of
    /// any QP connected to one of its QPs, complete with
    /// IBV_WC_RETRY_EXC_ERR as with a responder that never answers (QP to
    /// ERR, the rest flush); UD datagrams from or to it are dropped at
    /// delivery. RC traffic between two QPs of one context (a process's
    /// loopback path) still flows: the device loops it back inside. Port
    /// state and GIDs stay as they are (no carrier change is modelled);
    /// clearing it reconnects the wire.
    bool link_down = false;
    /// With link_down: RC work to or from the device stays unacknowledged
    /// in its send queue, as on hardware while a QP's retries last
    /// (ack_timeout x (retry_cnt + 1): seconds), instead of failing at once.
    /// Moving the QP to ERR flushes it; clearing this lets the retries run
    /// out (IBV_WC_RETRY_EXC_ERR).
    bool link_retrying = false;
    bool checks_pkey_index = true;  ///< mlx5 refuses pkey_index >= table (rxe does not)
    bool raises_last_wqe = true;    ///< SRQ QP in ERR -> IBV_EVENT_QP_LAST_WQE_REACHED
                                    ///< (the IBA requires it; rxe on Linux 6.1 does not)
    bool cleans_cq_on_destroy = false; ///< destroy_qp removes the QP's CQEs (mlx5)
    /// The most inline data a QP may ask for (cap.max_inline_data); more
    /// fails create_qp with EINVAL. rxe's RXE_MAX_INLINE_DATA is 400.
    uint32_t max_inline_data = 400;
    std::vector<FakePort> ports;    ///< ports[0] is port 1
};

/// Which kind of QP, as the state machine sees it.
enum class FakeQpKind { kRC, kUC, kUD, kDCI, kDCT };

/// One posted send or receive, copied at post time.
struct PostedWr {
    uint32_t qp_num = 0;
    uint64_t wr_id = 0;
    ibv_wr_opcode opcode = IBV_WR_SEND;  ///< sends only
    unsigned int send_flags = 0;
    std::vector<ibv_sge> sge;
    uint32_t length = 0;                 ///< sum of the sge lengths (sends)
    uint32_t imm_data = 0;
    uint32_t remote_qpn = 0, remote_qkey = 0; ///< UD sends; remote_qpn: the DCT number (DC)
    ibv_ah *ah = nullptr;                     ///< UD and DC sends
    uint64_t dc_key = 0;                      ///< DC: the access key given with the DCT number
    uint64_t remote_addr = 0;                 ///< RDMA and atomics
    uint32_t rkey = 0;
    uint64_t compare_add = 0, swap = 0;       ///< atomics
    std::vector<uint8_t> inline_data;         ///< IBV_SEND_INLINE: the data, copied at post
};

class FakeVerbs {
public:
    /// No devices (like this build machine).
    FakeVerbs();
    /// One fake device per snapshot device: ports, GID tables (netdev
    /// ifindexes from the snapshot), pkeys; names starting with "mlx5" are
    /// mlx5 (dv, DC, pkey-index checks), others behave like rxe. A port's
    /// active MTU is the snapshot's, or derived from its first GID's netdev
    /// MTU as the kernel does for RoCE (4096 when unknown).
    explicit FakeVerbs(const topo::Snapshot &snapshot);
    ~FakeVerbs();
    FakeVerbs(const FakeVerbs &) = delete;
    FakeVerbs &operator=(const FakeVerbs &) = delete;

    /// The table to hand to the code under test. Valid while *this lives.
    const verbs::VerbsApi &api() const { return api_; }

    // ---- scripting -----------------------------------------------------
    void add_device(FakeDevice device);
    /// Mutable access, e.g. to move a GID: device("mlx5_bond_0").ports[0].gids.
    FakeDevice &device(const std::string &name);
    /// Whether the "process" has CAP_NET_RAW (controlled qkeys). Default false.
    void set_privileged(bool privileged);
    /// The next calls of `call` fail with `err`: after letting `skip` calls
    /// through, `times` calls fail (times < 0: forever). Replaces an earlier
    /// script for the same call.
    void fail(Call call, int err, int skip = 0, int times = 1);
    /// Neighbour resolution of `dgid` fails with `err` (modify_qp to RTR with
    /// an AV, create_ah).
    void set_unreachable(const std::array<uint8_t, 16> &dgid, int err = ETIMEDOUT);
    /// The next send posted on `qp` completes with `status` (and the QP goes
    /// to ERR, flushing what follows).
    void fail_next_send(ibv_qp *qp, ibv_wc_status status, uint32_t vendor_err = 0);
    /// Completes the oldest posted receive of `qp` (or its SRQ) with success;
    /// false when none is posted.
    bool deliver_recv(ibv_qp *qp, uint32_t byte_len, uint32_t src_qp = 0,
                      const uint32_t *imm = nullptr);
    /// Appends a completion to `cq` as is.
    void push_completion(ibv_cq *cq, const ibv_wc &wc);
    /// Queues an async event for get_async_event on `ctx`.
    void push_async_event(ibv_context *ctx, const ibv_async_event &event);
    /// Successful sends complete automatically (default true). When off,
    /// sends stay in flight on their QP until complete_sends(), and entering
    /// ERR flushes them: one IBV_WC_WR_FLUSH_ERR completion each, signaled
    /// or not (a work request completed in error always completes).
    void set_auto_complete_sends(bool on);
    /// Completes the `n` oldest sends in flight on `qp` with success (a
    /// completion for the signaled ones); returns how many there were.
    size_t complete_sends(ibv_qp *qp, size_t n);

    // ---- the wire between the QPs of this FakeVerbs (fake_verbs_wire.cc) --
    // Several processes' worth of verbs objects share one FakeVerbs (each
    // opens its own context); in wire mode their QPs talk to each other.
    /// A UD datagram sent and not delivered yet.
    struct Datagram {
        uint32_t src_qpn = 0;
        uint32_t dst_qpn = 0;
        uint32_t qkey = 0;
        std::array<uint8_t, 16> sgid{}; ///< the sender's GID (its AH's, held since create_ah)
        std::array<uint8_t, 16> dgid{};
        std::vector<uint8_t> payload;
    };
    /// Wire mode (default off). UD sends complete at once (a datagram is
    /// gone once transmitted) and wait in datagrams() - to be delivered,
    /// dropped, duplicated or reordered by the test. RC work requests stay
    /// in flight on their QP until run_rc() carries them to the QP theirs is
    /// connected to (dest_qp_num), as the two HCAs would.
    void set_wire(bool on);
    std::deque<Datagram> &datagrams();
    /// Delivers a datagram as the receiving device does: dropped silently
    /// (false) unless its QP exists, is UD in RTR or RTS, its port has the
    /// destination GID, the qkey matches and a receive is posted; otherwise the receive holds the 40-byte GRH
    /// (for an IPv4-mapped GID the IPv4 header in its last 20 bytes, as
    /// RoCE v2 devices write it; else an IPv6 header) and the payload, and
    /// completes with IBV_WC_GRH.
    bool deliver_datagram(const Datagram &d);
    /// Executes RC work requests in flight, each QP's in order, until none
    /// can go: SEND into the responder's SRQ or receive queue (none posted:
    /// receiver not ready, it waits - rnr_retry 7 retries forever); RDMA
    /// WRITE/READ and 64-bit atomics against the responder's memory regions
    /// (rkey, bounds, MR and QP access flags checked: IBV_WC_REM_ACCESS_ERR
    /// otherwise, both QPs to ERR). A responder that does not exist or is
    /// not in RTR/RTS never answers: the requester's work request completes
    /// with IBV_WC_RETRY_EXC_ERR and its QP goes to ERR (the rest flush).
    /// Signaled work requests complete on the requester's CQ. Returns how
    /// many work requests were executed or failed.
    size_t run_rc();
    /// The link under `qp` breaks (a cable pulled, a bond member gone): its
    /// oldest work request in flight completes with `status` and the QP goes
    /// to ERR, flushing the rest; with nothing in flight, the next send does
    /// (fail_next_send). The first `delivered` work requests in flight
    /// reach the responder before that, but their acknowledgements are lost:
    /// the requester sees them fail although the peer has them (on a DCI:
    /// at the DCT each names; its key is not checked).
    void break_qp(ibv_qp *qp, ibv_wc_status status = IBV_WC_RETRY_EXC_ERR,
                  size_t delivered = 0);
    /// The QP of this FakeVerbs with that number (nullptr: none).
    ibv_qp *find_qp(uint32_t qpn) const;
    /// DC in wire mode (fake_verbs_dc.cc): executes the work requests in
    /// flight on DCIs in RTS against the DCT each names (address handle's
    /// GID, DCT number, key), with run_rc()'s semantics for the operations.
    /// Returns how many were executed or failed.
    size_t run_dc();
    /// How many requests `dct` dropped because their DC access key was not
    /// its own (the DCT context's violation counter).
    uint64_t dct_key_violations(const ibv_qp *dct) const;

    // ---- inspection ----------------------------------------------------
    int calls(Call call) const { return calls_[static_cast<size_t>(call)]; }
    const std::vector<PostedWr> &sends() const { return sends_; }
    const std::vector<PostedWr> &recvs() const { return recvs_; }
    ibv_qp_state qp_state(const ibv_qp *qp) const;
    /// The LAG port configured on `qp` (0: none, or reset by a state change).
    uint8_t qp_lag_port(const ibv_qp *qp) const;
    /// The UDP source port set on `qp` with mlx5dv_modify_qp_udp_sport (0: none).
    uint16_t qp_udp_sport(const ibv_qp *qp) const;
    /// The attributes last applied to `qp` (valid fields per applied mask).
    const ibv_qp_attr &qp_attr(const ibv_qp *qp) const;
    /// The errno the last failed modify_qp returned, and why (the fake's own
    /// explanation, for test failure messages).
    int last_modify_errno() const { return last_modify_errno_; }
    const std::string &last_modify_reason() const { return last_modify_reason_; }
    /// The numbers of the QPs destroyed (destroy_qp that succeeded), in
    /// the order they were.
    const std::vector<uint32_t> &destroyed_qps() const { return destroyed_qps_; }
    /// Bytes of every live memory region (ibv_reg_mr's lengths).
    size_t registered_bytes() const;
    /// Open contexts + PDs + MRs + CQs + SRQs + QPs + AHs + channels.
    size_t live_objects() const;
    /// How many dereg_mr calls came while a posted receive (on an SRQ or a
    /// QP) still pointed into the MR. The kernel allows it; a message
    /// arriving then is written through a dead registration - into freed
    /// memory once the buffer is freed. 0 when teardown runs in reverse
    /// creation order (QPs and SRQs before their buffers).
    size_t busy_deregs() const;
    /// Completions waiting in `cq` (not consumed by poll_cq yet).
    size_t cq_depth(const ibv_cq *cq) const;
    /// The live MR whose local (`remote`: remote) key is `key`, and its
    /// access flags in *access; nullptr when none has it.
    const ibv_mr *mr_by_key(uint32_t key, bool remote, int *access = nullptr) const;

    /// Implementation state (fake_verbs_state.h); not for tests.
    struct State;
    State &state() { return *st_; }

private:
    std::unique_ptr<State> st_;
    verbs::VerbsApi api_{};
    int slot_ = -1;
    std::array<int, static_cast<size_t>(Call::kCount)> calls_{};
    std::vector<PostedWr> sends_;
    std::vector<PostedWr> recvs_;
    std::vector<uint32_t> destroyed_qps_;
    int last_modify_errno_ = 0;
    std::string last_modify_reason_;

    friend struct FakeOps;
    friend struct FakeDcOps;
};

} // namespace roce::testing
