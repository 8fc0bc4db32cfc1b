// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: the (source, tag) -> bucket hash index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace roce::pml::match::detail {

/// Packs a (source, tag) pair into one 64-bit key. Sources are -1 (any) or
/// ranks >= 0, tags any int32, so every pair has a distinct key and source -2
/// never occurs: KeyIndex uses that for its empty slots.
inline constexpr uint64_t pack_key(int32_t source, int32_t tag) noexcept {
    return (static_cast<uint64_t>(static_cast<uint32_t>(source)) << 32) |
           static_cast<uint32_t>(tag);
}

/// Open-addressing hash map from 64-bit keys to V* with linear probing,
/// backward-shift deletion (no tombstones, so probe lengths stay short under
/// churn) and a load factor kept at or below 1/2. Expected O(1)
/// find/insert/erase; it allocates only when it grows or is rebuilt.
/// Not thread-safe.
template <typename V>
class KeyIndex {
public:
    /// Never a valid key: pack_key(-2, 0).
    static constexpr uint64_t kEmpty = pack_key(-2, 0);

    KeyIndex() = default;
    KeyIndex(const KeyIndex &) = delete;
    KeyIndex &operator=(const KeyIndex &) = delete;
    ~KeyIndex() { delete[] slots_; }

    /// The value stored under `key`, or nullptr.
    V *find(uint64_t key) const noexcept {
        if (slots_ == nullptr) {
            return nullptr;
        }
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            const Slot &s = slots_[i];
            if (s.key == key) {
                return s.value;
            }
            if (s.key == kEmpty) {
                return nullptr;
            }
        }
    }

    /// Stores `value` (non-null) under `key`, which must be absent. Returns
    /// false, changing nothing, when growing the table fails.
    bool insert(uint64_t key, V *value) noexcept {
        if ((count_ + 1) * 2 > capacity() &&
            !rehash(capacity() == 0 ? kMinCapacity : capacity() * 2)) {
            return false;
        }
        std::size_t i = home(key);
        while (slots_[i].key != kEmpty) {
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{key, value};
        ++count_;
        return true;
    }

    /// Removes `key`, which must be present. Halves the table when it falls
    /// below 1/8 full (so it returns to a size that fits the entries after a
    /// burst; amortised O(1) thanks to the gap between 1/8 and 1/2).
    void erase(uint64_t key) noexcept {
        std::size_t i = home(key);
        while (slots_[i].key != key) {
            i = (i + 1) & mask_;
        }
        // Backward shift: pull later entries of the probe run into the hole
        // when the hole lies on their probe path (between home and slot).
        std::size_t hole = i;
        for (std::size_t j = (hole + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
            std::size_t h = home(slots_[j].key);
            bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
            if (movable) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = Slot{kEmpty, nullptr};
        --count_;
        if (count_ * 8 < capacity() && capacity() > kMinCapacity) {
            rehash(capacity() / 2); // if that fails the table just stays larger
        }
    }

    std::size_t size() const noexcept { return count_; }
    std::size_t capacity() const noexcept { return slots_ == nullptr ? 0 : mask_ + 1; }

    /// Calls f(key, V*) for every entry; f must not modify the index.
    template <typename F>
    void for_each(F &&f) const {
        for (std::size_t i = 0; i < capacity(); ++i) {
            if (slots_[i].key != kEmpty) {
                f(slots_[i].key, slots_[i].value);
            }
        }
    }

    /// Removes every entry and frees the table.
    void clear() noexcept {
        delete[] slots_;
        slots_ = nullptr;
        mask_ = 0;
        shift_ = 64;
        count_ = 0;
    }

    /// Probe distance of `key` from its home slot, or -1 when absent (tests).
    long probe_distance(uint64_t key) const noexcept {
        if (slots_ == nullptr) {
            return -1;
        }
        long d = 0;
        for (std::size_t i = home(key); slots_[i].key != kEmpty; i = (i + 1) & mask_, ++d) {
            if (slots_[i].key == key) {
                return d;
            }
        }
        return -1;
    }

    static constexpr std::size_t kMinCapacity = 64;

private:
    struct Slot {
        uint64_t key = kEmpty;
        V *value = nullptr;
    };

    // Fibonacci hashing: one multiply by 2^64/phi, keep the top bits. Every
    // bit of source and tag reaches the top bits, and runs of consecutive
    // tags (or sources) land far apart, so neither clusters.
    std::size_t home(uint64_t key) const noexcept {
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
    }

    // Moves every entry into a fresh table of `new_capacity` slots; nothing
    // changes if that cannot be allocated.
    bool rehash(std::size_t new_capacity) noexcept {
        Slot *fresh = new (std::nothrow) Slot[new_capacity];
        if (fresh == nullptr) {
            return false;
        }
        Slot *old = slots_;
        std::size_t old_capacity = capacity();
        slots_ = fresh;
        mask_ = new_capacity - 1;
        shift_ = 64;
        for (std::size_t c = new_capacity; c > 1; c >>= 1) {
            --shift_;
        }
        count_ = 0;
        for (std::size_t i = 0; i < old_capacity; ++i) {
            if (old[i].key == kEmpty) {
                continue;
            }
            std::size_t j = home(old[i].key);
            while (slots_[j].key != kEmpty) {
                j = (j + 1) & mask_;
            }
            slots_[j] = old[i];
            ++count_;
        }
        delete[] old;
        return true;
    }

    Slot *slots_ = nullptr;
    std::size_t mask_ = 0;
    unsigned shift_ = 64; // 64 - log2(capacity)
    std::size_t count_ = 0;
};

} // namespace roce::pml::match::detail
