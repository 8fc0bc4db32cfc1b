// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Extended communicator ids (Open MPI 5.0; under 4.1 nothing here runs but
// the refusal of an EXT fragment). A communicator made without a parent
// (MPI_Comm_create_from_group, sessions) has an index each process picks
// itself and a 128-bit extended id that is the same everywhere; one with an
// index above 16 bits does not fit a MATCH header. For such communicators
// (PmlComm::plain false) the sender looks up the receiver's index in
// PmlComm::peer_ctx:
//   known, <= 16 bits  plain MATCH/RNDV/RGET headers carrying it;
//   known, larger      EXT by index + the match-type header;
//   unknown            EXT by extended id + the match-type header. The
//                      receiver finds the communicator by that id (or keeps
//                      the message under a waiting key of EarlyArrivals
//                      until add_comm creates it), learns the sender's
//                      index from the EXT header, and answers once with a
//                      bare EXT by index carrying its own, from which the
//                      sender learns the receiver's.
// This is ob1's handshake (Open MPI 5.0's MCA_PML_OB1_HDR_TYPE_CID) in our
// format; nothing blocks in the send path (no PMIx lookup). Sequence
// numbers keep MPI order across headers of both kinds. The wire format is
// in pml_roce_wire.h, the pure tables in pml_roce_excid.h.
#include "pml_roce_internal.h"

#include <cstdio>

namespace roce::pml {
namespace {

excid::ExcId excid_of(const uint64_t id[2]) noexcept { return excid::ExcId{id[0], id[1]}; }

const uint64_t kNoExcid[2] = {0, 0};

// Refuses an EXT fragment or what it claims: counted, reported (rate
// limited), dropped.
void refuse_ext(const wire::ExtHdr &e, const char *why) noexcept {
    if (!should_log(&g.counters.bad_ext)) {
        return;
    }
    char to[64];
    if (e.common.flags & wire::kExtByIndex) {
        std::snprintf(to, sizeof to, "communicator index %u", e.dst_ctx);
    } else {
        std::snprintf(to, sizeof to, "extended id 0x%016" PRIx64 "%016" PRIx64, e.excid[0],
                      e.excid[1]);
    }
    report("refused message",
           "error: refused an EXT %s from rank %d (its index %u) for %s: %s; dropped (%" PRIu64
           " refused so far)",
           e.inner == 0 ? "answer" : wire::kind_name(e.inner), e.src, e.src_ctx, to, why,
           g.counters.bad_ext);
}

enum class Learnt { kNew, kKnown, kConflict, kBadSource };

// Records that rank `src` knows the communicator as `src_ctx`.
Learnt learn(PmlComm *pc, int32_t src, uint32_t src_ctx) noexcept {
    if (src >= pc->remote_size) {
        return Learnt::kBadSource;
    }
    uint32_t *slot = &pc->peer_ctx[src];
    uint32_t want = src_ctx + 1;
    uint32_t seen = 0;
    if (must_lock()) {
        if (__atomic_compare_exchange_n(slot, &seen, want, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return Learnt::kNew;
        }
    } else {
        seen = *slot;
        if (seen == 0) {
            *slot = want;
            return Learnt::kNew;
        }
    }
    return seen == want ? Learnt::kKnown : Learnt::kConflict;
}

// Tells rank `dst` our index of the communicator (a bare EXT by index).
void send_answer(PmlComm *pc, int32_t dst) noexcept {
    uint32_t v = must_lock() ? __atomic_load_n(&pc->peer_ctx[dst], __ATOMIC_ACQUIRE) : pc->peer_ctx[dst];
    if (v == 0) {
        return; // nothing to address it by (cannot happen: learnt first)
    }
    wire::ExtHdr a = wire::make_ext_answer(v - 1, pc->ctx, pc->my_rank, pc->excid);
    count(&g.counters.ext_answers);
    send_ctrl(ompi_comm_peer_lookup(pc->comm, dst), wire::Kind::kExt, &a, sizeof a);
}

// The communicator an EXT message names, with a reference, or nullptr: then
// the message was held (by extended id, communicator not created yet), or
// refused. Holding happens under g.early_lock, like hold_early.
PmlComm *find_or_hold(const wire::ExtMsg &m, mca_btl_base_module_t *btl, const Pieces &data) noexcept {
    const wire::ExtHdr &e = m.ext;
    if (e.common.flags & wire::kExtByIndex) {
        if (e.dst_ctx > roce::compat::kMaxContextId) {
            refuse_ext(e, "index above this process's pml_max_contextid");
            return nullptr;
        }
        PmlComm *pc = g.comms.acquire(e.dst_ctx);
        if (pc == nullptr && e.inner != 0) {
            // A communicator with a global index that this process has not
            // created yet: held by index as a MATCH would be.
            incoming(e.dst_ctx, btl, e.inner, &m.inner, m.inner.match, data);
            return nullptr;
        }
        if (pc == nullptr) {
            refuse_ext(e, "no such communicator here (an answer for a freed one?)");
        }
        return pc;
    }
    if (!roce::compat::kExtendedIds) {
        refuse_ext(e, "Open MPI 4.1 has no extended communicator ids");
        return nullptr;
    }
    Guard guard(&g.early_lock);
    if (std::optional<uint32_t> ctx = g.excids->find(excid_of(e.excid))) {
        PmlComm *pc = g.comms.acquire(*ctx);
        if (pc != nullptr) {
            return pc;
        }
    }
    if (e.inner == 0) {
        refuse_ext(e, "an answer for a communicator that does not exist here");
        return nullptr;
    }
    util::Result<uint32_t> key = g.excids->hold(excid_of(e.excid), {e.src, e.src_ctx});
    if (!key) {
        refuse_ext(e, key.status().message().c_str());
        return nullptr;
    }
    const wire::MatchHdr &mh = m.inner.match;
    Kept *k = keep_copy(btl, e.inner, &m.inner, data);
    if (k == nullptr || !g.early->hold(*key, match::Envelope{mh.src, mh.tag, mh.seq}, k).is_ok()) {
        fatal("out of memory holding a message for a communicator not created yet (extended id)");
    }
    ++g.counters.early;
    ++g.counters.ext_early;
    return nullptr;
}

} // namespace

void write_ext(const PmlComm *pc, int32_t dst, wire::Kind inner, uint8_t *p) noexcept {
    uint32_t v = must_lock() ? __atomic_load_n(&pc->peer_ctx[dst], __ATOMIC_ACQUIRE) : pc->peer_ctx[dst];
    wire::ExtHdr h = v != 0 ? wire::make_ext(inner, true, v - 1, pc->ctx, pc->my_rank,
                                             pc->global ? kNoExcid : pc->excid)
                            : wire::make_ext(inner, false, 0, pc->ctx, pc->my_rank, pc->excid);
    std::memcpy(p, &h, sizeof h);
    count(&g.counters.ext_sent);
}

int ext_add_comm(PmlComm *pc, ompi_communicator_t *comm, uint32_t *waiting_key,
                 std::vector<int32_t> &answers) noexcept {
    *waiting_key = 0;
    pc->plain = false;
    pc->global = roce::compat::comm_has_global_index(comm);
    pc->peer_ctx.reset(new (std::nothrow) uint32_t[pc->remote_size]());
    if (pc->peer_ctx == nullptr) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (pc->global) {
        // An index above 16 bits, the same everywhere: EXT by index.
        for (int32_t i = 0; i < pc->remote_size; ++i) {
            pc->peer_ctx[i] = pc->ctx + 1;
        }
        return OMPI_SUCCESS;
    }
    roce::compat::comm_excid(comm, pc->excid);
    if (!OMPI_COMM_IS_INTER(comm)) {
        pc->peer_ctx[pc->my_rank] = pc->ctx + 1; // messages to ourselves
    }
    auto w = g.excids->publish(excid_of(pc->excid), pc->ctx);
    if (!w) {
        report("internal error", "error: communicator %s (index %u): %s", comm->c_name, pc->ctx,
               w.status().message().c_str());
        return w.status().code() == util::Code::kResourceExhausted ? OMPI_ERR_OUT_OF_RESOURCE
                                                                    : OMPI_ERR_BAD_PARAM;
    }
    if (!w->has_value()) {
        return OMPI_SUCCESS;
    }
    const excid::Waiting &waiting = **w;
    *waiting_key = waiting.key;
    for (const excid::Announcement &a : waiting.announced) {
        wire::ExtHdr e = wire::make_ext(wire::Kind::kMatch, false, 0, a.src_ctx, a.src, pc->excid);
        switch (learn(pc, a.src, a.src_ctx)) {
        case Learnt::kNew:
            try {
                answers.push_back(a.src);
            } catch (const std::bad_alloc &) {
                fatal("out of memory answering a peer of communicator %u", pc->ctx);
            }
            break;
        case Learnt::kKnown: break;
        case Learnt::kConflict: refuse_ext(e, "another index than this rank announced before"); break;
        case Learnt::kBadSource: refuse_ext(e, "source rank outside the communicator"); break;
        }
    }
    return OMPI_SUCCESS;
}

void ext_send_answers(PmlComm *pc, const std::vector<int32_t> &answers) noexcept {
    for (int32_t dst : answers) {
        send_answer(pc, dst);
    }
}

void ext_del_comm(PmlComm *pc) noexcept {
    if (roce::compat::kExtendedIds && !pc->global) {
        (void)g.excids->unpublish(excid_of(pc->excid));
    }
}

} // namespace roce::pml

using namespace roce::pml;

extern "C" {

void mca_pml_roce_cb_ext(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const roce::compat::RecvDesc *des) {
    wire::ExtMsg m;
    Pieces data;
    wire::Defect d = wire::Defect::kShort;
    if (des->des_segment_count >= 1) {
        const mca_btl_base_segment_t &s = des->des_segments[0];
        const auto *p = static_cast<const uint8_t *>(s.seg_addr.pval);
        // The inner header's size follows from its kind (byte 4); decode_ext
        // checks everything, including a segment too short for it.
        std::size_t hb = sizeof(wire::ExtHdr);
        if (s.seg_len > offsetof(wire::ExtHdr, inner)) {
            hb += wire::match_header_size(p[offsetof(wire::ExtHdr, inner)]);
        }
        if (pieces_of(des, hb < s.seg_len ? hb : s.seg_len, data)) {
            d = wire::decode_ext(p, s.seg_len, data.total, m);
        }
    }
    if (d != wire::Defect::kNone) {
        reject_header(tag, des, d);
        return;
    }
    const wire::ExtHdr &e = m.ext;
    CommRef pc(find_or_hold(m, btl, data));
    if (!pc) {
        return;
    }
    if (!pc->plain && !pc->global) {
        if (!(pc->excid[0] == e.excid[0] && pc->excid[1] == e.excid[1])) {
            refuse_ext(e, "the communicator with that index here has another extended id");
            return;
        }
        switch (learn(pc.get(), e.src, e.src_ctx)) {
        case Learnt::kNew:
            if (!(e.common.flags & wire::kExtByIndex)) {
                send_answer(pc.get(), e.src); // the sender does not know our index
            }
            break;
        case Learnt::kKnown: break;
        case Learnt::kConflict:
            refuse_ext(e, "another index than this rank announced before");
            return;
        case Learnt::kBadSource:
            refuse_ext(e, "source rank outside the communicator");
            return;
        }
    }
    if (e.inner == 0) {
        return; // an answer: learnt above
    }
    incoming_on(pc.get(), btl, e.inner, &m.inner, m.inner.match, data);
}

} // extern "C"
