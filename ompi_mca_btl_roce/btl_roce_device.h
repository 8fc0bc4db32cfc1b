// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "btl_roce_frag.h"
#include "qp/queue_pair.h"
#include "select/selection.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/handles.h"
#include "verbs/verbs_api.h"

namespace roce::btl {

/// Sizes of the per-port verbs resources (from MCA parameters).
struct DeviceConfig {
    uint32_t srq_size = 512;        ///< receive buffers posted to the SRQ
    uint32_t recv_slot = 8192 + 64; ///< bytes per receive buffer (max_send_size + header)
    uint32_t send_frags = 256;      ///< send descriptors (same slot size)
    uint32_t sq_depth = 128;        ///< send queue depth of each RC QP
    uint32_t max_inline = 128;      ///< inline data requested for RC QPs
    uint32_t ud_bufs = 64;          ///< UD receive buffers (connection setup)
};

/// Memory allocated page-aligned and registered with the PD; deregistered
/// and freed in that order on destruction.
struct RegisteredSlab {
    struct Free {
        void operator()(uint8_t *p) const noexcept { ::free(p); }
    };
    std::unique_ptr<uint8_t, Free> mem; // declared before mr: freed after deregistration
    verbs::Mr mr;
    size_t size = 0;
    uint8_t *data() const { return mem.get(); }
    uint32_t lkey() const { return mr ? mr->lkey : 0; }
};

/// The verbs resources of one RoCE port: context, PD, one completion queue
/// for everything (RC and UD, sends and receives: one poll per progress
/// call), the shared receive queue with its buffers, the UD QP used for
/// connection setup, and the send descriptor pool.
///
/// Members are declared in creation order so destruction runs in reverse:
/// the UD QP, SRQ and CQ go before the MRs are deregistered and the buffers
/// freed (they hold posted receives in them), and the PD and context last.
///
/// Lifetime rule for the owner: every RC QP created with create_rc_qp() -
/// live paths and the QPs held by a Retirement (connection/retire.h) - must
/// be destroyed before the Device. They complete into its CQ, consume its
/// SRQ and belong to its PD and context; a Device destroyed first fails to
/// destroy those (EBUSY) and a QP destroyed afterwards is a use-after-free
/// of the closed context.
///
/// Not thread-safe: the owning Module serialises access.
class Device {
public:
    /// Opens `sel.device` and creates everything for `sel.port`; the UD QP
    /// goes RESET->INIT->RTR->RTS with `sel`'s pkey index, port and qkey,
    /// every transition preflighted against `fresh` (qp/queue_pair.h).
    /// Registration of the buffer slabs shrinks (with one warning on `log`)
    /// when the locked-memory limit does not allow the configured sizes.
    /// `log` must outlive the Device.
    static util::Result<std::unique_ptr<Device>> open(const verbs::VerbsApi &api,
                                                      const select::Selection &sel,
                                                      qp::SharedSnapshotSource fresh, bool privileged,
                                                      const DeviceConfig &cfg,
                                                      util::LogSink &log);
    ~Device();

    const verbs::VerbsApi &api() const { return *api_; }
    ibv_context *context() const { return ctx_.get(); }
    ibv_pd *pd() const { return pd_.get(); }
    ibv_cq *cq() const { return cq_.get(); }
    ibv_srq *srq() const { return srq_.get(); }
    ibv_qp *ud_qp() const { return ud_qp_->get(); }
    const std::string &name() const { return name_; }
    int port() const { return port_; }
    const DeviceConfig &config() const { return cfg_; }
    uint32_t max_inline() const { return max_inline_; }
    const ibv_device_attr &attr() const { return dattr_; }

    /// Posts SRQ receive buffer `index`.
    util::Status post_srq_recv(uint32_t index);
    /// Posts the `n` SRQ receive buffers `indices` as one list: one call
    /// into the provider (one doorbell) per kSrqPostBatch buffers. An error
    /// names how many of them were posted.
    util::Status post_srq_recvs(const uint32_t *indices, size_t n);
    static constexpr size_t kSrqPostBatch = 32;
    uint8_t *srq_buffer(uint32_t index) const {
        return srq_slab_.data() + static_cast<size_t>(index) * cfg_.recv_slot;
    }

    /// Posts UD receive buffer `index` (each holds a 40-byte GRH + message).
    util::Status post_ud_recv(uint32_t index);
    uint8_t *ud_buffer(uint32_t index) const {
        return ud_slab_.data() + static_cast<size_t>(index) * kUdSlot;
    }

    /// Sends `len` bytes (at most kUdSlot - 40) as one UD datagram.
    util::Status ud_send(ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey,
                         const uint8_t *data, size_t len);

    /// Brings the UD QP back after the device moved it to the error state
    /// (rxe does that when a datagram cannot be transmitted, e.g. while an
    /// active-backup bond has no active member): RESET -> INIT -> RTR -> RTS
    /// with the same number, preflighted like the first time, all receive
    /// buffers posted again and every send slot free. Completions of the
    /// old incarnation still in the CQ must be ignored by the caller (see
    /// ud_generation()).
    util::Status recover_ud();
    /// The state the device reports for the UD QP (a system call).
    ibv_qp_state ud_state() const { return ud_qp_->query_state(); }
    /// How many times the UD QP was recovered.
    uint32_t ud_recoveries() const { return ud_recoveries_; }

    /// A new RC QP in RESET state, attached to the CQ and SRQ. The caller
    /// destroys it before the Device (see the class comment).
    util::Result<verbs::Qp> create_rc_qp();

    /// The next asynchronous event of this Device's context, without
    /// blocking (open() made the async fd non-blocking): true with *out
    /// filled, false when none is pending. The event is acknowledged before
    /// it is returned - ibv_destroy_qp waits until every event reported for
    /// its QP has been - so *out is a copy whose element pointers are valid
    /// only while that object lives. A failure other than "none pending"
    /// (e.g. the device is gone) is logged once at warning level, and from
    /// then on this returns false without reading. One system call when
    /// nothing is pending: call it only when someone waits for an event
    /// (a non-empty Retirement).
    bool next_async_event(ibv_async_event *out);
    /// The async event fd (non-blocking), for a caller that polls it.
    int async_fd() const { return ctx_ ? ctx_->async_fd : -1; }

    FragPool &frags() { return frags_; }
    /// A UD send slot's completion arrived: the slot may be reused.
    void ud_send_done(uint32_t slot) {
        if (slot < ud_send_busy_.size()) {
            ud_send_busy_[slot] = false;
        }
    }

    static constexpr size_t kUdSlot = 2048;
    static constexpr size_t kGrhSize = 40;

private:
    Device() = default;
    util::Status create_queues(const select::Selection &sel, qp::SharedSnapshotSource fresh,
                               bool privileged, util::LogSink &log);
    util::Status create_slabs(util::LogSink &log);

    const verbs::VerbsApi *api_ = nullptr;
    util::LogSink *log_ = nullptr;
    bool async_failed_ = false;
    std::string name_;
    int port_ = 1;
    DeviceConfig cfg_;
    ibv_device_attr dattr_{};
    uint32_t max_inline_ = 0;
    uint32_t srq_count_ = 0;
    uint32_t ud_send_next_ = 0;
    uint32_t ud_recoveries_ = 0;
    std::vector<bool> ud_send_busy_;

    // Creation order (open(): context and PD, create_slabs(), then
    // create_queues()); destruction is the reverse, so the queues that hold
    // posted receives in the slabs go before the slabs.
    verbs::Context ctx_;
    verbs::Pd pd_;
    RegisteredSlab srq_slab_;
    RegisteredSlab send_slab_;
    RegisteredSlab ud_slab_;     ///< receive slots, then send slots
    FragPool frags_;             ///< descriptors over send_slab_
    verbs::Cq cq_;
    verbs::Srq srq_;
    std::unique_ptr<qp::QueuePair> ud_qp_;
};

/// Registers `bytes` of fresh page-aligned memory for local write and
/// remote access as requested; a clear Status (with the RLIMIT_MEMLOCK value
/// when that is the likely cause) on failure. A failed deregistration
/// later is logged on `log` (when set).
util::Result<RegisteredSlab> register_slab(const verbs::VerbsApi &api, ibv_pd *pd, size_t bytes,
                                           int access, util::LogSink *log = nullptr);

/// "locked-memory limit (ulimit -l) is 8192 KiB" or "... is unlimited".
std::string memlock_limit_text();

/// ibv_mtu enum -> bytes (256..4096); 0 for anything else.
int mtu_bytes(int ibv_mtu) noexcept;

} // namespace roce::btl
