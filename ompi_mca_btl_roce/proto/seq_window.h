// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
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
        : words_(word_count(span), 0), mask_(static_cast<uint32_t>(words_.size() * 64 - 1)),
          span_(span), base_(start) {}

    enum class Verdict { kNew, kDuplicate, kTooFar };

    Verdict accept(uint32_t seq) {
        uint32_t ahead = seq - base_; // serial arithmetic: wraps naturally
        if (ahead >= 0x80000000u) {
            return Verdict::kDuplicate; // behind the window: delivered long ago
        }
        if (ahead >= span_) {
            return Verdict::kTooFar;
        }
        if (ahead == 0) {
            // In order, the common case: base_'s bit is never set (the window
            // slides past every received number at once).
            ++base_;
            slide();
            return Verdict::kNew;
        }
        uint64_t &word = words_[(seq & mask_) >> 6];
        uint64_t bit = uint64_t{1} << (seq & 63);
        if ((word & bit) != 0) {
            return Verdict::kDuplicate;
        }
        word |= bit;
        return Verdict::kNew;
    }

    /// The oldest sequence number not received yet.
    uint32_t next_expected() const { return base_; }

private:
    // Bit (n & mask_) stands for number n: the bitmap holds a power of two
    // of bits, at least span_, so it divides 2^32 (the numbering wraps
    // consistently) and two numbers of the window never share a bit.
    static size_t word_count(uint32_t span) {
        size_t words = 1;
        while (words * 64 < span) {
            words *= 2;
        }
        return words;
    }
    /// Moves base_ past every number received beyond it, clearing their bits.
    void slide() {
        for (;;) {
            uint64_t &word = words_[(base_ & mask_) >> 6];
            uint64_t bit = uint64_t{1} << (base_ & 63);
            if ((word & bit) == 0) {
                return;
            }
            word &= ~bit;
            ++base_;
        }
    }

    std::vector<uint64_t> words_; ///< received numbers beyond base_
    uint32_t mask_;
    uint32_t span_;
    uint32_t base_;
};

} // namespace roce::btl
