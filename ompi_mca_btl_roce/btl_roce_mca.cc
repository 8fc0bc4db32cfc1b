// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_mca.h"

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/btl/base/base.h"

#include "btl_roce.h"
#include "btl_roce_pvars.h"
#include "util/params.h"
#include "util/strings.h"
#include "proto/transport.h"
#include "proto/wire.h"

#include <algorithm>

namespace roce::btl {

namespace {

mca_base_component_t *component() { return &mca_btl_roce_component.super.btl_version; }

/// Storage of the generic btl_roce_* parameters (Open MPI's
/// mca_btl_base_param_register writes the user's values into an
/// mca_btl_base_module_t); validated_module_config() copies them into the
/// configuration, from which each module starts.
mca_btl_base_module_t g_generic;

// Registration never fails the component: a parameter that cannot be
// registered keeps its default, and validation reports bad values later.
template <typename T>
void reg(const char *name, const char *help, mca_base_var_type_t type, mca_base_var_enum_t *en,
         mca_base_var_info_lvl_t level, T *storage) {
    (void)mca_base_component_var_register(component(), name, help, type, en, 0,
                                          static_cast<mca_base_var_flag_t>(0), level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

mca_base_var_enum_t *make_enum(const char *name, const mca_base_var_enum_value_t *values) {
    mca_base_var_enum_t *en = nullptr;
    if (mca_base_var_enum_create(name, values, &en) != OPAL_SUCCESS) {
        return nullptr;
    }
    return en;
}

void release_enum(mca_base_var_enum_t *en) {
    if (en != nullptr) {
        OBJ_RELEASE(en);
    }
}

/// Whether the user gave btl_roce_<name> a value of their own (the
/// environment, a file, the command line, an override: any source but the
/// default) other than 0, which Open MPI's help for the generic latency and
/// bandwidth parameters defines as "auto-detect at run time".
bool user_set_nonzero(const char *name, unsigned value) {
    int idx = mca_base_var_find("opal", "btl", "roce", name);
    const mca_base_var_t *var = nullptr;
    if (idx < 0 || mca_base_var_get(idx, &var) != OPAL_SUCCESS || var == nullptr) {
        return false;
    }
    return var->mbv_source != MCA_BASE_VAR_SOURCE_DEFAULT && value != 0;
}

} // namespace

int register_params() noexcept {
    try {
        mca_btl_roce_params_t &p = mca_btl_roce_component.params;
        (void)mca_base_var_group_component_register(
            component(), "RoCE/LAG-aware verbs transport (ompi-roce)");

        p.if_include = nullptr;
        reg("if_include",
            "Comma-separated list of what this BTL may use; nothing else is used. Entries: an "
            "RDMA device (mlx5_bond_0), one port of it (mlx5_bond_0:1), a netdev (bond0, "
            "bond0.3027) or a subnet (198.18.0.0/24) that a GID's address must lie in. Mutually "
            "exclusive with btl_roce_if_exclude. Default: empty (use every RoCE port).",
            MCA_BASE_VAR_TYPE_STRING, nullptr, OPAL_INFO_LVL_1, &p.if_include);
        p.if_exclude = nullptr;
        reg("if_exclude",
            "Comma-separated list of RDMA devices, device:port pairs, netdevs or subnets this "
            "BTL must not use (same forms as btl_roce_if_include, with which it is mutually "
            "exclusive). Default: empty.",
            MCA_BASE_VAR_TYPE_STRING, nullptr, OPAL_INFO_LVL_1, &p.if_exclude);

        p.gid_index = -1;
        reg("gid_index",
            "GID table index to use on every port, or -1 to choose automatically (RoCE v2, "
            "IPv4-mapped, in the peer's subnet). A forced index is still checked against the "
            "live table (exists, not empty, RoCE, netdev allowed) and refused with the reason "
            "if unusable; roce-doctor shows the table.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_3, &p.gid_index);

        static const mca_base_var_enum_value_t kVersions[] = {
            {0, "auto"}, {1, "v1"}, {2, "v2"}, {0, nullptr}};
        mca_base_var_enum_t *versions = make_enum("btl_roce_roce_versions", kVersions);
        p.roce_version = 0;
        reg("roce_version",
            "RoCE version of the GIDs to use: auto (prefer RoCE v2, fall back to v1), v1 or v2 "
            "(also accepted as 0, 1, 2).",
            MCA_BASE_VAR_TYPE_INT, versions, OPAL_INFO_LVL_3, &p.roce_version);
        release_enum(versions);

        static const mca_base_var_enum_value_t kFamilies[] = {
            {0, "auto"}, {4, "ipv4"}, {6, "ipv6"}, {0, nullptr}};
        mca_base_var_enum_t *families = make_enum("btl_roce_address_families", kFamilies);
        p.address_family = 0;
        reg("address_family",
            "Address family of the GIDs to use: auto (IPv4-mapped, then global IPv6, then "
            "link-local IPv6 as a last resort), ipv4 or ipv6.",
            MCA_BASE_VAR_TYPE_INT, families, OPAL_INFO_LVL_3, &p.address_family);
        release_enum(families);

        p.qkey = select::kDefaultQkey;
        reg("qkey",
            "Q_Key of the UD queue pairs used for connection setup. Must have bit 31 clear "
            "(below 0x80000000) unless the process has CAP_NET_RAW: the kernel refuses a "
            "'controlled' qkey with EPERM otherwise.",
            MCA_BASE_VAR_TYPE_UNSIGNED_INT, nullptr, OPAL_INFO_LVL_5, &p.qkey);

        p.verbose = 0;
        // Open MPI's verbosity names (none, error, component, warn, info,
        // trace, debug, max) as well as numbers, like btl_base_verbose.
        reg("verbose",
            "Verbosity of the roce BTL: 0 errors and warnings only, 10 device/port/GID "
            "decisions and why, 50 connection events, 90 per-operation tracing; Open MPI's "
            "names (error, component, warn, info, trace, debug, max) work too. "
            "btl_base_verbose raises it too.",
            MCA_BASE_VAR_TYPE_INT, &mca_base_var_enum_verbose, OPAL_INFO_LVL_3, &p.verbose);

        p.srq_size = 512;
        reg("srq_size",
            "Receive buffers posted to the shared receive queue of each port (16..65536). Each "
            "holds max_send_size bytes; together with send_frags they are registered memory, "
            "shrunk automatically (with a warning) when the locked-memory limit is lower.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.srq_size);
        p.send_frags = 256;
        reg("send_frags",
            "Send buffers of each port (16..65536), max_send_size bytes each.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.send_frags);
        p.sq_depth = 128;
        reg("sq_depth", "Send queue depth of each RC queue pair and DC initiator (8..16384).",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.sq_depth);
        p.max_inline = 128;
        reg("max_inline",
            "Bytes of inline data requested for RC queue pairs (0..1024): small messages are "
            "copied into the work request instead of being read by DMA. The device may grant "
            "less.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.max_inline);
        p.credits = 32;
        reg("credits",
            "Receive credits granted to each peer (2..4096): how many messages a peer may have "
            "in flight to this process before it waits for credits to come back. Keeps the "
            "shared receive queue from being overrun.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.credits);
        p.ack_timeout = 18;
        reg("ack_timeout",
            "Local ACK timeout exponent of RC queue pairs (1..31): a lost packet is resent after "
            "4.096 us * 2^N (18: about 1 s).",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.ack_timeout);
        p.retry_count = 6;
        reg("retry_count",
            "Retransmissions of an RC packet before the queue pair gives up (0..7); the path "
            "then fails over and reconnects. 7 means 'retry forever' to soft-RoCE (rxe), so a "
            "peer whose address vanished would never be noticed there: the default is 6.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.retry_count);
        p.connect_timeout = 30;
        reg("connect_timeout",
            "Seconds to wait for a peer to answer a connection request (1..3600) before the "
            "connection fails with an error naming the peer.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_4, &p.connect_timeout);

        static const mca_base_var_enum_value_t kLag[] = {
            {0, "auto"}, {1, "off"}, {2, "affinity"}, {3, "sport"}, {0, nullptr}};
        mca_base_var_enum_t *lag = make_enum("btl_roce_lag_policies", kLag);
        p.lag_policy = 0;
        reg("lag_policy",
            "How the paths (RC queue pairs) to a peer are spread over the members of a LAG: "
            "auto (queue affinity on an mlx5 LAG device, else UDP source ports), off (one "
            "path), affinity (mlx5dv_modify_qp_lag_port: path i on LAG port i % n + 1), sport "
            "(a UDP source port per path, chosen so that a Linux bond with layer3+4 hashing "
            "puts path i on member i % n).",
            MCA_BASE_VAR_TYPE_INT, lag, OPAL_INFO_LVL_3, &p.lag_policy);
        release_enum(lag);
        p.num_paths = 0;
        reg("num_paths",
            "Paths (RC queue pairs) per peer, 0..16; 0 means one per LAG member (1 without a "
            "LAG). Large RDMA transfers are striped over them; when one fails, its traffic "
            "moves to the others while it reconnects.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_4, &p.num_paths);
        p.rdma_chunk = 1024 * 1024;
        reg("rdma_chunk",
            "Bytes (4096..1073741824, a multiple of 4096) of the largest RDMA read or write "
            "posted as one work request: larger ones are cut into equal chunks of at most this "
            "size, spread over the paths. Larger chunks mean fewer requests and protocol "
            "turns; smaller ones less data in flight per request and less to resend after a "
            "loss. Soft-RoCE (rxe) holds a read back while 128 PSNs are unacknowledged (one "
            "PSN per path-MTU packet), so its chunks follow each other rather than overlap "
            "(docs/perf/wire.md). The default, 1 MiB, reads a message of up to 1 MiB at once "
            "on one path (as UCX does) and still cuts it into one chunk per path when it is "
            "striped (btl_roce_rdma_stripe_min).",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.rdma_chunk);
        p.rdma_chunks_per_path = 4;
        reg("rdma_chunks_per_path",
            "RDMA chunks in flight on one path at most (1..64); the others wait for those to "
            "complete.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.rdma_chunks_per_path);
        p.rdma_stripe_min = 256 * 1024;
        reg("rdma_stripe_min",
            "Bytes (0..1073741824): an RDMA read or write at least this large is striped over "
            "every path of the peer that is up (at least one chunk per path), so a LAG's "
            "members share it.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.rdma_stripe_min);

        p.netmon = true;
        reg("netmon",
            "Watch the bonds, VLANs and addresses under the RoCE ports with rtnetlink (a "
            "thread that sleeps until the kernel reports a change) and verbs async events, so "
            "an address replaced on the bond or a GID table rewritten at a failover is known "
            "before the next connection: new connections use the reselected GID. Without it "
            "(or where netlink is refused) the same is found out from failed operations.",
            MCA_BASE_VAR_TYPE_BOOL, nullptr, OPAL_INFO_LVL_4, &p.netmon);

        static const mca_base_var_enum_value_t kTransports[] = {
            {0, "auto"}, {1, "rc"}, {2, "dc"}, {0, nullptr}};
        mca_base_var_enum_t *transports = make_enum("btl_roce_transports", kTransports);
        p.transport = static_cast<int>(TransportMode::kAuto);
        reg("transport",
            "What carries the data: auto (DC when the job has more peers than "
            "btl_roce_dc_peer_threshold and the device runs mlx5 DC, else RC), rc (reliable "
            "connections: a connection and a queue pair per peer and path) or dc (mlx5's "
            "Dynamically Connected transport: one DC target and btl_roce_dc_dcis initiators per "
            "port, whatever the number of peers; on a device without DC a warning and RC). Two "
            "processes use DC between them only when both chose it; btl_roce_verbose 10 says what "
            "each port chose and why.",
            MCA_BASE_VAR_TYPE_INT, transports, OPAL_INFO_LVL_3, &p.transport);
        release_enum(transports);
        p.dc_peer_threshold = static_cast<int>(kDefaultDcPeerThreshold);
        reg("dc_peer_threshold",
            "With btl_roce_transport = auto: DC when the job has more peers (processes - 1) "
            "than this (0..16777216). Below it RC is cheaper per message and its queue pairs "
            "still fit; above it RC's memory grows with every peer and DC's does not.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_4, &p.dc_peer_threshold);
        p.dc_dcis = static_cast<int>(kDefaultDcis);
        reg("dc_dcis",
            "DC initiators (send queues) per port when DC is used (1..64): how many peers this "
            "process sends to in parallel; each peer's traffic stays on one of them, in order.",
            MCA_BASE_VAR_TYPE_INT, nullptr, OPAL_INFO_LVL_5, &p.dc_dcis);

        // The generic btl_roce_{exclusivity,eager_limit,max_send_size,
        // rdma_pipeline_*,...} parameters, over the btl's defaults.
        btl_defaults(g_generic, &mca_btl_roce_component.super);
        (void)mca_btl_base_param_register(component(), &g_generic);
        register_pvars();
        return OPAL_SUCCESS;
    } catch (...) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
}

util::Result<select::Options> validated_options(bool privileged) {
    const mca_btl_roce_params_t &p = mca_btl_roce_component.params;
    select::RawOptions raw;
    raw.prefix = "btl_roce_";
    raw.if_include = p.if_include ? p.if_include : "";
    raw.if_exclude = p.if_exclude ? p.if_exclude : "";
    raw.gid_index = p.gid_index;
    raw.roce_version = p.roce_version;
    raw.address_family = p.address_family;
    raw.qkey = p.qkey;
    return select::parse_options(raw, privileged);
}

util::Result<ModuleConfig> validated_module_config() {
    const mca_btl_roce_params_t &p = mca_btl_roce_component.params;
    struct Check {
        const char *name;
        int value, lo, hi;
    };
    const Check checks[] = {
        {"btl_roce_srq_size", p.srq_size, 16, 65536},
        {"btl_roce_send_frags", p.send_frags, 16, 65536},
        {"btl_roce_sq_depth", p.sq_depth, 8, 16384},
        {"btl_roce_max_inline", p.max_inline, 0, 1024},
        {"btl_roce_credits", p.credits, 2, 4096},
        {"btl_roce_ack_timeout", p.ack_timeout, 1, 31},
        {"btl_roce_retry_count", p.retry_count, 0, 7},
        {"btl_roce_connect_timeout", p.connect_timeout, 1, 3600},
        {"btl_roce_num_paths", p.num_paths, 0, 16},
        {"btl_roce_rdma_chunks_per_path", p.rdma_chunks_per_path, 1, 64},
        {"btl_roce_rdma_stripe_min", p.rdma_stripe_min, 0, 1 << 30},
        {"btl_roce_lag_policy", p.lag_policy, 0, 3},
    };
    for (const Check &c : checks) {
        util::Status s = util::check_range(c.name, c.value, c.lo, c.hi);
        if (!s) {
            return s;
        }
    }
    if (p.rdma_chunk < 4096 || p.rdma_chunk > (1 << 30) || p.rdma_chunk % 4096 != 0) {
        return util::Status(util::Code::kInvalidArgument,
                            util::format("btl_roce_rdma_chunk = %d is invalid: allowed values "
                                         "are multiples of 4096 from 4096 to 1073741824 (bytes)",
                                         p.rdma_chunk));
    }
    auto transport = parse_transport(p.transport, p.dc_peer_threshold, p.dc_dcis);
    if (!transport) {
        return transport.status();
    }
    const mca_btl_base_module_t &t = g_generic;
    util::Status s = util::check_range("btl_roce_max_send_size",
                                       static_cast<int64_t>(t.btl_max_send_size), 1024,
                                       1024 * 1024, "1024..1048576 (bytes)");
    if (!s) {
        return s;
    }
    if (t.btl_eager_limit > t.btl_max_send_size) {
        return util::Status(util::Code::kInvalidArgument,
                            util::format("btl_roce_eager_limit = %zu is invalid: it must not "
                                         "exceed btl_roce_max_send_size (%zu)",
                                         t.btl_eager_limit, t.btl_max_send_size));
    }
    ModuleConfig c;
    c.btl = t;
    c.bandwidth_set = user_set_nonzero("bandwidth", t.btl_bandwidth);
    c.latency_set = user_set_nonzero("latency", t.btl_latency);
    c.device.srq_size = static_cast<uint32_t>(p.srq_size);
    c.device.send_frags = static_cast<uint32_t>(p.send_frags);
    c.device.sq_depth = static_cast<uint32_t>(p.sq_depth);
    c.device.max_inline = static_cast<uint32_t>(p.max_inline);
    // Slots hold the fragment header plus max_send_size, cache-line rounded,
    // and room for the header of a send forwarded from another rail (a
    // full-size send of a lost rail fits one slot of the rail carrying it).
    c.device.recv_slot = static_cast<uint32_t>(
        (t.btl_max_send_size + wire::kFragHeaderSize + wire::kForwardHeaderSize + 63) &
        ~size_t{63});
    c.credits_per_peer = static_cast<uint32_t>(p.credits);
    c.credit_threshold = c.credits_per_peer / 4 > 1 ? c.credits_per_peer / 4 : 1;
    c.ack_timeout = p.ack_timeout;
    c.retry_count = p.retry_count;
    c.connect_timeout_s = p.connect_timeout;
    c.lag_policy = static_cast<LagPolicy>(p.lag_policy);
    c.num_paths = static_cast<unsigned>(p.num_paths);
    c.rdma_chunk = static_cast<size_t>(p.rdma_chunk);
    c.chunks_per_path = static_cast<uint32_t>(p.rdma_chunks_per_path);
    c.stripe_min = static_cast<size_t>(p.rdma_stripe_min);
    c.transport = transport.value();
    // The receiver's duplicate window must exceed what can be in flight.
    c.seq_span = std::max<uint32_t>(8192, 4 * c.credits_per_peer * 16);
    return c;
}

} // namespace roce::btl
