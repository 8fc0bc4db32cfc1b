// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "opal/mca/btl/btl.h"
#include "opal/threads/mutex.h"

#include "btl_roce_addr.h"
#include "btl_roce_device.h"
#include "btl_roce_endpoint.h"
#include "connection/retire.h"
#include "connector/connector.h"
#include "counters.h"
#include "data/data_path.h"
#include "data/dc_resources.h"
#include "proto/lag.h"
#include "proto/transport.h"
#include "rails.h"
#include "netmon/event_queue.h"
#include "util/log.h"
#include "util/rate_limit.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::btl {
class Module;
}

/// The module as Open MPI sees it. `super` must stay first.
struct mca_btl_roce_module_t {
    mca_btl_base_module_t super;
    roce::btl::Module *impl;
};

namespace roce::btl {

/// Tunables from MCA parameters that the module (not the device) uses.
struct ModuleConfig {
    DeviceConfig device;
    /// The generic btl parameters as Open MPI registered them (eager limit,
    /// max send size, pipeline sizes, exclusivity, latency, bandwidth, flags,
    /// the component pointer); no function pointers. The module starts its
    /// mca_btl_base_module_t from this and installs its own function table.
    mca_btl_base_module_t btl{};
    uint32_t credits_per_peer = 32;
    uint32_t credit_threshold = 8;
    int ack_timeout = 18;      ///< IB local ACK timeout exponent: 4.096 us * 2^n
    int retry_count = 6;       ///< rxe retries forever at 7
    int rnr_retry = 7;         ///< 7 = retry forever on receiver-not-ready
    double connect_timeout_s = 30.0;
    double connect_retry_s = 0.2;
    double reconnect_delay_s = 0.05; ///< after a path fails, before its new REQ
    uint32_t max_rdma_ops = 256;
    LagPolicy lag_policy = LagPolicy::kAuto;
    unsigned num_paths = 0;          ///< 0: one per LAG member
    /// RC or DC (btl_roce_transport, btl_roce_dc_peer_threshold,
    /// btl_roce_dc_dcis): decided per module at create (Module::transport()).
    TransportConfig transport;
    size_t stripe_min = 256 * 1024;  ///< RDMA at least this large is striped (btl_roce_rdma_stripe_min)
    /// Reads and writes larger than this are posted in chunks of at most this
    /// size (or size/64, if larger), at most chunks_per_path of them in flight
    /// on a path: a bounded amount of data in flight per path, and a lost
    /// packet costs one chunk's retransmission. (A 64 MiB RDMA read as one
    /// request ran at about 1 MB/s between the soft-RoCE guests: its response
    /// overran the receiver and every gap restarted the read from there.)
    size_t rdma_chunk = 1024 * 1024;  ///< btl_roce_rdma_chunk
    uint32_t chunks_per_path = 4;    ///< btl_roce_rdma_chunks_per_path
    uint32_t seq_span = 8192;        ///< data fragments in flight per endpoint, at most
    /// btl_roce_bandwidth / btl_roce_latency were set by the user (to
    /// something other than Open MPI's 0, "auto-detect"): every module keeps
    /// them. Otherwise each module derives its bandwidth from its port
    /// (select::rail_bandwidth), so that the bml weighs rails by speed.
    bool bandwidth_set = false;
    bool latency_set = false;
};

/// btl_latency (us) and btl_bandwidth (Mb/s) before a module knows its port:
/// what ompi_info shows, and what a module keeps when its port's speed is
/// unknown (select::rail_bandwidth).
inline constexpr uint32_t kDefaultLatency = 10;
inline constexpr uint32_t kDefaultBandwidth = 25000;
/// Default btl_roce_max_send_size, eager_limit and rndv_eager_limit: 8 KiB
/// on the wire with the fragment header (a whole number of packets at every
/// RoCE MTU).
inline constexpr size_t kDefaultMaxSend = 8192 - wire::kFragHeaderSize;

/// The defaults of the generic btl parameters and the capabilities of this
/// btl (flags, atomics), before Open MPI registers the user's values over
/// them, and the module's function table. `component` is stored in
/// btl_component. The functions must be there at registration:
/// mca_btl_base_param_register registers the RDMA parameters (pipeline
/// sizes, latency, bandwidth, put/get limits) only when btl_put is set, and
/// ends with mca_btl_base_param_verify, which clears the PUT, GET and flush
/// flags of a module without those functions - a btl with no RDMA for ob1's
/// rendezvous and for osc/rdma.
void btl_defaults(mca_btl_base_module_t &t, mca_btl_base_component_t *component);

/// A module's btl_flags from the registered btl_roce_flags value: the same,
/// plus remote completion of RDMA (ROCE_BTL_FLAGS_REMOTE_COMPLETION, 5.0's
/// MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION, 0 under 4.1) when put or the
/// atomics are left. That flag is not among the registered defaults because
/// Open MPI's flag enumerator has no name for it: with it in the value,
/// ompi_info would print btl_roce_flags as empty. So a user who wants 5.0's
/// osc/rdma off the btl's RDMA takes fetching-atomics out of btl_roce_flags.
uint32_t module_flags(uint32_t registered);

/// Who this process is, the same for every module (the component learns it
/// from Open MPI and the kernel).
struct ProcessInfo {
    uint64_t name = 0;     ///< our Open MPI process name (jobid << 32 | vpid)
    uint64_t token = 0;    ///< our connection token, published in the modex (never 0)
    uint32_t job_size = 0; ///< processes in our job, from PMIx (0: unknown)
};

/// Open MPI's view of the other processes, as a module needs it. Both calls
/// may block (PMIx): the module makes them without its lock.
class PeerDirectory {
public:
    virtual ~PeerDirectory() = default;
    /// `proc`'s modex address: kNotFound when it published none, kProtocol
    /// when it is malformed.
    virtual util::Result<wire::ModexAddress> address(opal_proc_t *proc) = 0;
    /// The process of `name` (jobid << 32 | vpid), created if Open MPI knows
    /// the job; nullptr when it does not.
    virtual opal_proc_t *proc_for(uint64_t name) = 0;
};

/// Registration of user memory for RDMA and in-place sends. Production:
/// Open MPI's grdma cache over the module's PD (opal_env.h). Thread-safe:
/// called without the module lock.
class MemoryRegistry {
public:
    virtual ~MemoryRegistry() = default;
    /// A handle whose lkey/rkey cover [base, base + size) with the access of
    /// `flags` (MCA_BTL_REG_FLAG_*); nullptr when it cannot be registered.
    virtual mca_btl_base_registration_handle_t *register_mem(void *base, size_t size,
                                                             uint32_t flags) = 0;
    /// Releases a handle of register_mem (an OPAL code).
    virtual int deregister_mem(mca_btl_base_registration_handle_t *handle) = 0;
    /// Memory a registration covers, and its access (MCA_BTL_REG_FLAG_*).
    struct Extent {
        void *base = nullptr;
        size_t size = 0;
        uint32_t flags = 0;
    };
    /// What a live handle of register_mem covers (at least what was asked:
    /// grdma rounds to pages and merges neighbours): what the module
    /// registers on its sibling rails, so that their keys serve every user
    /// of the handle. Thread-safe, as the rest.
    virtual Extent extent(const mca_btl_base_registration_handle_t *handle) const = 0;
};

/// Everything a module takes from outside, so that N modules run in one
/// test process over FakeVerbs. The component fills it from Open MPI and
/// rdma-core (opal_env.h); nothing inside the module reaches for a global.
struct ModuleEnv {
    const verbs::VerbsApi *verbs = nullptr; ///< must outlive the module
    /// The current view of the machine for this module's device, shared and
    /// immutable: what preflight checks every QP transition and address
    /// handle against, and what endpoints choose their addressing from.
    /// Production: the process's topo::SnapshotCache
    /// (qp::cache_snapshot_source), which re-reads only a device or the
    /// netdevs that an event (or, without the monitor, age) marked stale.
    qp::SharedSnapshotSource snapshots;
    ProcessInfo who;
    PeerDirectory *peers = nullptr;         ///< must outlive the module
    /// The registry over the module's Device, made once the Device is open.
    std::function<util::Result<std::unique_ptr<MemoryRegistry>>(Device &dev)> registry;
    /// Monotonic seconds (default: CLOCK_MONOTONIC).
    std::function<double()> clock;
    /// btl_finalize: the owner forgets the module and deletes it (an OPAL code).
    std::function<int(mca_btl_base_module_t *)> finalized;
    /// A user-facing error of the running job: `topic` names its cause (a
    /// section of help-mpi-btl-roce.txt), `detail` says what happened. The
    /// module has already logged `detail` at error level (for "path failed"
    /// each failure has its warning line instead); the component adds
    /// the topic's explanation through opal_show_help (btl_roce_log.h,
    /// show_explanation). May be unset. Called with the module lock held.
    std::function<void(const char *topic, const std::string &detail)> report;
    /// The process's rails (its modules, and which peers each reaches now),
    /// shared by all of them: what a module that lost every path to a peer
    /// sends over meanwhile (rails.h). May be unset (one rail: nothing to
    /// move to).
    std::shared_ptr<Rails> rails;
};

/// One port's worth of transport, as a facade: it owns the verbs resources
/// (Device), the endpoint table, the Retirement of QPs, the connection side
/// (Connector, connector/connector.h: the handshake's ConnectionManager and
/// its verbs host, endpoint addressing, UD recovery) and the data path
/// (DataPath, data/data_path.h), and is what the C function table calls.
/// The data path's entry points (alloc to flush) are forwarded to the
/// DataPath as they are; the Module's own are the peers (add_procs), memory
/// registration, progress (which hands each completion to its part),
/// network events, counters and finalize. It is the data path's host: a
/// broken path, a needed connection and a first message go to the
/// Connector.
///
/// Locks. One lock, lock_, guards the module's mutable state: plan_ (its
/// snapshot is replaced when addresses change) and every member declared
/// after lock_ except registry_ - the Device's queues and pools, the
/// endpoints with both halves of their paths, the Retirement, the Connector
/// with its ConnectionManager, and the DataPath (none has a lock of its own;
/// the DataPath's QPN table, RDMA operation pool and deferred callbacks are
/// under this one, and its entry points take it, being given a reference).
/// Why one, and not one per part: a data-path event can change connection
/// state (an error completion retires the QP and reconnects) and a
/// connection event changes what the data path may use (a path coming up
/// drains the pending sends), in the same call; two locks would always be
/// taken together, in an order kept by hand.
/// progress() polls the CQ with it held, and under MPI_THREAD_MULTIPLE
/// only tries it (a thread that finds it taken returns: the holder is
/// progressing), so one thread at a time handles completions and reaps
/// retired QPs. Taken without it: the PML callbacks (DataPath::run_deferred),
/// the PeerDirectory calls (they may block on PMIx), the MemoryRegistry
/// (grdma has its own lock).
class Module final : private DataPathHost {
public:
    /// The module for `plan`'s port, its Device open (through env.verbs)
    /// and its UD QP ready. `env` and `log` are the component's (or a
    /// test's); `log` must outlive the module.
    static util::Result<std::unique_ptr<Module>> create(const PortPlan &plan,
                                                        const ModuleConfig &cfg, ModuleEnv env,
                                                        util::LogSink &log);
    ~Module() override;

    mca_btl_base_module_t *base() { return &c_.super; }
    static Module *from(mca_btl_base_module_t *b) {
        return reinterpret_cast<mca_btl_roce_module_t *>(b)->impl;
    }
    const PortPlan &plan() const { return plan_; }
    /// The port's verbs resources (tests reach the UD QP through it).
    Device &device() { return *dev_; }
    /// The sink the module logs to (the C function table logs the message
    /// of an error it maps to an OPAL code there, at debug level).
    util::LogSink &log() { return log_; }
    /// This module's modex advertisement; with DC queues (dc()), the DC
    /// target's number and access key (wire::kPortFlagDct).
    wire::PortAdvert advert() const;
    /// Index of this module in the process's modex address; the module
    /// joins ModuleEnv::rails under it.
    void set_port_index(uint16_t i);
    /// "device:port", for messages of other rails (immutable).
    const std::string &rail_name() const { return rail_name_; }
    /// The transport of this port, decided once at create (proto/transport.h:
    /// choose_transport on cfg.transport, the job size and the device's DC
    /// capability, asked through verbs::query_dc_support only when the
    /// parameters would pick DC) and logged: at info level
    /// (btl_roce_verbose 10), or as a warning when btl_roce_transport = dc
    /// is not fully honoured. `dc` is set when the port chose DC and its DC
    /// queues (dc()) were made and are published in advert(); if they could
    /// not be made, `dc` is cleared and the line says why (RC, nothing
    /// published). With `dc` set, sends, RDMA and atomics to a peer that
    /// published a DC target too go over DC (DataPath, data/dc_*.cc).
    /// Immutable after create.
    const TransportChoice &transport() const { return transport_; }
    /// The port's DC target and initiators (data/dc_resources.h); nullptr
    /// unless transport().dc. Made at create, destroyed at finalize before
    /// the Device.
    const DcResources *dc() const { return dc_.get(); }
    /// The DC counters (DataPath::dc_stats), and the data path for tests
    /// that look at its DCIs. Lock held or a single thread.
    const DcStats &dc_stats() const { return dp_->dc_stats(); }
    const DataPath &data_path() const { return *dp_; }

    // --- a lost rail (btl_roce_rails.cc; docs/architecture.md, "Losing a
    // rail"). Called by a sibling module, without any module lock held. ----
    /// Carries `origin` (a send of `from`'s endpoint for `peer`, numbered
    /// there, described by `hdr`) to `peer` as a wire::kForward fragment;
    /// when it is sent or given up, `from` learns it (forward_completed).
    /// retry_later() when no slot is free; kUnavailable when this module
    /// has no connected endpoint for `peer` (the send stays `from`'s).
    util::Status carry(uint64_t peer, const wire::ForwardHeader &hdr, const Frag &origin,
                       Module &from);
    /// A send of ours that a sibling carried is done there (`status` an
    /// OPAL code): DataPath::forward_done under our lock.
    void forward_completed(Frag *f, int status);
    /// Posts `origin` (a put or get of `from`'s endpoint for `peer`) on our
    /// endpoint for `peer`, with the keys of this rail (DataPath::carry_rdma);
    /// when that is done, `from` learns it (rdma_carried). retry_later()
    /// when we cannot now; kUnavailable without an endpoint for `peer`;
    /// kNotFound when the keys for this rail are missing (never carried here).
    util::Status carry_rdma(uint64_t peer, const RdmaOp &origin, Module &from);
    /// An RDMA operation of ours that a sibling carried is done there
    /// (`status` an OPAL code): DataPath::carried_rdma_done under our lock.
    void rdma_carried(RdmaOp *op, int status);
    /// Registers [base, base + size) with our registry alone, for a sibling
    /// whose registration it mirrors (register_mem); nullptr when it cannot
    /// be. No lock of ours is taken.
    mca_btl_base_registration_handle_t *register_for_rail(void *base, size_t size, uint32_t flags);
    /// Releases a handle of register_for_rail; a refusal is logged (warn).
    void release_for_rail(mca_btl_base_registration_handle_t *handle);
    /// A send of `sender`'s endpoint on this rail arrived over another rail
    /// (`via`, its label for messages): refused unless our endpoint for
    /// `sender` is the sender's port `hdr.origin_src_port`, else run
    /// through that endpoint's window and, if new, delivered to the PML as
    /// received here. `payload` holds hdr.length bytes.
    void receive_forwarded(uint64_t sender, const std::string &via,
                           const wire::ForwardHeader &hdr, const uint8_t *payload);
    /// Sends `hdr` (a wire::ForwardKind::kPortDown notice of another rail
    /// of ours, no payload) to `peer` over this rail. Errors: as carry.
    util::Status carry_notice(uint64_t peer, const wire::ForwardHeader &hdr);
    /// Follows `m`'s events about this port's netdevs from now on (checked
    /// in progress() with one atomic load; see on_net_events()).
    void follow(netmon::Monitor &m);
    /// Handles `events` as if the monitor had queued them (takes the lock):
    /// for a caller with another source of events, such as a test.
    void net_events(const std::vector<netmon::Event> &events);

    // --- BTL interface (btl_roce_module.cc) -------------------------------
    // Errors are util::Status; the C function table maps each to an OPAL
    // code once (to_opal, btl_roce_log.h). data/data_path.h says which code
    // each data-path answer becomes.
    /// Handles for the processes this port reaches (set in `reachable`);
    /// reads the modex without the lock. A peer it cannot reach is left out
    /// (logged at info level), not an error: always ok. What is allocated
    /// when (issue 19): an RC peer gets its Endpoint here (its paths' QPs
    /// come at its first send). A DC peer (it published a DC target on the
    /// port we reach, as we did) gets nothing of its own: its handle is
    /// its DC handle (dc_handle_of: its opal_proc_t's address, tagged),
    /// and only the first peer at a remote GID makes that GID's address
    /// handle (Connector::dc_dest, shared by the peers there). Its Endpoint
    /// (sequence windows, queues, label: some KiB) is made at its first
    /// use (endpoint()) or when its first fragment arrives (looked up as a
    /// process not added yet is, in progress). A process added again gets
    /// the handle it got before.
    util::Status add_procs(size_t nprocs, opal_proc_t **procs, mca_btl_base_endpoint_t **endpoints,
                           opal_bitmap_t *reachable);
    /// The Endpoint behind a handle of add_procs (nullptr for nullptr).
    /// For a DC handle it is found by name (the module lock taken around a
    /// hash look-up), or made now on the peer's first use: its modex read
    /// again without the lock, then add_peer with `use`; nullptr (logged)
    /// if that fails. What every entry point of the C function table calls
    /// with Open MPI's handle: inline, so an RC peer's costs one test.
    Endpoint *endpoint(mca_btl_base_endpoint_t *e) {
        return OPAL_LIKELY(!is_dc_handle(e)) ? Endpoint::from(e) : dc_endpoint(e);
    }
    /// DC peers with an Endpoint (used, or heard from). Lock held or a
    /// single thread.
    size_t dc_peers() const { return dp_->dc_peers(); }
    /// Remote GIDs with a DC address handle (shared by their peers).
    size_t dc_dests() const { return conn_->dc_dests(); }
    /// Nothing: endpoints live until finalize. Always ok.
    util::Status del_procs(size_t nprocs, opal_proc_t **procs, mca_btl_base_endpoint_t **endpoints);
    /// Logs the path counters and hands the module to env.finalized (which
    /// deletes it); kInternal when that refused. The module is gone when
    /// this returns.
    util::Status finalize();

    // --- the data path's entry points: forwarded (data/data_path.h has the
    // contracts; each takes the module lock itself) -------------------------
    /// DataPath::alloc.
    mca_btl_base_descriptor_t *alloc(Endpoint *ep, uint8_t order, size_t size, uint32_t flags) {
        return dp_->alloc(ep, order, size, flags);
    }
    /// DataPath::free_des.
    util::Status free_des(mca_btl_base_descriptor_t *des) { return dp_->free_des(des); }
    /// DataPath::prepare_src.
    mca_btl_base_descriptor_t *prepare_src(Endpoint *ep, opal_convertor_t *conv, uint8_t order,
                                           size_t reserve, size_t *size, uint32_t flags) {
        return dp_->prepare_src(ep, conv, order, reserve, size, flags);
    }
    /// DataPath::send.
    util::Status send(Endpoint *ep, mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag) {
        return dp_->send(ep, des, tag);
    }
    /// DataPath::sendi.
    util::Status sendi(Endpoint *ep, opal_convertor_t *conv, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                       mca_btl_base_descriptor_t **descriptor) {
        return dp_->sendi(ep, conv, header, header_size, payload_size, order, flags, tag,
                          descriptor);
    }
    /// DataPath::rdma (put and get).
    util::Status rdma(Endpoint *ep, bool is_put, void *local_address, uint64_t remote_address,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
        return dp_->rdma(ep, is_put, local_address, remote_address, local_handle, remote_handle,
                         size, cbfunc, cbcontext, cbdata);
    }
    /// DataPath::atomic.
    util::Status atomic(Endpoint *ep, void *local_address, uint64_t remote_address,
                        mca_btl_base_registration_handle_t *local_handle,
                        mca_btl_base_registration_handle_t *remote_handle, int op, uint64_t operand,
                        uint64_t compare, bool is_cswap, mca_btl_base_rdma_completion_fn_t cbfunc,
                        void *cbcontext, void *cbdata) {
        return dp_->atomic(ep, local_address, remote_address, local_handle, remote_handle, op,
                           operand, compare, is_cswap, cbfunc, cbcontext, cbdata);
    }
    /// DataPath::flush (progresses this module while it waits).
    util::Status flush(Endpoint *ep) { return dp_->flush(ep); }
    /// Registers user memory (MemoryRegistry, without the lock); nullptr
    /// when it cannot be, reported once as "registration failed". Also what
    /// the data path registers in-place sends with. The handle's table gets
    /// the keys of the same memory on every rail of the process (ports below
    /// kHandleRails; register_for_rail of each sibling, once per handle of
    /// our registry while it is held): what a sibling carries our RDMA with
    /// when this rail loses a peer. A rail that cannot register it is left
    /// out of the table.
    mca_btl_base_registration_handle_t *register_mem(void *base, size_t size,
                                                     uint32_t flags) override;
    /// Releases a handle of register_mem (without the lock), and with its
    /// last holder its registrations on the sibling rails; kInternal,
    /// naming the handle and the registry's OPAL code, when the registry
    /// refused.
    util::Status deregister_mem(mca_btl_base_registration_handle_t *handle) override;
    /// Where the PML's error callback goes (the data path calls it). Always ok.
    util::Status register_error(mca_btl_base_module_error_cb_fn_t cb) {
        dp_->set_error_cb(cb);
        return util::Status::ok();
    }

    /// Polls the completion queue and runs timers; returns the number of
    /// completions handled. Cheap when idle: one ibv_poll_cq.
    int progress();

    /// Appends this module's paths and connection-manager drops to `out`
    /// (btl_roce_counters.cc). Takes the module lock: any thread, never
    /// with the lock held.
    void read_counters(BtlCounters &out);

private:
    Module(const PortPlan &plan, const ModuleConfig &cfg, ModuleEnv env, util::LogSink &log);
    /// Seconds on the injected clock.
    double clock() const { return env_.clock(); }

    /// DataPathHost: a DC fragment from `name`, unknown here
    /// (Connector::queue_lookup). Lock held.
    bool dc_unknown_sender(uint64_t name) override { return conn_->queue_lookup(name); }

    /// The Endpoint of process `pn`, if it has one. Lock held.
    Endpoint *find_endpoint(const opal_process_name_t &pn);
    /// What Open MPI holds for process `pn` if it has an Endpoint, else
    /// nullptr. Lock held.
    mca_btl_base_endpoint_t *known(const opal_process_name_t &pn);
    /// Adds `proc` (modex address `addr`) at the first of its ports we
    /// reach. A peer that published a DC target there, as we did, is
    /// reached over DC: its GID's address handle is made if it is the
    /// first peer there (Connector::dc_dest, shared), and then, unless
    /// `use`, nothing more - its DC handle (dc_handle_of) is returned; with
    /// `use` (its first use, or its first fragment) its Endpoint is made
    /// with its DC route (DataPath::add_dc_peer). Any other peer gets its
    /// Endpoint (Connector::add_endpoint_at). nullptr and `why` when no
    /// port is reached. Lock held.
    mca_btl_base_endpoint_t *add_peer(opal_proc_t *proc, const wire::ModexAddress &addr,
                                      std::string *why, bool use);

    /// Looks up the names the Connector queued (unknown requesters of our
    /// job) and makes their endpoints; called without the lock (the
    /// PeerDirectory may block on PMIx).
    void resolve_lookups(const std::vector<uint64_t> &names);

    // DataPathHost, lock held (register_mem, deregister_mem and progress
    // are public above).
    /// The path's QP is broken: the manager retires it and reconnects.
    void path_failed(Endpoint &ep, size_t i, const std::string &why) override {
        conn_->manager().path_failed(ep, i, why);
    }
    void start_connect(Endpoint &ep) override { conn_->start_connect(ep); }
    /// Our progress and our siblings' (they may be carrying our RDMA), each
    /// without any module lock held: what flush waits with.
    int flush_progress() override;
    /// `ep` is in lost_ and a sibling rail reaches its peer (lock held).
    bool can_carry(const Endpoint &ep) override;
    /// The first message on a path doubles as the RTU.
    void rc_message(Endpoint &ep, size_t i) override { conn_->manager().on_rc_message(ep, i); }

    /// A user-facing error of the running job: its line at error level, then
    /// env_.report for the explanation.
    void report(const char *topic, const std::string &detail);

    // A lost rail (btl_roce_rails.cc).
    /// DataPathHost: a kForward fragment from `via`'s peer (untrusted).
    void forwarded(Endpoint &via, const uint8_t *data, size_t len) override;
    /// The Connector's news (lock held): `ep` has a live path again
    /// (`reached`), or lost its last one or failed.
    void reach_changed(Endpoint &ep, bool reached);
    /// Whether a sibling rail reaches `ep`'s peer now (lock held).
    bool reached_elsewhere(const Endpoint &ep) const;
    /// Moves the waiting sends, puts and gets of the endpoints in lost_ to a
    /// sibling rail that reaches their peer; called by progress without the
    /// lock.
    void reroute();
    /// reroute's part for the puts and gets of `ep`, over `b`.
    void reroute_rdma(Endpoint &ep, Module &b);
    /// The endpoint of this (carrying) module for `peer`, for carry and
    /// carry_rdma; kUnavailable naming this rail when it has none. Takes the lock.
    util::Status carrier_endpoint(uint64_t peer, Endpoint **ep);
    /// register_mem's part: the keys of the memory behind `h` on every
    /// sibling rail into h's table, once per handle held.
    void share_registration(mca_btl_base_registration_handle_t *h);
    /// deregister_mem's part: with the last holder of `h`, its registrations
    /// on the sibling rails are released.
    void unshare_registration(mca_btl_base_registration_handle_t *h);
    /// A forwarded fragment from `via` refused: counted, and one error line
    /// per sender per 10 s naming it. Lock held.
    void refuse_forwarded(const std::string &via, const std::string &why);

    // Progress and events (btl_roce_progress.cc, btl_roce_netmon.cc), lock held.
    void log_path_stats();
    void on_net_events();
    void handle_net_events(const std::vector<netmon::Event> &events);
    /// endpoint() for a DC handle (btl_roce_peers.cc).
    Endpoint *dc_endpoint(mca_btl_base_endpoint_t *e);
    /// A peer to tell, over a sibling rail, that our port went down: its
    /// name and its port index on this rail.
    struct PortDownNotice {
        uint64_t peer = 0;
        uint16_t peer_port = 0;
    };
    /// Tells each of `peers` over a sibling rail that our port went down
    /// (btl_roce_rails.cc); those without a free slot wait for the next
    /// pass. Without the lock.
    void tell_port_down(const std::vector<PortDownNotice> &peers);

    mca_btl_roce_module_t c_;
    PortPlan plan_;
    ModuleConfig cfg_;
    util::LogSink &log_;
    ModuleEnv env_;
    uint16_t port_index_ = 0;
    opal_mutex_t lock_;

    // Declared after dev_; the destructor tears them down in the order
    // that keeps every reference valid (btl_roce_module.cc).
    std::unique_ptr<Device> dev_;
    EndpointTable endpoints_;
    /// QPs taken out of service, destroyed once none of their completions
    /// can still reach the CQ (connection/retire.h). Their entries in the
    /// data path's QPN table live until then.
    std::unique_ptr<Retirement> retirement_;
    /// The DC target and initiators when the port chose DC (transport_.dc).
    std::unique_ptr<DcResources> dc_;
    /// Sends, RDMA, atomics and their completions (data/data_path.h); it
    /// owns the QPN table, the RDMA operation pool and the deferred PML
    /// callbacks.
    std::unique_ptr<DataPath> dp_;
    /// The connection side (connector/connector.h): the handshake, the
    /// paths' QPs, the endpoints' addressing, UD recovery.
    std::unique_ptr<Connector> conn_;
    std::unique_ptr<MemoryRegistry> registry_;
    /// Our registrations' copies on the sibling rails (register_mem): per
    /// handle of registry_, how many register_mem calls hold it and the
    /// sibling handles (by port index) to release with the last. Guarded by
    /// reg_mu_, a lock of its own (the registry is used without the module
    /// lock): never taken with the module lock, held while a sibling's
    /// registry is called (which takes no lock of ours, and registry locks
    /// are leaves), so there is no cycle.
    struct RailRegs {
        uint32_t refs = 0;
        mca_btl_base_registration_handle_t *sibling[kHandleRails] = {};
    };
    std::mutex reg_mu_;
    std::unordered_map<mca_btl_base_registration_handle_t *, RailRegs> rail_regs_;
    bool warned_registration_ = false;
    uint64_t progress_calls_ = 0;
    std::unique_ptr<netmon::EventQueue> netq_; ///< bond/address events (netmon)
    double readdress_at_ = 0;       ///< > 0: choose addresses again at this time
    bool port_down_ = false;        ///< the device said our port went down, not up since
    std::vector<PortDownNotice> notify_down_; ///< sent by progress() without the lock

    std::string rail_name_;         ///< "device:port"
    TransportChoice transport_;     ///< RC or DC, and why (immutable after create)
    /// Endpoints that were connected and have no live path now: their
    /// waiting sends go over a sibling rail (reroute) until a path is back.
    /// `announced`: the warning naming the sibling was written.
    struct Lost {
        Endpoint *ep = nullptr;
        bool announced = false;
    };
    std::vector<Lost> lost_;
    util::RateLimiter forward_warn_{10.0, 16}; ///< refused forwarded fragments
};

/// Seconds on a monotonic clock.
double now_seconds() noexcept;

} // namespace roce::btl
