// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Helpers shared by the matching-engine tests: small integers stand for the
// pml's request and payload pointers (the engine never dereferences them).
#pragma once

#include <cstdint>

#include "match/comm_matcher.h"

namespace roce::pml::match {

/// Reaches CommMatcher's private state (house rule: a friend TestPeer).
class CommMatcherTestPeer {
    static detail::PeerState *peer(CommMatcher &m, int32_t source) {
        detail::PeerState *p = m.peers_[static_cast<std::size_t>(source)];
        return p != nullptr ? p : m.make_peer(source);
    }

public:
    /// Makes `source`'s next expected sequence number `seq`, as if `seq`
    /// messages had already been admitted (used to test wraparound quickly).
    static bool set_expected(CommMatcher &m, int32_t source, Seq seq) {
        detail::PeerState *p = peer(m, source);
        if (p == nullptr || p->held.count() != 0) {
            return false;
        }
        p->expected = seq;
        return true;
    }
    static Seq expected(CommMatcher &m, int32_t source) {
        detail::PeerState *p = peer(m, source);
        return p == nullptr ? 0 : p->expected;
    }
    /// Entries in the (source, tag) index, empty buckets included.
    /// Fault injection: the matcher runs out of unexpected-message (or
    /// posted-receive) nodes beyond `n`.
    static void limit_unexpected_nodes(CommMatcher &m, std::size_t n) { m.unex_pool_.set_limit(n); }
    static void limit_posted_nodes(CommMatcher &m, std::size_t n) { m.posted_pool_.set_limit(n); }
    /// ... or of buckets beyond `n` (checked when the pool grows: chunks of 64 first).
    static void limit_buckets(CommMatcher &m, std::size_t n) { m.bucket_pool_.set_limit(n); }
    static std::size_t index_size(const CommMatcher &m) { return m.index_.size(); }
    /// True when the index has a bucket for (source, tag), empty or not.
    static bool has_bucket(const CommMatcher &m, int32_t source, int32_t tag) {
        return m.index_.find(detail::pack_key(source, tag)) != nullptr;
    }
    static std::size_t index_capacity(const CommMatcher &m) { return m.index_.capacity(); }
    /// Buckets holding a posted receive or an unexpected message.
    static std::size_t live_buckets(const CommMatcher &m) {
        std::size_t n = 0;
        m.index_.for_each([&n](uint64_t, const detail::Bucket *b) { n += b->empty() ? 0 : 1; });
        return n;
    }
    static std::size_t bucket_nodes_live(const CommMatcher &m) { return m.bucket_pool_.live(); }
};

} // namespace roce::pml::match

namespace match_test {

inline void *ptr(uintptr_t id) {
    return reinterpret_cast<void *>(id);
}
inline uintptr_t id_of(const void *p) {
    return reinterpret_cast<uintptr_t>(p);
}

/// Offers (source, tag, seq) with payload id `payload`; counts keep() calls.
inline roce::pml::match::Arrival deliver(roce::pml::match::CommMatcher &m, int32_t source,
                                         int32_t tag, roce::pml::match::Seq seq, uintptr_t payload,
                                         int *keep_calls = nullptr) {
    return m.arrive(roce::pml::match::Envelope{source, tag, seq}, [&]() -> void * {
        if (keep_calls != nullptr) {
            ++*keep_calls;
        }
        return ptr(payload);
    });
}

} // namespace match_test
