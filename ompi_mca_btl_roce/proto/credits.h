// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>

namespace roce::btl {

/// Credit-based flow control of one RC connection, so a receiver's shared
/// receive queue is never overrun (no RNR storms).
///
/// Every message on the connection - data or credit-only - consumes one
/// receive buffer at the peer, so it needs one credit. The peer grants an
/// initial window at connection time and returns a credit for every buffer
/// it reposts, piggybacked on its own traffic or, when it has none, in a
/// credit-only message. `reserve` credits are kept back for those
/// credit-only messages so that two sides which both ran out of data credits
/// can still tell each other about reposted buffers (no deadlock). A
/// credit-only message is sent only when at least `threshold` credits are
/// owed, so credit messages never answer each other forever.
///
/// Pure bookkeeping: not thread-safe, the endpoint's lock covers it.
class CreditLedger {
public:
    explicit CreditLedger(uint32_t reserve = 1, uint32_t threshold = 8)
        : reserve_(reserve), threshold_(threshold) {}

    /// The window the peer granted at connection time; also the most this
    /// ledger will ever hold (the peer cannot return more buffers than it
    /// granted).
    void set_initial(uint32_t credits) noexcept {
        credits_ = credits;
        window_ = credits;
    }
    /// Credits the peer returned (piggybacked or in a credit message). What
    /// would take the count beyond the window is not taken: it cannot be
    /// real, and a count that wrapped would let us overrun the peer. Returns
    /// how many were refused (0 from a well-behaved peer).
    uint32_t add(uint32_t credits) noexcept {
        uint32_t room = window_ > credits_ ? window_ - credits_ : 0;
        uint32_t take = credits < room ? credits : room;
        credits_ += take;
        return credits - take;
    }

    /// Takes a credit for a data message; false when only the reserve is left.
    bool take_for_data() noexcept {
        if (credits_ <= reserve_) {
            return false;
        }
        --credits_;
        return true;
    }
    /// Takes a credit for a credit-only message (may use the reserve).
    bool take_for_control() noexcept {
        if (credits_ == 0) {
            return false;
        }
        --credits_;
        return true;
    }
    /// Gives back a credit taken for a message that could not be posted.
    void untake() noexcept { ++credits_; }

    /// A receive buffer this peer consumed was reposted: one credit is owed.
    void owe(uint32_t n = 1) noexcept { owed_ += n; }
    /// Credits to piggyback now (at most 65535, the header field); resets them.
    uint16_t take_owed() noexcept {
        uint32_t n = owed_ > 0xffffu ? 0xffffu : owed_;
        owed_ -= n;
        return static_cast<uint16_t>(n);
    }
    /// True when enough is owed to justify a credit-only message.
    bool credit_message_due() const noexcept { return owed_ >= threshold_; }

    uint32_t available() const noexcept { return credits_; }
    uint32_t window() const noexcept { return window_; }
    uint32_t owed() const noexcept { return owed_; }
    uint32_t reserve() const noexcept { return reserve_; }

private:
    uint32_t credits_ = 0;
    uint32_t window_ = 0;
    uint32_t owed_ = 0;
    uint32_t reserve_;
    uint32_t threshold_;
};

} // namespace roce::btl
