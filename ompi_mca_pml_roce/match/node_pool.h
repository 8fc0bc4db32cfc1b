// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Internal to the matching engine: a free-list pool of fixed-size nodes.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace roce::pml::match::detail {

/// Hands out nodes of type T from chunks it allocates as needed, and takes
/// them back on a free list threaded through the member `Next` (a T* field of
/// T that the node's user does not need while the node is free). Once the
/// pool has grown to the peak number of live nodes, alloc/free never call the
/// allocator again. Nodes keep their other fields across free/alloc, so a
/// generation counter in T survives reuse. Chunks are value-initialised and
/// destroyed (with every node in them) only with the pool.
///
/// Not thread-safe. alloc() returns nullptr when memory is exhausted.
template <typename T, T *T::*Next>
class NodePool {
public:
    NodePool() = default;
    NodePool(const NodePool &) = delete;
    NodePool &operator=(const NodePool &) = delete;

    /// A node (fields as its previous user left them, Next cleared), or nullptr.
    /// Forced inline: it is on every fast path (grow() is not).
    [[gnu::always_inline]] T *alloc() noexcept {
        if (free_ == nullptr && !grow()) {
            return nullptr;
        }
        T *node = free_;
        free_ = node->*Next;
        node->*Next = nullptr;
        ++live_;
        return node;
    }

    /// Returns a node obtained from alloc() of this pool.
    [[gnu::always_inline]] void free(T *node) noexcept {
        node->*Next = free_;
        free_ = node;
        --live_;
    }

    /// Caps the number of nodes the pool will ever hold (fault injection in
    /// tests: alloc() then fails as if memory were exhausted). Checked only
    /// when the pool grows.
    void set_limit(std::size_t max_nodes) noexcept { limit_ = max_nodes; }

    /// Nodes handed out and not yet freed.
    std::size_t live() const noexcept { return live_; }
    /// Nodes allocated in chunks so far (live + free).
    std::size_t capacity() const noexcept { return capacity_; }

private:
    static constexpr std::size_t kFirstChunk = 64;
    static constexpr std::size_t kMaxChunk = 4096;

    bool grow() noexcept {
        std::size_t n = capacity_ == 0 ? kFirstChunk : capacity_;
        if (n > kMaxChunk) {
            n = kMaxChunk;
        }
        if (capacity_ >= limit_) {
            return false;
        }
        if (n > limit_ - capacity_) {
            n = limit_ - capacity_;
        }
        std::unique_ptr<T[]> chunk(new (std::nothrow) T[n]());
        if (!chunk) {
            return false;
        }
        try {
            chunks_.push_back(std::move(chunk));
        } catch (...) {
            return false;
        }
        T *nodes = chunks_.back().get();
        for (std::size_t i = n; i-- > 0;) {
            nodes[i].*Next = free_;
            free_ = &nodes[i];
        }
        capacity_ += n;
        return true;
    }

    std::vector<std::unique_ptr<T[]>> chunks_;
    T *free_ = nullptr;
    std::size_t capacity_ = 0;
    std::size_t live_ = 0;
    std::size_t limit_ = static_cast<std::size_t>(-1);
};

} // namespace roce::pml::match::detail
