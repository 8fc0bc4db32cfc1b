// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: the small CommMatcher helpers on every
// fast path, defined inline here so that both halves (comm_matcher.cc and
// comm_matcher_recv.cc) get them without a call (those the inline fast paths
// of arrive() and post() need too are in comm_matcher_fast.h). Include only
// from those.
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
