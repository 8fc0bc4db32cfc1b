// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The reference matcher for the randomized test: MPI's matching rules
// written as plainly as possible, with linear lists and no cleverness, and
// nothing shared with the engine under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace match_model {

constexpr int32_t kAny = -1; // MPI_ANY_SOURCE and MPI_ANY_TAG

struct Msg {
    int32_t source;
    int32_t tag;
    uint16_t seq;
    uintptr_t id; // stands for the payload
};

struct Recv {
    int32_t source;
    int32_t tag;
    uintptr_t request;
};

/// What happened to a message, in the order the engine reports it.
struct Event {
    enum Kind { kMatched, kQueued, kHeld } kind;
    uintptr_t msg;
    uintptr_t request; // kMatched only
    bool operator==(const Event &o) const {
        return kind == o.kind && msg == o.msg && request == o.request;
    }
};

/// MPI 3.1, 3.5 and 3.8: a receive (source, tag) accepts a message when the
/// source is equal or ANY_SOURCE, and the tag is equal or ANY_TAG, where
/// ANY_TAG does not accept the negative tags collectives use.
inline bool accepts(int32_t recv_source, int32_t recv_tag, const Msg &m) {
    bool source_ok = recv_source == kAny || recv_source == m.source;
    bool tag_ok = recv_tag == m.tag || (recv_tag == kAny && m.tag >= 0);
    return source_ok && tag_ok;
}

class ReferenceMatcher {
public:
    ReferenceMatcher(int32_t size, bool allow_overtake)
        : overtake_(allow_overtake), expected_(static_cast<std::size_t>(size), 0),
          held_(static_cast<std::size_t>(size)) {}

    void set_expected(int32_t source, uint16_t seq) { expected_[source] = seq; }

    /// Would arrive(m) need to store the message (held or unexpected)?
    bool would_store(const Msg &m) const {
        if (!overtake_ && m.seq != expected_[m.source]) {
            return true;
        }
        for (const Recv &r : posted_) {
            if (accepts(r.source, r.tag, m)) {
                return false;
            }
        }
        return true;
    }

    /// A message off the network. Messages of one source are considered for
    /// matching strictly in sequence order: a message that is not next waits
    /// until every earlier one has been considered.
    std::vector<Event> arrive(const Msg &m) {
        std::vector<Event> events;
        if (!overtake_ && m.seq != expected_[m.source]) {
            held_[m.source].push_back(m);
            events.push_back(Event{Event::kHeld, m.id, 0});
            return events;
        }
        events.push_back(admit(m));
        if (overtake_) {
            return events;
        }
        ++expected_[m.source];
        for (bool found = true; found;) {
            found = false;
            std::vector<Msg> &held = held_[m.source];
            for (std::size_t i = 0; i < held.size(); ++i) {
                if (held[i].seq == expected_[m.source]) {
                    Msg next = held[i];
                    held.erase(held.begin() + static_cast<long>(i));
                    events.push_back(admit(next));
                    ++expected_[m.source];
                    found = true;
                    break;
                }
            }
        }
        return events;
    }

    /// A new receive takes the earliest-admitted unexpected message it
    /// accepts; otherwise it joins the end of the posted list.
    std::optional<Msg> post(int32_t source, int32_t tag, uintptr_t request) {
        if (std::optional<Msg> m = improbe(source, tag)) {
            return m;
        }
        posted_.push_back(Recv{source, tag, request});
        return std::nullopt;
    }

    std::optional<Msg> iprobe(int32_t source, int32_t tag) const {
        for (const Msg &m : unexpected_) {
            if (accepts(source, tag, m)) {
                return m;
            }
        }
        return std::nullopt;
    }

    std::optional<Msg> improbe(int32_t source, int32_t tag) {
        for (std::size_t i = 0; i < unexpected_.size(); ++i) {
            if (accepts(source, tag, unexpected_[i])) {
                Msg m = unexpected_[i];
                unexpected_.erase(unexpected_.begin() + static_cast<long>(i));
                return m;
            }
        }
        return std::nullopt;
    }

    bool cancel(uintptr_t request) {
        for (std::size_t i = 0; i < posted_.size(); ++i) {
            if (posted_[i].request == request) {
                posted_.erase(posted_.begin() + static_cast<long>(i));
                return true;
            }
        }
        return false;
    }

    std::size_t posted_count() const { return posted_.size(); }
    std::size_t unexpected_count() const { return unexpected_.size(); }
    std::size_t held_count() const {
        std::size_t n = 0;
        for (const auto &h : held_) {
            n += h.size();
        }
        return n;
    }
    const std::vector<Recv> &posted() const { return posted_; }
    const std::vector<Msg> &unexpected() const { return unexpected_; }
    const std::vector<std::vector<Msg>> &held() const { return held_; }

private:
    /// An admitted message goes to the earliest-posted receive that accepts
    /// it, or to the end of the unexpected list.
    Event admit(const Msg &m) {
        for (std::size_t i = 0; i < posted_.size(); ++i) {
            if (accepts(posted_[i].source, posted_[i].tag, m)) {
                uintptr_t request = posted_[i].request;
                posted_.erase(posted_.begin() + static_cast<long>(i));
                return Event{Event::kMatched, m.id, request};
            }
        }
        unexpected_.push_back(m);
        return Event{Event::kQueued, m.id, 0};
    }

    bool overtake_;
    std::vector<uint16_t> expected_;
    std::vector<std::vector<Msg>> held_;
    std::vector<Recv> posted_;    // posting order
    std::vector<Msg> unexpected_; // admission order
};

} // namespace match_model
