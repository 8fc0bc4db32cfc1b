// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Module lifetime, peers, memory registration, and the C function table
// Open MPI calls. Every thunk is noexcept and answers with an OPAL code:
// the module answers with a util::Status, mapped here, once, by to_opal.
#include "btl_roce_module.h"

#include <ctime>
#include <cstddef>

#include "opal/class/opal_bitmap.h"
#include "opal/mca/btl/base/base.h"

#include "btl_roce_log.h"
#include "ompi_series.h"
#include "select/rail_speed.h"
#include "verbs/dc_support.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

double now_seconds() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {

Module *M(mca_btl_base_module_t *b) { return Module::from(b); }

// The Endpoint of Open MPI's handle `e` (Module::endpoint: a DC peer's is
// made at its first use). `*bad` when `e` names a peer whose Endpoint
// cannot be had (its modex gone): the entry point answers OPAL_ERR_UNREACH,
// or no descriptor.
Endpoint *EP(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, bool *bad) {
    Endpoint *ep = M(b)->endpoint(e);
    *bad = ep == nullptr && e != nullptr;
    return ep;
}

// The thunks: catch everything, never let an exception into Open MPI.
template <typename F>
auto guarded(F &&f, decltype(f()) fail) noexcept -> decltype(f()) {
    try {
        return f();
    } catch (...) {
        return fail;
    }
}

// The one place a Status of the module becomes an OPAL code. The PML sees
// only the code, so the message of a real error is logged at debug level;
// flow control (retry_later(): no message) costs nothing more here.
int answer(Module *m, const Status &s) noexcept {
    int rc = to_opal(s);
    if (s.has_message() && m->log().enabled(util::LogLevel::kDebug)) {
        try {
            m->log().write(util::LogLevel::kDebug, s.to_string());
        } catch (...) {
            // The code is the answer; a lost debug line is not worth failing it.
        }
    }
    return rc;
}

int t_add_procs(mca_btl_base_module_t *b, size_t n, opal_proc_t **p, mca_btl_base_endpoint_t **e,
                opal_bitmap_t *r) {
    return guarded([&] { return answer(M(b), M(b)->add_procs(n, p, e, r)); }, OPAL_ERROR);
}
int t_del_procs(mca_btl_base_module_t *b, size_t n, opal_proc_t **p,
                mca_btl_base_endpoint_t **e) {
    return guarded([&] { return answer(M(b), M(b)->del_procs(n, p, e)); }, OPAL_ERROR);
}
int t_finalize(mca_btl_base_module_t *b) {
    // The module is deleted inside finalize(): map without touching it.
    return guarded([&] { return to_opal(M(b)->finalize()); }, OPAL_ERROR);
}
mca_btl_base_descriptor_t *t_alloc(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e,
                                   uint8_t order, size_t size, uint32_t flags) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? nullptr : M(b)->alloc(ep, order, size, flags);
        },
        nullptr);
}
int t_free(mca_btl_base_module_t *b, mca_btl_base_descriptor_t *d) {
    return guarded([&] { return answer(M(b), M(b)->free_des(d)); }, OPAL_ERROR);
}
mca_btl_base_descriptor_t *t_prepare_src(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e,
                                         opal_convertor_t *c, uint8_t order, size_t reserve,
                                         size_t *size, uint32_t flags) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? nullptr : M(b)->prepare_src(ep, c, order, reserve, size, flags);
        },
        nullptr);
}
int t_send(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, mca_btl_base_descriptor_t *d,
           mca_btl_base_tag_t tag) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH : answer(M(b), M(b)->send(ep, d, tag));
        },
        OPAL_ERROR);
}
int t_sendi(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, opal_convertor_t *c, void *hdr,
            size_t hdr_size, size_t payload, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
            mca_btl_base_descriptor_t **d) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b),
                                M(b)->sendi(ep, c, hdr, hdr_size, payload, order, flags, tag, d));
        },
        OPAL_ERR_OUT_OF_RESOURCE);
}
int t_put(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, void *local, uint64_t remote,
          mca_btl_base_registration_handle_t *lh, mca_btl_base_registration_handle_t *rh,
          size_t size, int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void *ctx,
          void *data) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b),
                                M(b)->rdma(ep, true, local, remote, lh, rh, size, cb, ctx, data));
        },
        OPAL_ERROR);
}
int t_get(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, void *local, uint64_t remote,
          mca_btl_base_registration_handle_t *lh, mca_btl_base_registration_handle_t *rh,
          size_t size, int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void *ctx,
          void *data) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b),
                                M(b)->rdma(ep, false, local, remote, lh, rh, size, cb, ctx, data));
        },
        OPAL_ERROR);
}
int t_aop(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, uint64_t remote,
          mca_btl_base_registration_handle_t *rh, mca_btl_base_atomic_op_t op, uint64_t operand,
          int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b), M(b)->atomic(ep, nullptr, remote, nullptr, rh, op, operand, 0,
                                                   false, cb, ctx, data));
        },
        OPAL_ERROR);
}
int t_afop(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, void *local, uint64_t remote,
           mca_btl_base_registration_handle_t *lh, mca_btl_base_registration_handle_t *rh,
           mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
           mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b), M(b)->atomic(ep, local, remote, lh, rh, op, operand, 0, false,
                                                   cb, ctx, data));
        },
        OPAL_ERROR);
}
int t_acswap(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e, void *local, uint64_t remote,
             mca_btl_base_registration_handle_t *lh, mca_btl_base_registration_handle_t *rh,
             uint64_t compare, uint64_t value, int flags, int order,
             mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH
                       : answer(M(b), M(b)->atomic(ep, local, remote, lh, rh, 0, value, compare,
                                                   true, cb, ctx, data));
        },
        OPAL_ERROR);
}
int t_flush(mca_btl_base_module_t *b, mca_btl_base_endpoint_t *e) {
    return guarded(
        [&] {
            bool bad = false;
            Endpoint *ep = EP(b, e, &bad);
            return bad ? OPAL_ERR_UNREACH : answer(M(b), M(b)->flush(ep));
        },
        OPAL_ERROR);
}
mca_btl_base_registration_handle_t *t_register_mem(mca_btl_base_module_t *b,
                                                   mca_btl_base_endpoint_t *, void *base,
                                                   size_t size, uint32_t flags) {
    return guarded([&] { return M(b)->register_mem(base, size, flags); }, nullptr);
}
int t_deregister_mem(mca_btl_base_module_t *b, mca_btl_base_registration_handle_t *h) {
    return guarded([&] { return answer(M(b), M(b)->deregister_mem(h)); }, OPAL_ERROR);
}
int t_register_error(mca_btl_base_module_t *b, mca_btl_base_module_error_cb_fn_t cb) {
    return guarded([&] { return answer(M(b), M(b)->register_error(cb)); }, OPAL_ERROR);
}

void install_function_table(mca_btl_base_module_t &t) {
    t.btl_add_procs = t_add_procs;
    t.btl_del_procs = t_del_procs;
    t.btl_finalize = t_finalize;
    t.btl_alloc = t_alloc;
    t.btl_free = t_free;
    t.btl_prepare_src = t_prepare_src;
    t.btl_send = t_send;
    t.btl_sendi = t_sendi;
    t.btl_put = t_put;
    t.btl_get = t_get;
    t.btl_dump = mca_btl_base_dump;
    t.btl_atomic_op = t_aop;
    t.btl_atomic_fop = t_afop;
    t.btl_atomic_cswap = t_acswap;
    t.btl_register_mem = t_register_mem;
    t.btl_deregister_mem = t_deregister_mem;
    t.btl_register_error = t_register_error;
    t.btl_flush = t_flush;
}

} // namespace

uint32_t module_flags(uint32_t registered) {
    const uint32_t rdma_or_atomics =
        MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS;
    return (registered & rdma_or_atomics) != 0 ? registered | ROCE_BTL_FLAGS_REMOTE_COMPLETION
                                               : registered;
}

void btl_defaults(mca_btl_base_module_t &t, mca_btl_base_component_t *component) {
    t = mca_btl_base_module_t{};
    t.btl_component = component;
    // A full fragment and the btl's 8-byte header make exactly 8 KiB on the
    // wire: 2 packets at MTU 4096, 8 at MTU 1024 (8 KiB of payload would
    // take a third / ninth packet for the last 8 bytes).
    t.btl_eager_limit = kDefaultMaxSend;
    t.btl_rndv_eager_limit = kDefaultMaxSend;
    t.btl_max_send_size = kDefaultMaxSend;
    t.btl_rdma_pipeline_send_length = 1024 * 1024;
    t.btl_rdma_pipeline_frag_size = 1024 * 1024;
    t.btl_min_rdma_pipeline_size = 16 * 1024;
    t.btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT;
    t.btl_latency = kDefaultLatency;
    t.btl_bandwidth = kDefaultBandwidth;
    t.btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_GET |
                  MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_ATOMIC_OPS |
                  MCA_BTL_FLAGS_ATOMIC_FOPS | MCA_BTL_FLAGS_RDMA_FLUSH;
    t.btl_atomic_flags = MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_CSWAP;
    t.btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t);
    t.btl_get_limit = 1u << 30;
    t.btl_put_limit = 1u << 30;
    t.btl_get_alignment = 0;
    t.btl_put_alignment = 0;
    t.btl_get_local_registration_threshold = 0;
    t.btl_put_local_registration_threshold = 0;
    install_function_table(t);
}

namespace {

// btl_bandwidth from the port (select::rail_bandwidth: the Ethernet speed of
// the netdev or the bond's members, else active_speed x active_width), so
// that the bml splits traffic over rails by speed. A value the user set
// wins. btl_latency is not derived: the bml sends first fragments only over
// the btls of the lowest latency, so rails that differ in speed must keep
// one latency to all carry eager traffic; 0 ("auto") becomes the default.
void derive_speed(mca_btl_base_module_t &b, const PortPlan &plan, const ModuleConfig &cfg,
                  const verbs::VerbsApi &api, ibv_context *ctx, util::LogSink &log) {
    ibv_port_attr attr{};
    select::PortSpeed port;
    if (api.query_port(ctx, static_cast<uint8_t>(plan.port), &attr) == 0) {
        port.active_speed = attr.active_speed;
        port.active_width = attr.active_width;
    }
    static const topo::Snapshot kEmpty;
    select::RailBandwidth bw = select::rail_bandwidth(plan.snapshot ? *plan.snapshot : kEmpty,
                                                      plan.selection.netdev, port);
    std::string bw_text;
    if (cfg.bandwidth_set) {
        bw_text = util::format("bandwidth %u Mb/s (btl_roce_bandwidth, set explicitly; the port "
                               "says: %s)",
                               b.btl_bandwidth, bw.why.c_str());
    } else if (bw.derived()) {
        b.btl_bandwidth = bw.mbps;
        bw_text = util::format("bandwidth %u Mb/s (%s)", bw.mbps, bw.why.c_str());
    } else {
        b.btl_bandwidth = b.btl_bandwidth != 0 ? b.btl_bandwidth : kDefaultBandwidth;
        bw_text =
            util::format("bandwidth %u Mb/s (the default: %s)", b.btl_bandwidth, bw.why.c_str());
    }
    if (!cfg.latency_set && b.btl_latency == 0) {
        b.btl_latency = kDefaultLatency;
    }
    log.write(util::LogLevel::kInfo,
              util::format("%s:%d: %s, latency %u us (%s)", plan.device.c_str(),
                           plan.port, bw_text.c_str(), b.btl_latency,
                           cfg.latency_set ? "btl_roce_latency, set explicitly"
                                           : "the default, the same on every rail"));
}

// RC or DC for this port (proto/transport.h). The device is asked (a DC
// target created and destroyed on its own PD) only when the parameters and
// the job size would pick DC.
TransportChoice decide_transport(const ModuleConfig &cfg, const ProcessInfo &who,
                                 const verbs::VerbsApi &api, const Device &dev,
                                 const std::string &rail) {
    return choose_transport(cfg.transport, who.job_size, rail, [&] {
        verbs::DcSupport s = verbs::query_dc_support(api, dev.context(), dev.name());
        return DcCapability{s.supported, s.reason};
    });
}

// The DC queues of a port that chose DC, made with the module's RC retry
// and RDMA-atomic values.
Result<std::unique_ptr<DcResources>> make_dc(const ModuleConfig &cfg, const PortPlan &plan,
                                             const ModuleEnv &env, Device &dev,
                                             util::LogSink &log) {
    DcResourcesConfig dc;
    dc.dcis = cfg.transport.dc_dcis;
    dc.caps.max_send_wr = cfg.device.sq_depth;
    dc.dci_params.timeout = static_cast<uint8_t>(cfg.ack_timeout);
    dc.dci_params.retry_cnt = static_cast<uint8_t>(cfg.retry_count);
    dc.dci_params.rnr_retry = static_cast<uint8_t>(cfg.rnr_retry);
    int init_rd = dev.attr().max_qp_init_rd_atom > 16 ? 16 : dev.attr().max_qp_init_rd_atom;
    dc.dci_params.max_rd_atomic = static_cast<uint8_t>(init_rd > 0 ? init_rd : 1);
    // On an mlx5 LAG with queue affinity (as the RC paths are pinned,
    // connector/path_qps.cc), the DCIs take the bond's ports in turn. The
    // device is asked (DC runs on mlx5 only, where mlx5dv answers).
    mlx5dv_context dv{};
    dv.comp_mask = MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS;
    if (cfg.lag_policy != LagPolicy::kOff && cfg.lag_policy != LagPolicy::kSport &&
        env.verbs->mlx5dv_query_device(dev.context(), &dv) == 0 &&
        (dv.comp_mask & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) != 0 && dv.num_lag_ports > 1) {
        dc.lag_ports = dv.num_lag_ports;
    }
    return DcResources::create(*env.verbs, dev, plan.selection, env.snapshots, plan.privileged, dc,
                               log);
}

} // namespace

Module::Module(const PortPlan &plan, const ModuleConfig &cfg, ModuleEnv env,
               util::LogSink &log)
    : plan_(plan), cfg_(cfg), log_(log), env_(std::move(env)) {
    c_.super = cfg.btl;
    c_.super.btl_flags = module_flags(c_.super.btl_flags);
    install_function_table(c_.super);
    c_.impl = this;
    if (!env_.clock) {
        env_.clock = now_seconds;
    }
    OBJ_CONSTRUCT(&lock_, opal_mutex_t);
    rail_name_ = util::format("%s:%d", plan_.device.c_str(), plan_.port);
}

Result<std::unique_ptr<Module>> Module::create(const PortPlan &plan, const ModuleConfig &cfg,
                                               ModuleEnv env, util::LogSink &log) {
    if (env.verbs == nullptr || !env.snapshots || env.peers == nullptr || !env.registry ||
        !env.finalized) {
        return Status(Code::kInternal, "Module::create: incomplete environment");
    }
    std::unique_ptr<Module> m(new Module(plan, cfg, std::move(env), log));
    auto dev = Device::open(*m->env_.verbs, plan.selection, m->env_.snapshots, plan.privileged,
                            cfg.device, log);
    if (!dev) {
        return dev.status();
    }
    m->dev_ = std::move(dev.value());
    derive_speed(m->c_.super, plan, cfg, *m->env_.verbs, m->dev_->context(), log);
    m->transport_ = decide_transport(cfg, m->env_.who, *m->env_.verbs, *m->dev_, m->rail_name_);
    TransportChoice &tc = m->transport_;
    if (tc.dc) {
        // Made now, before anyone reads advert(): the DCT's number exists
        // only from RTR on.
        auto dc = make_dc(cfg, plan, m->env_, *m->dev_, log);
        if (dc) {
            m->dc_ = std::move(dc.value());
            // Published, so both ends agree on DC (dc_with_peer): sends,
            // RDMA and atomics to such a peer go over it (data/dc_*.cc).
            tc.why += util::format("; DC target 0x%x and %zu initiators ready and published: "
                                   "sends, RDMA and atomics to peers with a DC target go over DC",
                                   m->dc_->dct_number(), m->dc_->dcis());
        } else {
            // Nothing published: every peer uses RC with this port.
            tc.dc = false;
            // Asked for with btl_roce_transport = dc, and not had.
            tc.refused = cfg.transport.mode == TransportMode::kDc;
            tc.why +=
                "; but its DC queues could not be made (" + dc.status().message() + "): using RC";
        }
    }
    log.write(tc.refused ? util::LogLevel::kWarn : util::LogLevel::kInfo, "transport " + tc.why);
    RetirementConfig rc;
    rc.cq_entries = static_cast<uint32_t>(m->dev_->cq()->cqe);
    m->retirement_ = std::make_unique<Retirement>(log, rc);
    DataPathConfig dc{cfg.max_rdma_ops, cfg.stripe_min, cfg.rdma_chunk, cfg.chunks_per_path,
                      cfg.seq_span};
    DataPathHost &dp_host = *m;
    auto dp = DataPath::create(dp_host, *m->dev_, *m->retirement_, dc, &m->c_.super, m->lock_,
                               m->endpoints_.all, m->env_.clock, log);
    if (!dp) {
        return dp.status();
    }
    m->dp_ = std::move(dp.value());
    if (m->dc_) {
        m->dp_->set_dc(m->dc_.get(), m->env_.who.name);
    }
    ConnectorEnv ce;
    ce.plan = &m->plan_;
    ce.cfg = &m->cfg_;
    ce.dev = m->dev_.get();
    ce.retirement = m->retirement_.get();
    ce.dp = m->dp_.get();
    ce.endpoints = &m->endpoints_;
    ce.snapshots = m->env_.snapshots;
    ce.clock = m->env_.clock;
    ce.self_name = m->env_.who.name;
    ce.self_job_size = m->env_.who.job_size;
    Module *raw = m.get();
    ce.report = [raw](const char *topic, const std::string &detail) { raw->report(topic, detail); };
    ce.explain = m->env_.report;
    ce.reach_changed = [raw](Endpoint &ep, bool reached) { raw->reach_changed(ep, reached); };
    ce.reached_elsewhere = [raw](const Endpoint &ep) { return raw->reached_elsewhere(ep); };
    CmIdentity me;
    me.name = m->env_.who.name;
    me.token = m->env_.who.token;
    me.port_index = m->port_index_;
    me.ud_qpn = m->dev_->ud_qp()->qp_num;
    m->conn_ = std::make_unique<Connector>(std::move(ce), me, log);

    // Send and receive slots hold a header plus max_send_size, and the
    // header of a send forwarded from another rail (data/forward.cc); eager
    // cannot be larger than that.
    size_t payload =
        m->dev_->config().recv_slot - wire::kFragHeaderSize - wire::kForwardHeaderSize;
    mca_btl_base_module_t &b = m->c_.super;
    if (b.btl_max_send_size > payload) {
        b.btl_max_send_size = payload;
    }
    if (b.btl_eager_limit > b.btl_max_send_size) {
        b.btl_eager_limit = b.btl_max_send_size;
    }
    if (b.btl_rndv_eager_limit > b.btl_max_send_size) {
        b.btl_rndv_eager_limit = b.btl_max_send_size;
    }

    auto registry = m->env_.registry(*m->dev_);
    if (!registry) {
        return registry.status();
    }
    m->registry_ = std::move(registry.value());
    return m;
}

Module::~Module() {
    // QPs first (live ones retired, then all drained and destroyed; the
    // connection manager gone before them), then the endpoints' address
    // handles, the registrations, and last the Device (CQ, SRQ, UD QP,
    // buffers, PD, context). First of all, no sibling finds it any more.
    if (env_.rails) {
        env_.rails->leave(this);
        // Our copies on the siblings still here go now; a sibling already
        // gone released them with its registry.
        for (auto &entry : rail_regs_) {
            const RailRegs &r = entry.second;
            for (unsigned p = 0; p < kHandleRails; ++p) {
                Module *m = r.sibling[p] ? env_.rails->at_port(static_cast<uint16_t>(p)) : nullptr;
                if (m != nullptr && m != this) {
                    m->release_for_rail(r.sibling[p]);
                }
            }
        }
        rail_regs_.clear();
    }
    // The DCIs and the DCT first: their work names the Connector's
    // address handles, and they complete into the Device's CQ. What is on
    // the DCIs completes (or flushes back in error) before they go, and
    // its callbacks run now, once: none after finalize.
    if (dc_ && dp_) {
        dp_->close_dc(1.0);
        std::vector<DataPath::Deferred> todo;
        dp_->take_deferred(todo);
        // Completions only: receives and the error callback are not
        // given to a PML that is finalizing.
        std::vector<DataPath::Deferred> done;
        for (DataPath::Deferred &d : todo) {
            if (d.kind == DataPath::Deferred::Kind::kSendDone ||
                d.kind == DataPath::Deferred::Kind::kRdmaDone) {
                done.push_back(std::move(d));
            }
        }
        if (!done.empty()) {
            dp_->run_deferred(done);
        }
    }
    dc_.reset();
    if (conn_) {
        conn_->retire_all();
    }
    conn_.reset();
    retirement_.reset();
    endpoints_.all.clear();
    endpoints_.by_name.clear();
    dp_.reset(); // its RDMA operation pool is registered on the Device's PD
    registry_.reset();
    dev_.reset();
    OBJ_DESTRUCT(&lock_);
}

void Module::set_port_index(uint16_t i) {
    port_index_ = i;
    dp_->set_dc_port(i);
    CmIdentity me = conn_->manager().identity();
    me.port_index = i;
    conn_->manager().set_identity(me);
    if (env_.rails) {
        env_.rails->join(this, i);
    }
}

wire::PortAdvert Module::advert() const {
    wire::PortAdvert a = advertise(plan_, dev_->ud_qp()->qp_num);
    if (dc_) {
        a.flags |= wire::kPortFlagDct;
        a.dct_number = dc_->dct_number();
        a.dc_key = dc_->access_key();
    }
    return a;
}

void Module::log_path_stats() {
    // Connection messages dropped (forged, malformed, stale) are worth a
    // line whenever there were any; the per-path traffic at verbose 10.
    const CmDrops &d = conn_->manager().drops();
    if (d.total() > 0) {
        log_.write(util::LogLevel::kInfo,
                   util::format("%s:%d: connection messages dropped that named no peer of ours: "
                                "%llu malformed, %llu misdirected, %llu with a wrong token, %llu "
                                "from unknown processes",
                                plan_.device.c_str(), plan_.port,
                                static_cast<unsigned long long>(d.malformed),
                                static_cast<unsigned long long>(d.misdirected),
                                static_cast<unsigned long long>(d.unauthenticated),
                                static_cast<unsigned long long>(d.unknown_sender)));
    }
    // A rail lost and survived (issue 16): what moved, whenever anything did
    // (at verbose 10, as the other info lines).
    const RailStats &rs = dp_->rail_stats();
    if (rs.rerouted_sends + rs.carried_sends + rs.forwarded_received + rs.forwarded_refused +
            rs.rerouted_rdma + rs.carried_rdma >
        0) {
        log_.write(util::LogLevel::kInfo,
                   util::format("%s: %llu sends (%llu bytes) carried by another rail, %llu "
                                "(%llu bytes) carried for another rail; %llu forwarded sends "
                                "received, %llu duplicates dropped, %llu refused; %llu puts/gets "
                                "(%llu bytes) carried by another rail, %llu (%llu bytes) for "
                                "another rail",
                                rail_name_.c_str(),
                                static_cast<unsigned long long>(rs.rerouted_sends),
                                static_cast<unsigned long long>(rs.rerouted_bytes),
                                static_cast<unsigned long long>(rs.carried_sends),
                                static_cast<unsigned long long>(rs.carried_bytes),
                                static_cast<unsigned long long>(rs.forwarded_received),
                                static_cast<unsigned long long>(rs.forwarded_duplicates),
                                static_cast<unsigned long long>(rs.forwarded_refused),
                                static_cast<unsigned long long>(rs.rerouted_rdma),
                                static_cast<unsigned long long>(rs.rerouted_rdma_bytes),
                                static_cast<unsigned long long>(rs.carried_rdma),
                                static_cast<unsigned long long>(rs.carried_rdma_bytes)));
    }
    if (!log_.enabled(util::LogLevel::kInfo)) {
        return;
    }
    for (const auto &ep : endpoints_.all) {
        if (ep->drops.total() > 0) {
            log_.write(util::LogLevel::kInfo,
                       util::format("%s: connection messages dropped: %llu with a wrong token, "
                                    "%llu misdirected, %llu fitting no connection state (late "
                                    "copies, races)",
                                    ep->label.c_str(),
                                    static_cast<unsigned long long>(ep->drops.unauthenticated),
                                    static_cast<unsigned long long>(ep->drops.misdirected),
                                    static_cast<unsigned long long>(ep->drops.unexpected)));
        }
        for (size_t i = 0; i < ep->path_count(); ++i) {
            const Path &p = ep->path_at(i);
            if (!p.ever_up) {
                continue;
            }
            log_.write(util::LogLevel::kInfo,
                       util::format("path %zu to %s: source port 0x%04x%s, %llu bytes, %llu "
                                    "messages, %llu retransmits, %llu failovers, %llu reconnects%s",
                                    i, ep->label.c_str(), p.tx.spread.sport,
                                    p.tx.spread.member >= 0
                                        ? util::format(" (member %d)", p.tx.spread.member).c_str()
                                        : "",
                                    static_cast<unsigned long long>(p.tx.stats.bytes),
                                    static_cast<unsigned long long>(p.tx.stats.messages),
                                    static_cast<unsigned long long>(p.tx.stats.retransmits),
                                    static_cast<unsigned long long>(p.tx.stats.failovers),
                                    static_cast<unsigned long long>(p.tx.stats.reconnects),
                                    p.tx.stats.bad_credits > 0
                                        ? util::format(", %llu credits beyond the window refused",
                                                       static_cast<unsigned long long>(
                                                           p.tx.stats.bad_credits))
                                              .c_str()
                                        : ""));
        }
    }
}

Status Module::finalize() {
    log_path_stats();
    // The owner (the component) forgets this module and deletes it: the
    // call runs on a copy, since it destroys env_ with the module, and
    // nothing of the module is touched after it.
    auto finalized = env_.finalized;
    int rc = finalized(base());
    if (rc != OPAL_SUCCESS) {
        return Status(Code::kInternal,
                      util::format("btl_finalize: the component could not release the module "
                                   "(OPAL code %d)",
                                   rc));
    }
    return Status::ok();
}

mca_btl_base_registration_handle_t *Module::register_mem(void *base, size_t size,
                                                         uint32_t flags) {
    mca_btl_base_registration_handle_t *h = registry_->register_mem(base, size, flags);
    if (h == nullptr) {
        OPAL_THREAD_LOCK(&lock_);
        bool first = !warned_registration_;
        warned_registration_ = true;
        OPAL_THREAD_UNLOCK(&lock_);
        if (first) {
            report("registration failed",
                       util::format("%s: cannot register %zu bytes for RDMA (%s); large "
                                    "messages fall back to copying through send buffers",
                                    plan_.device.c_str(), size, memlock_limit_text().c_str()));
        }
        return nullptr;
    }
    share_registration(h); // the keys of the other rails (btl_roce_rails.cc)
    if (log_.enabled(util::LogLevel::kTrace)) {
        log_.write(util::LogLevel::kTrace,
                   util::format("registered %p+%zu flags 0x%x: rkey 0x%x lkey 0x%x, rails 0x%x",
                                base, size, flags, h->rkey, h->lkey, h->rails));
    }
    return h;
}

Status Module::deregister_mem(mca_btl_base_registration_handle_t *handle) {
    uint32_t rkey = handle != nullptr ? handle->rkey : 0; // the handle may be gone after
    if (handle != nullptr) {
        unshare_registration(handle);
    }
    int rc = registry_->deregister_mem(handle);
    if (rc != OPAL_SUCCESS) {
        return Status(Code::kInternal,
                      util::format("%s: releasing the registration of rkey 0x%x failed (OPAL code "
                                   "%d)",
                                   plan_.device.c_str(), rkey, rc));
    }
    return Status::ok();
}

void Module::report(const char *topic, const std::string &detail) {
    // The line first, on stderr, where it cannot be lost.
    log_.write(util::LogLevel::kError, detail);
    if (env_.report) {
        env_.report(topic, detail);
    }
}

} // namespace roce::btl
