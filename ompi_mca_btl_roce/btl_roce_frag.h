// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "opal/mca/btl/btl.h"

namespace roce::btl {

class Endpoint;

/// Rails (ports of a process) whose keys a registration handle carries
/// (data/data_path.h): ports 0 .. kHandleRails - 1. The RDMA of a rail at a
/// higher port index, or to memory a peer registered there, is never carried
/// by another rail: it waits for its own, as without the table, and nothing
/// else changes for it.
inline constexpr unsigned kHandleRails = 4;
/// The valid bits of a handle's `rails` mask.
inline constexpr uint32_t kHandleRailMask = (1u << kHandleRails) - 1;

/// What a work request id points at. Pointers are 8-byte aligned, so the
/// low 3 bits of wr_id carry the kind; receive buffers use an index.
enum class WrKind : uint64_t {
    kSend = 1,    ///< a Frag (wr_id = Frag* | kind)
    kRdma = 2,    ///< an RdmaOp
    kSrqRecv = 3, ///< SRQ receive buffer (wr_id = index << 3 | kind)
    kUdRecv = 4,  ///< UD receive buffer
    kUdSend = 5,  ///< UD send buffer
    kControl = 6, ///< a credit-only message (wr_id = index << 3 | kind)
};
inline constexpr uint64_t kWrKindMask = 7;
inline uint64_t make_wr_id(const void *p, WrKind k) {
    return reinterpret_cast<uint64_t>(p) | static_cast<uint64_t>(k);
}
inline uint64_t make_wr_id(uint64_t index, WrKind k) {
    return (index << 3) | static_cast<uint64_t>(k);
}
inline WrKind wr_kind(uint64_t wr_id) { return static_cast<WrKind>(wr_id & kWrKindMask); }
template <typename T>
T *wr_ptr(uint64_t wr_id) {
    return reinterpret_cast<T *>(wr_id & ~kWrKindMask);
}
inline uint64_t wr_index(uint64_t wr_id) { return wr_id >> 3; }

/// A send descriptor handed to the PML. `base` must stay the first member:
/// Open MPI sees only the mca_btl_base_descriptor_t. The payload lives in
/// a slot of a registered slab (`buf`, `lkey`); in-place sends add a second
/// scatter/gather entry pointing at the user's registered buffer.
struct Frag {
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segments[2];
    uint8_t *buf = nullptr;   ///< header + payload space (registered)
    uint32_t lkey = 0;
    uint32_t capacity = 0;    ///< payload bytes available after the header
    uint32_t slot = 0;        ///< index in the pool
    Endpoint *endpoint = nullptr;
    uint8_t tag = 0;
    bool in_use = false;
    bool inplace = false;     ///< segments[1] is user memory
    uint32_t inplace_lkey = 0;
    void *inplace_reg = nullptr; ///< rcache registration to release
    Frag *next = nullptr;     ///< pending-queue link
    int path = -1;            ///< path it was last posted on
    uint32_t seq = 0;         ///< data fragment number (valid when has_seq)
    bool has_seq = false;     ///< numbered on first post; resends keep the number
    bool control = false;     ///< a credit-only message
    /// Carries a send of another rail (a wire::kForward fragment: its
    /// payload starts with a wire::ForwardHeader; data/forward.cc).
    bool forward = false;
    /// DC: error completions this send has had (the first puts it back in
    /// the queue, the second fails it; data/dc_send.cc).
    uint8_t dc_errors = 0;
};

/// Fixed pool of Frags over one registered slab. Not thread-safe (the
/// module lock covers it).
class FragPool {
public:
    FragPool() = default;
    FragPool(const FragPool &) = delete;
    FragPool &operator=(const FragPool &) = delete;
    ~FragPool();

    /// Sets up `count` frags of `slot_size` bytes each over `slab`
    /// (registered with `lkey`); the first kFragHeaderSize bytes of each slot
    /// hold the wire header.
    void init(uint8_t *slab, uint32_t lkey, size_t slot_size, size_t count);
    Frag *get();
    void put(Frag *f);
    size_t free_count() const { return free_.size(); }
    size_t size() const { return frags_.size(); }

private:
    std::vector<Frag> frags_;
    std::vector<Frag *> free_;
};

/// An RDMA or atomic operation in flight. Lives in a registered slab so
/// `result` can take the old value of a non-fetching atomic.
struct alignas(64) RdmaOp {
    uint64_t result = 0;
    mca_btl_base_rdma_completion_fn_t cbfunc = nullptr;
    void *cbcontext = nullptr;
    void *cbdata = nullptr;
    void *local_address = nullptr;
    mca_btl_base_registration_handle_t *local_handle = nullptr;
    Endpoint *ep = nullptr;
    RdmaOp *next_free = nullptr;
    bool copy_result = false; ///< copy `result` to local_address on completion
    // What to post again if its path fails (RDMA READ/WRITE are idempotent;
    // an atomic is reissued only if it never executed).
    ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
    ibv_sge sge{};
    uint64_t remote_address = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    int path = -1;            ///< where it is posted now
    RdmaOp *parent = nullptr; ///< striped: the operation this chunk belongs to
    uint32_t chunks_left = 0; ///< striped parent: chunks not completed yet
    int status = 0;           ///< OPAL code; a striped parent keeps the first error
    RdmaOp *next_retry = nullptr; ///< link in the endpoint's queue of ops to post again
    /// DC: error completions this operation (or chunk) has had
    /// (data/dc_rdma.cc: a read or write is posted again once).
    uint8_t dc_errors = 0;
    // A lost rail (data/rdma_carry.cc): the keys of the same memory on each
    // rail of this process (local) and of the peer's (remote), copied from
    // the handles when the operation was issued; bit p of the mask: valid.
    uint32_t rail_lkey[kHandleRails] = {};
    uint32_t rail_rkey[kHandleRails] = {};
    uint32_t lkey_rails = 0;
    uint32_t rkey_rails = 0;
    /// Waits on its own rail's retry queue: the rail that would carry it has
    /// no key for it (set by the origin module; cleared when posted).
    bool stay = false;
    /// A proxy: the operation of another rail of ours (on that rail's data
    /// path) this one carries; its completion goes there (cbfunc).
    RdmaOp *carried = nullptr;
};

} // namespace roce::btl
