// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// N btl Modules in one test process over one FakeVerbs in wire mode: each a
// "process" with its own name, token and verbs objects, their UD and RC
// queue pairs reaching each other through the fake. Driven through the
// entry points Open MPI uses (the module's C function table, the component's
// progress), with a clock the test controls. Test code only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "btl_roce_module.h"
#include "fake_verbs.h"
#include "topo/snapshot_cache.h"
#include "util/log.h"

namespace roce::testing {

/// Keeps the lines (for failure messages) and counts the errors.
class KeepSink final : public util::LogSink {
public:
    bool enabled(util::LogLevel level) const noexcept override {
        return level <= util::LogLevel::kDebug;
    }
    void write(util::LogLevel level, std::string_view line) noexcept override;
    bool contains(const std::string &needle) const;
    std::vector<std::string> lines;
    size_t errors = 0;
};

/// One simulated process.
struct BtlProc {
    uint64_t name = 0;
    uint64_t token = 0;
    opal_proc_t proc{};
    std::unique_ptr<btl::Module> module;        ///< null once finalized
    /// FabricOptions::all_rails: the modules of the machine's other ports
    /// (rail r + 1 of this process), published after `module` in the modex.
    std::vector<std::unique_ptr<btl::Module>> more_rails;
    /// The process's rails (all its modules), as the component's.
    std::shared_ptr<btl::Rails> rails = std::make_shared<btl::Rails>();
    std::vector<mca_btl_base_endpoint_t *> eps; ///< eps[j]: this process's endpoint for process j
    std::vector<std::string> received;          ///< payloads of the fragments delivered to the PML
    std::vector<std::string> errors;            ///< the PML's error callback
    mca_btl_base_module_t *btl() const { return module->base(); }
};

struct FabricOptions {
    const char *fixture = "rxe_bond";
    size_t procs = 2;
    uint32_t credits = 8;
    uint32_t send_frags = 64;
    double connect_timeout_s = 30.0;
    /// The modules' snapshot cache: while `monitored` is false, a device is
    /// re-read when what the cache holds of it is older than this many
    /// seconds of the fabric's clock (0: at every use, so a change made to
    /// the fake is seen at the next transition); `monitored`: only the
    /// test's invalidations refresh it, as the netlink monitor's events do.
    double cache_max_age_s = 0;
    bool monitored = false;
    std::function<void(btl::ModuleConfig &)> tweak;
    /// Edits the fake machine before any module is created (e.g. an mlx5
    /// device whose firmware has DC off).
    std::function<void(FakeVerbs &)> setup;
    /// One module per port the policy plans (every rail of the machine), not
    /// just the first; each process publishes them all, in plan order.
    bool all_rails = false;
    /// Edits what process i publishes in the modex (e.g. moves one rail to a
    /// subnet no other process has), after its modules exist.
    std::function<void(size_t i, btl::wire::ModexAddress &)> modex;
};

class BtlFabric final : public btl::PeerDirectory {
public:
    explicit BtlFabric(FabricOptions o = {});
    ~BtlFabric() override;

    static constexpr mca_btl_base_tag_t kTag = 0x42;

    FakeVerbs fake;
    /// The one view of the (fake) machine every module reads, as the
    /// component's; its stats() count the reads.
    std::unique_ptr<topo::SnapshotCache> cache;
    /// Reads of the whole (fake) machine, by the cache or anyone else.
    int machine_reads = 0;
    KeepSink log;
    std::vector<std::unique_ptr<BtlProc>> procs;
    /// ModuleEnv::report calls of every module: (help topic, detail).
    std::vector<std::pair<std::string, std::string>> reports;

    /// The modex of processes that are not modules of the fabric (fake
    /// peers, e.g. dc_memory_rig.h's thousands): asked by address() for a
    /// proc the fabric does not know. May be unset.
    std::function<util::Result<btl::wire::ModexAddress>(opal_proc_t *)> more_peers;
    // PeerDirectory: the modex as every process published it.
    util::Result<btl::wire::ModexAddress> address(opal_proc_t *proc) override;
    opal_proc_t *proc_for(uint64_t name) override;

    /// Every process adds every other (and itself), as the PML's add_procs.
    void add_all();
    /// Seconds on the fabric's clock; every read advances it by a tick (1
    /// us), so time passes as the code looks at it. advance() jumps.
    double now() { return now_ += tick_; }
    void advance(double seconds) { now_ += seconds; }

    /// alloc + send of `payload` from i to j (the PML's way for eager data).
    /// The btl's return code; -1 when alloc gave no descriptor.
    int send(size_t i, size_t j, const std::string &payload);
    /// One progress call of every live module (the component's progress).
    int progress_all();
    /// RC work executed, every datagram delivered, every module progressed,
    /// `rounds` times.
    void run(int rounds = 50);
    /// run() with the clock advancing `step` seconds a round, until `done`
    /// (true) or `max_rounds` (false).
    bool run_until(const std::function<bool()> &done, int max_rounds = 2000, double step = 0.01);
    /// The process whose UD QP has this number (procs.size(): none).
    size_t owner_of_ud(uint32_t qpn) const;
    /// Delivers (and removes) datagram k of the wire; then progresses its receiver.
    bool deliver(size_t k);

    /// Process i's Endpoint for j (a DC peer's is made now, as on its first use).
    btl::Endpoint &ep(size_t i, size_t j) { return *procs[i]->module->endpoint(procs[i]->eps[j]); }
    /// True when i's endpoint for j is connected with every path up.
    bool all_up(size_t i, size_t j);
    /// btl_finalize of process i (its modules, every rail, are deleted), as MPI_Finalize
    /// does; its bounded drain of retired QPs sees 0.1 s pass per clock read.
    int finalize(size_t i);

    /// RDMA memory: a registration through the module's C table.
    mca_btl_base_registration_handle_t *reg(size_t i, void *base, size_t size);

private:
    double now_ = 1000.0;
    double tick_ = 1e-6;
    std::map<opal_proc_t *, size_t> index_;
    std::vector<btl::wire::ModexAddress> modex_;
};

/// `v` in order (what arrived, compared as a set with its multiplicity).
std::vector<std::string> sorted(std::vector<std::string> v);

} // namespace roce::testing
