// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_stream.h"

#include <new>

namespace roce::pml::rndv {

bool StreamTable::closed(const StreamKey &k) const noexcept {
    for (const StreamKey &c : closed_) {
        if (c == k) {
            return true;
        }
    }
    return false;
}

void StreamTable::close(const StreamKey &k) noexcept {
    if (closed_.size() < kClosedMemory) {
        try {
            closed_.push_back(k);
            return;
        } catch (...) {
            return; // not remembering it only makes a late copy look new
        }
    }
    closed_[closed_next_] = k;
    closed_next_ = (closed_next_ + 1) % kClosedMemory;
}

void StreamTable::free_stage(Entry &e) noexcept {
    if (e.stage != nullptr) {
        e.stage.reset();
        staged_bytes_ -= e.msg_len;
    }
}

Outcome StreamTable::create(const StreamKey &k, uint64_t msg_len, uint64_t offset,
                            uint64_t len, bool stage, Map::iterator &it) noexcept {
    if (closed(k)) {
        return Outcome::kDuplicate;
    }
    if (msg_len == 0 || len == 0 || offset > msg_len || len > msg_len - offset) {
        return Outcome::kOutOfRange;
    }
    if (stage && staged_ >= kMaxStaged) {
        return Outcome::kNoMemory;
    }
    try {
        it = map_.emplace(k, Entry{}).first;
    } catch (...) {
        return Outcome::kNoMemory;
    }
    Entry &e = it->second;
    e.msg_len = msg_len;
    e.acct.open(0, msg_len, nullptr);
    if (stage) {
        e.stage.reset(new (std::nothrow) uint8_t[msg_len]);
        if (e.stage == nullptr) {
            map_.erase(it);
            return Outcome::kNoMemory;
        }
        staged_bytes_ += msg_len;
    }
    ++staged_; // until bind() gives it an owner
    return Outcome::kAccepted;
}

StreamTable::Piece StreamTable::piece(const StreamKey &k, uint64_t msg_len, uint64_t offset,
                                      uint64_t len) noexcept {
    Piece p{Outcome::kAccepted, nullptr, nullptr, msg_len, 0};
    auto it = map_.find(k);
    if (it == map_.end()) {
        p.outcome = create(k, msg_len, offset, len, true, it);
        if (p.outcome != Outcome::kAccepted) {
            return p;
        }
    }
    Entry &e = it->second;
    p.msg_len = e.msg_len;
    p.arrived = e.acct.arrived();
    if (msg_len != e.msg_len) {
        p.outcome = Outcome::kOutOfRange;
        return p;
    }
    p.outcome = e.acct.admit(offset, len);
    if (p.outcome != Outcome::kAccepted) {
        return p;
    }
    p.owner = e.owner;
    if (e.owner == nullptr) {
        p.stage = e.stage.get() + offset;
    }
    return p;
}

bool StreamTable::settle(const StreamKey &k, void **owner) noexcept {
    auto it = map_.find(k);
    if (it == map_.end()) {
        return false;
    }
    Entry &e = it->second;
    if (!e.acct.settle() || e.owner == nullptr) {
        return false;
    }
    *owner = e.owner;
    free_stage(e);
    map_.erase(it);
    close(k);
    return true;
}

StreamTable::Binding StreamTable::bind(const StreamKey &k, uint64_t msg_len, uint64_t first,
                                       void *owner) noexcept {
    Binding b{Outcome::kAccepted, nullptr, {}};
    auto it = map_.find(k);
    if (it == map_.end()) {
        b.outcome = create(k, msg_len, 0, first, false, it);
        if (b.outcome != Outcome::kAccepted) {
            return b;
        }
    }
    Entry &e = it->second;
    if (e.owner != nullptr) {
        b.outcome = Outcome::kDuplicate;
        return b;
    }
    if (msg_len != e.msg_len || first == 0) {
        b.outcome = Outcome::kOutOfRange;
        return b;
    }
    b.outcome = e.acct.admit(0, first);
    if (b.outcome != Outcome::kAccepted) {
        return b;
    }
    try {
        e.acct.each_range([&](uint64_t lo, uint64_t hi) {
            if (hi <= first) {
                return; // the RNDV's own bytes
            }
            b.ranges.emplace_back(lo < first ? first : lo, hi);
        });
    } catch (...) {
        // Unreachable in practice (a handful of ranges); leave the message
        // staged, its RNDV bytes counted: the receive is refused.
        b.ranges.clear();
        b.outcome = Outcome::kNoMemory;
        return b;
    }
    e.owner = owner;
    --staged_;
    b.stage = e.stage.get();
    return b;
}

void StreamTable::drop_stage(const StreamKey &k) noexcept {
    auto it = map_.find(k);
    if (it != map_.end()) {
        free_stage(it->second);
    }
}

std::size_t StreamTable::clear() noexcept {
    std::size_t n = map_.size();
    map_.clear();
    staged_ = 0;
    staged_bytes_ = 0;
    closed_.clear();
    closed_next_ = 0;
    return n;
}

} // namespace roce::pml::rndv
