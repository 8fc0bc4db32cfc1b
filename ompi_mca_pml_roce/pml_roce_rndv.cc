// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_rndv.h"

namespace roce::pml::rndv {

const char *outcome_name(Outcome o) noexcept {
    switch (o) {
    case Outcome::kAccepted: return "accepted";
    case Outcome::kDuplicate: return "duplicate";
    case Outcome::kUnknown: return "unknown request id";
    case Outcome::kWrongState: return "request not waiting for it";
    case Outcome::kOutOfRange: return "bytes outside the range asked for";
    case Outcome::kOverlap: return "overlaps bytes that already arrived";
    case Outcome::kTooFragmented: return "too many separate pieces";
    case Outcome::kNoMemory: return "out of memory";
    }
    return "?";
}

void FragAccount::open(uint64_t lo, uint64_t hi, void *owner) noexcept {
    lo_ = lo;
    hi_ = hi;
    arrived_ = 0;
    unpacking_ = 0;
    complete_ = false;
    owner_ = owner;
}

Outcome FragAccount::admit(uint64_t offset, uint64_t len) noexcept {
    if (offset < lo_ || offset > hi_ || len > hi_ - offset) {
        return Outcome::kOutOfRange;
    }
    ++unpacking_;
    arrived_ += len;
    return Outcome::kAccepted;
}

bool FragAccount::settle() noexcept {
    --unpacking_;
    if (!complete_ && unpacking_ == 0 && arrived_ >= hi_ - lo_) {
        complete_ = true;
        return true;
    }
    return false;
}

uint64_t FragTable::open(FragAccount &a, uint64_t lo, uint64_t hi, void *owner) noexcept {
    a.open(lo, hi, owner);
    a.id_ = ids_.insert(&a);
    return a.id_;
}

FragTable::Admission FragTable::admit(uint64_t id, uint64_t offset, uint64_t len) noexcept {
    auto *a = static_cast<FragAccount *>(ids_.find(id));
    if (a == nullptr) {
        return {Outcome::kUnknown, nullptr};
    }
    return {a->admit(offset, len), a};
}

bool FragTable::settle(FragAccount &a) noexcept {
    if (!a.settle()) {
        return false;
    }
    ids_.erase(a.id_);
    return true;
}

uint64_t AnswerTable::open(void *request) noexcept { return ids_.insert(request); }

AnswerTable::Claim AnswerTable::claim_ack(uint64_t id, uint64_t offset, uint64_t size) noexcept {
    void *r = ids_.find(id);
    if (r == nullptr) {
        return {Outcome::kUnknown, nullptr};
    }
    SendView v = view_(r);
    if (v.phase != SendPhase::kWaitAck && v.phase != SendPhase::kWaitFin) {
        return {Outcome::kWrongState, r};
    }
    if (offset > v.total || size > v.total - offset) {
        return {Outcome::kOutOfRange, r};
    }
    ids_.erase(id);
    return {Outcome::kAccepted, r};
}

AnswerTable::Claim AnswerTable::claim_fin(uint64_t id, uint64_t) noexcept {
    void *r = ids_.find(id);
    if (r == nullptr) {
        return {Outcome::kUnknown, nullptr};
    }
    if (view_(r).phase != SendPhase::kWaitFin) {
        return {Outcome::kWrongState, r};
    }
    ids_.erase(id);
    return {Outcome::kAccepted, r};
}

} // namespace roce::pml::rndv
