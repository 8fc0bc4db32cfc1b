// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "match/early_arrivals.h"

#include <new>
#include <string>

namespace roce::pml::match {

util::Status EarlyArrivals::hold(uint32_t context, const Envelope &envelope,
                                 void *payload) noexcept {
    try {
        by_context_[context].push_back(Early{envelope, payload});
        ++total_;
        return util::Status();
    } catch (const std::bad_alloc &) {
        return util::Status(util::Code::kResourceExhausted,
                            "out of memory holding a message for context " +
                                std::to_string(context) + ", which does not exist yet");
    }
}

std::size_t EarlyArrivals::count(uint32_t context) const noexcept {
    auto it = by_context_.find(context);
    return it == by_context_.end() ? 0 : it->second.size();
}

util::Status
EarlyArrivals::transfer(
    uint32_t context, CommMatcher &matcher,
    FnRef<void(void *payload, Verdict why, const util::Status &explained)> on_rejected) noexcept {
    auto it = by_context_.find(context);
    if (it == by_context_.end()) {
        return util::Status();
    }
    if (matcher.posted_count() != 0) {
        return explain(Verdict::kHasPosted, it->second.front().envelope, context, matcher.size());
    }
    std::vector<Early> early = std::move(it->second);
    by_context_.erase(it);
    total_ -= early.size();

    util::Status first_error;
    auto refuse = [&](const Early &e, Verdict why) {
        util::Status st = explain(why, e.envelope, context, matcher.size());
        on_rejected(e.payload, why, st);
        if (first_error.is_ok()) {
            first_error = std::move(st);
        }
    };
    for (const Early &e : early) {
        void *payload = e.payload;
        Arrival a = matcher.arrive(e.envelope, [payload]() { return payload; });
        if (a.kind == ArrivalKind::kRejected) {
            refuse(e, a.verdict);
            continue;
        }
        // No receive is posted, so released messages only become unexpected;
        // they cannot fail for lack of a payload, only for lack of nodes.
        while (a.more_ready) {
            a = matcher.next_ready(e.envelope.source);
            if (a.kind == ArrivalKind::kRejected) {
                // Left held in the matcher, ready: the next arrival from
                // this source reports more_ready and the pml drains it.
                if (first_error.is_ok()) {
                    first_error = explain(a.verdict, e.envelope, context, matcher.size());
                }
                break;
            }
        }
    }
    return first_error;
}

std::size_t
EarlyArrivals::drain(FnRef<void(uint32_t context, const Message &message)> release) noexcept {
    std::size_t n = 0;
    for (auto &[context, list] : by_context_) {
        for (const Early &e : list) {
            release(context, Message{e.envelope.source, e.envelope.tag, e.envelope.seq, e.payload});
            ++n;
        }
    }
    by_context_.clear();
    total_ = 0;
    return n;
}

} // namespace roce::pml::match
