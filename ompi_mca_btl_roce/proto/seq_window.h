// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <vector>

namespace roce::btl {

/// Duplicate detection for the fragments of one connection.
///
/// Every fragment carries a 32-bit sequence number, 0, 1, 2, ... per
/// connection. Fragments may arrive out of order (they travel over several
/// paths of a LAG) and, after a path fails, the sender resends everything
/// that had not completed on it - some of which the receiver may already
/// have. accept() says whether a sequence number is new; a fragment whose
/// number was seen is dropped, so no message is delivered twice.
///
/// The window covers `span` numbers ahead of the oldest missing one. The
/// sender keeps the same structure for its completions and never numbers a
/// fragment `span` or more beyond its oldest uncompleted one; since a
/// fragment not received is not completed, every number the receiver sees is
/// inside its window, and one beyond it is a protocol violation (reported,
/// not accepted). Serial-number arithmetic handles wraparound. Pure; not
/// thread-safe.
class SeqWindow {
public:
    /// `start` is the first sequence number expected (0 on a new connection).
    explicit SeqWindow(uint32_t span = 8192, uint32_t start = 0)
        : bits_(span, false), base_(start) {}

    enum class Verdict { kNew, kDuplicate, kTooFar };

    Verdict accept(uint32_t seq) {
        uint32_t ahead = seq - base_; // serial arithmetic: wraps naturally
        if (ahead >= 0x80000000u) {
            return Verdict::kDuplicate; // behind the window: delivered long ago
        }
        if (ahead >= bits_.size()) {
            return Verdict::kTooFar;
        }
        size_t slot = (head_ + ahead) % bits_.size();
        if (bits_[slot]) {
            return Verdict::kDuplicate;
        }
        bits_[slot] = true;
        // Slide past every number now received in order.
        while (bits_[head_]) {
            bits_[head_] = false;
            head_ = (head_ + 1) % bits_.size();
            ++base_;
        }
        return Verdict::kNew;
    }

    /// The oldest sequence number not received yet.
    uint32_t next_expected() const { return base_; }

private:
    std::vector<bool> bits_;
    size_t head_ = 0;   ///< slot of base_
    uint32_t base_ = 0;
};

} // namespace roce::btl
