// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Value types of the matching engine's API. No MPI types: the pml maps its
// headers and requests onto these (see README.md in this directory).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace roce::pml::match {

/// Wildcard source of a receive or probe. Equal to Open MPI's MPI_ANY_SOURCE
/// (-1); the pml static_asserts that.
inline constexpr int32_t kAnySource = -1;

/// Wildcard tag of a receive or probe. Equal to MPI_ANY_TAG (-1). It matches
/// only tags >= 0: negative tags belong to collectives and are matched only by
/// a receive naming that exact tag. A message may carry any tag but kAnyTag.
inline constexpr int32_t kAnyTag = -1;

/// Per-(communicator, sender) message sequence number as carried on the wire.
/// The sender numbers the messages it sends to one peer on one communicator
/// 0, 1, 2, ... modulo 2^16 (the first message is 0).
using Seq = uint16_t;

/// How far ahead of the next expected sequence number a message may arrive
/// and still be held: a sender must never have more than this many messages
/// to one peer on one communicator in flight beyond the oldest one not yet
/// delivered. A message further ahead is indistinguishable from a duplicate
/// under 16-bit arithmetic and is rejected as one.
inline constexpr uint32_t kMaxReorderDistance = 32767;

/// What the pml reads from an arriving match header (the context id selects
/// the CommMatcher, or EarlyArrivals when the communicator does not exist yet).
struct Envelope {
    int32_t source = 0; ///< sender's rank in the communicator (remote group for intercomms)
    int32_t tag = 0;    ///< any value except kAnyTag
    Seq seq = 0;        ///< the sender's sequence number for (communicator, this receiver)
};

/// Why an operation was refused. Every refusal leaves the engine unchanged and
/// the pml still owns whatever it passed in.
enum class Verdict : uint8_t {
    kOk = 0,
    kBadSource, ///< message source outside [0, size), or receive source outside [-1, size)
    kBadTag,    ///< a message carrying kAnyTag
    kDuplicate, ///< sequence number already seen (behind the expected one, or held twice)
    kNoMemory,  ///< the engine, or the pml's keep callback, could not allocate
    kHasPosted, ///< EarlyArrivals::transfer into a matcher that already has posted receives
};

/// Short stable name of a verdict ("bad source", ...), for messages.
const char *verdict_name(Verdict v) noexcept;

/// A message handed back to the pml: an unexpected message taken by a receive
/// or by improbe, or one found by iprobe (then still owned by the engine).
struct Message {
    int32_t source = 0;
    int32_t tag = 0;
    Seq seq = 0;
    void *payload = nullptr; ///< the pml's descriptor, as returned by its keep callback
};

/// Outcome of CommMatcher::arrive and CommMatcher::next_ready.
enum class ArrivalKind : uint8_t {
    kMatched,  ///< matched the posted receive `request`; the pml delivers the data now
    kQueued,   ///< matched nothing: now an unexpected message (payload kept)
    kHeld,     ///< ahead of its sequence: held until its predecessors arrive (payload kept)
    kNone,     ///< next_ready only: no held message of that source is in order
    kRejected, ///< refused, see `verdict`; nothing changed and keep was not called
};

/// Result of offering one message to a CommMatcher.
struct Arrival {
    ArrivalKind kind = ArrivalKind::kNone;
    Verdict verdict = Verdict::kOk;
    /// True when messages of `message.source` held earlier are now in
    /// sequence: the pml must call next_ready(source) until it returns kNone
    /// (it may drop and retake its lock in between).
    bool more_ready = false;
    /// kMatched: the `request` pointer given to post().
    void *request = nullptr;
    /// The message. For kMatched, `payload` is null when the message matched
    /// as it arrived (keep was never called: the pml uses the data it has in
    /// hand) and is the kept payload when it comes from next_ready (the pml
    /// owns it again).
    Message message;
};

/// Identifies a posted receive for cancel(). Stale handles (receive already
/// matched or cancelled, node reused) are recognised and refused.
struct PostedHandle {
    void *node = nullptr;
    uint32_t generation = 0;
};

/// Outcome of CommMatcher::post.
struct Posting {
    Verdict verdict = Verdict::kOk;
    /// True: `message` was unexpected and is now removed from the engine; the
    /// receive is not posted and the pml owns the payload again.
    bool matched = false;
    Message message;
    /// When posted (verdict ok, not matched): the handle for cancel().
    PostedHandle handle;
};

/// Outcome of iprobe / improbe.
struct Probe {
    Verdict verdict = Verdict::kOk;
    bool found = false;
    Message message; ///< iprobe: still owned by the engine; improbe: removed, the pml owns it
};

/// A non-owning reference to a callable, like a function pointer with state.
/// Cheap to pass by value; the referenced callable must outlive the call.
template <typename Sig>
class FnRef;

template <typename R, typename... Args>
class FnRef<R(Args...)> {
public:
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FnRef> &&
                                                      std::is_invocable_r_v<R, F &, Args...>>>
    FnRef(F &&f) noexcept // NOLINT: implicit by design
        : obj_(const_cast<void *>(static_cast<const void *>(std::addressof(f)))),
          call_([](void *obj, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F> *>(obj))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

private:
    void *obj_;
    R (*call_)(void *, Args...);
};

/// Called by CommMatcher::arrive only when the message must be stored
/// (unexpected or held): returns a durable payload handle owned by the pml
/// (typically a descriptor holding a copy of the data), or nullptr when it
/// cannot allocate one (the arrival is then refused with kNoMemory).
using KeepFn = FnRef<void *()>;

/// Called by CommMatcher::post (the form that takes it) only when the
/// receive must be posted, after everything else that can fail: returns the
/// pml's request (non-null, opaque), or nullptr when it cannot make one (the
/// post is then refused with kNoMemory, nothing changed).
using MakeRequestFn = FnRef<void *()>;

} // namespace roce::pml::match
