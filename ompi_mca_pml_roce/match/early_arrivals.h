// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Messages that arrive for a communicator this process has not created yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "match/comm_matcher.h"
#include "match/types.h"
#include "util/status.h"

namespace roce::pml::match {

/// Holds match headers whose context id names no communicator yet (a peer
/// created it first and already sent on it), until the pml's add_comm moves
/// them into the new communicator's CommMatcher. One per process.
///
/// This path is rare, so it uses ordinary containers (it allocates).
///
/// Thread safety: none inside. The pml guards it with one lock, and must hold
/// that lock both around "look up the communicator, and hold the message
/// here if there is none" in the receive path and around "publish the new
/// communicator, then transfer()" in add_comm; otherwise a message can be
/// held after its communicator's transfer has run and stay here forever.
///
/// Ownership: payloads belong to the pml; the store keeps the pointers.
class EarlyArrivals {
public:
    EarlyArrivals() = default;
    EarlyArrivals(const EarlyArrivals &) = delete;
    EarlyArrivals &operator=(const EarlyArrivals &) = delete;

    /// Keeps a message (envelope and the pml's durable payload) for
    /// `context`. No validation happens here: transfer() checks the envelope
    /// against the communicator. kResourceExhausted when out of memory (the
    /// pml still owns the payload).
    util::Status hold(uint32_t context, const Envelope &envelope, void *payload) noexcept;

    /// Moves every message held for `context` into `matcher`, in the order
    /// they arrived, exactly as if they arrived now: each is admitted in
    /// sequence order or held by the matcher for its turn, and becomes
    /// unexpected (the matcher must have no receive posted, which is the case
    /// in add_comm before the communicator is returned to the user;
    /// otherwise nothing moves and the result is a kInternal error).
    /// A message the matcher refuses (source outside the communicator,
    /// duplicate sequence number, no memory) is given to on_rejected with
    /// the verdict and its explanation, so the pml can free its payload and
    /// tell a duplicate from a malformed message; the result then is the
    /// first refusal, explained, after all messages were processed.
    util::Status transfer(
        uint32_t context, CommMatcher &matcher,
        FnRef<void(void *payload, Verdict why, const util::Status &explained)> on_rejected) noexcept;

    /// Messages held for `context`.
    std::size_t count(uint32_t context) const noexcept;
    /// Messages held for all contexts.
    std::size_t size() const noexcept { return total_; }

    /// Forgets everything (finalize), calling release(context, message) for
    /// each held message so the pml can free its payload. Returns the count.
    std::size_t drain(FnRef<void(uint32_t context, const Message &message)> release) noexcept;

private:
    struct Early {
        Envelope envelope;
        void *payload;
    };
    std::unordered_map<uint32_t, std::vector<Early>> by_context_;
    std::size_t total_ = 0;
};

} // namespace roce::pml::match
