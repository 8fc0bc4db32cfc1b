// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: the inline fast paths of
// CommMatcher::arrive() and CommMatcher::post(source, tag, request), and the
// helpers they share with the rest of the engine. Included by
// comm_matcher.h only (after the class), so that the pml gets the commonest
// arrival and posting without a call, the Arrival/Posting returned through
// memory and the register saves of the general paths: these were most of
// the engine's instructions per message on the receive-posted path
// (issue 18). Whatever they do not handle they leave, unchanged, to the
// general paths in comm_matcher.cc and comm_matcher_recv.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace roce::pml::match {

// An emptied bucket is not erased at once: the same (source, tag) usually
// comes back soon (ping-pong, halo exchanges, collectives), and then neither
// the index nor the pool is touched. Up to max_idle_buckets empty buckets wait
// on a FIFO; beyond that the oldest is erased, so keys used once (thousands
// of distinct tags) cost one insert and one erase each, and the index stays
// proportional to the keys in use. Eviction is a separate step (trim_idle) so
// that parking one bucket never frees another one a caller still holds.
// The newest parked bucket waits in newest_idle_ rather than at the FIFO's
// tail (it joins the FIFO when another one is parked): a bucket emptied and
// used again at once, the common case, then costs two pointer stores.
inline void CommMatcher::settle(Bucket *b) noexcept {
    if (!b->empty() || b->idle) {
        return;
    }
    b->idle = true;
    ++idle_count_;
    if (newest_idle_ != nullptr) {
        Bucket *n = newest_idle_;
        n->idle_next = nullptr;
        n->idle_prev = idle_tail_;
        (idle_tail_ != nullptr ? idle_tail_->idle_next : idle_head_) = n;
        idle_tail_ = n;
    }
    newest_idle_ = b;
}

inline void CommMatcher::trim_idle() noexcept {
    if (idle_count_ > options_.max_idle_buckets) {
        evict_idle();
    }
}

inline void CommMatcher::unidle(Bucket *b) noexcept {
    if (!b->idle) {
        return;
    }
    b->idle = false;
    --idle_count_;
    if (b == newest_idle_) {
        newest_idle_ = nullptr;
        return;
    }
    (b->idle_prev != nullptr ? b->idle_prev->idle_next : idle_head_) = b->idle_next;
    (b->idle_next != nullptr ? b->idle_next->idle_prev : idle_tail_) = b->idle_prev;
}

inline void CommMatcher::remove_posted(PostedNode *n) noexcept {
    detail::unlink(n);
    if (n->source == kAnySource && n->tag != kAnyTag) {
        --posted_any_source_tag_;
    }
    if (n->bucket != nullptr) {
        settle(n->bucket);
        trim_idle();
        n->bucket = nullptr;
    }
    n->request = nullptr;
    ++n->generation;
    posted_pool_.free(n);
}

// A message that finds its receive posted, in the one case that needs
// neither the reorder ring nor a wildcard list: in sequence with nothing
// held from its sender (so no duplicate, and nothing becomes ready), no
// (kAnySource, t) receive posted anywhere, and for a tag >= 0 no kAnyTag
// receive posted for its sender or for any source (so the head of its
// (source, tag) bucket is the earliest-posted receive that accepts it:
// README.md, "Why the order is right", 3). Exactly what arrive_general()
// does in that case, without the Arrival returned through memory.
[[gnu::always_inline]] inline void *CommMatcher::match_posted(const Envelope &envelope) noexcept {
    // First what a message that waits (nothing posted at all) fails on.
    if (posted_pool_.live() == 0 ||
        static_cast<uint32_t>(envelope.source) >= static_cast<uint32_t>(size_) ||
        envelope.tag == kAnyTag || options_.allow_overtake || posted_any_source_tag_ != 0) {
        return nullptr;
    }
    PeerState *p = peers_[static_cast<std::size_t>(envelope.source)];
    if (p == nullptr || p->expected != envelope.seq || p->held.count() != 0 ||
        (envelope.tag >= 0 &&
         (p->posted_any_tag.head != nullptr || posted_any_any_.head != nullptr))) {
        return nullptr;
    }
    Bucket *kb = index_.find(detail::pack_key(envelope.source, envelope.tag));
    PostedNode *n = kb != nullptr ? kb->posted.head : nullptr;
    if (n == nullptr) {
        return nullptr;
    }
    void *request = n->request;
    remove_posted(n);
    ++stats_.matched_on_arrival;
    ++p->expected;
    return request;
}

[[gnu::always_inline]] inline Arrival CommMatcher::arrive(const Envelope &envelope,
                                                          KeepFn keep) noexcept {
    if (void *request = match_posted(envelope); __builtin_expect(request != nullptr, 1)) {
        Arrival a;
        a.kind = ArrivalKind::kMatched;
        a.request = request;
        a.message = Message{envelope.source, envelope.tag, envelope.seq, nullptr};
        return a;
    }
    return arrive_general(envelope, keep);
}

// A (source, tag) receive, source a rank, whose bucket exists (the key was
// used recently: it may be parked empty) and holds no unexpected message (so
// nothing matches: README.md, "Why the order is right", 3), with a node
// free in the pool. Exactly what post_node() does in that case.
[[gnu::always_inline]] inline bool
CommMatcher::post_fast(int32_t source, int32_t tag, void *request, PostedHandle *handle) noexcept {
    if (static_cast<uint32_t>(source) >= static_cast<uint32_t>(size_) || tag == kAnyTag) {
        return false;
    }
    Bucket *kb = index_.find(detail::pack_key(source, tag));
    if (kb == nullptr || kb->unexpected.head != nullptr) {
        return false;
    }
    PostedNode *n = posted_pool_.alloc();
    if (n == nullptr) {
        return false;
    }
    unidle(kb);
    n->bucket = kb;
    n->request = request;
    n->order = next_order_++;
    n->source = source;
    n->tag = tag;
    detail::push_back(kb->posted, n);
    stats_.peak_posted = std::max(stats_.peak_posted, posted_pool_.live());
    *handle = PostedHandle{n, n->generation};
    return true;
}

[[gnu::always_inline]] inline Posting CommMatcher::post(int32_t source, int32_t tag,
                                                        void *request) noexcept {
    Posting r;
    if (__builtin_expect(post_fast(source, tag, request, &r.handle), 1)) {
        return r;
    }
    return post_general(source, tag, request);
}

} // namespace roce::pml::match
