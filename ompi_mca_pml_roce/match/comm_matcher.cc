// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "match/comm_matcher.h"
#include "match/comm_matcher_inl.h"

#include <algorithm>
#include <cassert>
#include <new>
#include <string>

namespace roce::pml::match {

using namespace detail;

const char *verdict_name(Verdict v) noexcept {
    switch (v) {
    case Verdict::kOk:
        return "ok";
    case Verdict::kBadSource:
        return "bad source";
    case Verdict::kBadTag:
        return "bad tag";
    case Verdict::kDuplicate:
        return "duplicate sequence number";
    case Verdict::kNoMemory:
        return "out of memory";
    case Verdict::kHasPosted:
        return "receives already posted";
    }
    return "unknown";
}

util::Result<std::unique_ptr<CommMatcher>> CommMatcher::create(int32_t size,
                                                               Options options) noexcept {
    try {
        if (size < 1) {
            return util::Status(util::Code::kInvalidArgument,
                                "communicator size " + std::to_string(size) +
                                    " is invalid for a matcher: allowed values are 1..2147483647");
        }
        return std::make_unique<CommMatcher>(size, options);
    } catch (const std::bad_alloc &) {
        return util::Status(util::Code::kResourceExhausted,
                            "no memory for the matcher of a communicator of " +
                                std::to_string(size) + " ranks");
    }
}

CommMatcher::CommMatcher(int32_t size, Options options)
    : size_(size), options_(options), peers_(static_cast<std::size_t>(size), nullptr) {
    assert(size >= 1);
}

CommMatcher::~CommMatcher() = default;

// Peers are never returned to the pool, so a node is always fresh
// (value-initialised: expected 0, empty lists, no ring).
CommMatcher::PeerState *CommMatcher::make_peer(int32_t source) noexcept {
    PeerState *p = peer_pool_.alloc();
    peers_[static_cast<std::size_t>(source)] = p;
    return p;
}

CommMatcher::Bucket *CommMatcher::make_bucket(uint64_t key) noexcept {
    Bucket *b = bucket_pool_.alloc();
    if (b == nullptr) {
        return nullptr;
    }
    b->key = key;
    b->posted = PostedList();
    b->unexpected = UnexList();
    b->idle = false;
    if (!index_.insert(key, b)) {
        bucket_pool_.free(b);
        return nullptr;
    }
    return b;
}

void CommMatcher::evict_idle() noexcept {
    while (idle_count_ > options_.max_idle_buckets) {
        Bucket *old = idle_head_ != nullptr ? idle_head_ : newest_idle_;
        unidle(old);
        index_.erase(old->key);
        bucket_pool_.free(old);
    }
}

Arrival CommMatcher::rejected(const Envelope &envelope, Verdict why) noexcept {
    ++stats_.rejected;
    Arrival a;
    a.kind = ArrivalKind::kRejected;
    a.verdict = why;
    a.message = Message{envelope.source, envelope.tag, envelope.seq, nullptr};
    return a;
}

// Everything that can fail (node, buckets, the pml's keep) comes before the
// first list is touched, so a failure leaves the matcher as it was.
inline CommMatcher::UnexNode *CommMatcher::enqueue_unexpected(PeerState *p, const Envelope &envelope,
                                                       Bucket *kb, void *payload,
                                                       KeepFn *keep) noexcept {
    UnexNode *u = unex_pool_.alloc();
    if (u == nullptr) {
        return nullptr;
    }
    // Making buckets never erases one (only settle() does), so kb stays valid.
    if (kb == nullptr && (kb = bucket(envelope.source, envelope.tag)) == nullptr) {
        unex_pool_.free(u);
        return nullptr;
    }
    Bucket *tb = nullptr;
    if ((tag_lists_ && (tb = bucket(kAnySource, envelope.tag)) == nullptr) ||
        (payload == nullptr && (payload = (*keep)()) == nullptr)) {
        unex_pool_.free(u);
        settle(kb); // a fresh bucket must not stay empty off the FIFO
        if (tb != nullptr) {
            settle(tb);
        }
        trim_idle();
        return nullptr;
    }
    unidle(kb);
    u->key_bucket = kb;
    u->tag_bucket = tb;
    u->peer = p;
    u->payload = payload;
    u->source = envelope.source;
    u->tag = envelope.tag;
    u->seq = envelope.seq;
    push_back<kByKey>(kb->unexpected, u);
    if (tb != nullptr) {
        unidle(tb);
        push_back<kByTag>(tb->unexpected, u);
    }
    if (source_lists_ && envelope.tag >= 0) {
        push_back<kBySource>(p->unexpected, u);
        push_back<kByAll>(unexpected_all_, u);
    }
    u->admitted = next_admitted_++;
    stats_.peak_unexpected = std::max(stats_.peak_unexpected, unex_pool_.live());
    return u;
}

// Matches an admitted (in-sequence) message, or queues it as unexpected.
// Inline: it is the body of both arrive() and next_ready().
inline void CommMatcher::admit(PeerState *p, const Envelope &envelope, void *payload, KeepFn *keep,
                               Arrival &a) noexcept {
    Bucket *kb = index_.find(pack_key(envelope.source, envelope.tag));
    // Nothing posted at all (the common case for a message that waits): no
    // receive list to look at.
    if (PostedNode *n = posted_pool_.live() == 0 ? nullptr : first_posted_for(p, envelope.tag, kb)) {
        a.kind = ArrivalKind::kMatched;
        a.request = n->request;
        a.message = Message{envelope.source, envelope.tag, envelope.seq, payload};
        remove_posted(n);
        ++stats_.matched_on_arrival;
        return;
    }
    UnexNode *u = enqueue_unexpected(p, envelope, kb, payload, keep);
    if (u == nullptr) {
        a = rejected(envelope, Verdict::kNoMemory);
        return;
    }
    a.kind = ArrivalKind::kQueued;
    a.message = Message{envelope.source, envelope.tag, envelope.seq, u->payload};
}

Arrival CommMatcher::arrive_general(const Envelope &envelope, KeepFn keep) noexcept {
    if (envelope.source < 0 || envelope.source >= size_) {
        return rejected(envelope, Verdict::kBadSource);
    }
    if (envelope.tag == kAnyTag) {
        return rejected(envelope, Verdict::kBadTag);
    }
    PeerState *p = peer(envelope.source);
    if (p == nullptr) {
        return rejected(envelope, Verdict::kNoMemory);
    }
    if (!options_.allow_overtake) {
        // Serial-number arithmetic: the distance ahead of the expected
        // sequence number modulo 2^16; "behind" shows up as > 2^15.
        uint32_t distance = static_cast<Seq>(envelope.seq - p->expected);
        if (distance > kMaxReorderDistance || p->held.find(envelope.seq) != nullptr) {
            return rejected(envelope, Verdict::kDuplicate);
        }
        if (distance != 0) {
            if (!p->held.reserve(distance)) {
                return rejected(envelope, Verdict::kNoMemory);
            }
            void *payload = keep();
            if (payload == nullptr) {
                return rejected(envelope, Verdict::kNoMemory);
            }
            p->held.put(envelope.seq, envelope.tag, payload);
            ++held_count_;
            ++stats_.out_of_order;
            stats_.peak_held = std::max(stats_.peak_held, held_count_);
            Arrival a;
            a.kind = ArrivalKind::kHeld;
            a.message = Message{envelope.source, envelope.tag, envelope.seq, payload};
            // Normally false; true when an earlier next_ready() failed for
            // memory and left the expected message ready but undelivered.
            set_more_ready(p, a);
            return a;
        }
    }
    Arrival a;
    admit(p, envelope, nullptr, &keep, a);
    if (a.kind != ArrivalKind::kRejected && !options_.allow_overtake) {
        ++p->expected;
        set_more_ready(p, a);
    }
    return a;
}

Arrival CommMatcher::next_ready(int32_t source) noexcept {
    Arrival none;
    if (source < 0 || source >= size_) {
        return rejected(Envelope{source, 0, 0}, Verdict::kBadSource);
    }
    PeerState *p = peers_[static_cast<std::size_t>(source)];
    const ReorderRing::Entry *e = p == nullptr ? nullptr : p->held.find(p->expected);
    if (e == nullptr) {
        none.message.source = source;
        return none;
    }
    Envelope envelope{source, e->tag, e->seq};
    Arrival a;
    admit(p, envelope, e->payload, nullptr, a);
    if (a.kind == ArrivalKind::kRejected) {
        return a; // stays held; a later call retries
    }
    p->held.remove(envelope.seq);
    --held_count_;
    ++p->expected;
    set_more_ready(p, a);
    return a;
}

// The first (kAnySource, tag) or kAnyTag lookup on this communicator: the
// lists it needs are built from every unexpected message (each is on its
// (source, tag) bucket) sorted by admission stamp, so each new list is in
// admission order as if it had been kept all along. O(u log u + index
// capacity), once per communicator. What can fail (the sort's array, the
// buckets) comes first: then the buckets made are parked again and nothing
// else changed.
bool CommMatcher::build_lists(int32_t source, int32_t tag) noexcept {
    const bool tags = source == kAnySource && tag != kAnyTag && !tag_lists_;
    const bool sources = tag == kAnyTag && !source_lists_;
    std::vector<UnexNode *> all;
    try {
        all.reserve(unex_pool_.live());
    } catch (...) {
        return false;
    }
    index_.for_each([&all](uint64_t key, Bucket *b) {
        if (static_cast<int32_t>(key >> 32) != kAnySource) {
            for (UnexNode *u = b->unexpected.head; u != nullptr; u = u->link[kByKey].next) {
                all.push_back(u); // within the reserved size
            }
        }
    });
    std::sort(all.begin(), all.end(),
              [](const UnexNode *a, const UnexNode *b) { return a->admitted < b->admitted; });
    if (tags) {
        for (std::size_t i = 0; i < all.size(); ++i) {
            if ((all[i]->tag_bucket = bucket(kAnySource, all[i]->tag)) == nullptr) {
                for (std::size_t k = 0; k < i; ++k) {
                    settle(all[k]->tag_bucket);
                    all[k]->tag_bucket = nullptr;
                }
                trim_idle();
                return false;
            }
        }
        for (UnexNode *u : all) {
            unidle(u->tag_bucket);
            push_back<kByTag>(u->tag_bucket->unexpected, u);
        }
        tag_lists_ = true;
    }
    if (sources) {
        for (UnexNode *u : all) {
            if (u->tag >= 0) {
                push_back<kBySource>(u->peer->unexpected, u);
                push_back<kByAll>(unexpected_all_, u);
            }
        }
        source_lists_ = true;
    }
    return true;
}

} // namespace roce::pml::match
