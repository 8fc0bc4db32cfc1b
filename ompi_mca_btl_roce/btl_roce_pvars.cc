// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_pvars.h"

#include <cstdint>

#include "opal/constants.h"
// Open MPI 4.1 declares the pvar API without extern "C".
extern "C" {
#include "opal/mca/base/mca_base_pvar.h"
}

#include "btl_roce.h"

namespace roce::btl {
namespace {

using Read = uint64_t (*)(const BtlCounters &);

/// One variable: a process-wide value (`read`), or a per-path array of
/// unsigned values (`path`; `none` in the slots beyond the paths that
/// exist) or of PathSlotState values (`state`).
struct Def {
    const char *name;
    const char *help;
    int var_class;
    Read read = nullptr;
    uint64_t (*path)(const PathCounters &) = nullptr;
    uint64_t none = 0;
    bool state = false;
};

template <uint64_t PathCounters::*F>
uint64_t sum(const BtlCounters &c) {
    return c.total(F);
}

uint64_t paths_up(const BtlCounters &c) {
    return c.paths_up();
}
uint64_t path_count(const BtlCounters &c) {
    return c.paths.size();
}
uint64_t cm_malformed(const BtlCounters &c) {
    return c.cm_drops.malformed;
}
uint64_t cm_unauthenticated(const BtlCounters &c) {
    return c.cm_drops.unauthenticated;
}
uint64_t cm_other(const BtlCounters &c) {
    return c.cm_drops.misdirected + c.cm_drops.unknown_sender + c.cm_drops.unexpected;
}
template <uint64_t RailCounters::*F>
uint64_t rail_sum(const BtlCounters &c) {
    return c.rail_total(F);
}
template <uint64_t PathCounters::*F>
uint64_t field(const PathCounters &p) {
    return p.*F;
}
uint64_t peer_of(const PathCounters &p) {
    return p.peer_vpid;
}
/// path_peer of a slot without a path (no rank is this large).
constexpr uint64_t kNoPeer = 0xffffffffu;

constexpr int kCounter = MCA_BASE_PVAR_CLASS_COUNTER;
constexpr int kLevel = MCA_BASE_PVAR_CLASS_LEVEL;

// clang-format off
const Def kDefs[] = {
    {"bytes_sent", "Payload bytes this process sent over RoCE (sends and RDMA), summed over its ports and paths", kCounter, sum<&PathCounters::bytes_sent>},
    {"bytes_received", "Payload bytes of the data fragments this process received over RoCE (RDMA transfers are counted by their initiator)", kCounter, sum<&PathCounters::bytes_received>},
    {"messages_sent", "Sends and RDMA operations completed", kCounter, sum<&PathCounters::messages_sent>},
    {"messages_received", "Data fragments received", kCounter, sum<&PathCounters::messages_received>},
    {"rdma_reads", "RDMA reads posted (each chunk of a striped transfer counts once)", kCounter, sum<&PathCounters::rdma_reads>},
    {"rdma_writes", "RDMA writes posted (each chunk of a striped transfer counts once)", kCounter, sum<&PathCounters::rdma_writes>},
    {"retransmits", "Fragments and RDMA operations posted again on another path after their path failed", kCounter, sum<&PathCounters::retransmits>},
    {"failovers", "Paths that failed while connected (their traffic moved to the peer's other paths)", kCounter, sum<&PathCounters::failovers>},
    {"reconnects", "Paths connected again after a failure", kCounter, sum<&PathCounters::reconnects>},
    {"credit_stalls", "Sends that had to wait because the peer had granted no receive credit", kCounter, sum<&PathCounters::credit_stalls>},
    {"cm_dropped_malformed", "Connection-manager datagrams dropped because they did not parse", kCounter, cm_malformed},
    {"cm_dropped_unauthenticated", "Connection-manager datagrams dropped because their token was not the sender's (forged, or from a stale job)", kCounter, cm_unauthenticated},
    {"cm_dropped_other", "Connection-manager datagrams dropped for another reason: for another process, from an unknown sender, or fitting no connection state", kCounter, cm_other},
    {"rerouted_sends", "Sends of a port that had lost every path to their peer, carried by another port of this process that still reached it (a lost rail)", kCounter, rail_sum<&RailCounters::rerouted_sends>},
    {"rerouted_bytes", "Payload bytes of those sends", kCounter, rail_sum<&RailCounters::rerouted_bytes>},
    {"carried_bytes", "Payload bytes this process's ports carried for another of its ports that had lost its peer (equals rerouted_bytes once they completed)", kCounter, rail_sum<&RailCounters::carried_bytes>},
    {"forwarded_received", "Sends of peers received over another port than the one they were sent on (their rail was lost), delivered once", kCounter, rail_sum<&RailCounters::forwarded_received>},
    {"forwarded_refused", "Forwarded fragments refused: malformed, naming a port or sender that does not match, or beyond the window", kCounter, rail_sum<&RailCounters::forwarded_refused>},
    {"rerouted_rdma", "Puts and gets (each chunk of a large one counts once) of a port that had lost every path to their peer, carried by another port of this process that still reached it (a lost rail)", kCounter, rail_sum<&RailCounters::rerouted_rdma>},
    {"rerouted_rdma_bytes", "Bytes of those puts and gets", kCounter, rail_sum<&RailCounters::rerouted_rdma_bytes>},
    {"carried_rdma_bytes", "Bytes of puts and gets this process's ports posted for another of its ports that had lost its peer (equals rerouted_rdma_bytes once they completed, unless one was posted again after a failure)", kCounter, rail_sum<&RailCounters::carried_rdma_bytes>},
    {"port_down_notices", "Notices from peers, carried by another port, that their port of a rail went down: the paths to them on that rail failed at once instead of when their retries ran out", kCounter, rail_sum<&RailCounters::port_down_notices>},
    {"paths_up", "Paths (RC queue pairs to peers) connected now", kLevel, paths_up},
    {"path_count", "Paths this process has now, connected or not (the used length of the btl_roce_path_* arrays, which hold at most 64)", kLevel, path_count},
    {"path_bytes_sent", "Per path (array of 64; order: port, peer, path; see btl_roce_path_peer): payload bytes sent", kCounter, nullptr, field<&PathCounters::bytes_sent>},
    {"path_bytes_received", "Per path (array of 64): payload bytes received", kCounter, nullptr, field<&PathCounters::bytes_received>},
    {"path_failovers", "Per path (array of 64): failures while connected", kCounter, nullptr, field<&PathCounters::failovers>},
    {"path_reconnects", "Per path (array of 64): reconnections after a failure", kCounter, nullptr, field<&PathCounters::reconnects>},
    {"path_retransmits", "Per path (array of 64): work posted again after this path failed", kCounter, nullptr, field<&PathCounters::retransmits>},
    {"path_peer", "Per path (array of 64): the peer's rank in MPI_COMM_WORLD of its job (4294967295: no path in this slot)", kLevel, nullptr, peer_of, kNoPeer},
    {"path_state", "Per path (array of 64): -1 none, 0 idle (failed, reconnecting), 1 connecting, 2 awaiting the peer's RTU, 3 up", MCA_BASE_PVAR_CLASS_STATE, nullptr, nullptr, 0, true},
};
// clang-format on

bool is_array(const Def &d) {
    return d.read == nullptr;
}

int get_value(const mca_base_pvar_t *pvar, void *value, void *) noexcept {
    try {
        const Def &d = *static_cast<const Def *>(pvar->ctx);
        BtlCounters c = collect_counters();
        if (d.read != nullptr) {
            *static_cast<unsigned long long *>(value) = d.read(c);
        } else if (d.path != nullptr) {
            fill_slots(c, static_cast<unsigned long long *>(value), kPvarPathSlots,
                       static_cast<unsigned long long>(d.none), d.path);
        } else {
            fill_slots(c, static_cast<int *>(value), kPvarPathSlots,
                       static_cast<int>(PathSlotState::kNoPath),
                       [](const PathCounters &p) { return static_cast<int>(slot_state(p.state)); });
        }
        return OPAL_SUCCESS;
    } catch (...) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
}

int notify(mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *, int *count) noexcept {
    if (event == MCA_BASE_PVAR_HANDLE_BIND && count != nullptr) {
        *count =
            is_array(*static_cast<const Def *>(pvar->ctx)) ? static_cast<int>(kPvarPathSlots) : 1;
    }
    return OPAL_SUCCESS;
}

} // namespace

void register_pvars() noexcept {
    const auto *component = &mca_btl_roce_component.super.btl_version;
    const auto flags = static_cast<mca_base_pvar_flag_t>(MCA_BASE_PVAR_FLAG_READONLY |
                                                         MCA_BASE_PVAR_FLAG_CONTINUOUS);
    for (const Def &d : kDefs) {
        // path_state has no enumerator: Open MPI 4.1.4's ompi_info crashes
        // after printing a performance variable's enumeration; the values
        // are in its description instead.
        (void)mca_base_component_pvar_register(
            component, d.name, d.help, OPAL_INFO_LVL_4, d.var_class,
            d.state ? MCA_BASE_VAR_TYPE_INT : MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, nullptr,
            MCA_BASE_VAR_BIND_NO_OBJECT, flags, get_value, nullptr, notify, const_cast<Def *>(&d));
    }
}

} // namespace roce::btl
