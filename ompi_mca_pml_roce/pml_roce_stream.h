// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The receiver's bookkeeping of streamed messages (a RNDV with
// wire::kRndvStream, then STREAM fragments sent without waiting for an
// ACK), without MPI types (libpml_roce_pure.la). The pml calls it under its
// id lock; tests/unit/test_pml_stream.cc drives it with reordered,
// duplicated, truncated and forged pieces.
//
// A message is known by its key (the receiver's communicator index, the
// sender's rank, the sender's id). Its pieces may come before its RNDV
// (the btl spreads fragments over paths) and its RNDV may wait unexpected
// until a receive matches it, so a message has one of two homes:
//   staged: no receive yet; pieces are copied into a buffer of msg_len
//           bytes that the table owns (stage());
//   bound:  a receive matched the RNDV (bind()); staged bytes were copied
//           to it and every later piece goes straight to it.
// Each byte is accepted once (FragAccount over [0, msg_len)); when all
// msg_len bytes of a bound message arrived, the message is closed: its key
// is forgotten and remembered among the last kClosedMemory closed keys, so
// that a late copy of a piece is a duplicate, not a new message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pml_roce_rndv.h"

namespace roce::pml::rndv {

/// Names a streamed message at the receiver.
struct StreamKey {
    uint32_t ctx; ///< the receiver's index of the communicator
    int32_t src;  ///< the sender's rank in it
    uint64_t id;  ///< the sender's id of the message (RNDV src_req)
    bool operator==(const StreamKey &o) const noexcept {
        return ctx == o.ctx && src == o.src && id == o.id;
    }
};

/// The streamed messages a receiver is assembling.
///
/// Thread safety: none; the pml serialises calls with its id lock.
class StreamTable {
public:
    /// Messages with no receive yet that may be staged at once; a piece
    /// that would start one more is refused (kNoMemory). Bounds what
    /// forged keys can make a receiver hold (at most this many buffers of
    /// at most wire::kMaxStream bytes).
    static constexpr std::size_t kMaxStaged = 4096;
    /// Closed keys remembered to recognise late copies.
    static constexpr std::size_t kClosedMemory = 1024;

    /// Where the bytes of an accepted piece go.
    struct Piece {
        Outcome outcome;
        /// Bound: the receive (the caller unpacks the bytes into it, then
        /// calls settle()). Staged: nullptr, and `stage` is where the caller
        /// copies the bytes (before settle(), under the same lock).
        void *owner;
        uint8_t *stage;
        uint64_t msg_len; ///< the message's length (for describing a refusal)
        uint64_t arrived; ///< bytes of it that arrived before this piece
    };
    /// A STREAM fragment: `len` bytes at `offset` of a `msg_len`-byte
    /// message. Refused: a length that differs from the one the message
    /// was first seen with, or bytes outside it (kOutOfRange); bytes that
    /// all arrived (kDuplicate, also for a closed message); partly
    /// arrived bytes (kOverlap); too many staged messages or no memory
    /// (kNoMemory). Nothing changes when refused.
    Piece piece(const StreamKey &k, uint64_t msg_len, uint64_t offset, uint64_t len) noexcept;

    /// One accepted piece (or bind()'s own bytes) has been copied. True
    /// exactly once per message: when it is bound and every byte arrived;
    /// the message is then closed and *owner set to its receive.
    bool settle(const StreamKey &k, void **owner) noexcept;

    /// What bind() found.
    struct Binding {
        Outcome outcome;
        /// Staged bytes to copy into the receive (under the same lock):
        /// ranges of `stage`, none of them inside [0, first).
        const uint8_t *stage;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;
    };
    /// The RNDV of the message matched `owner`, bringing its first
    /// `first` bytes (copied by the caller, who then calls settle() once,
    /// also when first == 0). Refused: a message already bound
    /// (kDuplicate), another length (kOutOfRange), staged bytes inside
    /// [0, first) (kOverlap); kNoMemory.
    Binding bind(const StreamKey &k, uint64_t msg_len, uint64_t first, void *owner) noexcept;

    /// The staged buffer of a message, once bind() handed its ranges over,
    /// is no longer needed: frees it.
    void drop_stage(const StreamKey &k) noexcept;

    std::size_t live() const noexcept { return map_.size(); }
    std::size_t staged() const noexcept { return staged_; }
    /// Bytes of staging buffers held.
    uint64_t staged_bytes() const noexcept { return staged_bytes_; }
    /// Forgets everything (finalize); returns the messages that were live.
    std::size_t clear() noexcept;

private:
    struct Hash {
        std::size_t operator()(const StreamKey &k) const noexcept {
            uint64_t h = k.id * 0x9e3779b97f4a7c15ull;
            h ^= (uint64_t{k.ctx} << 32 | static_cast<uint32_t>(k.src)) + 0x632be59bd9b4e019ull +
                 (h << 6) + (h >> 2);
            return static_cast<std::size_t>(h);
        }
    };
    struct Entry {
        uint64_t msg_len = 0;
        FragAccount acct;
        std::unique_ptr<uint8_t[]> stage;
        void *owner = nullptr;
    };
    using Map = std::unordered_map<StreamKey, Entry, Hash>;
    /// A new entry for `k` whose first bytes are [offset, offset + len) of
    /// a msg_len-byte message, with a staging buffer when `stage` (the cap
    /// kMaxStaged applies then); counted staged until bind() binds it.
    /// kDuplicate for a closed key, kOutOfRange for bytes outside the
    /// message, kNoMemory.
    Outcome create(const StreamKey &k, uint64_t msg_len, uint64_t offset, uint64_t len,
                   bool stage, Map::iterator &it) noexcept;
    bool closed(const StreamKey &k) const noexcept;
    void close(const StreamKey &k) noexcept;
    void free_stage(Entry &e) noexcept;

    Map map_;
    std::size_t staged_ = 0; ///< entries without an owner
    uint64_t staged_bytes_ = 0;
    std::vector<StreamKey> closed_; ///< ring of the last kClosedMemory closed keys
    std::size_t closed_next_ = 0;
};

} // namespace roce::pml::rndv
