// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Request ids for the wire: ACK, FRAG and FIN name a request of the peer
// that receives them. A raw pointer from the network would be trusted
// blindly; an id from this table is checked (slot in range, generation
// equal, slot in use) before the pml touches the request, so a stale,
// duplicated or forged id is refused. Pure C++ (libpml_roce_pure.la).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace roce::pml {

/// Maps 64-bit ids to live objects. An id is (generation << 32) | (slot + 1):
/// never 0, and never equal to an id issued earlier for the same slot until
/// the 32-bit generation wraps (after 2^32 reuses of one slot).
///
/// Thread safety: none inside; the pml serialises calls with one lock.
/// Cost: insert amortised O(1) (the slot vector grows to the peak number of
/// live ids and never shrinks); find and erase O(1).
class HandleTable {
public:
    /// Registers `object` (non-null) and returns its id (never 0); 0 when
    /// out of memory.
    uint64_t insert(void *object) noexcept;

    /// The object registered under `id`, or nullptr when the id is 0, out of
    /// range, stale (erased, or its slot reused) or malformed.
    void *find(uint64_t id) const noexcept;

    /// Removes `id` and returns its object; nullptr (nothing changed) when
    /// find(id) would return nullptr.
    void *erase(uint64_t id) noexcept;

    /// What an id names: a live object, an id this table issued and has
    /// erased since (a late copy of a message for a finished request, or a
    /// forger who guessed an old id), or an id it never issued (0, a slot
    /// never used, a generation not reached yet). After a slot's generation
    /// wraps (2^32 reuses) an erased id may be reported as never issued.
    enum class State : uint8_t { kLive, kClosed, kNever };
    struct Lookup {
        void *object; ///< set when kLive
        State state;
    };
    Lookup lookup(uint64_t id) const noexcept;

    std::size_t live() const noexcept { return live_; }
    std::size_t capacity() const noexcept { return slots_.size(); }

private:
    struct Slot {
        void *object = nullptr;
        uint32_t generation = 1;
        uint32_t next_free = 0; // slot index + 1 of the next free slot; 0: end
    };
    const Slot *slot_of(uint64_t id) const noexcept;

    std::vector<Slot> slots_;
    uint32_t free_head_ = 0; // slot index + 1; 0: no free slot
    std::size_t live_ = 0;
};

} // namespace roce::pml
