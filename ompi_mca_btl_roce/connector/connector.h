// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "btl_roce_addr.h"
#include "btl_roce_device.h"
#include "btl_roce_endpoint.h"
#include "connection/manager.h"
#include "connection/retire.h"
#include "data/data_path.h"
#include "qp/queue_pair.h"
#include "util/log.h"
#include "util/status.h"

namespace roce::btl {

struct ModuleConfig;

/// A GID as the address it holds, for messages ("10.0.0.1" for an
/// IPv4-mapped one, else the IPv6 text).
std::string gid_text(const wire::Gid &g);

/// What a Connector takes from its module: shared state it reads and
/// writes under the module lock, and the module's ways out.
struct ConnectorEnv {
    /// The module's port plan; its `snapshot` is replaced by every current
    /// view the Connector takes (the plan is what new endpoints, the advert
    /// and the bond view read).
    PortPlan *plan = nullptr;
    const ModuleConfig *cfg = nullptr;
    Device *dev = nullptr;
    Retirement *retirement = nullptr;
    DataPath *dp = nullptr;
    EndpointTable *endpoints = nullptr;
    /// The current view of the machine (ModuleEnv::snapshots).
    qp::SharedSnapshotSource snapshots;
    std::function<double()> clock;
    uint64_t self_name = 0;       ///< our process name (the loopback endpoint's)
    uint32_t self_job_size = 0;   ///< processes in our job (0: unknown)
    /// A user-facing error of the running job (Module::report: its line,
    /// then the explanation).
    std::function<void(const char *topic, const std::string &detail)> report;
    /// Only the explanation of `topic` (ModuleEnv::report; may be unset).
    std::function<void(const char *topic, const std::string &detail)> explain;
    /// `ep` has a live path again (true: a path came up), or has none any
    /// more (false: its last path was lost, or the peer failed): the module
    /// tells its sibling rails (rails.h). May be unset.
    std::function<void(Endpoint &ep, bool reached)> reach_changed;
    /// Whether another rail of this process reaches `ep`'s peer now (then
    /// losing every path of this one is not the peer's failure). May be
    /// unset: no other rail.
    std::function<bool(const Endpoint &ep)> reached_elsewhere;
};

/// The connection side of one module, over rdma-core: it owns the
/// ConnectionManager (the handshake, connection/manager.h) and is its host
/// (CmHost): the UD address handles, the paths' RC QPs - created in INIT,
/// paired over the LAG, connected to RTR and RTS, pinned to a LAG port,
/// retired - and what the data path must do when a path comes up, is lost,
/// or a peer fails. It also keeps the addressing of every endpoint (one
/// Selection each, chosen by common/select from the shared view and
/// revalidated against it), creates endpoints (from the modex or for a
/// requester of our job that Open MPI has not added yet), recovers the UD
/// QP after a failed completion, and reaps retired QPs.
///
/// Locks: none of its own. Every call is made with the module lock held,
/// which also guards everything it is given in ConnectorEnv; the Module
/// says why there is one lock (btl_roce_module.h).
///
/// Lifetime: made after the Device, the Retirement, the DataPath and the
/// endpoint table, destroyed before them; `retire_all` before the
/// endpoints go.
class Connector final : private CmHost {
public:
    /// `env`'s pointers must outlive the Connector; `me` is the manager's
    /// identity (our name, token, port index, UD QPN).
    Connector(ConnectorEnv env, const CmIdentity &me, util::LogSink &log);
    ~Connector() override;
    Connector(const Connector &) = delete;
    Connector &operator=(const Connector &) = delete;

    /// The handshake: busy(), run_timers(), path_failed(), on_rc_message(),
    /// drops(), set_identity().
    ConnectionManager &manager() { return *cm_; }
    const ConnectionManager &manager() const { return *cm_; }

    /// `ep` is needed: connects it if it is closed (a handshake, or for the
    /// loopback endpoint a local wiring); nothing otherwise.
    void start_connect(Endpoint &ep);

    /// The first of a peer's ports (in its modex address) we reach, and how
    /// (chosen from the current view).
    struct PortPick {
        size_t port = 0;
        PathChoice path;
    };
    /// The port add_endpoint would take; nothing, and `why`, when none is
    /// reached (another qkey, no GID of ours reaches it).
    std::optional<PortPick> choose_port(const wire::ModexAddress &addr, std::string *why);
    /// An endpoint for `proc` on the first of its ports (in `addr`) we
    /// reach, addressed from the current view and added to the endpoint
    /// table; nullptr and `why` when none is reached.
    Endpoint *add_endpoint(opal_proc_t *proc, const wire::ModexAddress &addr, std::string *why);
    /// The same at the port `pick` chose (choose_port).
    Endpoint *add_endpoint_at(opal_proc_t *proc, const wire::ModexAddress &addr,
                              const PortPick &pick);
    /// The names of requesters unknown_requester queued, taken (at most
    /// kMaxLookups); the module looks them up without the lock.
    std::vector<uint64_t> take_lookups();
    /// A queued name could not be made an endpoint: never looked up again.
    void lookup_failed(uint64_t name) { lookup_failed_.insert(name); }
    /// A DC fragment names `name`, for which there is no endpoint: as for
    /// an unknown requester (unknown_requester), a lookup is queued when it
    /// may be a process of our job, or is one allow_lookup named (true),
    /// else false.
    bool queue_lookup(uint64_t name) { return unknown_requester(name); }
    /// The DC destination of the peers that `path` addresses (its remote
    /// GID): an index into a table of the Connector that holds, once per
    /// remote GID, the address handle DC work requests name those peers
    /// with (made here for the first peer there, from `path`, with the
    /// checks of ensure_ah; shared by every peer at that GID, so the peers
    /// of one remote node cost one; destroyed with the Connector). Errors:
    /// as ensure_ah.
    util::Result<uint32_t> dc_dest(const PathChoice &path);
    /// Remote GIDs with a DC destination (one address handle each).
    size_t dc_dests() const { return dc_dests_.size(); }
    /// The address handle of DC destination `dest` (dc_dest).
    ibv_ah *dc_ah(uint32_t dest) const { return dc_dests_.at(dest).get(); }
    /// `name` (a process of another job that add_procs added as a DC peer,
    /// with no Endpoint yet) may be looked up when its fragments arrive,
    /// as a process of our job may (queue_lookup).
    void allow_lookup(uint64_t name) { lookup_allowed_.insert(name); }
    static constexpr size_t kMaxLookups = 64;

    /// A completion of the UD QP (wr_kind kUdRecv or kUdSend): a datagram
    /// to the manager and its buffer reposted, or a send slot freed; a
    /// failed one marks the UD QP for recovery.
    void on_ud_completion(const ibv_wc &wc);
    /// True when after_poll has work: QPs retiring or the UD QP to recover.
    bool needs_attention() const { return ud_suspect_ || !retirement_.empty(); }
    /// Completions per ibv_poll_cq, in the module's progress and here.
    static constexpr int kPollBatch = 16;
    /// After a CQ poll that returned `polled` (of kPollBatch): async events
    /// fed to the Retirement, retired QPs destroyed when nothing of them
    /// can reach the CQ any more, the UD QP recovered (retried each second).
    void after_poll(int polled);

    /// The view changed (a monitor event): endpoints whose address is gone
    /// choose again, and their live paths reconnect from the new address.
    void readdress();

    /// The port went down, as its device's async events say (the module
    /// hears them from the monitor): the paths of each peer another rail of
    /// ours reaches fail at once (ConnectionManager::port_down), so that
    /// peer's traffic moves to the other rail now, not after every QP's
    /// retries have run out; a peer nothing else reaches keeps its QPs,
    /// which ride out a short flap by retransmitting. Returns the peers
    /// whose paths failed.
    std::vector<Endpoint *> port_down(const std::string &why);
    /// The port is active again: paths waiting to reconnect try now.
    void port_up();
    /// `ep`'s peer told us (over another rail) that its port of this rail
    /// went down: the paths to it fail now, quietly (their retries would
    /// take seconds to find out). Returns how many failed.
    size_t peer_port_down(Endpoint &ep, const std::string &why);

    /// Finalize: every QP retired, drained for at most a second, destroyed;
    /// their QPN entries unmapped.
    void retire_all();

private:
    // CmHost (connector/host.cc, addressing.cc, path_qps.cc).
    double now() const override;
    util::Status send_cm(Peer &peer, const std::vector<uint8_t> &bytes) override;
    void address(const Peer &peer, wire::CmMessage &m) const override;
    size_t paths_wanted(const Peer &peer) const override;
    util::Result<LocalQp> open_qp(Peer &peer, size_t i) override;
    util::Status accept_qps(Peer &peer, size_t first, const std::vector<wire::PathInfo> &remote,
                            std::vector<LocalQp> *local) override;
    util::Status connect_qp(Peer &peer, size_t i, const wire::PathInfo &remote) override;
    util::Status wire_loopback(Peer &peer, size_t i) override;
    void retire_qp(Peer &peer, size_t i) override;
    void path_up(Peer &peer, size_t i, uint32_t credits, bool reconnected) override;
    void path_lost(Peer &peer, size_t i) override;
    void peer_failed(Peer &peer, const std::string &why) override;
    bool reached_elsewhere(const Peer &peer) const override;
    void peer_moved(Peer &peer, const wire::Gid &from) override;
    bool revalidate(Peer &peer, bool thorough) override;
    std::string route(const Peer &peer) const override;
    Peer *find_peer(uint64_t name) override;
    bool unknown_requester(uint64_t name) override;

    static Endpoint &ep_of(Peer &peer) { return static_cast<Endpoint &>(peer); }
    static const Endpoint &ep_of(const Peer &peer) { return static_cast<const Endpoint &>(peer); }

    // Addressing (connector/addressing.cc).
    util::Status ensure_ah(Endpoint &ep);
    /// An address handle to `path`'s peer GID, preflighted (ensure_ah,
    /// dc_dest); `path`'s GID index follows preflight's correction. `who`
    /// names the peer(s) in messages.
    util::Result<verbs::Ah> make_ah(PathChoice &path, const std::string &who);
    /// The current view, which also becomes plan.snapshot; plan.snapshot
    /// when no view can be had (logged at debug level).
    std::shared_ptr<const topo::Snapshot> current_view();
    /// select::revalidate of the endpoint's Selection against `view`
    /// (nullptr: current_view()): unchanged or moved to another slot (the
    /// Selection follows it), false; our address gone, choose_path again:
    /// true when the endpoint got a new addressing (the manager then
    /// reconnects its paths), false when nothing reaches the peer now
    /// (reported as "address changed").
    bool revalidate_path(Endpoint &ep,
                         const std::shared_ptr<const topo::Snapshot> &view = nullptr);
    void set_path_choice(Endpoint &ep, const PathChoice &choice);

    // The paths' RC QPs (connector/path_qps.cc).
    qp::QpParams rc_params(const Path &path) const;
    util::Result<std::unique_ptr<qp::QueuePair>> new_init_qp(const Endpoint &ep);
    void install_qp(Endpoint &ep, size_t i, std::unique_ptr<qp::QueuePair> qp);
    util::Status create_path_qp(Endpoint &ep, size_t i);
    util::Status create_paired_qp(Endpoint &ep, size_t i, uint32_t remote_qpn,
                                  std::vector<std::unique_ptr<qp::QueuePair>> &spares);
    util::Status connect_path_qp(Endpoint &ep, Path &path, qp::QueuePair &qp,
                                 uint32_t remote_qpn, uint32_t remote_psn);
    util::Status apply_lag_port(Endpoint &ep, size_t i);

    // The UD QP (connector/recovery.cc).
    void check_ud();

    ConnectorEnv env_;
    PortPlan &plan_;
    const ModuleConfig &cfg_;
    Device &dev_;
    Retirement &retirement_;
    DataPath &dp_;
    EndpointTable &eps_;
    util::LogSink &log_;
    std::unique_ptr<ConnectionManager> cm_;
    bool lag_affinity_ = false;                  ///< the device does queue-affinity LAG (mlx5)
    bool ud_suspect_ = false;                    ///< a UD completion failed: check the UD QP
    double ud_retry_at_ = 0;                     ///< when a failed UD recovery is tried again
    std::vector<uint64_t> lookups_;              ///< unknown requesters to look up (bounded)
    /// DC destinations (dc_dest): one address handle per remote GID, found
    /// by it (nothing more: an Endpoint chooses its own addressing when it
    /// is made).
    std::vector<verbs::Ah> dc_dests_;
    std::map<wire::Gid, uint32_t> dc_dest_by_gid_;
    std::unordered_set<uint64_t> lookup_failed_; ///< names looked up in vain (at most job size)
    /// DC peers of other jobs added and not used yet (allow_lookup).
    std::unordered_set<uint64_t> lookup_allowed_;
};

} // namespace roce::btl
