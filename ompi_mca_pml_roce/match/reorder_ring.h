// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: messages of one sender held until their turn.
#pragma once

#include <cstdint>

#include "match/types.h"

namespace roce::pml::match::detail {

/// The messages of one (communicator, sender) that arrived ahead of the
/// expected sequence number. A ring indexed by seq modulo its capacity (a
/// power of two, grown on demand up to 2^15 so that every held message, at
/// distance 1..kMaxReorderDistance from the expected one, has its own slot).
/// Insert, lookup and removal are O(1); growth (rare: only when a message
/// arrives further ahead than ever before) is O(capacity). Allocates nothing
/// until the sender's first out-of-order message. Not thread-safe.
class ReorderRing {
public:
    struct Entry {
        void *payload;
        int32_t tag;
        Seq seq;
        bool used;
    };

    ReorderRing() = default;
    ReorderRing(const ReorderRing &) = delete;
    ReorderRing &operator=(const ReorderRing &) = delete;
    ~ReorderRing() { delete[] slots_; }

    uint32_t count() const noexcept { return count_; }
    uint32_t capacity() const noexcept { return capacity_; }

    /// The held entry for `seq`, or nullptr.
    const Entry *find(Seq seq) const noexcept {
        if (count_ == 0) {
            return nullptr;
        }
        const Entry &e = slots_[seq & (capacity_ - 1)];
        return e.used && e.seq == seq ? &e : nullptr;
    }

    /// Makes room for a message `distance` (1..kMaxReorderDistance) ahead of
    /// the expected sequence number. Precondition (kept by CommMatcher): every
    /// held message lies 0..kMaxReorderDistance ahead of the expected one, so
    /// with capacity > distance all of them and the new one have distinct
    /// slots. Returns false, changing nothing, when out of memory.
    bool reserve(uint32_t distance) noexcept;

    /// Holds a message whose slot reserve() made available and that is not
    /// held already.
    void put(Seq seq, int32_t tag, void *payload) noexcept {
        Entry &e = slots_[seq & (capacity_ - 1)];
        e = Entry{payload, tag, seq, true};
        ++count_;
    }

    /// Forgets the held message `seq` (find(seq) must be non-null).
    void remove(Seq seq) noexcept {
        slots_[seq & (capacity_ - 1)].used = false;
        --count_;
    }

    /// Calls f(const Entry&) for every held message, in no particular order.
    template <typename F>
    void for_each(F &&f) const {
        for (uint32_t i = 0; count_ != 0 && i < capacity_; ++i) {
            if (slots_[i].used) {
                f(slots_[i]);
            }
        }
    }

    /// Forgets every held message, keeping the capacity.
    void clear() noexcept;

private:
    Entry *slots_ = nullptr;
    uint32_t capacity_ = 0;
    uint32_t count_ = 0;
};

} // namespace roce::pml::match::detail
