// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "qp/queue_pair.h"
#include "util/log.h"

namespace roce::btl {

/// Bounds of Retirement's waits, in seconds.
struct RetirementConfig {
    /// How long an SRQ-attached QP waits for IBV_EVENT_QP_LAST_WQE_REACHED
    /// after it was moved to ERR. rdma_rxe on Linux 6.1 never raises the
    /// event, so there every retired QP waits this long; the wait only has
    /// to cover a receive the device was executing when the QP entered ERR
    /// (its completion is written before the device lets go of the QP).
    double last_wqe_timeout = 2.0;
    /// How long the owner's outstanding sends may take to come back
    /// flushed. ERR flushes them at once on every device, so running out
    /// means the owner's count is wrong: logged, then the QP is drained and
    /// destroyed without them.
    double flush_timeout = 10.0;
    /// The capacity of the owner's CQ (ibv_cq::cqe). Once a QP's waits are
    /// over, polling this many completions also drains it of that QP (the
    /// second way of IBA 10.3.1), so a CQ that is never polled empty under
    /// load does not hold retired QPs forever. 0: only an empty poll counts.
    uint32_t cq_entries = 0;
};

/// Owns the RC QPs taken out of service and destroys each only when no
/// completion of it can still be in, or reach, the CQ:
///
///  1. retire(): the QP goes to ERR (its work requests flush back; an
///     SRQ-attached QP raises IBV_EVENT_QP_LAST_WQE_REACHED once the SRQ
///     will not feed it again, IBA o11-5.2.5);
///  2. an SRQ-attached QP waits for that event (on_async_event()), or
///     RetirementConfig::last_wqe_timeout, after which one line with the
///     reason, the QPN and the device is logged (info) and it goes on;
///  3. it waits until every send the owner counted as outstanding came
///     back (on_send_flushed());
///  4. it waits for a reap() in a later progress call than the one in which
///     2 and 3 were over, reporting a poll that came back with fewer entries
///     than asked (or, since then, RetirementConfig::cq_entries polled): the
///     owner then consumed everything the CQ held when the QP's last
///     completion was written, so every receive of the QP the device
///     completed was handed to the owner. (mlx5's destroy
///     removes the QP's completions from the CQ - rdma-core's
///     mlx5_destroy_qp -> __mlx5_cq_clean - although the sender already got
///     the RC ACK for them: destroying earlier loses messages);
///  5. reap() destroys it and returns its QPN.
///
/// The owner keeps its qpn -> path map entry (to deliver the receives of
/// step 4) until reap() or destroy_all() returns the QPN. A destroy failure
/// is logged (warning) with the verb, errno, QPN and device, and the QP is
/// let go: the kernel reclaims it when the context is closed.
///
/// How the owner (the btl module) drives it, under its lock:
///  - path failed / replaced: retire(std::move(qp), its outstanding sends,
///    now) instead of destroying the QP;
///  - progress(), for each completion: a send/RDMA completion whose qp_num
///    is retired() -> on_send_flushed(qpn); receive completions as usual;
///  - progress(), after the poll, when !empty(): every pending async event
///    (Device::next_async_event) -> on_async_event(); then
///    reap(polled, batch, now) and erase the returned QPNs from the map.
///    The idle fast path must not skip this while !empty();
///  - finalize, before the Device is destroyed: destroy_all() with a drain
///    round and a bound (see there). Declare the Retirement after the
///    Device in the owner, so it is destroyed first in any case.
///
/// Times are seconds on the owner's monotonic clock. Not thread-safe: the
/// owner serialises calls. `log` must outlive the Retirement.
class Retirement {
public:
    explicit Retirement(util::LogSink &log, RetirementConfig cfg = {});
    /// Destroys the QPs still held at once (destroy_all() without a drain).
    ~Retirement();
    Retirement(const Retirement &) = delete;
    Retirement &operator=(const Retirement &) = delete;

    /// Takes `qp` out of service: moves it to ERR unless it is still in
    /// RESET (then nothing of it can be in the CQ, and it waits for nothing
    /// but the next reap), and holds it until it is safe to destroy.
    /// `outstanding_sends`: the completions the owner still expects from it
    /// (sends, RDMA, atomics; each comes back, flushed if not done). A QP
    /// that cannot be moved to ERR is logged (warning) and retired anyway:
    /// it waits out the bounds. An empty `qp` is ignored.
    void retire(std::unique_ptr<qp::QueuePair> qp, uint32_t outstanding_sends, double now);

    /// Whether `qpn` is held here (retired, not destroyed yet).
    bool retired(uint32_t qpn) const;

    /// One of the outstanding completions of retired QP `qpn` came back.
    /// False (and nothing changes) when `qpn` is not held here.
    bool on_send_flushed(uint32_t qpn);

    /// Feeds an async event of the owner's context. True when it was the
    /// Last WQE Reached of a QP held here; every other event is left to the
    /// caller (false). Read events after the CQ poll of the same progress
    /// call: a QP the device moved to ERR raises the event at once, and the
    /// error completion that makes the owner retire it may come in a later
    /// poll - an event read before retire() is not remembered (that QP then
    /// waits out last_wqe_timeout).
    bool on_async_event(const ibv_async_event &event);

    /// Call once per progress call, after its poll of the CQ: `polled` is
    /// what ibv_poll_cq returned (negative: it failed), `asked` the entries
    /// it was asked for. Destroys the QPs whose waits were over at an
    /// earlier reap() call if this poll came back short (polled < asked) or
    /// cq_entries completions were polled since; marks the QPs whose waits
    /// are over now (applying the two timeouts). Returns the QPNs destroyed
    /// (the owner erases them from its map).
    std::vector<uint32_t> reap(int polled, int asked, double now);

    /// One round of the owner's draining at finalize: poll the CQ until it
    /// returns fewer entries than asked, handling each completion as
    /// progress() does (on_send_flushed() for retired QPs), feed pending
    /// async events to on_async_event(); return whether the CQ was polled
    /// empty (false if it cannot be polled).
    using DrainRound = std::function<bool()>;
    /// The owner's monotonic clock, in seconds.
    using Clock = std::function<double()>;

    /// Finalize. Gives the QPs still held up to `bound` seconds to finish
    /// the sequence above - calling `round`, then reap(), until none is
    /// left (sleeping 1 ms between rounds that destroyed nothing) - then
    /// destroys the rest at once and logs one line (info) naming them and
    /// what each still waited for. Destroying a QP in ERR early is safe for
    /// memory (the device stops using it, its buffers and its CQ at
    /// destroy); what it loses are receives nobody will read any more at
    /// finalize. Without `round` or with `bound` <= 0 nothing is drained.
    /// `clock` defaults to CLOCK_MONOTONIC. Returns every QPN destroyed; then
    /// empty(). Call it before the Device goes (btl_roce_device.h).
    std::vector<uint32_t> destroy_all(const DrainRound &round = {}, double bound = 0,
                                      const Clock &clock = {});

    size_t size() const { return held_.size(); }
    bool empty() const { return held_.empty(); }

private:
    struct Held {
        std::unique_ptr<qp::QueuePair> qp;
        uint32_t qpn = 0;
        uint32_t sends_left = 0;
        bool wait_last_wqe = false; ///< SRQ-attached, moved to ERR, no event yet
        double since = 0;           ///< when it was retired
        uint64_t quiet_at = 0;      ///< the reap() call that saw its waits over (0: not yet)
        uint64_t polled_since = 0;  ///< completions polled after that call
    };
    Held *find(uint32_t qpn);
    std::vector<uint32_t> reap_after(bool polled_short, uint32_t polled, double now);
    /// Applies the timeouts; true when nothing but the drain is left.
    bool waits_over(Held &h, double now);
    void destroy(Held &h, double now);
    std::string where(const Held &h) const;

    util::LogSink &log_;
    RetirementConfig cfg_;
    std::vector<Held> held_;
    uint64_t reaps_ = 0;
};

} // namespace roce::btl
