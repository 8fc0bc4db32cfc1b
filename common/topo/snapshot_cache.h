// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "topo/readers.h"
#include "topo/snapshot.h"
#include "util/status.h"

namespace roce::topo {

/// Reads the whole machine (topo::read_live in production).
using MachineReader = std::function<util::Result<Snapshot>()>;
/// Reads one RDMA device by name (topo::read_rdma_device in production):
/// kNotFound when no such device exists (any more). `warnings` may be null.
using DeviceReader =
    std::function<util::Result<DeviceInfo>(const std::string &device, std::vector<std::string> *)>;

/// Where a SnapshotCache gets its data. `machine` is required; `device` and
/// `netdevs` make partial refreshes possible (without them every refresh
/// is a full read); `clock` (monotonic seconds) only matters for max_age.
struct CacheSources {
    MachineReader machine;
    DeviceReader device;
    /// The netdev half: the monitor's model (netmon::model_netdev_reader),
    /// or live_netdev_reader when no monitor runs.
    NetdevReader netdevs;
    std::function<double()> clock; ///< default: std::chrono::steady_clock
};

/// How a SnapshotCache behaves; fixed at construction.
struct CacheOptions {
    /// Only while no monitor feeds the cache (set_monitored(false), the
    /// default): view_for(device) re-reads the device (and the netdevs) when
    /// what the cache holds of it is older than this. 0: at every call
    /// (the behaviour of a fresh read per transition, for one device);
    /// negative: never (only invalidations refresh).
    double max_age_seconds = 1.0;
};

/// One published snapshot and its number. The snapshot never changes; a
/// refresh publishes a new one with the next generation.
struct SnapshotView {
    std::shared_ptr<const Snapshot> snapshot;
    uint64_t generation = 0; ///< 1 for the first snapshot, +1 per refresh
};

/// Counters since construction (for tests, the benchmark and diagnostics).
struct CacheStats {
    uint64_t machine_reads = 0; ///< calls of the machine reader
    uint64_t device_reads = 0;  ///< calls of the device reader
    uint64_t netdev_reads = 0;  ///< calls of the netdev reader outside machine reads
    uint64_t read_errors = 0;   ///< refreshes that failed (nothing published)
    uint64_t generation = 0;
};

/// One shared, immutable picture of the machine for every QP transition,
/// address handle and revalidation of a process, kept current by
/// invalidations (the monitor's events: netmon::feed_cache) and, where no
/// monitor runs, by age - instead of reading the whole machine each time.
///
/// Refreshes are lazy: invalidate_*() only mark what changed (cheap, no
/// I/O, callable from the monitor's callbacks); the next current() or
/// view_for() reads what was marked - the first time or after
/// invalidate_all() the whole machine, else just the devices marked and/or
/// the netdevs - and publishes a new snapshot under the next generation. A
/// burst of events before the next use costs one read per device
/// concerned.
///
/// Thread safety: every method may be called from any thread. Readers run
/// with no lock held that invalidate_*() or generation() take, one refresh
/// at a time; callers of current()/view_for() wait for a refresh in
/// progress. An invalidation that arrives during a refresh is not lost: it
/// is read by the next one. Published snapshots are immutable and shared:
/// hold the shared_ptr as long as needed. The readers must be callable
/// from any thread that calls current()/view_for().
class SnapshotCache {
public:
    /// Reads nothing yet: the first current() or view_for() reads the machine.
    explicit SnapshotCache(CacheSources sources, CacheOptions options = {});
    SnapshotCache(const SnapshotCache &) = delete;
    SnapshotCache &operator=(const SnapshotCache &) = delete;

    /// The current view, after reading what was invalidated (a full read
    /// the first time). Errors: a reader's, with the cache's context
    /// ("snapshot cache: re-reading mlx5_bond_0: ..."); nothing is published,
    /// the marks stay (the next call tries again), and the previous view
    /// stays current. A device the device reader no longer finds
    /// (kNotFound) is removed from the snapshot, not an error.
    [[nodiscard]] util::Result<SnapshotView> current();

    /// current() for a transition on `device`: while unmonitored, first
    /// invalidates the device and the netdevs when what the cache holds of
    /// them is older than max_age_seconds. What qp preflight calls
    /// (qp::cache_snapshot_source).
    [[nodiscard]] util::Result<SnapshotView> view_for(const std::string &device);

    /// The device's GID/pkey tables or ports changed (verbs GID_CHANGE,
    /// PORT_ACTIVE/ERR, a device appeared, disappeared or its netdevs
    /// changed). No I/O.
    void invalidate_device(const std::string &device);
    /// Netdevs changed (addresses, MTU, link state, bonds, VLANs). No I/O.
    void invalidate_netdevs();
    /// Anything may have changed (the monitor resynchronised). No I/O.
    void invalidate_all();

    /// Whether a monitor feeds invalidations (then nothing ages). Default
    /// false.
    void set_monitored(bool monitored);

    /// The last published generation (0 before the first): one atomic
    /// load, for a progress loop asking whether anything changed.
    uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

    CacheStats stats() const;

private:
    struct Marks {
        bool all = false;
        bool netdevs = false;
        std::set<std::string> devices;
        bool any() const { return all || netdevs || !devices.empty(); }
        void merge(const Marks &o);
    };

    util::Result<SnapshotView> refresh();
    util::Result<Snapshot> rebuild(const Snapshot &old, const Marks &marks, CacheStats *reads);
    double now() const;

    CacheSources src_;
    CacheOptions opt_;

    std::mutex refresh_mu_; ///< one refresh at a time; held while readers run

    mutable std::mutex mu_; ///< guards everything below; never held across I/O
    Marks marks_;
    bool monitored_ = false;
    std::shared_ptr<const Snapshot> snap_;
    double netdevs_read_at_ = 0;
    std::map<std::string, double> device_read_at_;
    CacheStats stats_;

    std::atomic<uint64_t> generation_{0};
};

/// A device reader over `api` (topo::read_rdma_device); `api` must outlive
/// the reader.
DeviceReader verbs_device_reader(const verbs::VerbsApi &api);

} // namespace roce::topo
