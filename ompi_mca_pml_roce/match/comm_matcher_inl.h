// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: the small CommMatcher helpers on every
// fast path, defined inline here so that both halves (comm_matcher.cc and
// comm_matcher_recv.cc) get them without a call. Include only from those.
#pragma once

#include <algorithm>

#include "match/comm_matcher.h"

namespace roce::pml::match {

inline CommMatcher::PeerState *CommMatcher::peer(int32_t source) noexcept {
    PeerState *p = peers_[static_cast<std::size_t>(source)];
    return p != nullptr ? p : make_peer(source);
}

inline CommMatcher::Bucket *CommMatcher::bucket(int32_t source, int32_t tag) noexcept {
    uint64_t key = detail::pack_key(source, tag);
    Bucket *b = index_.find(key);
    return b != nullptr ? b : make_bucket(key);
}

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

inline void CommMatcher::set_more_ready(const PeerState *p, Arrival &a) const noexcept {
    a.more_ready = p->held.find(p->expected) != nullptr;
}

// The posted receives that can accept a message (source, tag) are exactly the
// heads of four FIFOs, one per receive kind; the earliest posted wins.
inline CommMatcher::PostedNode *
CommMatcher::first_posted_for(const PeerState *p, int32_t tag,
                              const Bucket *key_bucket) const noexcept {
    PostedNode *best = key_bucket != nullptr ? key_bucket->posted.head : nullptr;
    auto consider = [&best](PostedNode *n) {
        if (n != nullptr && (best == nullptr || n->order < best->order)) {
            best = n;
        }
    };
    if (posted_any_source_tag_ != 0) {
        if (const Bucket *tb = index_.find(detail::pack_key(kAnySource, tag))) {
            consider(tb->posted.head);
        }
    }
    if (tag >= 0) {
        consider(p->posted_any_tag.head);
        consider(posted_any_any_.head);
    }
    return best;
}

// Each receive kind has one FIFO holding exactly the unexpected messages it
// accepts, in admission order: its head is the answer.
inline CommMatcher::UnexNode *CommMatcher::first_unexpected_for(int32_t source,
                                                                int32_t tag) const noexcept {
    if (source == kAnySource) {
        if (tag == kAnyTag) {
            return unexpected_all_.head;
        }
        const Bucket *tb = index_.find(detail::pack_key(kAnySource, tag));
        return tb != nullptr ? tb->unexpected.head : nullptr;
    }
    if (tag == kAnyTag) {
        const PeerState *p = peers_[static_cast<std::size_t>(source)];
        return p != nullptr ? p->unexpected.head : nullptr;
    }
    const Bucket *kb = index_.find(detail::pack_key(source, tag));
    return kb != nullptr ? kb->unexpected.head : nullptr;
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

inline Message CommMatcher::take_unexpected(UnexNode *u) noexcept {
    using detail::unlink;
    unlink<detail::kByKey>(u->key_bucket->unexpected, u);
    if (tag_lists_) {
        unlink<detail::kByTag>(u->tag_bucket->unexpected, u);
        settle(u->tag_bucket);
    }
    if (source_lists_ && u->tag >= 0) {
        unlink<detail::kBySource>(u->peer->unexpected, u);
        unlink<detail::kByAll>(unexpected_all_, u);
    }
    settle(u->key_bucket);
    trim_idle();
    Message m{u->source, u->tag, u->seq, u->payload};
    unex_pool_.free(u);
    return m;
}

} // namespace roce::pml::match
