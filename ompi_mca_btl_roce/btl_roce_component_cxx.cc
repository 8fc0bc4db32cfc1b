// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The extern "C" thunks behind the component structure. Each one is noexcept,
// catches everything and answers Open MPI with an OPAL code: no exception
// ever crosses into Open MPI.
#include "opal_cxx_compat.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "opal/constants.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/hwloc/base/base.h"
#include "opal_pmix_compat.h"
#include "opal/util/output.h"

#include "btl_roce.h"
#include "btl_roce_addr.h"
#include "btl_roce_log.h"
#include "btl_roce_mca.h"
#include "btl_roce_module.h"
#include "btl_roce_pvars.h"
#include "proto/locality.h"
#include "select/rail_speed.h"
#include "opal_env.h"
#include "netmon/cache_feed.h"
#include "netmon/monitor.h"
#include "netmon/rdma_binding.h"
#include "topo/port_probe.h"
#include "topo/readers.h"
#include "topo/snapshot_cache.h"
#include "util/privilege.h"
#include "util/strings.h"
#include "verbs/verbs_api.h"

namespace roce::btl {
namespace {

/// Process-wide state of the component between open and close.
struct ComponentState {
    explicit ComponentState(int output) : log(output) {}
    OpalSink log;
    ProcessInfo who;
    OpalPeerDirectory peers; ///< the modules' view of the other processes
    /// The process's one view of the machine, shared by every module for
    /// planning, preflight and re-addressing (topo/snapshot_cache.h).
    /// Declared first: it outlives the feed and the modules reading it.
    std::unique_ptr<topo::SnapshotCache> cache;
    /// Declared before the modules: destroyed (its thread joined) after
    /// them, and their event queues detach either way.
    std::unique_ptr<netmon::Monitor> monitor;
    netmon::Subscription feed; ///< the monitor's events into the cache
    /// The modules as rails of one another (rails.h): declared before them,
    /// so it outlives every module that leaves it.
    std::shared_ptr<Rails> rails = std::make_shared<Rails>();
    std::vector<std::unique_ptr<Module>> modules;
};

std::unique_ptr<ComponentState> g_state;

int open_output() {
    int out = opal_output_open(nullptr);
    int verbose = mca_btl_roce_component.params.verbose;
    if (opal_btl_base_framework.framework_verbose > verbose) {
        verbose = opal_btl_base_framework.framework_verbose;
    }
    opal_output_set_verbosity(out, verbose);
    return out;
}

void publish_modex(util::LogSink &log) {
    wire::ModexAddress addr;
    addr.token = g_state->who.token;
    for (auto &m : g_state->modules) {
        addr.ports.push_back(m->advert());
    }
    std::vector<uint8_t> blob = wire::encode(addr);
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_SEND(rc, ROCE_PMIX_GLOBAL, &mca_btl_roce_component.super.btl_version, blob.data(),
                    blob.size());
    if (rc != OPAL_SUCCESS) {
        log.write(util::LogLevel::kWarn,
                  util::format("could not publish the roce address (modex error %d): peers "
                               "will not reach this process over RoCE",
                               rc));
    }
}

// The number of processes in our job (PMIx's job size), which bounds the
// names a connection request may come from. 0 when PMIx does not say.
uint32_t job_size() {
    opal_process_name_t job = opal_proc_local_get()->proc_name;
    job.vpid = OPAL_VPID_WILDCARD;
    uint32_t size = 0;
    uint32_t *ptr = &size;
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, ROCE_PMIX_JOB_SIZE, &job, &ptr, ROCE_PMIX_UINT32);
    return rc == OPAL_SUCCESS ? size : 0;
}

// The NUMA nodes of this process's binding, from Open MPI's own hwloc
// topology (loaded once per process by Open MPI: never a second one here).
std::set<int> numa_nodes_of_process() {
    if (opal_hwloc_base_get_topology() != OPAL_SUCCESS) {
        return {};
    }
    return process_numa_nodes(opal_hwloc_topology);
}

// With several RDMA devices, keeps the ones nearest to this process's CPU
// binding among equally fast rails (locality.h). The topology is only
// consulted in that case: one device, the usual RoCE LAG host, costs nothing.
std::vector<PortPlan> near_plans(std::vector<PortPlan> plans, util::LogSink &log) {
    std::vector<DeviceLocality> devs;
    for (const auto &p : plans) {
        // The rail's speed as the snapshot knows it (the Ethernet speed; the
        // port's codes are read when the module exists).
        uint32_t mbps =
            p.snapshot ? select::rail_bandwidth(*p.snapshot, p.selection.netdev, {}).mbps : 0;
        bool seen = false;
        for (auto &d : devs) {
            if (d.device == p.device) {
                seen = true;
                d.mbps = std::max(d.mbps, mbps);
            }
        }
        if (!seen) {
            devs.push_back({p.device, read_device_numa_node(p.device), mbps});
        }
    }
    if (devs.size() < 2) {
        return plans;
    }
    std::string why;
    std::vector<std::string> keep = nearest_devices(devs, numa_nodes_of_process(), &why);
    log.write(util::LogLevel::kInfo, "device choice: " + why);
    std::vector<PortPlan> out;
    for (auto &p : plans) {
        if (std::find(keep.begin(), keep.end(), p.device) != keep.end()) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

// The bond/netlink monitor for the ports in use (btl_roce_netmon). Its
// failure to start is a warning: the modules still find out about address
// changes from failed operations.
void start_monitor(util::LogSink &log) {
    if (!mca_btl_roce_component.params.netmon) {
        return;
    }
    netmon::MonitorOptions o;
    o.log = &log;
    o.verbs = &verbs::real_verbs();
    for (auto &m : g_state->modules) {
        o.verbs_devices.push_back(m->plan().device);
    }
    o.rdma_source = []() -> util::Result<std::vector<netmon::RdmaBinding>> {
        auto s = topo::read_live(verbs::real_verbs(), topo::live_netdev_reader());
        if (!s) {
            return s.status();
        }
        return netmon::bindings_from_snapshot(*s);
    };
    o.fallback_poll = []() { return topo::read_sysfs("/", topo::live_netdev_reader()); };
    auto mon = std::make_unique<netmon::Monitor>(std::move(o));
    util::Status s = mon->start();
    if (!s) {
        log.write(util::LogLevel::kWarn, "the bond/address monitor did not start (" +
                                             s.message() +
                                             "); address changes are found from failed "
                                             "operations instead");
        return;
    }
    for (auto &m : g_state->modules) {
        m->follow(*mon);
    }
    // From now on the cache re-reads a device or the netdevs only after an
    // event about them (and once in full, for what changed before).
    g_state->feed = netmon::feed_cache(*mon, *g_state->cache);
    g_state->monitor = std::move(mon);
}

// No port for this process: a reason at verbose level, and an error only
// when the user asked for something specific (btl_roce_if_include, or a
// pinned btl_roce_gid_index that no port can honour) - without RoCE
// hardware every ob1 job initialises this btl and must stay quiet.
void not_used(util::LogSink &log, const std::string &why) {
    const mca_btl_roce_params_t &p = mca_btl_roce_component.params;
    std::vector<std::string> asked;
    if (p.if_include != nullptr && p.if_include[0] != '\0') {
        asked.push_back(util::format("btl_roce_if_include = %s", p.if_include));
    }
    if (p.gid_index >= 0) {
        asked.push_back(util::format("btl_roce_gid_index = %d", p.gid_index));
    }
    if (!asked.empty()) {
        show_error("no usable port", util::join(asked, ", ") + ": " + why);
    }
    log.write(util::LogLevel::kInfo, "not used: " + why);
}

// The process's snapshot cache over rdma-core and the live netdevs: the
// first use reads the machine, later ones only what the monitor's events
// (or, without a monitor, an age of 1 s) marked stale.
std::unique_ptr<topo::SnapshotCache> make_cache() {
    topo::CacheSources src;
    src.netdevs = topo::live_netdev_reader();
    src.machine = [netdevs = src.netdevs] { return topo::read_live(verbs::real_verbs(), netdevs); };
    src.device = topo::verbs_device_reader(verbs::real_verbs());
    return std::make_unique<topo::SnapshotCache>(std::move(src));
}

// What a module for `device` takes from Open MPI and rdma-core (opal_env.h).
ModuleEnv module_env(util::LogSink &log, const std::string &device) {
    ModuleEnv env;
    env.verbs = &verbs::real_verbs();
    env.snapshots = qp::cache_snapshot_source(*g_state->cache, device);
    env.who = g_state->who;
    env.peers = &g_state->peers;
    env.registry = [&log](Device &dev) { return grdma_registry(dev, log); };
    env.finalized = mca_btl_roce_component_module_finalized;
    env.rails = g_state->rails;
    env.report = [](const char *topic, const std::string &detail) {
        show_explanation(topic, detail);
    };
    return env;
}

// Decides whether this process gets roce modules. Must stay cheap and quiet
// when there is no RoCE hardware: Debian's default configuration makes every
// ob1 job initialise every installed btl.
mca_btl_base_module_t **init(int *num_btls) {
    *num_btls = 0;
    util::LogSink &log = g_state->log;

    bool privileged = util::may_use_controlled_qkey();
    auto options = validated_options(privileged);
    auto config = options ? validated_module_config() : util::Result<ModuleConfig>(options.status());
    if (!config) {
        show_error("invalid parameter", config.status().message() +
                                            "\nThe roce BTL is disabled for this job.");
        return nullptr;
    }

    // Cheap first look: without an active Ethernet port there is nothing to
    // read or select.
    std::string why = topo::explain_unusable(topo::probe_ports(verbs::real_verbs()));
    if (!why.empty()) {
        not_used(log, why);
        return nullptr;
    }
    g_state->cache = make_cache();
    auto view = g_state->cache->current();
    if (!view) {
        log.write(util::LogLevel::kWarn, "not used: cannot read the RDMA/netdev state: " +
                                             view.status().message());
        return nullptr;
    }
    std::vector<std::string> skipped;
    std::vector<PortPlan> plans = plan_ports(view->snapshot, *options, privileged, &skipped);
    for (const auto &s : skipped) {
        log.write(util::LogLevel::kInfo, "port not used: " + s);
    }
    plans = near_plans(std::move(plans), log);
    if (plans.empty()) {
        not_used(log, skipped.empty() ? "no RoCE port could be set up" : util::join(skipped, "; "));
        return nullptr;
    }
    // The secret that proves our connection messages are ours (docs/security.md).
    auto token = new_token();
    if (!token) {
        show_error("port setup failed",
                   "cannot draw the connection token: " + token.status().message() +
                       "\nThe roce BTL is disabled for this job.");
        return nullptr;
    }
    g_state->who.name = local_process_name();
    g_state->who.token = token.value();
    g_state->who.job_size = job_size();
    for (auto &plan : plans) {
        log.write(util::LogLevel::kInfo,
                  util::format("%s:%d: %s", plan.device.c_str(), plan.port,
                               plan.explanation.c_str()));
        auto m = Module::create(plan, *config, module_env(log, plan.device), log);
        if (!m) {
            // A port the policy accepted but that cannot be set up is worth
            // an error: this is the reported failure, said precisely.
            show_error(setup_failure_topic(m.status()),
                       util::format("%s:%d: %s", plan.device.c_str(), plan.port,
                                    m.status().message().c_str()));
            continue;
        }
        m.value()->set_port_index(static_cast<uint16_t>(g_state->modules.size()));
        g_state->modules.push_back(std::move(m.value()));
    }
    if (g_state->modules.empty()) {
        log.write(util::LogLevel::kInfo, "not used: no RoCE port could be set up");
        return nullptr;
    }
    publish_modex(log);
    start_monitor(log);

    auto **out = static_cast<mca_btl_base_module_t **>(
        malloc(sizeof(mca_btl_base_module_t *) * g_state->modules.size()));
    if (out == nullptr) {
        g_state->modules.clear();
        return nullptr;
    }
    for (size_t i = 0; i < g_state->modules.size(); ++i) {
        out[i] = g_state->modules[i]->base();
        (void)mca_btl_base_param_verify(out[i]);
    }
    *num_btls = static_cast<int>(g_state->modules.size());
    return out;
}

} // namespace

BtlCounters collect_counters() {
    BtlCounters c;
    if (g_state) {
        for (auto &m : g_state->modules) {
            m->read_counters(c);
        }
    }
    return c;
}

} // namespace roce::btl

using roce::btl::g_state;

extern "C" {

int mca_btl_roce_component_register_params(void) { return roce::btl::register_params(); }

int mca_btl_roce_component_open_cxx(void) {
    try {
        mca_btl_roce_component.output = roce::btl::open_output();
        g_state = std::make_unique<roce::btl::ComponentState>(mca_btl_roce_component.output);
        return OPAL_SUCCESS;
    } catch (...) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
}

int mca_btl_roce_component_close_cxx(void) {
    try {
        g_state.reset();
        if (mca_btl_roce_component.output >= 0) {
            opal_output_close(mca_btl_roce_component.output);
            mca_btl_roce_component.output = -1;
        }
    } catch (...) {
        // Nothing useful to do at close; never let it reach Open MPI.
    }
    return OPAL_SUCCESS;
}

mca_btl_base_module_t **mca_btl_roce_component_init_cxx(int *num_btls, bool, bool) {
    try {
        if (!g_state) {
            *num_btls = 0;
            return nullptr;
        }
        return roce::btl::init(num_btls);
    } catch (const std::exception &e) {
        roce::btl::show_error("internal error", std::string("during init: ") + e.what());
    } catch (...) {
        roce::btl::show_error("internal error", "during init (an unknown exception)");
    }
    if (g_state) {
        g_state->modules.clear();
    }
    *num_btls = 0;
    return nullptr;
}

int mca_btl_roce_component_progress_cxx(void) {
    int n = 0;
    if (g_state) {
        for (auto &m : g_state->modules) {
            n += m->progress();
        }
    }
    return n;
}

int mca_btl_roce_component_module_finalized(mca_btl_base_module_t *module) {
    try {
        if (g_state) {
            auto &v = g_state->modules;
            v.erase(std::remove_if(v.begin(), v.end(),
                                   [&](const auto &m) { return m->base() == module; }),
                    v.end());
            if (v.empty()) {
                g_state->monitor.reset(); // joins its thread: none is left at MPI_Finalize
            }
        }
        return OPAL_SUCCESS;
    } catch (...) {
        return OPAL_ERROR;
    }
}

} // extern "C"
