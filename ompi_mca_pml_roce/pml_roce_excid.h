// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Extended communicator ids (Open MPI 5.0), the pure part: which
// communicator an extended id names here, and the messages that arrived by
// extended id before this process created the communicator. Pure C++ (no
// MPI types), unit-tested in tests/unit/test_pml_excid.cc. The protocol is
// on wire::ExtHdr (pml_roce_wire.h); the pml's use in pml_roce_ext.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"

namespace roce::pml::excid {

/// A communicator's 128-bit extended id (Open MPI 5.0's
/// ompi_comm_extended_cid_t: cid_base, cid_sub), the same on every process.
struct ExcId {
    uint64_t base = 0;
    uint64_t sub = 0;
    bool operator==(const ExcId &o) const noexcept { return base == o.base && sub == o.sub; }
};

struct ExcIdHash {
    std::size_t operator()(const ExcId &e) const noexcept {
        uint64_t h = e.base * 0x9e3779b97f4a7c15ull ^ (e.sub + 0x632be59bd9b4e019ull + (e.base << 6));
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};

/// What a message by extended id told about its sender: its rank in the
/// communicator and its index of it.
struct Announcement {
    int32_t src;
    uint32_t src_ctx;
};

/// Messages that waited for a communicator, handed over when it is created.
struct Waiting {
    /// The key under which the pml's EarlyArrivals holds the messages
    /// (a key no communicator index takes: >= kFirstWaitingKey).
    uint32_t key;
    /// Each message's announcement, in arrival order (one per message).
    std::vector<Announcement> announced;
};

/// Keys for EarlyArrivals above every communicator index (wire::kMaxContext).
inline constexpr uint32_t kFirstWaitingKey = uint32_t{1} << 31;

/// Extended id -> this process's index, for the communicators without a
/// global index that exist here, and the extended ids that messages named
/// before their communicator existed.
///
/// Nothing from the wire is trusted: a peer can name any extended id, so
/// at most `max_waiting` distinct unknown ids wait at once (hold() answers
/// kResourceExhausted beyond; the pml reports and drops the message).
///
/// Thread safety: none; the pml guards it with g.early_lock, together with
/// EarlyArrivals (the same "look up or hold" / "publish and transfer" rule).
class ExcIdTable {
public:
    explicit ExcIdTable(std::size_t max_waiting = 4096) noexcept : max_waiting_(max_waiting) {}

    /// Records that `id` is this process's communicator `ctx`. Returns the
    /// messages that waited for it, if any (removed from the table).
    /// kInvalidArgument if `id` is published already (two live
    /// communicators cannot share an extended id); kResourceExhausted when
    /// out of memory.
    util::Result<std::optional<Waiting>> publish(const ExcId &id, uint32_t ctx) noexcept;
    /// Forgets `id` (the communicator is being freed). False if unknown.
    bool unpublish(const ExcId &id) noexcept;
    /// This process's index of `id`, if the communicator exists here.
    std::optional<uint32_t> find(const ExcId &id) const noexcept;

    /// Notes a message by extended id for a communicator that does not exist
    /// here yet, and answers the EarlyArrivals key to hold it under (the
    /// same key for every message of that id). kResourceExhausted when
    /// `max_waiting` ids wait already, or out of memory.
    util::Result<uint32_t> hold(const ExcId &id, Announcement a) noexcept;

    std::size_t published() const noexcept { return by_id_.size(); }
    /// Distinct extended ids with waiting messages.
    std::size_t waiting() const noexcept { return waiting_.size(); }
    /// Forgets all waiting ids (finalize; the pml drains EarlyArrivals).
    void clear() noexcept;

private:
    std::size_t max_waiting_;
    uint32_t next_key_ = kFirstWaitingKey;
    std::unordered_map<ExcId, uint32_t, ExcIdHash> by_id_;
    std::unordered_map<ExcId, Waiting, ExcIdHash> waiting_;
};

} // namespace roce::pml::excid
