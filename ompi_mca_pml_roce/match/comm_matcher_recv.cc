// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The receiving half of CommMatcher: post, cancel, probes, drain, stats.
#include "match/comm_matcher.h"
#include "match/comm_matcher_inl.h"

#include <algorithm>
#include <string>

namespace roce::pml::match {

using namespace detail;

// Appends a receive that took no unexpected message to its FIFO. The
// request is `request`, or made by `make` once nothing else can fail.
inline bool CommMatcher::post_node(int32_t source, int32_t tag, Bucket *kb, void *request,
                                   MakeRequestFn *make, PostedHandle *handle) noexcept {
    PostedNode *n = posted_pool_.alloc();
    if (n == nullptr) {
        if (kb != nullptr) {
            settle(kb);
            trim_idle();
        }
        return false;
    }
    PostedList *list = nullptr;
    if (tag != kAnyTag) {
        if (kb == nullptr && (kb = bucket(source, tag)) == nullptr) {
            posted_pool_.free(n);
            return false;
        }
        list = &kb->posted;
    } else if (source == kAnySource) {
        list = &posted_any_any_;
    } else {
        PeerState *p = peer(source);
        if (p == nullptr) {
            posted_pool_.free(n);
            return false;
        }
        list = &p->posted_any_tag;
    }
    if (make != nullptr && (request = (*make)()) == nullptr) {
        posted_pool_.free(n);
        if (tag != kAnyTag) {
            settle(kb); // a fresh bucket must not stay empty off the FIFO
            trim_idle();
        }
        return false;
    }
    if (tag != kAnyTag) {
        unidle(kb);
    }
    n->bucket = tag != kAnyTag ? kb : nullptr;
    n->request = request;
    n->order = next_order_++;
    n->source = source;
    n->tag = tag;
    push_back(*list, n);
    if (source == kAnySource && tag != kAnyTag) {
        ++posted_any_source_tag_;
    }
    stats_.peak_posted = std::max(stats_.peak_posted, posted_pool_.live());
    *handle = PostedHandle{n, n->generation};
    return true;
}

inline Posting CommMatcher::post_impl(int32_t source, int32_t tag, void *request,
                                      MakeRequestFn *make) noexcept {
    Posting r;
    if (source < kAnySource || source >= size_) {
        r.verdict = Verdict::kBadSource;
        return r;
    }
    Bucket *kb = nullptr;
    UnexNode *u = nullptr;
    if (source != kAnySource && tag != kAnyTag) {
        // The common case costs one probe of the index: the bucket found (or
        // made) here is the one the receive is posted on if nothing matches.
        kb = bucket(source, tag);
        if (kb == nullptr) {
            r.verdict = Verdict::kNoMemory;
            return r;
        }
        u = kb->unexpected.head;
    } else {
        if (!wildcard_lists(source, tag)) {
            r.verdict = Verdict::kNoMemory;
            return r;
        }
        u = first_unexpected_for(source, tag);
    }
    if (u != nullptr) {
        r.matched = true;
        r.message = take_unexpected(u);
        ++stats_.matched_on_post;
        return r;
    }
    if (!post_node(source, tag, kb, request, make, &r.handle)) {
        r.verdict = Verdict::kNoMemory;
    }
    return r;
}

Posting CommMatcher::post_general(int32_t source, int32_t tag, void *request) noexcept {
    return post_impl(source, tag, request, nullptr);
}

Posting CommMatcher::post(int32_t source, int32_t tag, MakeRequestFn make_request) noexcept {
    return post_impl(source, tag, nullptr, &make_request);
}

bool CommMatcher::cancel(PostedHandle handle) noexcept {
    auto *n = static_cast<PostedNode *>(handle.node);
    if (n == nullptr || n->generation != handle.generation || n->list == nullptr) {
        return false;
    }
    remove_posted(n);
    return true;
}

Probe CommMatcher::iprobe(int32_t source, int32_t tag) noexcept {
    Probe r;
    if (source < kAnySource || source >= size_) {
        r.verdict = Verdict::kBadSource;
        return r;
    }
    if (!wildcard_lists(source, tag)) {
        r.verdict = Verdict::kNoMemory;
        return r;
    }
    if (const UnexNode *u = first_unexpected_for(source, tag)) {
        r.found = true;
        r.message = Message{u->source, u->tag, u->seq, u->payload};
    }
    return r;
}

Probe CommMatcher::improbe(int32_t source, int32_t tag) noexcept {
    Probe r;
    if (source < kAnySource || source >= size_) {
        r.verdict = Verdict::kBadSource;
        return r;
    }
    if (!wildcard_lists(source, tag)) {
        r.verdict = Verdict::kNoMemory;
        return r;
    }
    if (UnexNode *u = first_unexpected_for(source, tag)) {
        r.found = true;
        r.message = take_unexpected(u);
    }
    return r;
}

std::size_t CommMatcher::drain(FnRef<void(void *request)> on_request,
                               FnRef<void(const Message &message)> on_message) noexcept {
    std::size_t calls = 0;
    auto release_posted = [&](PostedList &list) {
        for (PostedNode *n = list.head, *next; n != nullptr; n = next) {
            next = n->next;
            on_request(n->request);
            ++calls;
            n->list = nullptr;
            n->bucket = nullptr;
            n->request = nullptr;
            ++n->generation;
            posted_pool_.free(n);
        }
        list = PostedList();
    };
    // Every unexpected message is on exactly one (source >= 0, tag) bucket.
    index_.for_each([&](uint64_t, Bucket *b) {
        release_posted(b->posted);
        if (static_cast<int32_t>(b->key >> 32) != kAnySource) {
            for (UnexNode *u = b->unexpected.head, *next; u != nullptr; u = next) {
                next = u->link[kByKey].next;
                on_message(Message{u->source, u->tag, u->seq, u->payload});
                ++calls;
                unex_pool_.free(u);
            }
        }
    });
    index_.for_each([&](uint64_t, Bucket *b) { bucket_pool_.free(b); });
    index_.clear();
    idle_head_ = idle_tail_ = newest_idle_ = nullptr;
    idle_count_ = 0;
    release_posted(posted_any_any_);
    unexpected_all_ = UnexList();
    for (std::size_t source = 0; source < peers_.size(); ++source) {
        PeerState *p = peers_[source];
        if (p == nullptr) {
            continue;
        }
        release_posted(p->posted_any_tag);
        p->unexpected = UnexList();
        p->held.for_each([&](const ReorderRing::Entry &e) {
            on_message(Message{static_cast<int32_t>(source), e.tag, e.seq, e.payload});
            ++calls;
        });
        p->held.clear();
    }
    posted_any_source_tag_ = 0;
    held_count_ = 0;
    return calls;
}

MatcherStats CommMatcher::stats() const noexcept {
    MatcherStats s = stats_;
    s.posted = posted_pool_.live();
    s.unexpected = unex_pool_.live();
    s.held = held_count_;
    s.index_capacity = index_.capacity();
    return s;
}

util::Status explain(Verdict verdict, const Envelope &envelope, uint32_t context,
                     int32_t comm_size) {
    if (verdict == Verdict::kOk) {
        return util::Status();
    }
    std::string msg = "match header from source " + std::to_string(envelope.source) + " (tag " +
                      std::to_string(envelope.tag) + ", seq " + std::to_string(envelope.seq) +
                      ") on context " + std::to_string(context) + ": ";
    util::Code code = util::Code::kProtocol;
    switch (verdict) {
    case Verdict::kBadSource:
        msg +=
            "the source is not a rank of the communicator (size " + std::to_string(comm_size) + ")";
        break;
    case Verdict::kBadTag:
        msg += "tag -1 is the wildcard MPI_ANY_TAG and cannot label a message";
        break;
    case Verdict::kDuplicate:
        msg += "this sequence number was already received from that source (a duplicate, or "
               "more than 32767 messages ahead of the next expected one)";
        break;
    case Verdict::kNoMemory:
        code = util::Code::kResourceExhausted;
        msg += "out of memory while holding the message";
        break;
    case Verdict::kHasPosted:
        code = util::Code::kInternal;
        msg += "early messages were moved into a communicator that already has receives posted";
        break;
    case Verdict::kOk:
        break;
    }
    return util::Status(code, std::move(msg));
}

} // namespace roce::pml::match
