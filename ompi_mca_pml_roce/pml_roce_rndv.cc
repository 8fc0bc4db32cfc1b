// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_rndv.h"

#include <algorithm>
#include <iterator>

namespace roce::pml::rndv {

const char *outcome_name(Outcome o) noexcept {
    switch (o) {
    case Outcome::kAccepted:
        return "accepted";
    case Outcome::kDuplicate:
        return "duplicate";
    case Outcome::kUnknown:
        return "unknown request id";
    case Outcome::kWrongState:
        return "request not waiting for it";
    case Outcome::kOutOfRange:
        return "bytes outside the range asked for";
    case Outcome::kOverlap:
        return "overlaps bytes that already arrived";
    case Outcome::kTooFragmented:
        return "too many separate pieces";
    case Outcome::kNoMemory:
        return "out of memory";
    }
    return "?";
}

void FragAccount::open(uint64_t lo, uint64_t hi, void *owner, bool put) noexcept {
    put_ = put;
    lo_ = lo;
    hi_ = hi;
    prefix_ = lo;
    ahead_.clear();
    if (ahead_.capacity() > 64) {
        // A message that arrived in many pieces (or a forger) does not
        // leave its memory with the request for the next one.
        std::vector<Range>().swap(ahead_);
    }
    arrived_ = 0;
    unpacking_ = 0;
    complete_ = false;
    owner_ = owner;
}

Outcome FragAccount::admit(uint64_t offset, uint64_t len) noexcept {
    if (complete_) {
        return Outcome::kDuplicate;
    }
    if (len == 0 || offset < lo_ || offset > hi_ || len > hi_ - offset) {
        return Outcome::kOutOfRange;
    }
    const uint64_t end = offset + len; // <= hi_: no overflow
    if (end <= prefix_) {
        return Outcome::kDuplicate;
    }
    if (offset < prefix_) {
        return Outcome::kOverlap;
    }
    // The first piece ending after `offset`, and its predecessor.
    auto next = std::upper_bound(ahead_.begin(), ahead_.end(), offset,
                                 [](uint64_t o, const Range &r) { return o < r.end; });
    if (next != ahead_.end() && next->begin <= offset) {
        return end <= next->end ? Outcome::kDuplicate : Outcome::kOverlap;
    }
    if (next != ahead_.end() && next->begin < end) {
        return Outcome::kOverlap;
    }
    // New bytes: [offset, end) touches nothing that arrived, except maybe
    // at its ends, where it joins.
    if (offset == prefix_) {
        prefix_ = end;
        if (next != ahead_.end() && next->begin == prefix_) {
            prefix_ = next->end;
            ahead_.erase(next); // next is the first piece (nothing lies between)
        }
    } else {
        bool joins_prev = next != ahead_.begin() && std::prev(next)->end == offset;
        bool joins_next = next != ahead_.end() && next->begin == end;
        if (joins_prev && joins_next) {
            std::prev(next)->end = next->end;
            ahead_.erase(next);
        } else if (joins_prev) {
            std::prev(next)->end = end;
        } else if (joins_next) {
            next->begin = offset;
        } else {
            if (ahead_.size() >= kMaxPieces) {
                return Outcome::kTooFragmented;
            }
            try {
                ahead_.insert(next, Range{offset, end});
            } catch (...) {
                return Outcome::kNoMemory;
            }
        }
    }
    arrived_ += len;
    ++unpacking_;
    return Outcome::kAccepted;
}

Outcome FragAccount::admit_put(uint64_t offset, uint64_t len) noexcept {
    if (!put_) {
        return Outcome::kWrongState;
    }
    if (offset != lo_ || len != hi_ - lo_) {
        return Outcome::kOutOfRange;
    }
    if (arrived_ != 0) {
        return arrived_ == hi_ - lo_ ? Outcome::kDuplicate : Outcome::kOverlap;
    }
    return admit(offset, len);
}

bool FragAccount::settle() noexcept {
    --unpacking_;
    if (!complete_ && unpacking_ == 0 && arrived_ == hi_ - lo_) {
        complete_ = true;
        return true;
    }
    return false;
}

uint64_t FragTable::open(FragAccount &a, uint64_t lo, uint64_t hi, void *owner, bool put) noexcept {
    a.open(lo, hi, owner, put);
    a.id_ = ids_.insert(&a);
    return a.id_;
}

FragTable::Admission FragTable::find(uint64_t id) noexcept {
    HandleTable::Lookup l = ids_.lookup(id);
    if (l.state == HandleTable::State::kClosed) {
        return {Outcome::kDuplicate, nullptr};
    }
    if (l.state == HandleTable::State::kNever) {
        return {Outcome::kUnknown, nullptr};
    }
    return {Outcome::kAccepted, static_cast<FragAccount *>(l.object)};
}

FragTable::Admission FragTable::admit(uint64_t id, uint64_t offset, uint64_t len) noexcept {
    Admission f = find(id);
    if (f.account != nullptr) {
        f.outcome = f.account->admit(offset, len);
    }
    return f;
}

FragTable::Admission FragTable::admit_put(uint64_t id, uint64_t offset, uint64_t len) noexcept {
    Admission f = find(id);
    if (f.account != nullptr) {
        f.outcome = f.account->admit_put(offset, len);
    }
    return f;
}

bool FragTable::settle(FragAccount &a) noexcept {
    if (!a.settle()) {
        return false;
    }
    ids_.erase(a.id_);
    return true;
}

uint64_t AnswerTable::open(void *request) noexcept {
    return ids_.insert(request);
}

namespace {

Outcome not_live(HandleTable::State s) noexcept {
    return s == HandleTable::State::kClosed ? Outcome::kDuplicate : Outcome::kUnknown;
}

} // namespace

AnswerTable::Claim AnswerTable::split_answer(uint64_t id, void *r, const SendView &v,
                                             bool split) noexcept {
    const uint8_t bits = v.split != nullptr ? *v.split : 0;
    if (!split) {
        if (bits != 0) {
            return {Outcome::kWrongState, r}; // the receiver split: its answer must say so
        }
        ids_.erase(id);
        return {Outcome::kAccepted, r};
    }
    if (v.split == nullptr) {
        return {Outcome::kWrongState, r};
    }
    if (bits & kSplitFin) {
        return {Outcome::kDuplicate, r};
    }
    *v.split = static_cast<uint8_t>(bits | kSplitFin);
    if (bits & kSplitPut) {
        ids_.erase(id);
    }
    Claim c{Outcome::kAccepted, r};
    c.first_split = (bits & kSplitPut) == 0;
    return c;
}

AnswerTable::Claim AnswerTable::claim_ack(uint64_t id, uint64_t offset, uint64_t size,
                                          bool split) noexcept {
    HandleTable::Lookup l = ids_.lookup(id);
    if (l.state != HandleTable::State::kLive) {
        return {not_live(l.state), nullptr};
    }
    void *r = l.object;
    SendView v = view_(r);
    if (v.phase != SendPhase::kWaitAck && v.phase != SendPhase::kWaitFin) {
        return {Outcome::kWrongState, r};
    }
    if (offset > v.total || size > v.total - offset) {
        return {Outcome::kOutOfRange, r};
    }
    if (split && v.phase != SendPhase::kWaitFin) {
        return {Outcome::kWrongState, r}; // only an RGET splits
    }
    return split_answer(id, r, v, split);
}

AnswerTable::Claim AnswerTable::claim_fin(uint64_t id, uint64_t size, bool split) noexcept {
    HandleTable::Lookup l = ids_.lookup(id);
    if (l.state != HandleTable::State::kLive) {
        return {not_live(l.state), nullptr};
    }
    void *r = l.object;
    SendView v = view_(r);
    if (v.phase != SendPhase::kWaitFin) {
        return {Outcome::kWrongState, r};
    }
    if (size > v.total) {
        return {Outcome::kOutOfRange, r};
    }
    return split_answer(id, r, v, split);
}

AnswerTable::Claim AnswerTable::claim_put(uint64_t id, uint64_t offset, uint64_t size) noexcept {
    HandleTable::Lookup l = ids_.lookup(id);
    if (l.state != HandleTable::State::kLive) {
        return {not_live(l.state), nullptr};
    }
    void *r = l.object;
    SendView v = view_(r);
    if (v.phase != SendPhase::kWaitFin || v.split == nullptr) {
        return {Outcome::kWrongState, r};
    }
    const uint8_t bits = *v.split;
    if (bits & kSplitPut) {
        return {Outcome::kDuplicate, r};
    }
    if (offset == 0 || size == 0 || offset > v.total || size > v.total - offset) {
        return {Outcome::kOutOfRange, r};
    }
    *v.split = static_cast<uint8_t>(bits | kSplitPut);
    if (bits & kSplitFin) {
        ids_.erase(id);
    }
    Claim c{Outcome::kAccepted, r};
    c.first_split = (bits & kSplitFin) == 0;
    return c;
}

} // namespace roce::pml::rndv
