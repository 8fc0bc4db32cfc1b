// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_fabric.h"

#include <algorithm>
#include <cstring>

#include "catch.h"
#include "direct_registry.h"
#include "fixtures.h"
#include "opal_btl_compat.h"
#include "topo/readers.h"

namespace roce::testing {

namespace {

/// Which process a module belongs to, for the PML callbacks.
std::map<const mca_btl_base_module_t *, BtlProc *> g_owner;

void on_recv(mca_btl_base_module_t *btl, mca_btl_base_tag_t, const roce::compat::RecvDesc *des) {
    auto it = g_owner.find(btl);
    REQUIRE(it != g_owner.end());
    const mca_btl_base_segment_t &s = des->des_segments[0];
    it->second->received.emplace_back(static_cast<const char *>(s.seg_addr.pval), s.seg_len);
}

void on_error(mca_btl_base_module_t *btl, int32_t, opal_proc_t *, char *info) {
    auto it = g_owner.find(btl);
    REQUIRE(it != g_owner.end());
    it->second->errors.emplace_back(info != nullptr ? info : "");
}

} // namespace

void KeepSink::write(util::LogLevel level, std::string_view line) noexcept {
    if (level == util::LogLevel::kError) {
        ++errors;
    }
    lines.emplace_back(std::string(util::level_name(level)) + ": " + std::string(line));
}

bool KeepSink::contains(const std::string &needle) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string &l) { return l.find(needle) != std::string::npos; });
}

std::vector<std::string> sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
}

BtlFabric::BtlFabric(FabricOptions o) : fake(fixture(o.fixture)) {
    fake.set_wire(true);
    if (o.setup) {
        o.setup(fake);
    }
    const char *name = o.fixture;
    topo::CacheSources src;
    src.netdevs = [name]() -> util::Result<std::vector<topo::NetdevInfo>> {
        return fixture(name).netdevs;
    };
    src.machine = [this, netdevs = src.netdevs] {
        ++machine_reads;
        return topo::read_live(fake.api(), netdevs);
    };
    src.device = topo::verbs_device_reader(fake.api());
    src.clock = [this] { return now_; };
    topo::CacheOptions copt;
    copt.max_age_seconds = o.cache_max_age_s;
    cache = std::make_unique<topo::SnapshotCache>(std::move(src), copt);
    cache->set_monitored(o.monitored);
    auto view = cache->current();
    REQUIRE(view);
    std::vector<std::string> skipped;
    auto plans = btl::plan_ports(view->snapshot, select::Options{}, false, &skipped);
    REQUIRE(!plans.empty());

    btl::ModuleConfig cfg;
    btl::btl_defaults(cfg.btl, nullptr);
    cfg.device.srq_size = 64;
    cfg.device.recv_slot = 1024;
    cfg.device.send_frags = o.send_frags;
    cfg.device.sq_depth = 32;
    cfg.device.ud_bufs = 16;
    cfg.btl.btl_max_send_size = 1024 - btl::wire::kFragHeaderSize;
    cfg.btl.btl_eager_limit = cfg.btl.btl_max_send_size;
    cfg.credits_per_peer = o.credits;
    cfg.credit_threshold = std::max<uint32_t>(1, o.credits / 4);
    cfg.connect_timeout_s = o.connect_timeout_s;
    cfg.max_rdma_ops = 64;
    if (o.tweak) {
        o.tweak(cfg);
    }
    mca_btl_base_active_message_trigger[kTag].cbfunc = roce::compat::recv_cb<on_recv>;
    mca_btl_base_active_message_trigger[kTag].cbdata = nullptr;

    for (size_t i = 0; i < o.procs; ++i) {
        auto p = std::make_unique<BtlProc>();
        p->name = (uint64_t{0x1234} << 32) | i;
        p->token = 0x5eed0000 + i * 0x1111 + 1;
        p->proc.proc_name.jobid = 0x1234;
        p->proc.proc_name.vpid = static_cast<opal_vpid_t>(i);
        compat::set_proc_hostname(&p->proc, "fakehost");
        index_[&p->proc] = i;
        btl::wire::ModexAddress a;
        a.token = p->token;
        const size_t rails = o.all_rails ? plans.size() : 1;
        for (size_t r = 0; r < rails; ++r) {
            btl::ModuleEnv env;
            env.verbs = &fake.api();
            env.snapshots = qp::cache_snapshot_source(*cache, plans[r].device);
            env.who = {p->name, p->token, static_cast<uint32_t>(o.procs)};
            env.peers = this;
            env.rails = p->rails;
            env.registry =
                [](btl::Device &dev) -> util::Result<std::unique_ptr<btl::MemoryRegistry>> {
                return std::unique_ptr<btl::MemoryRegistry>(std::make_unique<DirectRegistry>(dev));
            };
            env.clock = [this] { return now(); };
            env.report = [this](const char *topic, const std::string &detail) {
                reports.emplace_back(topic, detail);
            };
            env.finalized = [this](mca_btl_base_module_t *b) {
                for (auto &q : procs) {
                    if (q->module && q->btl() == b) {
                        g_owner.erase(b);
                        q->module.reset();
                    }
                    for (auto &m : q->more_rails) {
                        if (m && m->base() == b) {
                            g_owner.erase(b);
                            m.reset();
                        }
                    }
                }
                return OPAL_SUCCESS;
            };
            auto m = btl::Module::create(plans[r], cfg, std::move(env), log);
            if (!m) {
                FAIL("Module::create: " << m.status().to_string());
            }
            m.value()->set_port_index(static_cast<uint16_t>(r));
            mca_btl_base_module_t *b = m.value()->base();
            g_owner[b] = p.get();
            REQUIRE(b->btl_register_error(b, on_error) == OPAL_SUCCESS);
            a.ports.push_back(m.value()->advert());
            (r == 0 ? p->module : p->more_rails.emplace_back()) = std::move(m.value());
        }
        if (o.modex) {
            o.modex(i, a);
        }
        modex_.push_back(a);
        procs.push_back(std::move(p));
    }
}

BtlFabric::~BtlFabric() {
    // A test that stopped early (a failed REQUIRE) leaves live modules:
    // their bounded drain must see time pass, as in finalize(), or its 1 s
    // bound takes a million 1 us ticks, each after a real sleep.
    tick_ = 0.1;
    for (auto &p : procs) {
        if (p->module) {
            g_owner.erase(p->btl());
        }
        p->module.reset();
        for (auto &m : p->more_rails) {
            if (m) {
                g_owner.erase(m->base());
            }
            m.reset();
        }
    }
}

util::Result<btl::wire::ModexAddress> BtlFabric::address(opal_proc_t *proc) {
    auto it = index_.find(proc);
    if (it == index_.end()) {
        if (more_peers) {
            return more_peers(proc);
        }
        return util::Status(util::Code::kNotFound, "not in the fake modex");
    }
    return modex_[it->second];
}

opal_proc_t *BtlFabric::proc_for(uint64_t name) {
    for (auto &p : procs) {
        if (p->name == name) {
            return &p->proc;
        }
    }
    return nullptr;
}

void BtlFabric::add_all() {
    std::vector<opal_proc_t *> all;
    for (auto &p : procs) {
        all.push_back(&p->proc);
    }
    for (auto &p : procs) {
        p->eps.assign(all.size(), nullptr);
        REQUIRE(p->btl()->btl_add_procs(p->btl(), all.size(), all.data(), p->eps.data(), nullptr) ==
                OPAL_SUCCESS);
        for (auto *e : p->eps) {
            REQUIRE(e != nullptr);
        }
    }
}

int BtlFabric::send(size_t i, size_t j, const std::string &payload) {
    mca_btl_base_module_t *b = procs[i]->btl();
    mca_btl_base_descriptor_t *d = b->btl_alloc(b, procs[i]->eps[j], MCA_BTL_NO_ORDER,
                                                payload.size(), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (d == nullptr) {
        return -1;
    }
    std::memcpy(d->des_segments[0].seg_addr.pval, payload.data(), payload.size());
    d->des_cbfunc = nullptr;
    return b->btl_send(b, procs[i]->eps[j], d, kTag);
}

int BtlFabric::progress_all() {
    int n = 0;
    for (auto &p : procs) {
        if (p->module) {
            n += p->module->progress();
        }
        for (auto &m : p->more_rails) {
            n += m ? m->progress() : 0;
        }
    }
    return n;
}

size_t BtlFabric::owner_of_ud(uint32_t qpn) const {
    for (size_t i = 0; i < procs.size(); ++i) {
        if (procs[i]->module && procs[i]->module->advert().ud_qpn == qpn) {
            return i;
        }
    }
    return procs.size();
}

bool BtlFabric::deliver(size_t k) {
    auto &w = fake.datagrams();
    FakeVerbs::Datagram d = w.at(k);
    w.erase(w.begin() + static_cast<std::ptrdiff_t>(k));
    bool ok = fake.deliver_datagram(d);
    size_t r = owner_of_ud(d.dst_qpn);
    if (r < procs.size()) {
        procs[r]->module->progress();
    } else {
        progress_all(); // another rail's UD QP
    }
    return ok;
}

void BtlFabric::run(int rounds) {
    for (int k = 0; k < rounds; ++k) {
        fake.run_rc();
        fake.run_dc();
        while (!fake.datagrams().empty()) {
            (void)deliver(0);
        }
        progress_all();
    }
}

bool BtlFabric::run_until(const std::function<bool()> &done, int max_rounds, double step) {
    for (int k = 0; k < max_rounds; ++k) {
        if (done()) {
            return true;
        }
        run(1);
        advance(step);
    }
    return done();
}

bool BtlFabric::all_up(size_t i, size_t j) {
    btl::Endpoint &e = ep(i, j);
    if (e.state != btl::EpState::kConnected || e.path_count() == 0) {
        return false;
    }
    for (size_t k = 0; k < e.path_count(); ++k) {
        if (e.path_at(k).state != btl::PathState::kUp) {
            return false;
        }
    }
    return true;
}

int BtlFabric::finalize(size_t i) {
    mca_btl_base_module_t *b = procs[i]->btl();
    tick_ = 0.1;
    int rc = b->btl_finalize(b);
    for (auto &m : procs[i]->more_rails) {
        mca_btl_base_module_t *mb = m ? m->base() : nullptr;
        int more = mb != nullptr ? mb->btl_finalize(mb) : OPAL_SUCCESS;
        rc = rc == OPAL_SUCCESS ? more : rc;
    }
    tick_ = 1e-6;
    return rc;
}

mca_btl_base_registration_handle_t *BtlFabric::reg(size_t i, void *base, size_t size) {
    mca_btl_base_module_t *b = procs[i]->btl();
    return b->btl_register_mem(b, nullptr, base, size, MCA_BTL_REG_FLAG_ACCESS_ANY);
}

} // namespace roce::testing
