// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The rendezvous bookkeeping of the pml, without MPI types (libpml_roce_pure.la):
// what the receiver does with a FRAG and what the sender does with an ACK
// or FIN, once their headers decoded. The pml calls exactly this code under
// its id lock; tests/unit/test_pml_rndv.cc drives it with random sequences
// of valid, duplicated, reordered, truncated and forged messages.
//
//   receiver: RNDV matched (or RGET falls back) -> FragTable::open -> ACK {id, offset, size}
//             FRAG {id, offset, bytes} -> FragTable::admit -> unpack -> FragTable::settle
//   sender:   RNDV/RGET header sent -> AnswerTable::open (its id goes in the header)
//             ACK / FIN {id, ...} -> AnswerTable::claim_ack / claim_fin
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pml_roce_handles.h"

namespace roce::pml::rndv {

/// What became of a protocol message naming a request. Everything but
/// kAccepted means: drop the message, change nothing.
enum class Outcome : uint8_t {
    kAccepted = 0,  ///< act on it
    kDuplicate,     ///< nothing new: every byte of the FRAG arrived already, or the id
                    ///< was issued before and has been closed (a late copy)
    kUnknown,       ///< the id was never issued (forged or corrupted)
    kWrongState,    ///< the request is live but not waiting for this kind of message
    kOutOfRange,    ///< bytes outside what the request asked for, or outside the message
    kOverlap,       ///< a FRAG that partly overlaps bytes that already arrived
    kTooFragmented, ///< a FRAG that would leave more than kMaxPieces separate ranges
    kNoMemory,      ///< no memory to record the FRAG
};

/// Short stable name of an outcome ("duplicate", ...), for messages.
const char *outcome_name(Outcome o) noexcept;

/// The receiver's accounting of the FRAGs of one receive: the range of
/// message bytes it asked for, [lo, hi), and what arrived of it. Part of
/// the pml's RecvRequest (one per request, reused for each message).
///
/// Thread safety: none; the pml calls it under its id lock.
class FragAccount {
public:
    /// The most separate ranges of arrived bytes tracked beyond the
    /// contiguous start; a FRAG that would need more is refused
    /// (kTooFragmented). An honest sender keeps a handful of FRAGs of one
    /// message in flight (pml_roce_pipeline_depth, 8 by default, at most
    /// 1024), so gaps stay far below this; the cap bounds what a forger
    /// can make a receive store (16 bytes a range).
    static constexpr std::size_t kMaxPieces = 4096;

    /// Starts a message: the FRAGs must bring [lo, hi) (lo < hi). `put`:
    /// the range a split RGET asked the sender to put, which a PUT-FIN may
    /// bring whole (admit_put) or FRAGs piece by piece (the sender's
    /// fallback).
    void open(uint64_t lo, uint64_t hi, void *owner, bool put = false) noexcept;

    /// Checks a FRAG of `len` bytes at `offset` and, when kAccepted,
    /// records its bytes as arrived and the FRAG as being unpacked (call
    /// settle() when done). Never trusts the numbers: an empty FRAG or any
    /// byte outside [lo, hi) is kOutOfRange; bytes that all arrived already
    /// (even while the first copy is still being unpacked) kDuplicate; some
    /// but not all of them kOverlap; nothing is recorded then. O(log p + p)
    /// for p = pieces(), O(1) for FRAGs arriving in order.
    Outcome admit(uint64_t offset, uint64_t len) noexcept;

    /// Checks a PUT-FIN for [offset, offset + len): kAccepted (recorded as
    /// one admitted piece; call settle()) only when this is a put range
    /// (else kWrongState), the PUT-FIN names exactly [lo, hi) (else
    /// kOutOfRange) and none of its bytes arrived (all of them:
    /// kDuplicate, some: kOverlap).
    Outcome admit_put(uint64_t offset, uint64_t len) noexcept;

    /// One admitted FRAG has been unpacked. True exactly once: when every
    /// byte of [lo, hi) arrived exactly once and nothing is being unpacked
    /// any more.
    bool settle() noexcept;

    uint64_t lo() const noexcept { return lo_; }
    uint64_t hi() const noexcept { return hi_; }
    uint64_t arrived() const noexcept { return arrived_; }
    bool complete() const noexcept { return complete_; }
    bool is_put() const noexcept { return put_; }
    /// Separate ranges of arrived bytes beyond the contiguous start.
    std::size_t pieces() const noexcept { return ahead_.size(); }
    void *owner() const noexcept { return owner_; }
    uint64_t id() const noexcept { return id_; }
    /// Calls f(begin, end) for each range of arrived bytes, in order.
    template <typename F>
    void each_range(F &&f) const {
        if (prefix_ > lo_) {
            f(lo_, prefix_);
        }
        for (const Range &r : ahead_) {
            f(r.begin, r.end);
        }
    }

private:
    friend class FragTable;
    struct Range {
        uint64_t begin, end;
    };
    uint64_t lo_ = 0;
    uint64_t hi_ = 0;
    uint64_t prefix_ = 0;      ///< [lo_, prefix_) arrived
    std::vector<Range> ahead_; ///< arrived beyond prefix_: sorted, disjoint, not touching
    uint64_t arrived_ = 0;
    uint32_t unpacking_ = 0;
    bool complete_ = false;
    bool put_ = false;
    void *owner_ = nullptr;
    uint64_t id_ = 0;
};

/// Receives waiting for FRAGs, by the id their ACK told the sender.
///
/// Thread safety: none; the pml serialises calls with its id lock. The
/// FragAccounts are the caller's and must outlive their registration
/// (from open() to the settle() that returns true).
class FragTable {
public:
    /// Opens `a` for [lo, hi) on behalf of `owner` and registers it
    /// (`put`: FragAccount::open). Returns its id for the ACK or PUT (never
    /// 0); 0 when out of memory.
    uint64_t open(FragAccount &a, uint64_t lo, uint64_t hi, void *owner, bool put = false) noexcept;

    struct Admission {
        /// kUnknown: never issued; kDuplicate with no account: closed.
        Outcome outcome;
        /// The live receive the id names (also when its FRAG is refused, to
        /// describe the refusal); nullptr when the id names none.
        FragAccount *account;
    };
    /// Looks the FRAG's id up and admits its bytes (FragAccount::admit).
    /// An id closed before (the receive completed: a late copy) gives
    /// kDuplicate, an id never issued kUnknown; neither touches any
    /// FragAccount, so a FRAG for a finished receive never reaches its
    /// memory.
    Admission admit(uint64_t id, uint64_t offset, uint64_t len) noexcept;

    /// Looks a PUT-FIN's id up and admits it (FragAccount::admit_put);
    /// closed and never-issued ids as for admit().
    Admission admit_put(uint64_t id, uint64_t offset, uint64_t len) noexcept;

    /// FragAccount::settle; when it returns true the id is closed (later
    /// FRAGs naming it are refused) and the receive is the caller's again.
    bool settle(FragAccount &a) noexcept;

    std::size_t live() const noexcept { return ids_.live(); }
    std::size_t capacity() const noexcept { return ids_.capacity(); }

private:
    /// The live account `id` names (outcome kAccepted), or kDuplicate /
    /// kUnknown with no account; shared by admit() and admit_put().
    Admission find(uint64_t id) noexcept;

    HandleTable ids_;
};

/// The sender's protocol state of a send request.
enum class SendPhase : uint8_t {
    kIdle,
    kEagerPending,  ///< waiting for a descriptor to send the eager fragment
    kHeaderPending, ///< waiting for a descriptor to send the RNDV/RGET header
    kWaitAck,       ///< RNDV sent: waiting for the receiver's ACK
    kWaitFin,       ///< RGET sent: waiting for FIN (or a fallback ACK)
    kPipeline,      ///< sending FRAGs for the range an ACK asked for
};

/// SendView::split bits: what a split RGET's receiver has said so far.
enum SplitBits : uint8_t {
    kSplitPut = 0x01, ///< its PUT was accepted
    kSplitFin = 0x02, ///< its answer was accepted: the FIN (kFinSplit) or the ACK (kAckSplit)
};

/// What the answer checks read of a send request.
struct SendView {
    SendPhase phase;
    uint64_t total; ///< packed bytes of the message
    /// The request's SplitBits, which claim_put and claim_fin update (the
    /// caller's id lock serialises them); nullptr: the request cannot split.
    uint8_t *split;
};
/// Reads the view of one of the caller's send requests.
using ViewFn = SendView (*)(const void *request) noexcept;

/// Sends waiting for the receiver's answer (ACK or FIN), by the id their
/// header carried. An answer is accepted at most once: the id is closed by
/// the claim that accepts it.
///
/// Thread safety: none; the pml serialises calls with its id lock.
class AnswerTable {
public:
    explicit AnswerTable(ViewFn view) noexcept : view_(view) {}

    /// Registers a send request; its id (never 0), 0 when out of memory.
    uint64_t open(void *request) noexcept;

    struct Claim {
        Outcome outcome;
        /// The live send the id names (also when its answer is refused, to
        /// describe the refusal); nullptr when none. Accepted: the id is
        /// closed and the request is the caller's.
        void *request;
        /// Accepted PUT or split FIN that is the first of the two: the
        /// request now owes the receiver a put (or its FRAGs).
        bool first_split = false;
    };
    /// An ACK: the receiver wants [offset, offset + size) of the message
    /// (size 0: nothing more, the send is complete). Accepted when the
    /// request waits for an ACK or a FIN (RGET fallback) and the range lies
    /// within the message. An id accepted before (a copy of the answer)
    /// gives kDuplicate, an id never issued kUnknown.
    /// `split` (kAckSplit): the answer of a split RGET whose gets failed,
    /// checked as a split FIN (claim_fin) is.
    Claim claim_ack(uint64_t id, uint64_t offset, uint64_t size, bool split = false) noexcept;
    /// A FIN: the receiver got `size` bytes by RDMA. Accepted when the
    /// request waits for a FIN and `size` is at most the message length;
    /// kDuplicate and kUnknown as for claim_ack. `split` (kFinSplit): the
    /// receiver also sent a PUT; the id stays open until both are
    /// accepted, a second split FIN is kDuplicate, and a plain FIN after
    /// an accepted PUT is kWrongState.
    Claim claim_fin(uint64_t id, uint64_t size, bool split = false) noexcept;
    /// A PUT of a split RGET: the receiver wants [offset, offset + size)
    /// put into its buffer. Accepted once (a second one is kDuplicate),
    /// when the request waits for a FIN and can split (else kWrongState)
    /// and 0 < offset, 0 < size, offset + size <= the message length (else
    /// kOutOfRange). The id stays open until the split FIN is accepted too.
    Claim claim_put(uint64_t id, uint64_t offset, uint64_t size) noexcept;

    std::size_t live() const noexcept { return ids_.live(); }
    std::size_t capacity() const noexcept { return ids_.capacity(); }

private:
    // An accepted answer (ACK or FIN) of request r (view v) under id: a
    // plain one closes the id (refused once the receiver split); a split
    // one sets kSplitFin, once, and closes the id when the PUT came too.
    Claim split_answer(uint64_t id, void *r, const SendView &v, bool split) noexcept;

    ViewFn view_;
    HandleTable ids_;
};

} // namespace roce::pml::rndv
