// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "connection/retire.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/strings.h"

namespace roce::btl {

using util::LogLevel;

namespace {

double monotonic_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

Retirement::Retirement(util::LogSink &log, RetirementConfig cfg) : log_(log), cfg_(cfg) {}

Retirement::~Retirement() {
    (void)destroy_all();
}

std::string Retirement::where(const Held &h) const {
    const select::Selection &sel = h.qp->selection();
    return util::format("%s:%d: retired %s QP 0x%x", sel.device.c_str(), sel.port,
                        qp::to_string(h.qp->type()), h.qpn);
}

Retirement::Held *Retirement::find(uint32_t qpn) {
    for (auto &h : held_) {
        if (h.qpn == qpn) {
            return &h;
        }
    }
    return nullptr;
}

bool Retirement::retired(uint32_t qpn) const {
    for (const auto &h : held_) {
        if (h.qpn == qpn) {
            return true;
        }
    }
    return false;
}

void Retirement::retire(std::unique_ptr<qp::QueuePair> qp, uint32_t outstanding_sends, double now) {
    if (!qp || qp->get() == nullptr) {
        return;
    }
    Held h;
    h.qpn = qp->get()->qp_num;
    h.since = now;
    h.qp = std::move(qp);
    // A QP in RESET has nothing posted and completes nothing: there is
    // nothing to flush or wait for. Asked of the device, not of our record:
    // the device moves a QP to ERR on its own.
    if (h.qp->query_state() != IBV_QPS_RESET) {
        h.sends_left = outstanding_sends;
        h.wait_last_wqe = h.qp->get()->srq != nullptr;
        util::Status s = h.qp->to_error();
        if (!s) {
            double bound = std::max(h.wait_last_wqe ? cfg_.last_wqe_timeout : 0.0,
                                    h.sends_left > 0 ? cfg_.flush_timeout : 0.0);
            log_.write(LogLevel::kWarn,
                       util::format("%s: %s; retired anyway: it is destroyed after at most "
                                    "%.1f s and a drained CQ",
                                    where(h).c_str(), s.message().c_str(), bound));
        }
    }
    if (log_.enabled(LogLevel::kDebug)) {
        log_.write(LogLevel::kDebug,
                   util::format("%s: %u sends outstanding%s", where(h).c_str(), h.sends_left,
                                h.wait_last_wqe ? ", waiting for Last WQE Reached" : ""));
    }
    held_.push_back(std::move(h));
}

bool Retirement::on_send_flushed(uint32_t qpn) {
    Held *h = find(qpn);
    if (h == nullptr) {
        return false;
    }
    if (h->sends_left > 0) {
        --h->sends_left;
    }
    return true;
}

bool Retirement::on_async_event(const ibv_async_event &event) {
    if (event.event_type != IBV_EVENT_QP_LAST_WQE_REACHED) {
        return false;
    }
    // Matched by address, never dereferenced: the event may name a live QP
    // of the owner's.
    for (auto &h : held_) {
        if (h.qp->get() == event.element.qp) {
            h.wait_last_wqe = false;
            return true;
        }
    }
    return false;
}

bool Retirement::waits_over(Held &h, double now) {
    double age = now - h.since;
    if (h.sends_left > 0 && age >= cfg_.flush_timeout) {
        log_.write(LogLevel::kWarn,
                   util::format("%s: %u of its outstanding send completions did not come back "
                                "within %.1f s after ERR (the count handed to retire() is off); "
                                "destroying it once the CQ is drained",
                                where(h).c_str(), h.sends_left, cfg_.flush_timeout));
        h.sends_left = 0;
    }
    if (h.wait_last_wqe && age >= cfg_.last_wqe_timeout) {
        log_.write(LogLevel::kInfo,
                   util::format("%s: no IBV_EVENT_QP_LAST_WQE_REACHED within %.1f s after ERR "
                                "(rdma_rxe on Linux 6.1 never raises it); destroying it once "
                                "the CQ is drained",
                                where(h).c_str(), cfg_.last_wqe_timeout));
        h.wait_last_wqe = false;
    }
    return h.sends_left == 0 && !h.wait_last_wqe;
}

void Retirement::destroy(Held &h, double now) {
    std::string at = where(h);
    util::Status s = h.qp->destroy();
    if (!s) {
        log_.write(LogLevel::kWarn, util::format("%s: %s", at.c_str(), s.message().c_str()));
    } else if (log_.enabled(LogLevel::kDebug)) {
        log_.write(LogLevel::kDebug, util::format("%s: destroyed %.3f s after it was retired",
                                                  at.c_str(), now - h.since));
    }
    h.qp.reset();
}

std::vector<uint32_t> Retirement::reap(int polled, int asked, double now) {
    return reap_after(polled >= 0 && polled<asked, polled> 0 ? static_cast<uint32_t>(polled) : 0,
                      now);
}

std::vector<uint32_t> Retirement::reap_after(bool polled_short, uint32_t polled, double now) {
    ++reaps_;
    std::vector<uint32_t> done;
    for (size_t i = 0; i < held_.size();) {
        Held &h = held_[i];
        if (h.quiet_at != 0 && h.quiet_at < reaps_) {
            h.polled_since += polled;
        }
        bool drained = polled_short || (cfg_.cq_entries > 0 && h.polled_since >= cfg_.cq_entries);
        if (h.quiet_at != 0 && h.quiet_at < reaps_ && drained) {
            destroy(h, now);
            done.push_back(h.qpn);
            held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
        }
        if (h.quiet_at == 0 && waits_over(h, now)) {
            h.quiet_at = reaps_;
        }
        ++i;
    }
    return done;
}

std::vector<uint32_t> Retirement::destroy_all(const DrainRound &round, double bound,
                                              const Clock &clock) {
    std::vector<uint32_t> done;
    auto now = [&clock] { return clock ? clock() : monotonic_seconds(); };
    const double start = now();
    while (!held_.empty() && round && bound > 0 && now() - start < bound) {
        bool polled_short = round();
        std::vector<uint32_t> d = reap_after(polled_short, 0, now());
        done.insert(done.end(), d.begin(), d.end());
        if (d.empty() && !held_.empty()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    if (held_.empty()) {
        return done;
    }
    std::string what;
    for (const auto &h : held_) {
        std::vector<std::string> waits;
        if (h.sends_left > 0) {
            waits.push_back(util::format("%u sends", h.sends_left));
        }
        if (h.wait_last_wqe) {
            waits.push_back("Last WQE Reached");
        }
        if (waits.empty()) {
            waits.push_back("a drained CQ");
        }
        what += util::format("%s0x%x (%s)", what.empty() ? "" : ", ", h.qpn,
                             util::join(waits, " and ").c_str());
    }
    const select::Selection &sel = held_.front().qp->selection();
    log_.write(LogLevel::kInfo,
               util::format("%s:%d: destroying %zu retired QP%s at teardown before %s drained "
                            "(%s remaining receives are dropped): %s",
                            sel.device.c_str(), sel.port, held_.size(),
                            held_.size() == 1 ? "" : "s", held_.size() == 1 ? "it" : "they",
                            held_.size() == 1 ? "its" : "their", what.c_str()));
    double t = now();
    for (auto &h : held_) {
        destroy(h, t);
        done.push_back(h.qpn);
    }
    held_.clear();
    return done;
}

} // namespace roce::btl
