// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// MPI matching for one communicator: sequence ordering per sender, posted
// receives, unexpected messages, probe/mprobe, cancel. Pure C++ (no MPI or
// verbs types); README.md in this directory has the design and the proofs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "match/key_index.h"
#include "match/node_pool.h"
#include "match/nodes.h"
#include "match/types.h"
#include "util/status.h"

namespace roce::pml::match {

/// Counters for pml_dump and tests.
struct MatcherStats {
    std::size_t posted = 0;      ///< receives posted now
    std::size_t unexpected = 0;  ///< unexpected messages now
    std::size_t held = 0;        ///< messages held for sequence order now
    std::size_t peak_posted = 0; ///< high-water marks since creation
    std::size_t peak_unexpected = 0;
    std::size_t peak_held = 0;
    uint64_t matched_on_arrival = 0; ///< arrivals (incl. next_ready) that matched a posted receive
    uint64_t matched_on_post = 0;    ///< receives that took an unexpected message
    uint64_t out_of_order = 0;       ///< arrivals that had to be held
    uint64_t rejected = 0;           ///< arrivals refused (duplicates, bad envelope, memory)
    std::size_t index_capacity = 0;  ///< slots of the (source, tag) hash index
};

/// Per-communicator settings, fixed when the CommMatcher is created.
struct MatcherOptions {
    /// MPI 4 "mpi_assert_allow_overtaking": admit every message as it
    /// arrives, ignoring sequence numbers (nothing is ever held).
    bool allow_overtake = false;
    /// Empty (source, tag) buckets kept for reuse before the oldest is
    /// erased from the index. Keys used again soon then cost no index
    /// update; each kept bucket costs 72 bytes plus 32-64 bytes of index.
    std::size_t max_idle_buckets = 1024;
};

/// The matching state of one communicator on the receiving side.
///
/// Semantics (MPI 3.1 sec. 3.5 and 3.8): messages from one sender are
/// admitted in sequence-number order, whatever order they arrive in; an
/// admitted message matches the earliest-posted receive that accepts it,
/// across specific, ANY_SOURCE and ANY_TAG receives alike; a new receive,
/// probe or mprobe finds the earliest-admitted unexpected message it accepts;
/// kAnyTag never accepts a negative (collective) tag.
///
/// Cost: every operation is O(1) expected time (hash lookups and list heads),
/// independent of how many receives are posted or messages are unexpected,
/// for every mix of wildcards; see README.md for the case-by-case argument.
/// No allocation on the fast path: nodes come from pools that only grow to
/// the peak number in use.
///
/// Thread safety: none inside. Every call on one CommMatcher must be
/// serialised by the caller (the pml holds one lock per communicator around
/// each call, and around a keep callback's work, which runs inside arrive).
/// Distinct CommMatchers are independent and may be used concurrently.
///
/// Ownership: the engine stores the pml's `request` and `payload` pointers
/// but never dereferences, frees or copies what they point to. Pointers the
/// engine hands back (matched requests, taken payloads) belong to the pml
/// again. Before destruction the pml calls drain() to get back what is left;
/// the destructor itself does not call the pml.
class CommMatcher {
public:
    using Options = MatcherOptions;

    /// A matcher for a communicator whose (remote) group has `size` ranks
    /// (1..INT32_MAX). kInvalidArgument for a bad size, kResourceExhausted
    /// when the per-rank table cannot be allocated (8 bytes per rank; the
    /// per-sender state is created on first use).
    static util::Result<std::unique_ptr<CommMatcher>> create(int32_t size,
                                                             Options options) noexcept;
    static util::Result<std::unique_ptr<CommMatcher>> create(int32_t size) noexcept {
        return create(size, Options());
    }

    /// As create(), but throws std::bad_alloc; `size` must be >= 1.
    explicit CommMatcher(int32_t size, Options options = Options());
    ~CommMatcher();
    CommMatcher(const CommMatcher &) = delete;
    CommMatcher &operator=(const CommMatcher &) = delete;

    /// Offers a message that just arrived (its match header's envelope).
    ///  - in sequence: matched against the posted receives -> kMatched with
    ///    the earliest-posted receive that accepts it (keep is not called; the
    ///    pml delivers from the data in hand), or kQueued as unexpected after
    ///    calling keep() once to get a durable payload;
    ///  - ahead of sequence (by up to kMaxReorderDistance): keep() is called
    ///    and the message is kHeld until its predecessors arrive;
    ///  - refused (kRejected, keep not called, nothing changed): source not in
    ///    [0, size) (kBadSource), tag == kAnyTag (kBadTag), sequence number
    ///    already seen (kDuplicate), no memory in the engine or keep() returned
    ///    nullptr (kNoMemory: the same message may be offered again later).
    /// When `more_ready` is set the pml must call next_ready(source).
    /// O(1) expected; O(distance) once when a sender gets further ahead than
    /// ever before (the reorder ring grows).
    /// Inline: the commonest arrival (in sequence, nothing held from its
    /// sender, no wildcard receive that could be earlier, a receive posted
    /// for exactly its (source, tag)) is matched without a call.
    Arrival arrive(const Envelope &envelope, KeepFn keep) noexcept;

    /// Admits the next held message of `source` if it is now in sequence:
    /// kMatched (payload is the kept one, the pml owns it again), kQueued, or
    /// kNone when there is none; kRejected only for a bad source or kNoMemory
    /// (the message stays held; call again later). Sets more_ready as
    /// arrive() does. O(1) expected.
    Arrival next_ready(int32_t source) noexcept;

    /// Posts a receive for (source, tag), where source is a rank, or
    /// kAnySource, and tag is any value, kAnyTag meaning any tag >= 0.
    /// If an unexpected message matches, the earliest admitted one is removed
    /// and returned (matched = true) and nothing is posted. Otherwise the
    /// receive is posted with `request` (non-null, opaque) and `handle`
    /// identifies it for cancel(). kBadSource for a source outside
    /// [-1, size); kNoMemory when a node cannot be allocated (nothing
    /// changed). O(1) expected. Inline: a (source, tag) receive whose
    /// bucket exists and holds no unexpected message is posted without a
    /// call.
    Posting post(int32_t source, int32_t tag, void *request) noexcept;

    /// As post(), but the request is made only if it is needed: when an
    /// unexpected message matches, it is taken and make_request is never
    /// called (a blocking receive that finds its message needs no request);
    /// otherwise make_request is called once, after everything else that can
    /// fail, and the request it returns is posted (kNoMemory, nothing
    /// changed, when it returns nullptr). It runs inside the call, under the
    /// caller's lock, and must not call the matcher. O(1) expected.
    Posting post(int32_t source, int32_t tag, MakeRequestFn make_request) noexcept;

    /// Removes a posted receive that has not matched. Returns true if it was
    /// removed; false if the handle is stale (the receive already matched or
    /// was cancelled). O(1).
    bool cancel(PostedHandle handle) noexcept;

    /// MPI_Iprobe: the unexpected message a receive (source, tag) posted now
    /// would take, left in place (found = false when none). Messages held for
    /// sequence order are not visible yet. kBadSource as for post();
    /// kNoMemory when the wildcard's index cannot be built (below). O(1)
    /// expected.
    ///
    /// Wildcard indexes (post, iprobe, improbe): the lists that find the
    /// earliest unexpected message for (kAnySource, tag) and for kAnyTag
    /// receives are built the first time the communicator is asked for such
    /// a receive or probe, from the messages then unexpected (sorted by
    /// admission: O(u log u + index capacity), once per communicator), and
    /// kept from then on; until then arrivals and receives without wildcards
    /// do not pay for them.
    Probe iprobe(int32_t source, int32_t tag) noexcept;

    /// MPI_Improbe: as iprobe(), but removes the message; the pml owns its
    /// payload again and receives from it later (MPI_Mrecv). O(1) expected.
    Probe improbe(int32_t source, int32_t tag) noexcept;

    /// Empties the matcher (for del_comm or finalize): calls on_request for
    /// every posted receive and on_message for every unexpected and every
    /// held message (in no particular order), so the pml can release them.
    /// Returns how many callbacks were made. Meant for teardown: sequence
    /// numbers are kept as they are, so a drained matcher expects the same
    /// next message from each sender as before. O(size + index capacity).
    std::size_t drain(FnRef<void(void *request)> on_request,
                      FnRef<void(const Message &message)> on_message) noexcept;

    int32_t size() const noexcept { return size_; }
    bool allow_overtake() const noexcept { return options_.allow_overtake; }
    std::size_t posted_count() const noexcept { return posted_pool_.live(); }
    std::size_t unexpected_count() const noexcept { return unex_pool_.live(); }
    std::size_t held_count() const noexcept { return held_count_; }
    MatcherStats stats() const noexcept;

private:
    friend class CommMatcherTestPeer;
    using PostedNode = detail::PostedNode;
    using UnexNode = detail::UnexNode;
    using Bucket = detail::Bucket;
    using PeerState = detail::PeerState;

    // The inline fast paths of arrive() and post(request)
    // (comm_matcher_fast.h): nullptr / false, with nothing changed, when the
    // case is not theirs; the general paths below then handle it.
    void *match_posted(const Envelope &envelope) noexcept;
    bool post_fast(int32_t source, int32_t tag, void *request, PostedHandle *handle) noexcept;
    Arrival arrive_general(const Envelope &envelope, KeepFn keep) noexcept;
    Posting post_general(int32_t source, int32_t tag, void *request) noexcept;

    // Helpers; the small ones are inline in comm_matcher_fast.h (those on
    // the inline fast paths) and comm_matcher_inl.h.
    PeerState *peer(int32_t source) noexcept; // creates on first use; nullptr: no memory
    PeerState *make_peer(int32_t source) noexcept;
    Bucket *bucket(int32_t source, int32_t tag) noexcept; // find or create; nullptr: no memory
    Bucket *make_bucket(uint64_t key) noexcept;
    void settle(Bucket *b) noexcept; // after removing from b: park it if empty
    void unidle(Bucket *b) noexcept; // before adding to b: take it off the FIFO
    void trim_idle() noexcept;       // erase the oldest parked buckets beyond the limit
    void evict_idle() noexcept;

    // The fast paths are forced inline into their one or two callers: the
    // calls and register saves would otherwise be a third of the cost.
    [[gnu::always_inline]] void admit(PeerState *p, const Envelope &envelope, void *payload,
                                      KeepFn *keep, Arrival &a) noexcept;
    PostedNode *first_posted_for(const PeerState *p, int32_t tag,
                                 const Bucket *key_bucket) const noexcept;
    UnexNode *first_unexpected_for(int32_t source, int32_t tag) const noexcept;
    // Builds the wildcard lists a (source, tag) lookup needs if they are not
    // kept yet; false (nothing changed) when out of memory.
    bool wildcard_lists(int32_t source, int32_t tag) noexcept {
        return (source != kAnySource || tag == kAnyTag || tag_lists_) &&
                       (tag != kAnyTag || source_lists_)
                   ? true
                   : build_lists(source, tag);
    }
    bool build_lists(int32_t source, int32_t tag) noexcept;
    void remove_posted(PostedNode *n) noexcept;
    [[gnu::always_inline]] Message take_unexpected(UnexNode *u) noexcept;
    [[gnu::always_inline]] UnexNode *enqueue_unexpected(PeerState *p, const Envelope &envelope,
                                                        Bucket *key_bucket, void *payload,
                                                        KeepFn *keep) noexcept;
    [[gnu::always_inline]] bool post_node(int32_t source, int32_t tag, Bucket *key_bucket,
                                          void *request, MakeRequestFn *make,
                                          PostedHandle *handle) noexcept;
    [[gnu::always_inline]] Posting post_impl(int32_t source, int32_t tag, void *request,
                                             MakeRequestFn *make) noexcept;
    void set_more_ready(const PeerState *p, Arrival &a) const noexcept;
    Arrival rejected(const Envelope &envelope, Verdict why) noexcept;

    int32_t size_;
    Options options_;
    uint64_t next_order_ = 0;
    std::size_t posted_any_source_tag_ = 0; // posted (kAnySource, t >= or < 0) receives
    std::size_t held_count_ = 0;
    detail::PostedList posted_any_any_; // posted (kAnySource, kAnyTag) receives
    detail::UnexList unexpected_all_;   // unexpected with tag >= 0 from anyone (kByAll)
    uint64_t next_admitted_ = 0;        // admission stamp of the next unexpected message
    bool tag_lists_ = false;    // kByTag lists kept (a (kAnySource, t) lookup happened)
    bool source_lists_ = false; // kBySource and kByAll lists kept (a kAnyTag lookup happened)
    detail::KeyIndex<Bucket> index_;
    Bucket *idle_head_ = nullptr; // FIFO of empty buckets, oldest first
    Bucket *idle_tail_ = nullptr;
    Bucket *newest_idle_ = nullptr; // the newest empty bucket, after the FIFO's tail
    std::size_t idle_count_ = 0;    // FIFO + newest_idle_
    std::vector<PeerState *> peers_; // by source rank; nullptr until first use
    detail::NodePool<PostedNode, &PostedNode::next> posted_pool_;
    detail::NodePool<UnexNode, &UnexNode::pool_next> unex_pool_;
    detail::NodePool<Bucket, &Bucket::pool_next> bucket_pool_;
    detail::NodePool<PeerState, &PeerState::pool_next> peer_pool_;
    MatcherStats stats_;
};

/// Describes a refusal with its context for logs and error returns, e.g.
/// "match header from source 9 (tag 3, seq 12) on context 4: bad source
/// (communicator size 4)". kOk gives an ok Status.
util::Status explain(Verdict verdict, const Envelope &envelope, uint32_t context,
                     int32_t comm_size);

} // namespace roce::pml::match

#include "match/comm_matcher_fast.h"
