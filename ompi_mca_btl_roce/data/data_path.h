// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "opal/mca/btl/btl.h"
#include "opal/threads/mutex.h"

#include "btl_roce_device.h"
#include "btl_roce_endpoint.h"
#include "btl_roce_frag.h"
#include "connection/retire.h"
#include "data/dc_resources.h"
#include "data/rdma_op_pool.h"
#include "util/log.h"
#include "util/rate_limit.h"
#include "util/status.h"

/// What the PML copies onto the wire for RDMA (btl_registration_handle_size
/// bytes, as the registering process wrote them): the keys of the module
/// the memory was registered with, and the keys of the same memory
/// registered on each rail of that process, indexed by the rail's port
/// index in its modex address (docs/architecture.md, "Losing a rail"):
/// when a rail loses its peer, another rail carries its put and get with
/// these. Bit p of `rails` says rail_rkey[p] and rail_lkey[p] are valid.
/// From the wire nothing of it is trusted: a wrong key only makes the NIC
/// refuse the access. Its size is a multiple of 8 (`reserved` pads it):
/// osc/rdma places the lock words of a window right after a copy of it and
/// changes them with 8-byte atomics, which the btl refuses when unaligned
/// (a 44-byte handle hung osc/rdma under Open MPI 5.0).
struct mca_btl_base_registration_handle_t {
    uint32_t rkey;
    uint32_t lkey;
    uint32_t rail_rkey[roce::btl::kHandleRails];
    uint32_t rail_lkey[roce::btl::kHandleRails];
    uint32_t rails;    ///< bit p: the keys of port p are valid
    uint32_t reserved; ///< zero: keeps the size a multiple of 8
};
static_assert(sizeof(mca_btl_base_registration_handle_t) % 8 == 0,
              "osc/rdma's lock words follow a copy of the handle: keep it 8-byte aligned");

namespace roce::btl {

/// Flow control: a resource (credit, send-queue slot, CQ room, descriptor,
/// RDMA operation, connection) is missing now; the caller retries after
/// progress. Code::kResourceExhausted with an empty message, so the hot path
/// neither formats nor allocates (to_opal: OPAL_ERR_OUT_OF_RESOURCE).
inline util::Status retry_later() {
    return util::Status(util::Code::kResourceExhausted, std::string());
}

/// The tunables the data path uses (a part of ModuleConfig, copied in this
/// order by Module::create).
struct DataPathConfig {
    uint32_t max_rdma_ops = 256;    ///< RDMA/atomic operations (and chunks) in flight
    size_t stripe_min = 256 * 1024; ///< RDMA at least this large is striped over the paths
    size_t rdma_chunk = 1024 * 1024; ///< reads/writes larger than this go in chunks
    uint32_t chunks_per_path = 4;   ///< chunks in flight on one path, at most
    uint32_t seq_span = 8192;       ///< data fragments in flight per endpoint, at most
};

/// What the data path needs from its owner (the Module): the connection
/// side's reactions, the memory registry, and a full progress for flush.
/// Called with the module lock held, except register_mem, deregister_mem
/// (prepare_src and the release of an in-place send call them as the Module
/// did: with or without it; the registry has its own lock) and
/// flush_progress (flush calls it without the lock).
class DataPathHost {
public:
    virtual ~DataPathHost() = default;
    /// Path `i` of `ep` is broken (a failed post or an error completion):
    /// the connection manager retires its QP and reconnects it.
    virtual void path_failed(Endpoint &ep, size_t i, const std::string &why) = 0;
    /// `ep` is needed and may be closed: connect it if it is.
    virtual void start_connect(Endpoint &ep) = 0;
    /// A fragment arrived on live path `i` of `ep` (the first one doubles as
    /// the handshake's RTU).
    virtual void rc_message(Endpoint &ep, size_t i) = 0;
    /// User memory registered for an in-place send; nullptr when it cannot
    /// be (the host reports that once).
    virtual mca_btl_base_registration_handle_t *register_mem(void *base, size_t size,
                                                             uint32_t flags) = 0;
    /// Releases a handle of register_mem; an error says which handle and
    /// what the registry answered.
    virtual util::Status deregister_mem(mca_btl_base_registration_handle_t *handle) = 0;
    /// One full progress of the module (completions, timers, callbacks),
    /// and of the rails that may carry its RDMA (a carried operation
    /// completes on that rail's CQ): what flush waits with. Called without
    /// the lock.
    virtual int flush_progress() = 0;
    /// `ep` has no live path, and another rail of this process reaches its
    /// peer: its puts and gets wait on the retry queue, where the host takes
    /// them to be carried by that rail (docs/architecture.md, "Losing a
    /// rail"), instead of answering retry_later(). Lock held.
    virtual bool can_carry(const Endpoint &ep) = 0;
    /// A wire::kForward fragment (`len` bytes after its FragHeader, not
    /// parsed yet: untrusted) arrived from `via`'s peer on this module and
    /// passed its window: the send of another rail it carries goes to that
    /// rail (data/forward.cc, Module::forwarded). Called without the lock,
    /// from run_deferred; `data` is valid only during the call.
    virtual void forwarded(Endpoint &via, const uint8_t *data, size_t len) = 0;
    /// A DC fragment names `name`, which has no endpoint here: true when it
    /// may be a process of our job not added yet (Open MPI adds remote
    /// processes lazily) and a lookup is queued, as for an unknown RC
    /// requester (Connector::unknown_requester); false: not one of ours.
    virtual bool dc_unknown_sender(uint64_t name) = 0;
};

/// What a module counts of a lost rail's traffic (issue 16), published with
/// the path counters (counters.h: RailCounters).
struct RailStats {
    uint64_t rerouted_sends = 0;   ///< our sends another rail carried (completed there)
    uint64_t rerouted_bytes = 0;   ///< their payload bytes
    uint64_t carried_sends = 0;    ///< sends of another rail of ours that we carried
    uint64_t carried_bytes = 0;    ///< their payload bytes
    uint64_t forwarded_received = 0;   ///< forwarded sends delivered to the PML as ours
    uint64_t forwarded_duplicates = 0; ///< forwarded sends dropped: the window had them
    uint64_t forwarded_refused = 0;    ///< forwarded fragments refused (malformed, wrong rail)
    uint64_t rerouted_rdma = 0;        ///< our puts/gets another rail carried (completed there)
    uint64_t rerouted_rdma_bytes = 0;  ///< their bytes
    uint64_t carried_rdma = 0;         ///< puts/gets of another rail of ours that we posted
    uint64_t carried_rdma_bytes = 0;   ///< their bytes
    uint64_t port_down_notices = 0;    ///< peers that said their port of this rail went down
};

/// What a module counts of its DC traffic (issue 19).
struct DcStats {
    uint64_t sends = 0;             ///< DC sends completed successfully
    uint64_t received = 0;          ///< DC fragments delivered to the PML
    uint64_t duplicates = 0;        ///< DC fragments dropped: the sender's window had them
    uint64_t refused_malformed = 0; ///< DC fragments refused: header or trailer malformed
    uint64_t refused_unknown = 0;   ///< DC fragments refused: the trailer names no DC peer of ours
    uint64_t errors = 0;            ///< error completions on our DCIs (flushes not counted)
    uint64_t requeued = 0;          ///< sends put back after a DCI error, posted again
    uint64_t failed = 0;            ///< sends failed after their second error completion
    uint64_t recoveries = 0;        ///< DCIs brought back from ERR
    uint64_t held = 0;              ///< DC fragments held until their sender was added
    uint64_t rdma = 0;              ///< RDMA reads, writes (chunks) and atomics completed over DC
    uint64_t rdma_failed =
        0; ///< of them failed (a read or write's second error, an atomic's first)
};

/// The data path of one module: sends (alloc, prepare_src, send, sendi and
/// the queue of sends that wait), credits, RDMA reads and writes (striped
/// over the paths, in chunks), atomics, flush, and the completions of all
/// of them; the fragments it receives, and the PML callbacks it defers.
///
/// Owns: the RDMA operation pool, the count of signaled work requests in
/// flight, the QPN table (which path a completion belongs to), the deferred
/// PML callbacks, and the rate limiter of warnings about what came from
/// the wire. Uses, without owning: the Device's fragment pool, SRQ and send
/// queues (the fragment slab is registered and sized with the Device's
/// queues, so it stays there), the Retirement (whose QPs' completions still
/// arrive here), the endpoints' transmit state (PathTx, the pending and
/// retry queues, the sequence windows) and the module's endpoint table
/// (read by flush).
///
/// The QPN table is here, not with the connection side that fills it, because
/// every completion looks it up: the connection side adds a QP with map_qp
/// when it installs one and removes it with unmap_qp once the Retirement has
/// destroyed it.
///
/// Locks. The data path has no lock of its own: the module lock (`lock`,
/// given at creation) guards all of its state, for the reason the Module
/// states (a completion changes connection state and a connection event
/// changes what may be sent, in one call). The BTL entry points (alloc to
/// flush, run_deferred) take it themselves, where the Module used to;
/// every other member is called with it held. The PML callbacks
/// (run_deferred) run without it.
///
/// Errors. The entry points that answer with a code return a util::Status,
/// which the C function table maps once to an OPAL code (to_opal,
/// btl_roce_log.h): flow control is retry_later() (kResourceExhausted, no
/// message: OPAL_ERR_OUT_OF_RESOURCE), a failed peer kUnavailable
/// (OPAL_ERR_UNREACH), a request this btl cannot serve kInvalidArgument
/// (OPAL_ERR_BAD_PARAM) or kUnsupported (OPAL_ERR_NOT_SUPPORTED); real errors
/// carry a message naming the operation and the peer. None of them ever
/// answers OPAL's positive "complete, no callback" (1): what is accepted
/// always completes through its callback. The statuses handed to the PML's
/// completion callbacks (Deferred::status) stay OPAL codes, as their C
/// signatures take; to_opal makes them where a Status is at hand.
class DataPath {
public:
    /// A data path over `dev` for the module whose Open MPI face is `btl`
    /// (its btl_max_send_size bounds sends; PML callbacks get it); its RDMA
    /// operation pool registered on the Device's PD. Every reference must
    /// outlive the data path.
    static util::Result<std::unique_ptr<DataPath>>
    create(DataPathHost &host, Device &dev, Retirement &retirement, const DataPathConfig &cfg,
           mca_btl_base_module_t *btl, opal_mutex_t &lock,
           const std::vector<std::unique_ptr<Endpoint>> &endpoints, std::function<double()> clock,
           util::LogSink &log);
    /// Releases the RDMA operation pool (before the Device goes).
    ~DataPath();
    DataPath(const DataPath &) = delete;
    DataPath &operator=(const DataPath &) = delete;

    // --- BTL entry points (data/send.cc, data/rdma.cc); take the lock ----
    /// A descriptor for `size` bytes (at most btl_max_send_size); nullptr
    /// when none is free (the PML retries).
    mca_btl_base_descriptor_t *alloc(Endpoint *ep, uint8_t order, size_t size, uint32_t flags);
    /// Gives back a descriptor of alloc or prepare_src (and its in-place
    /// registration). Always ok.
    util::Status free_des(mca_btl_base_descriptor_t *des);
    /// A descriptor with `reserve` bytes of header room and up to *size
    /// bytes of the convertor's data: packed into the slot, or, contiguous
    /// and at least 4 KiB, sent in place from the user's registered buffer.
    /// *size becomes what was taken. Packs without the lock.
    mca_btl_base_descriptor_t *prepare_src(Endpoint *ep, opal_convertor_t *conv, uint8_t order,
                                           size_t reserve, size_t *size, uint32_t flags);
    /// Posts `des` on a path with a credit, or queues it until one has
    /// (starting the connection if needed): ok either way, and des_cbfunc
    /// (when set) runs once it is sent or given up. kUnavailable
    /// (OPAL_ERR_UNREACH) when the endpoint failed; `des` stays the caller's.
    util::Status send(Endpoint *ep, mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag);
    /// Sends header + payload now, or answers retry_later() without
    /// touching the convertor when it cannot (not connected, sends queued,
    /// no credit, slot or CQ room, larger than btl_max_send_size): the PML
    /// then falls back to a descriptor. After a hard posting error (the
    /// path is failed over) it is retry_later() too, with the packed
    /// descriptor handed back in *descriptor. kInternal (OPAL_ERROR) when
    /// the convertor could not be packed.
    util::Status sendi(Endpoint *ep, opal_convertor_t *conv, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                       mca_btl_base_descriptor_t **descriptor);
    /// RDMA write (`is_put`) or read of `size` bytes; `cbfunc` runs (without
    /// the lock) when the whole operation is done. retry_later() while
    /// connecting (the connection is started) or out of operations or room;
    /// kUnavailable once failed; kInvalidArgument without an endpoint or,
    /// for a non-empty transfer, a handle.
    util::Status rdma(Endpoint *ep, bool is_put, void *local_address, uint64_t remote_address,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
    /// 64-bit fetch-and-add (op MCA_BTL_ATOMIC_ADD) or compare-and-swap
    /// (`is_cswap`); other ops are kUnsupported (OPAL_ERR_NOT_SUPPORTED).
    /// kInvalidArgument without an endpoint, with a target not 8-byte
    /// aligned, or without a remote handle - the last with no message, as
    /// Open MPI 4.1.4's osc/rdma asks that routinely for memory it reaches
    /// through shared memory. Otherwise as rdma. The old value lands in
    /// `local_address` when it is given.
    util::Status atomic(Endpoint *ep, void *local_address, uint64_t remote_address,
                        mca_btl_base_registration_handle_t *local_handle,
                        mca_btl_base_registration_handle_t *remote_handle, int op, uint64_t operand,
                        uint64_t compare, bool is_cswap, mca_btl_base_rdma_completion_fn_t cbfunc,
                        void *cbcontext, void *cbdata);
    /// Returns once no RDMA operation of `ep` (nullptr: of any endpoint) is
    /// outstanding, progressing the host meanwhile. Called without the lock.
    /// Always ok.
    util::Status flush(Endpoint *ep);
    /// Where PML errors go (btl_register_error).
    void set_error_cb(mca_btl_base_module_error_cb_fn_t cb) { error_cb_ = cb; }

    /// Work for the PML that must run without the module lock held.
    struct Deferred {
        enum class Kind { kRecv, kSendDone, kRdmaDone, kError } kind = Kind::kRecv;
        Endpoint *ep = nullptr;
        // kRecv
        int path = -1; ///< the live path it came on (-1: a retired QP)
        bool forwarded = false; ///< a wire::kForward fragment: for DataPathHost::forwarded
        uint32_t buf_index = 0;
        uint8_t tag = 0;
        uint8_t *data = nullptr;
        size_t len = 0;
        // kSendDone / kRdmaDone
        Frag *frag = nullptr;
        RdmaOp *op = nullptr;
        /// An OPAL code: what the PML's completion callback takes.
        int status = OPAL_SUCCESS;
        // kError
        std::string text;
    };

    // --- progress (data/completions.cc) ------------------------------------
    /// Nothing deferred: read by progress's idle test without the lock (as
    /// the Module always did).
    bool nothing_deferred() const { return deferred_.empty(); }
    /// A completion of a send, RDMA, SRQ receive or credit message (every
    /// kind but the UD QP's). Lock held.
    void on_completion(const ibv_wc &wc);
    /// Moves the deferred PML work into `todo` (lock held; `todo` empty),
    /// for run_deferred. The data path carries on in a buffer an earlier
    /// run_deferred gave back, so once the buffers have grown no progress
    /// call allocates.
    void take_deferred(std::vector<Deferred> &todo);
    /// Runs `todo` without the lock (taking it around the bookkeeping: the
    /// receive buffers go back to the SRQ as lists of up to
    /// Device::kSrqPostBatch, with their credits, after the callbacks;
    /// descriptors and RDMA operations after each), then clears it and
    /// keeps its buffer for take_deferred (`todo` is left without one).
    void run_deferred(std::vector<Deferred> &todo);

    // --- the connection side's events (data/data_path.cc); lock held ------
    /// Completions on `qpn` belong to path `i` of `ep` from now on.
    void map_qp(uint32_t qpn, Endpoint &ep, size_t i);
    /// `qpn` is destroyed: none of its completions can arrive any more.
    void unmap_qp(uint32_t qpn);
    /// A path of `ep` came up: what waits for it (sends, RDMA) goes out.
    void path_up(Endpoint &ep);
    /// `ep` failed: its queued sends and RDMA complete with
    /// OPAL_ERR_UNREACH and the PML's error callback gets `text`.
    void fail_endpoint(Endpoint &ep, const std::string &text);

    // --- a lost rail (data/forward.cc; docs/architecture.md, "Losing a
    // rail") ----------------------------------------------------------------
    /// Takes up to `max` of `ep`'s waiting sends, in order, for another rail
    /// to carry while `ep` has no live path: each keeps its number, and one
    /// never sent gets the next (while the window allows; the rest waits).
    /// Nothing when `ep` has a live path or has failed. Lock held.
    void take_for_forwarding(Endpoint &ep, size_t max, std::vector<Frag *> &out);
    /// Gives back `frags[from..]` (taken by take_for_forwarding and not
    /// carried) to the head of `ep`'s queue, in their order. Lock held.
    void give_back(Endpoint &ep, const std::vector<Frag *> &frags, size_t from);
    /// A send of ours that another rail carried is done there with `status`
    /// (an OPAL code): on success it completes here (its des_cbfunc, our
    /// btl) and counts in our window; otherwise it waits again at the head
    /// of the queue (same number), or fails with OPAL_ERR_UNREACH if `ep`
    /// has failed. Lock held.
    void forward_done(Frag *f, int status);
    /// Entry point (takes the lock): sends `hdr` and `origin`'s payload (a
    /// send of another rail's endpoint, not ours; nullptr for a notice
    /// without payload) to `ep`'s peer as one wire::kForward fragment,
    /// copied into one of our slots. `cb` runs
    /// (without the lock, our btl) with `cbdata` and `context` in the
    /// descriptor once it is sent or given up. retry_later() without a
    /// free slot; kUnavailable unless `ep` is connected; kInvalidArgument
    /// when the payload does not fit a slot.
    util::Status send_forward(Endpoint &ep, const wire::ForwardHeader &hdr, const Frag *origin,
                              mca_btl_base_completion_fn_t cb, void *cbdata, void *context);
    /// Runs `ep`'s receive window on `seq`, the number of a send of `ep`'s
    /// peer that another rail carried (kNew: deliver it, once). Lock held.
    SeqWindow::Verdict accept_forwarded(Endpoint &ep, uint32_t seq);
    /// Hands `len` bytes for `tag` to the PML's receive callback, as
    /// received from `ep` on this module. Without the lock; false when
    /// nobody registered `tag` (the caller warns).
    bool deliver(Endpoint &ep, uint8_t tag, const uint8_t *data, size_t len);
    // --- a lost rail's RDMA (data/rdma_carry.cc) -----------------------------
    /// Takes up to `max` puts and gets waiting on `ep`'s retry queue (not
    /// atomics, not those marked `stay`) for another rail to carry while
    /// `ep` has no live path. Nothing when `ep` is connected or failed. They
    /// stay counted as `ep`'s outstanding operations. Lock held.
    void take_for_carrying(Endpoint &ep, size_t max, std::vector<RdmaOp *> &out);
    /// Puts `ops[from..]` (taken by take_for_carrying and not carried) back
    /// on `ep`'s retry queue (posted at once if `ep` is connected again).
    /// Lock held.
    void give_back_rdma(Endpoint &ep, const std::vector<RdmaOp *> &ops, size_t from);
    /// Entry point (takes the lock): posts `origin` (a put or get of another
    /// rail's endpoint for `ep`'s peer) on `ep` as a proxy operation of ours
    /// (chunked and striped as our own), with the local key of our rail
    /// `local_port` and the peer's remote key of the port `ep` is connected
    /// to, both from `origin`'s tables. `cb` runs (without the lock, our btl)
    /// with `cbcontext` and `cbdata` once the proxy is done, with OPAL_SUCCESS
    /// or the error (the origin then waits again); nothing else of the
    /// origin is touched. retry_later() when `ep` is not connected or has no
    /// room or operation free; kNotFound when a table lacks the key needed
    /// (the memory is not registered on that rail: never carried here).
    util::Status carry_rdma(Endpoint &ep, uint16_t local_port, const RdmaOp &origin,
                            mca_btl_base_rdma_completion_fn_t cb, void *cbcontext, void *cbdata);
    /// An operation of ours that another rail carried is done there with
    /// `status` (an OPAL code): on success it completes here (the caller's
    /// callback, our btl and endpoint, once); otherwise it waits again on
    /// the retry queue (posted at once if the endpoint is connected), or
    /// fails with OPAL_ERR_UNREACH if the endpoint has failed. Lock held.
    void carried_rdma_done(RdmaOp *op, int status);

    /// The counts of rerouted, carried and forwarded sends and RDMA. Lock held.
    RailStats &rail_stats() { return rail_stats_; }
    const RailStats &rail_stats() const { return rail_stats_; }

    // --- DC (data/dc_send.cc; issue 19) ------------------------------------
    /// From now on sends to peers with a DC route go over `dc`'s DCIs, and
    /// fragments on its DCT are received as DC fragments; `self_name` is
    /// what our trailers name us. `dc` must outlive the data path. Lock held.
    void set_dc(DcResources *dc, uint64_t self_name);
    /// Our port index (the module's in our modex address), named in our DC
    /// trailers. Lock held.
    void set_dc_port(uint16_t port) { dc_port_ = port; }
    /// `ep` (whose peer published a DC target, as we did) is reached over
    /// DC through `ah` (to its GID, shared), its DCT number and key. Its DCI
    /// is fixed here, by a hash of the peer's name and port index over the
    /// pool: every send to a peer goes through one DCI, whose work requests
    /// execute in order, so the peer receives our sends in the order they
    /// were posted, as the PML needs; peers spread over the DCIs. A DC
    /// fragment is accepted only from a peer added here; what the peer sent
    /// before (held, see DcStats::held) is delivered now, in order. Called
    /// when a DC peer is first used (Module::endpoint) or first heard from
    /// (its lookup), never at add_procs. Lock held.
    void add_dc_peer(Endpoint &ep, ibv_ah *ah);
    /// DC peers with an Endpoint. Lock held.
    size_t dc_peers() const { return dc_peers_.size(); }
    /// `name` was looked up in vain: its held DC fragments are refused
    /// (counted, their buffers reposted). Lock held.
    void drop_dc_held(uint64_t name) { release_dc_held(name); }
    /// The DC counters. Lock held.
    const DcStats &dc_stats() const { return dc_stats_; }
    /// DCI `i`'s work requests in flight, and whether it waits for them to
    /// flush before it is recovered. Lock held.
    uint32_t dci_outstanding(size_t i) const { return dcis_.at(i).outstanding; }
    bool dci_broken(size_t i) const { return dcis_.at(i).broken; }

    /// Finalize, before the DCIs are destroyed (data/dc_close.cc; takes the
    /// lock): no DCI is posted to or recovered any more; DC sends and RDMA
    /// waiting in their endpoints' queues complete with OPAL_ERR_UNREACH;
    /// the CQ is polled until every DCI's work has completed, for at most
    /// `limit_s` seconds of the clock, then each DCI still busy is moved
    /// to ERR and its work flushes back (OPAL_ERR_UNREACH), for at most as
    /// long again. Every DC operation completes exactly once (its callback
    /// deferred: run_deferred runs it). Receives polled meanwhile are
    /// dropped (the PML is finalizing). A DCI that never flushed is logged
    /// (warn) with the count of its work requests.
    void close_dc(double limit_s);
    /// Work requests on the DCIs not completed yet. Lock held.
    uint32_t dci_work() const;

    /// "<what> completion error on qpn 0x..: <status> (vendor error 0x..)".
    static std::string wc_error(const ibv_wc &wc, const char *what);

    /// Signaled work requests in flight (sends and RDMA), and their bound
    /// (the CQ's room besides the receives). Lock held.
    uint32_t inflight() const { return inflight_; }
    uint32_t max_inflight() const { return max_inflight_; }

private:
    DataPath(DataPathHost &host, Device &dev, Retirement &retirement, const DataPathConfig &cfg,
             mca_btl_base_module_t *btl, opal_mutex_t &lock,
             const std::vector<std::unique_ptr<Endpoint>> &endpoints, std::function<double()> clock,
             util::LogSink &log);

    // Sends (data/send.cc), lock held.
    int pick_path(Endpoint &ep, uint8_t order, bool control) const;
    util::Status post_frag(Endpoint &ep, Frag *f);
    util::Status post_frag_on(Endpoint &ep, size_t i, Frag *f);
    void queue_pending(Endpoint &ep, Frag *f);
    /// A send must wait: counts a credit stall on a path that is up with
    /// a send-queue slot but no credit.
    void note_stall(Endpoint &ep);
    void drain_pending(Endpoint &ep);
    void maybe_send_credits(Endpoint &ep, size_t path);
    void release_frag(Frag *f);

    // DC sends and receives (data/dc_send.cc), lock held.
    util::Status dc_post(Endpoint &ep, Frag *f);
    bool dc_can_post(const Endpoint &ep) const;
    void dc_drain(Endpoint &ep);
    void dc_requeue(Endpoint &ep, Frag *f);
    void on_dc_send_completion(const ibv_wc &wc, Frag *f);
    void dc_maybe_recover(size_t dci);
    void handle_dc_recv(const ibv_wc &wc, uint32_t idx);
    /// Runs the held fragments of `name` (now a DC peer) again, in order.
    void release_dc_held(uint64_t name);
    // DC RDMA and atomics (data/dc_rdma.cc), lock held.
    util::Status dc_post_rdma(Endpoint &ep, RdmaOp *op);
    util::Status dc_start_rdma(Endpoint &ep, RdmaOp *op, size_t size);
    void dc_retry_rdma(Endpoint &ep);
    void on_dc_rdma_completion(const ibv_wc &wc, RdmaOp *op);

    // RDMA (data/rdma.cc), lock held.
    util::Status post_rdma_on(Endpoint &ep, size_t i, RdmaOp *op);
    /// `queue_all`: post nothing, every chunk (or the whole) waits on the
    /// retry queue (a lost rail's operation, for another rail to carry).
    util::Status start_rdma(Endpoint &ep, RdmaOp *op, size_t size, bool queue_all = false);
    util::Status issue(Endpoint &ep, RdmaOp *op, size_t size, bool queue_all = false);
    /// Cuts `op` (a read or write of `size` bytes) into `n` equal chunks,
    /// 4 KiB aligned, each an RdmaOp of the pool naming `op` as its parent,
    /// with its keys (the rail tables too); sets op->chunks_left. False,
    /// with `parts` empty and nothing taken, when the pool runs out. Lock
    /// held (RC and DC alike).
    bool cut_rdma(Endpoint &ep, RdmaOp *op, size_t size, size_t n, std::vector<RdmaOp *> &parts);
    util::Status ready_for_rdma(Endpoint &ep, const char *what);
    /// `carried`: set when `ep` is not connected but the host can carry
    /// its RDMA (can_carry): the operation is made, to wait for a carrier.
    util::Result<RdmaOp *> new_rdma_op(Endpoint &ep, const char *what, void *local_address,
                                       mca_btl_base_registration_handle_t *local_handle,
                                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                       void *cbdata, bool *carried = nullptr);
    /// `status` is an OPAL code, for the PML's callback.
    void rdma_done(RdmaOp *op, int status);
    void retry_rdma(Endpoint &ep);
    void on_rdma_completion(const ibv_wc &wc);

    // Completions (data/completions.cc), lock held.
    /// `status` is an OPAL code, for the PML's callback.
    void complete_frag(Frag *f, int status);
    void handle_recv(const ibv_wc &wc);
    /// A received fragment the PML has seen: its buffer to repost, and the
    /// path (-1: a retired QP) whose sender gets the credit back.
    struct Reposted {
        Endpoint *ep;
        int path;
        uint32_t buf_index;
    };
    void repost(const Reposted *done, size_t n);
    Path *account_completion(uint32_t qpn, Endpoint **ep);
    void on_send_completion(const ibv_wc &wc);
    /// A warning about something that came from the wire: at most one line
    /// per `key` per 10 s, carrying the count.
    void warn_limited(const std::string &key, const std::string &line);

    DataPathHost &host_;
    Device &dev_;
    Retirement &retirement_;
    DataPathConfig cfg_;
    mca_btl_base_module_t *btl_;
    opal_mutex_t &lock_;
    const std::vector<std::unique_ptr<Endpoint>> &endpoints_;
    std::function<double()> clock_;
    util::LogSink &log_;

    struct QpRef {
        Endpoint *ep = nullptr;
        size_t path = 0;
    };
    std::unordered_map<uint32_t, QpRef> by_qpn_;
    std::vector<Deferred> deferred_; ///< PML callbacks to run unlocked
    /// Emptied buffers of run_deferred, for take_deferred: one per progress
    /// call running callbacks at once (threads, or a callback's progress).
    std::vector<std::vector<Deferred>> spare_;
    RdmaOpPool rdma_ops_;
    uint32_t inflight_ = 0; ///< signaled sends + RDMA in flight (bounded by the CQ)
    uint32_t max_inflight_ = 0;
    mca_btl_base_module_error_cb_fn_t error_cb_ = nullptr;
    util::RateLimiter warn_{10.0, 16}; ///< warnings about what came from the wire
    RailStats rail_stats_;

    // DC (data/dc_send.cc).
    struct DciState {
        uint32_t outstanding = 0; ///< work requests posted, not completed
        bool broken = false;      ///< an error completion came: recover once outstanding is 0
    };
    DcResources *dc_ = nullptr;
    bool dc_closing_ = false; ///< close_dc: nothing posted on a DCI nor recovered
    uint64_t dc_name_ = 0;
    uint16_t dc_port_ = 0;
    std::vector<DciState> dcis_;
    std::unordered_map<uint32_t, size_t> dci_by_qpn_;
    /// The DC peers with an Endpoint, by process name (their port index is
    /// checked too).
    std::unordered_map<uint64_t, Endpoint *> dc_peers_;
    /// DC fragments from a process of our job with no endpoint yet, held
    /// (their SRQ buffers not reposted) until it is added (add_dc_peer) or
    /// found not to be ours: at most kMaxDcHeld, in arrival order.
    struct Held {
        uint64_t name = 0;
        ibv_wc wc{};
    };
    std::vector<Held> dc_held_;
    static constexpr size_t kMaxDcHeld = 64;
    DcStats dc_stats_;
};

} // namespace roce::btl
