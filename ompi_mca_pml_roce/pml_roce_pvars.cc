// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_internal.h"

#include "pml_roce_pvars.h"

#include <cstdint>

// Open MPI 4.1 declares the pvar API without extern "C".
extern "C" {
#include "opal/mca/base/mca_base_pvar.h"
}

#include "pml_roce.h"

namespace roce::pml {
namespace {

/// Queue lengths summed over the live communicators.
struct Queues {
    uint64_t posted = 0, unexpected = 0, held = 0;
};

Queues queues() noexcept {
    Queues q;
    Guard early(&g.early_lock); // the list of PmlComms and their lives
    for (PmlComm *pc = g.comm_all; pc != nullptr; pc = pc->next_all) {
        if (__atomic_load_n(&pc->refs, __ATOMIC_ACQUIRE) <= 0 || !pc->matcher) {
            continue; // retired, in the pool
        }
        Guard lock(&pc->lock);
        match::MatcherStats s = pc->matcher->stats();
        q.posted += s.posted;
        q.unexpected += s.unexpected;
        q.held += s.held;
    }
    return q;
}

uint64_t load(const uint64_t &v) noexcept {
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

using Read = uint64_t (*)();

struct Def {
    const char *name;
    const char *help;
    int var_class;
    Read read;
};

// clang-format off
const Def kDefs[] = {
    {"posted_recvq_length", "Receives posted and not matched yet, summed over communicators", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return queues().posted; }},
    {"unexpected_msgq_length", "Messages arrived in order and not matched by a receive yet, summed over communicators", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return queues().unexpected; }},
    {"held_msgq_length", "Messages arrived ahead of their sequence number and held until the earlier ones arrive", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return queues().held; }},
    {"early_arrivals", "Messages for communicators this process has not created yet", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return static_cast<uint64_t>(g.early != nullptr ? g.early->size() : 0); }},
    {"match_attempts", "Attempts to match: message arrivals, receives posted and probes", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.match_attempts); }},
    {"rndv_sends_in_flight", "Sends waiting for the receiver's answer (rendezvous, RDMA get or send pipeline)", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return static_cast<uint64_t>(g.send_ids.live()); }},
    {"rndv_recvs_in_flight", "Receives waiting for the fragments of a rendezvous message", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return static_cast<uint64_t>(g.recv_ids.live()); }},
    {"sends_eager", "Messages sent eagerly (inline or copied)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.eager_inline) + load(g.counters.eager_copy); }},
    {"sends_rndv", "Messages sent with the rendezvous protocol", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.rndv); }},
    {"sends_rget", "Rendezvous messages the receiver fetched with RDMA get", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.rget); }},
    {"sends_pipeline", "Rendezvous messages sent through the send pipeline (fragments)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.pipeline); }},
    {"sends_stream", "Rendezvous messages streamed (header and fragments at once, pml_roce_stream_limit)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.streams); }},
    {"rget_split", "RDMA-get rendezvous messages this process received split: it got the first part while the sender put the rest (pml_roce_split_min)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.splits); }},
    {"split_put_fallbacks", "Split rendezvous whose sender sent its part in fragments instead of a put", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.split_fallbacks); }},
    {"stream_pieces_kept", "Pieces of streamed messages kept because their receive had not matched yet", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.stream_staged); }},
    {"refused_headers", "Protocol headers refused (malformed, unknown request id, outside the message)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.bad_headers) + load(g.counters.bad_ids) + load(g.counters.bad_frags) + load(g.counters.bad_streams) + load(g.counters.bad_split); }},
    {"ext_headers_sent", "Messages sent behind an EXT header (Open MPI 5.0: the receiver's index of the communicator unknown yet, or above 16 bits)", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.ext_sent); }},
    {"ext_early_arrivals", "Messages by extended communicator id that arrived before this process created the communicator", MCA_BASE_PVAR_CLASS_COUNTER,
     [] { return load(g.counters.ext_early); }},
    {"pending_requests", "Sends, gets and control messages waiting for BTL resources", MCA_BASE_PVAR_CLASS_LEVEL,
     [] { return static_cast<uint64_t>(__atomic_load_n(&g.pending_count, __ATOMIC_RELAXED)); }},
};
// clang-format on

int get_value(const mca_base_pvar_t *pvar, void *value, void *) noexcept {
    const Def &d = *static_cast<const Def *>(pvar->ctx);
    *static_cast<unsigned long long *>(value) = g.enabled ? d.read() : 0;
    return OMPI_SUCCESS;
}

} // namespace

void register_pvars() noexcept {
    const auto *component = &mca_pml_roce_component.super.pmlm_version;
    const auto flags = static_cast<mca_base_pvar_flag_t>(MCA_BASE_PVAR_FLAG_READONLY |
                                                         MCA_BASE_PVAR_FLAG_CONTINUOUS);
    for (const Def &d : kDefs) {
        (void)mca_base_component_pvar_register(component, d.name, d.help, OPAL_INFO_LVL_4,
                                               d.var_class, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG,
                                               nullptr, MCA_BASE_VAR_BIND_NO_OBJECT, flags,
                                               get_value, nullptr, nullptr, const_cast<Def *>(&d));
    }
}

} // namespace roce::pml
