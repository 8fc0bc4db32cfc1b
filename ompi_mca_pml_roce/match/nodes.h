// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: the intrusive nodes and lists it is built
// from. README.md in this directory explains which list holds what.
#pragma once

#include <cstdint>

#include "match/reorder_ring.h"
#include "match/types.h"

namespace roce::pml::match::detail {

struct Bucket;
struct PostedList;

/// One posted receive. Lives on exactly one PostedList while posted.
struct PostedNode {
    PostedNode *prev;
    PostedNode *next; // also the pool's free-list link
    PostedList *list; // the list it is on; nullptr when not posted
    Bucket *bucket;   // the bucket owning `list`, or nullptr (peer or comm list)
    void *request;
    uint64_t order; // posting order within the communicator
    int32_t source;
    int32_t tag;
    uint32_t generation; // bumped on every release; checked by cancel()
};

/// FIFO of posted receives of one kind, in posting order.
struct PostedList {
    PostedNode *head = nullptr;
    PostedNode *tail = nullptr;
};

inline void push_back(PostedList &list, PostedNode *n) noexcept {
    n->list = &list;
    n->next = nullptr;
    n->prev = list.tail;
    if (list.tail != nullptr) {
        list.tail->next = n;
    } else {
        list.head = n;
    }
    list.tail = n;
}

inline void unlink(PostedNode *n) noexcept {
    PostedList &list = *n->list;
    (n->prev != nullptr ? n->prev->next : list.head) = n->next;
    (n->next != nullptr ? n->next->prev : list.tail) = n->prev;
    n->list = nullptr;
}

struct PeerState;

/// The arrival-ordered lists an unexpected message can be on. kByKey is
/// always kept; kByTag is kept once a (kAnySource, tag) receive or probe was
/// asked for on the communicator, kBySource and kByAll once a kAnyTag one
/// was (built then from the messages' admission stamps).
enum UnexLink : unsigned {
    kByKey = 0,    ///< messages with this (source, tag): Bucket(source, tag)
    kByTag = 1,    ///< messages with this tag from any source: Bucket(kAnySource, tag)
    kBySource = 2, ///< messages with tag >= 0 from this source: PeerState
    kByAll = 3,    ///< messages with tag >= 0 from any source: the CommMatcher
    kLinkCount = 4,
};

/// One unexpected message (admitted in sequence, matched no posted receive).
struct UnexNode {
    struct Link {
        UnexNode *prev;
        UnexNode *next;
    };
    Link link[kLinkCount]; // by-source and by-all unused when tag < 0
    uint64_t admitted;     // admission stamp: orders the lists built on demand
    Bucket *key_bucket;
    Bucket *tag_bucket; // nullptr while the communicator keeps no kByTag lists
    PeerState *peer;
    void *payload;
    int32_t source;
    int32_t tag;
    Seq seq;
    UnexNode *pool_next;
};

/// FIFO of unexpected messages in admission order, threaded through link[L].
struct UnexList {
    UnexNode *head = nullptr;
    UnexNode *tail = nullptr;
};

template <unsigned L>
inline void push_back(UnexList &list, UnexNode *n) noexcept {
    n->link[L].next = nullptr;
    n->link[L].prev = list.tail;
    if (list.tail != nullptr) {
        list.tail->link[L].next = n;
    } else {
        list.head = n;
    }
    list.tail = n;
}

template <unsigned L>
inline void unlink(UnexList &list, UnexNode *n) noexcept {
    UnexNode::Link &k = n->link[L];
    (k.prev != nullptr ? k.prev->link[L].next : list.head) = k.next;
    (k.next != nullptr ? k.next->link[L].prev : list.tail) = k.prev;
}

/// The lists of one hash key. Key (s, t) with s >= 0: posted receives for
/// exactly (s, t), and unexpected messages with exactly (s, t) (kByKey).
/// Key (kAnySource, t): posted (ANY_SOURCE, t) receives, and unexpected
/// messages with tag t from any source (kByTag). Never are both lists
/// non-empty: every posted receive in a bucket would match every unexpected
/// message in it, and the engine keeps no unexpected message that a posted
/// receive matches. A bucket may be empty: empty buckets wait on a bounded
/// FIFO for their key to be used again (see CommMatcher::settle).
struct Bucket {
    uint64_t key;
    PostedList posted;
    UnexList unexpected;
    Bucket *idle_prev; // on CommMatcher's FIFO of empty buckets
    Bucket *idle_next;
    bool idle;
    Bucket *pool_next;
    bool empty() const noexcept { return posted.head == nullptr && unexpected.head == nullptr; }
};

/// Per-sender state, created on first use of that source.
struct PeerState {
    Seq expected;              // next sequence number to admit
    ReorderRing held;          // messages that arrived ahead of `expected`
    PostedList posted_any_tag; // posted (source, ANY_TAG) receives
    UnexList unexpected;       // unexpected messages with tag >= 0 (kBySource)
    PeerState *pool_next;
};

} // namespace roce::pml::match::detail
