// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_excid.h"

#include <cinttypes>
#include <cstdio>
#include <new>

namespace roce::pml::excid {

namespace {

std::string name(const ExcId &id) {
    char s[48];
    std::snprintf(s, sizeof s, "0x%016" PRIx64 "%016" PRIx64, id.base, id.sub);
    return s;
}

} // namespace

util::Result<std::optional<Waiting>> ExcIdTable::publish(const ExcId &id, uint32_t ctx) noexcept {
    try {
        auto [it, added] = by_id_.emplace(id, ctx);
        if (!added) {
            return util::Status(util::Code::kInvalidArgument,
                                "extended id " + name(id) + " is already communicator " +
                                    std::to_string(it->second) + " here");
        }
        auto w = waiting_.find(id);
        if (w == waiting_.end()) {
            return std::optional<Waiting>();
        }
        std::optional<Waiting> out(std::move(w->second));
        waiting_.erase(w);
        return out;
    } catch (const std::bad_alloc &) {
        return util::Status(util::Code::kResourceExhausted, "out of memory publishing extended id");
    }
}

bool ExcIdTable::unpublish(const ExcId &id) noexcept { return by_id_.erase(id) > 0; }

std::optional<uint32_t> ExcIdTable::find(const ExcId &id) const noexcept {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) {
        return std::nullopt;
    }
    return it->second;
}

util::Result<uint32_t> ExcIdTable::hold(const ExcId &id, Announcement a) noexcept {
    try {
        auto it = waiting_.find(id);
        if (it == waiting_.end()) {
            if (waiting_.size() >= max_waiting_) {
                return util::Status(util::Code::kResourceExhausted,
                                    std::to_string(waiting_.size()) +
                                        " unknown extended ids have messages waiting already (the "
                                        "limit); a message for another one, " +
                                        name(id) + ", is dropped");
            }
            it = waiting_.emplace(id, Waiting{next_key_, {}}).first;
            // 2^31 distinct ids in one run before a key comes round again.
            next_key_ = next_key_ == UINT32_MAX ? kFirstWaitingKey : next_key_ + 1;
        }
        it->second.announced.push_back(a);
        return it->second.key;
    } catch (const std::bad_alloc &) {
        return util::Status(util::Code::kResourceExhausted,
                            "out of memory holding a message for extended id " + name(id));
    }
}

void ExcIdTable::clear() noexcept {
    waiting_.clear();
    by_id_.clear();
}

} // namespace roce::pml::excid
