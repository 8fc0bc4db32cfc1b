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
/// Members are declared in creation order so destruction runs in reverse.
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
                                                      qp::SnapshotSource fresh, bool privileged,
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
    uint8_t *srq_buffer(uint32_t index) const {
        return srq_slab_.data() + static_cast<size_t>(index) * cfg_.recv_slot;
    }
    uint32_t srq_count() const { return srq_count_; }

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

    /// A new RC QP in RESET state, attached to the CQ and SRQ.
    util::Result<verbs::Qp> create_rc_qp();

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
    util::Status create_queues(const select::Selection &sel, qp::SnapshotSource fresh,
                               bool privileged, util::LogSink &log);
    util::Status create_slabs(util::LogSink &log);

    const verbs::VerbsApi *api_ = nullptr;
    std::string name_;
    int port_ = 1;
    DeviceConfig cfg_;
    ibv_device_attr dattr_{};
    uint32_t max_inline_ = 0;
    uint32_t srq_count_ = 0;
    uint32_t ud_send_next_ = 0;
    uint32_t ud_recoveries_ = 0;
    std::vector<bool> ud_send_busy_;

    // Creation order (destruction is the reverse).
    verbs::Context ctx_;
    verbs::Pd pd_;
    verbs::Cq cq_;
    verbs::Srq srq_;
    std::unique_ptr<qp::QueuePair> ud_qp_;
    RegisteredSlab srq_slab_;
    RegisteredSlab send_slab_;
    RegisteredSlab ud_slab_;     ///< receive slots, then send slots
    FragPool frags_;
};

/// Registers `bytes` of fresh page-aligned memory for local write and
/// remote access as requested; a clear Status (with the RLIMIT_MEMLOCK value
/// when that is the likely cause) on failure.
util::Result<RegisteredSlab> register_slab(const verbs::VerbsApi &api, ibv_pd *pd, size_t bytes,
                                           int access);

/// "locked-memory limit (ulimit -l) is 8192 KiB" or "... is unlimited".
std::string memlock_limit_text();

/// ibv_mtu enum -> bytes (256..4096); 0 for anything else.
int mtu_bytes(int ibv_mtu) noexcept;

} // namespace roce::btl
