// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// FakeVerbs: devices, queries, resources and failure scripting. The QP state
// machine and the data path are in fake_verbs_qp.cc.
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "fake_verbs_state.h"
#include "select/mtu.h"

namespace roce::testing {

namespace {

constexpr int kSlots = 8;
FakeVerbs *g_slots[kSlots] = {};

template <int N>
ibv_device **slot_get_device_list(int *n) {
    return FakeOps::get_device_list(*g_slots[N], n);
}

template <int... N>
constexpr std::array<ibv_device **(*)(int *), sizeof...(N)> make_slots(
    std::integer_sequence<int, N...>) {
    return {&slot_get_device_list<N>...};
}
constexpr auto kSlotFns = make_slots(std::make_integer_sequence<int, kSlots>{});

FakeVerbs::State &st(FakeVerbs &f) { return f.state(); }

/// Whether anything created from `ctx` still lives.
bool context_in_use(const FakeVerbs::State &s, const ibv_context *ctx) {
    auto uses = [ctx](const auto &objects, auto context_of) {
        for (const auto &[key, obj] : objects) {
            if (context_of(*obj) == ctx) {
                return true;
            }
        }
        return false;
    };
    return uses(s.pds, [](const FakePdObj &o) { return o.pd.context; }) ||
           uses(s.mrs, [](const FakeMrObj &o) { return o.mr.context; }) ||
           uses(s.channels, [](const FakeChannelObj &o) { return o.ch.context; }) ||
           uses(s.cqs, [](const FakeCqObj &o) { return o.cq.context; }) ||
           uses(s.srqs, [](const FakeSrqObj &o) { return o.srq.context; }) ||
           uses(s.qps, [](const FakeQpObj &o) { return o.qp.context; }) ||
           uses(s.ahs, [](const FakeAhObj &o) { return o.ah.context; });
}

/// Whether a posted receive points into `mr`.
bool posted_into(const FakeVerbs::State &s, const ibv_mr *mr) {
    auto hits = [mr](const std::deque<PostedWr> &q) {
        for (const auto &wr : q) {
            for (const auto &sge : wr.sge) {
                if (sge.lkey == mr->lkey) {
                    return true;
                }
            }
        }
        return false;
    };
    for (const auto &[key, srq] : s.srqs) {
        if (hits(srq->posted)) {
            return true;
        }
    }
    for (const auto &[key, qp] : s.qps) {
        if (hits(qp->rq)) {
            return true;
        }
    }
    return false;
}

template <typename T>
T *fail_ptr(int err) {
    errno = err;
    return nullptr;
}

} // namespace

const char *call_name(Call c) noexcept {
    static const char *const kNames[] = {
        "get_device_list", "open_device", "close_device", "query_device", "query_port",
        "query_gid_ex", "query_gid_table", "query_pkey", "get_async_event", "alloc_pd",
        "dealloc_pd", "reg_mr", "dereg_mr", "create_comp_channel", "destroy_comp_channel",
        "create_cq", "destroy_cq", "poll_cq", "req_notify_cq", "create_srq", "destroy_srq",
        "post_srq_recv", "create_qp", "destroy_qp", "modify_qp", "query_qp", "post_send",
        "post_recv", "create_ah", "destroy_ah", "mlx5dv_query_device", "mlx5dv_create_qp",
        "mlx5dv_modify_qp_lag_port", "mlx5dv_query_qp_lag_port", "mlx5dv_modify_qp_udp_sport",
        "wr_complete"};
    auto i = static_cast<size_t>(c);
    return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

// ---- helpers ---------------------------------------------------------------

FakeVerbs *FakeOps::owner(const ibv_context *ctx) {
    return reinterpret_cast<const FakeContextObj *>(ctx)->owner;
}

int FakeOps::enter(FakeVerbs &f, Call c) {
    auto i = static_cast<size_t>(c);
    ++f.calls_[i];
    auto &spec = st(f).fail[i];
    if (spec.err == 0 || spec.times == 0) {
        return 0;
    }
    if (spec.skip > 0) {
        --spec.skip;
        return 0;
    }
    if (spec.times > 0) {
        --spec.times;
    }
    return spec.err;
}

FakeDevice &FakeOps::device_of(const ibv_context *ctx) {
    auto *c = reinterpret_cast<const FakeContextObj *>(ctx);
    return st(*c->owner).devices[c->device]->spec;
}

bool FakeOps::port_valid(const ibv_context *ctx, int port) {
    return port >= 1 && port <= static_cast<int>(device_of(ctx).ports.size());
}

// ---- devices and queries ----------------------------------------------------

ibv_device **FakeOps::get_device_list(FakeVerbs &f, int *n) {
    if (int err = enter(f, Call::kGetDeviceList)) {
        return fail_ptr<ibv_device *>(err);
    }
    auto &devs = st(f).devices;
    auto **list = new ibv_device *[devs.size() + 1];
    for (size_t i = 0; i < devs.size(); ++i) {
        list[i] = &devs[i]->dev;
    }
    list[devs.size()] = nullptr;
    if (n != nullptr) {
        *n = static_cast<int>(devs.size());
    }
    return list;
}

void FakeOps::free_device_list(ibv_device **list) { delete[] list; }

ibv_context *FakeOps::open_device(ibv_device *dev) {
    for (FakeVerbs *f : g_slots) {
        if (f == nullptr) {
            continue;
        }
        auto &devs = st(*f).devices;
        for (size_t i = 0; i < devs.size(); ++i) {
            if (&devs[i]->dev != dev) {
                continue;
            }
            if (int err = enter(*f, Call::kOpenDevice)) {
                return fail_ptr<ibv_context>(err);
            }
            int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
            if (fd < 0) {
                return fail_ptr<ibv_context>(errno);
            }
            auto obj = std::make_unique<FakeContextObj>();
            std::memset(&obj->ctx, 0, sizeof(obj->ctx));
            obj->ctx.async_fd = fd;
            obj->ctx.device = dev;
            obj->ctx.num_comp_vectors = 4;
            obj->owner = f;
            obj->device = i;
            ibv_context *ctx = &obj->ctx;
            st(*f).contexts[ctx] = std::move(obj);
            return ctx;
        }
    }
    return fail_ptr<ibv_context>(ENODEV);
}

int FakeOps::close_device(ibv_context *ctx) {
    FakeVerbs &f = *owner(ctx);
    if (int err = enter(f, Call::kCloseDevice)) {
        return fail_with(err);
    }
    if (context_in_use(st(f), ctx)) {
        return fail_with(EBUSY); // see fake_verbs.h: the real close would leave them dangling
    }
    st(f).events.erase(ctx);
    st(f).contexts.erase(ctx);
    return 0;
}

int FakeOps::query_device(ibv_context *ctx, ibv_device_attr *a) {
    if (int err = enter(*owner(ctx), Call::kQueryDevice)) {
        return fail_with(err);
    }
    const FakeDevice &d = device_of(ctx);
    std::memset(a, 0, sizeof(*a));
    std::snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", "20.39.1002");
    a->phys_port_cnt = static_cast<uint8_t>(d.ports.size());
    a->max_qp = 1 << 17;
    a->max_qp_wr = 32768;
    a->max_sge = 30;
    a->max_cq = 1 << 16;
    a->max_cqe = 4194303;
    a->max_mr = 1 << 24;
    a->max_pd = 1 << 24;
    a->max_srq = 1 << 23;
    a->max_srq_wr = 32767;
    a->max_srq_sge = 31;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 16;
    a->max_pkeys = d.ports.empty() ? 0 : static_cast<uint16_t>(d.ports[0].pkeys.size());
    a->vendor_id = d.mlx5 ? 0x02c9 : 0;
    return 0;
}

int FakeOps::query_port(ibv_context *ctx, uint8_t port, ibv_port_attr *a) {
    if (int err = enter(*owner(ctx), Call::kQueryPort)) {
        return fail_with(err);
    }
    if (!port_valid(ctx, port)) {
        return fail_with(EINVAL);
    }
    const FakePort &p = device_of(ctx).ports[port - 1u];
    std::memset(a, 0, sizeof(*a));
    a->state = p.state;
    a->max_mtu = p.max_mtu;
    a->active_mtu = p.active_mtu;
    a->gid_tbl_len = p.gid_tbl_len;
    a->pkey_tbl_len = static_cast<uint16_t>(p.pkeys.size());
    a->link_layer = p.link_layer;
    a->phys_state = p.state == IBV_PORT_ACTIVE ? 5 : 3;
    a->active_width = p.active_width;
    a->active_speed = p.active_speed;
    return 0;
}

int FakeOps::query_gid_ex(ibv_context *ctx, uint32_t port, uint32_t index, ibv_gid_entry *e,
                          uint32_t flags) {
    if (int err = enter(*owner(ctx), Call::kQueryGidEx)) {
        return fail_with(err);
    }
    if (flags != 0 || !port_valid(ctx, static_cast<int>(port))) {
        return fail_with(EINVAL);
    }
    const FakePort &p = device_of(ctx).ports[port - 1];
    auto it = p.gids.find(static_cast<int>(index));
    if (it == p.gids.end()) {
        return fail_with(ENODATA); // empty or beyond the table, as the kernel says
    }
    std::memcpy(e->gid.raw, it->second.gid.data(), 16);
    e->gid_index = index;
    e->port_num = port;
    e->gid_type = it->second.type;
    e->ndev_ifindex = it->second.ndev_ifindex;
    return 0;
}

ssize_t FakeOps::query_gid_table(ibv_context *ctx, ibv_gid_entry *e, size_t n, uint32_t flags) {
    if (int err = enter(*owner(ctx), Call::kQueryGidTable)) {
        errno = err;
        return -err;
    }
    const FakeDevice &d = device_of(ctx);
    size_t total = 0;
    for (const auto &p : d.ports) {
        total += p.gids.size();
    }
    if (flags != 0 || n < total) {
        errno = EINVAL;
        return -EINVAL;
    }
    size_t k = 0;
    for (size_t pi = 0; pi < d.ports.size(); ++pi) {
        for (const auto &[index, g] : d.ports[pi].gids) {
            std::memcpy(e[k].gid.raw, g.gid.data(), 16);
            e[k].gid_index = static_cast<uint32_t>(index);
            e[k].port_num = static_cast<uint32_t>(pi + 1);
            e[k].gid_type = g.type;
            e[k].ndev_ifindex = g.ndev_ifindex;
            ++k;
        }
    }
    return static_cast<ssize_t>(k);
}

int FakeOps::query_pkey(ibv_context *ctx, uint8_t port, int index, __be16 *pkey) {
    if (int err = enter(*owner(ctx), Call::kQueryPkey)) {
        return fail_with(err);
    }
    if (!port_valid(ctx, port)) {
        return fail_with(EINVAL);
    }
    const FakePort &p = device_of(ctx).ports[port - 1u];
    if (index < 0 || static_cast<size_t>(index) >= p.pkeys.size()) {
        return fail_with(EINVAL);
    }
    *pkey = htons(p.pkeys[static_cast<size_t>(index)]);
    return 0;
}

int FakeOps::get_async_event(ibv_context *ctx, ibv_async_event *e) {
    FakeVerbs &f = *owner(ctx);
    if (int err = enter(f, Call::kGetAsyncEvent)) {
        return fail_with(err);
    }
    auto &q = st(f).events[ctx];
    if (q.empty()) {
        errno = EAGAIN; // like a non-blocking async fd
        return -1;
    }
    *e = q.front();
    q.pop_front();
    uint64_t one = 0;
    (void)!read(ctx->async_fd, &one, sizeof(one)); // the count is > 0: never blocks
    return 0;
}

void FakeOps::queue_event(FakeVerbs &f, ibv_context *ctx, const ibv_async_event &e) {
    st(f).events[ctx].push_back(e);
    uint64_t one = 1;
    (void)!write(ctx->async_fd, &one, sizeof(one));
}

void FakeOps::drop_qp_events(FakeVerbs &f, ibv_context *ctx, const ibv_qp *qp) {
    auto it = st(f).events.find(ctx);
    if (it == st(f).events.end()) {
        return;
    }
    auto &q = it->second;
    for (auto e = q.begin(); e != q.end();) {
        bool of_qp =
            e->element.qp == qp &&
            (e->event_type == IBV_EVENT_QP_FATAL || e->event_type == IBV_EVENT_QP_REQ_ERR ||
             e->event_type == IBV_EVENT_QP_ACCESS_ERR || e->event_type == IBV_EVENT_COMM_EST ||
             e->event_type == IBV_EVENT_SQ_DRAINED || e->event_type == IBV_EVENT_PATH_MIG ||
             e->event_type == IBV_EVENT_PATH_MIG_ERR ||
             e->event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
        if (of_qp) {
            e = q.erase(e);
            uint64_t one = 0;
            (void)!read(ctx->async_fd, &one, sizeof(one));
        } else {
            ++e;
        }
    }
}

int FakeOps::mlx5dv_query_device(ibv_context *ctx, mlx5dv_context *attrs) {
    if (int err = enter(*owner(ctx), Call::kMlx5dvQueryDevice)) {
        return fail_with(err);
    }
    const FakeDevice &d = device_of(ctx);
    if (!d.mlx5) {
        return fail_with(EOPNOTSUPP);
    }
    uint64_t asked = attrs->comp_mask;
    std::memset(attrs, 0, sizeof(*attrs));
    attrs->version = 1;
    if (asked & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) {
        attrs->num_lag_ports = static_cast<uint8_t>(d.num_lag_ports);
        attrs->comp_mask |= MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS;
    }
    // rdma-core answers this one on every mlx5 device (providers/mlx5/mlx5.c
    // _mlx5dv_query_device): the ODP caps over DC, 0 when the firmware
    // query fails. It does not say whether DC itself works - rdma-core has
    // no such flag; see verbs/dc_support.h for how that is found out.
    if (asked & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) {
        attrs->dc_odp_caps = d.dc ? d.dc_odp_caps : 0;
        attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
    }
    return 0;
}

// ---- resources ---------------------------------------------------------------

ibv_pd *FakeOps::alloc_pd(ibv_context *ctx) {
    FakeVerbs &f = *owner(ctx);
    if (int err = enter(f, Call::kAllocPd)) {
        return fail_ptr<ibv_pd>(err);
    }
    auto obj = std::make_unique<FakePdObj>();
    obj->pd.context = ctx;
    obj->pd.handle = st(f).next_key++;
    ibv_pd *pd = &obj->pd;
    st(f).pds[pd] = std::move(obj);
    return pd;
}

int FakeOps::dealloc_pd(ibv_pd *pd) {
    FakeVerbs &f = *owner(pd->context);
    if (int err = enter(f, Call::kDeallocPd)) {
        return fail_with(err);
    }
    auto it = st(f).pds.find(pd);
    if (it == st(f).pds.end()) {
        return fail_with(EINVAL);
    }
    if (it->second->users > 0) {
        return fail_with(EBUSY); // MRs, QPs, SRQs or AHs still use it
    }
    st(f).pds.erase(it);
    return 0;
}

ibv_mr *FakeOps::reg_mr(ibv_pd *pd, void *addr, size_t len, int access) {
    FakeVerbs &f = *owner(pd->context);
    if (int err = enter(f, Call::kRegMr)) {
        return fail_ptr<ibv_mr>(err);
    }
    // Remote write and atomics need local write (ib_check_mr_access).
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        return fail_ptr<ibv_mr>(EINVAL);
    }
    auto obj = std::make_unique<FakeMrObj>();
    obj->mr.context = pd->context;
    obj->mr.pd = pd;
    obj->mr.addr = addr;
    obj->mr.length = len;
    obj->mr.lkey = st(f).next_key++;
    obj->mr.rkey = st(f).next_key++;
    obj->access = access;
    ibv_mr *mr = &obj->mr;
    st(f).mrs[mr] = std::move(obj);
    ++st(f).pds.at(pd)->users;
    return mr;
}

int FakeOps::dereg_mr(ibv_mr *mr) {
    FakeVerbs &f = *owner(mr->context);
    if (int err = enter(f, Call::kDeregMr)) {
        return fail_with(err);
    }
    if (posted_into(st(f), mr)) {
        ++st(f).busy_deregs;
    }
    --st(f).pds.at(mr->pd)->users;
    st(f).mrs.erase(mr);
    return 0;
}

ibv_comp_channel *FakeOps::create_comp_channel(ibv_context *ctx) {
    FakeVerbs &f = *owner(ctx);
    if (int err = enter(f, Call::kCreateCompChannel)) {
        return fail_ptr<ibv_comp_channel>(err);
    }
    auto obj = std::make_unique<FakeChannelObj>();
    obj->ch.context = ctx;
    obj->ch.fd = -1;
    ibv_comp_channel *ch = &obj->ch;
    st(f).channels[ch] = std::move(obj);
    return ch;
}

int FakeOps::destroy_comp_channel(ibv_comp_channel *ch) {
    FakeVerbs &f = *owner(ch->context);
    if (int err = enter(f, Call::kDestroyCompChannel)) {
        return fail_with(err);
    }
    st(f).channels.erase(ch);
    return 0;
}

ibv_cq *FakeOps::create_cq(ibv_context *ctx, int cqe, void *user, ibv_comp_channel *ch, int vec) {
    FakeVerbs &f = *owner(ctx);
    if (int err = enter(f, Call::kCreateCq)) {
        return fail_ptr<ibv_cq>(err);
    }
    if (cqe < 1 || cqe > 4194303 || vec < 0 || vec >= ctx->num_comp_vectors) {
        return fail_ptr<ibv_cq>(EINVAL);
    }
    auto obj = std::make_unique<FakeCqObj>();
    obj->cq.context = ctx;
    obj->cq.channel = ch;
    obj->cq.cq_context = user;
    obj->cq.cqe = cqe;
    ibv_cq *cq = &obj->cq;
    st(f).cqs[cq] = std::move(obj);
    return cq;
}

int FakeOps::destroy_cq(ibv_cq *cq) {
    FakeVerbs &f = *owner(cq->context);
    if (int err = enter(f, Call::kDestroyCq)) {
        return fail_with(err);
    }
    auto it = st(f).cqs.find(cq);
    if (it == st(f).cqs.end()) {
        return fail_with(EINVAL);
    }
    if (it->second->users > 0) {
        return fail_with(EBUSY); // a QP still completes into it
    }
    st(f).cqs.erase(it);
    return 0;
}

int FakeOps::poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
    FakeVerbs &f = *owner(cq->context);
    if (int err = enter(f, Call::kPollCq)) {
        errno = err;
        return -err;
    }
    auto &q = st(f).cqs.at(cq)->wcs;
    int k = 0;
    while (k < n && !q.empty()) {
        wc[k++] = q.front();
        q.pop_front();
    }
    return k;
}

int FakeOps::req_notify_cq(ibv_cq *cq, int) {
    if (int err = enter(*owner(cq->context), Call::kReqNotifyCq)) {
        return fail_with(err);
    }
    return 0;
}

ibv_srq *FakeOps::create_srq(ibv_pd *pd, ibv_srq_init_attr *attr) {
    FakeVerbs &f = *owner(pd->context);
    if (int err = enter(f, Call::kCreateSrq)) {
        return fail_ptr<ibv_srq>(err);
    }
    if (attr->attr.max_wr == 0 || attr->attr.max_wr > 32767 || attr->attr.max_sge > 31) {
        return fail_ptr<ibv_srq>(EINVAL);
    }
    auto obj = std::make_unique<FakeSrqObj>();
    obj->srq.context = pd->context;
    obj->srq.pd = pd;
    obj->srq.srq_context = attr->srq_context;
    ibv_srq *srq = &obj->srq;
    st(f).srqs[srq] = std::move(obj);
    ++st(f).pds.at(pd)->users;
    return srq;
}

int FakeOps::destroy_srq(ibv_srq *srq) {
    FakeVerbs &f = *owner(srq->context);
    if (int err = enter(f, Call::kDestroySrq)) {
        return fail_with(err);
    }
    auto it = st(f).srqs.find(srq);
    if (it == st(f).srqs.end()) {
        return fail_with(EINVAL);
    }
    if (it->second->users > 0) {
        return fail_with(EBUSY);
    }
    --st(f).pds.at(srq->pd)->users;
    st(f).srqs.erase(it);
    return 0;
}

int FakeOps::check_av(FakeVerbs &f, const ibv_context *ctx, const ibv_ah_attr &ah,
                      std::string &why) {
    if (!port_valid(ctx, ah.port_num)) {
        why = "AV port_num " + std::to_string(ah.port_num) + " is not a port of the device";
        return EINVAL;
    }
    const FakePort &p = device_of(ctx).ports[ah.port_num - 1u];
    if (p.link_layer == IBV_LINK_LAYER_ETHERNET && !ah.is_global) {
        why = "a RoCE address vector needs a GRH (is_global = 1)";
        return EINVAL;
    }
    if (ah.is_global && p.gids.count(ah.grh.sgid_index) == 0) {
        why = "sgid_index " + std::to_string(ah.grh.sgid_index) +
              (ah.grh.sgid_index >= p.gid_tbl_len ? " is beyond the GID table"
                                                  : " is an empty GID slot");
        return ENODATA;
    }
    if (ah.is_global) {
        std::array<uint8_t, 16> dgid{};
        std::memcpy(dgid.data(), ah.grh.dgid.raw, 16);
        auto it = st(f).unreachable.find(dgid);
        if (it != st(f).unreachable.end()) {
            why = "resolving the destination's MAC (ARP/ND) failed";
            return it->second;
        }
    }
    return 0;
}

ibv_ah *FakeOps::create_ah(ibv_pd *pd, ibv_ah_attr *attr) {
    FakeVerbs &f = *owner(pd->context);
    if (int err = enter(f, Call::kCreateAh)) {
        return fail_ptr<ibv_ah>(err);
    }
    std::string why;
    if (int err = check_av(f, pd->context, *attr, why)) {
        return fail_ptr<ibv_ah>(err);
    }
    auto obj = std::make_unique<FakeAhObj>();
    obj->ah.context = pd->context;
    obj->ah.pd = pd;
    obj->attr = *attr;
    if (attr->is_global) {
        const FakePort &port = device_of(pd->context).ports[attr->port_num - 1u];
        obj->sgid = port.gids.at(attr->grh.sgid_index).gid; // check_av: the slot is populated
    }
    ibv_ah *ah = &obj->ah;
    st(f).ahs[ah] = std::move(obj);
    ++st(f).pds.at(pd)->users;
    return ah;
}

int FakeOps::destroy_ah(ibv_ah *ah) {
    FakeVerbs &f = *owner(ah->context);
    if (int err = enter(f, Call::kDestroyAh)) {
        return fail_with(err);
    }
    --st(f).pds.at(ah->pd)->users;
    st(f).ahs.erase(ah);
    return 0;
}

// ---- FakeVerbs -----------------------------------------------------------------

FakeVerbs::FakeVerbs() : st_(std::make_unique<State>()) {
    for (int i = 0; i < kSlots; ++i) {
        if (g_slots[i] == nullptr) {
            g_slots[i] = this;
            slot_ = i;
            break;
        }
    }
    if (slot_ < 0) {
        throw std::runtime_error("FakeVerbs: more than 8 instances at once");
    }
    api_ = verbs::VerbsApi{
        kSlotFns[static_cast<size_t>(slot_)],
        &FakeOps::free_device_list,
        [](ibv_device *d) -> const char * { return d->name; },
        &FakeOps::open_device,
        &FakeOps::close_device,
        &FakeOps::query_device,
        &FakeOps::query_port,
        &FakeOps::query_gid_ex,
        &FakeOps::query_gid_table,
        &FakeOps::query_pkey,
        &FakeOps::get_async_event,
        [](ibv_async_event *) {},
        &FakeOps::alloc_pd,
        &FakeOps::dealloc_pd,
        &FakeOps::reg_mr,
        &FakeOps::dereg_mr,
        &FakeOps::create_comp_channel,
        &FakeOps::destroy_comp_channel,
        &FakeOps::create_cq,
        &FakeOps::destroy_cq,
        &FakeOps::poll_cq,
        &FakeOps::req_notify_cq,
        &FakeOps::create_srq,
        &FakeOps::destroy_srq,
        &FakeOps::post_srq_recv,
        &FakeOps::create_qp,
        &FakeOps::destroy_qp,
        &FakeOps::modify_qp,
        &FakeOps::query_qp,
        &FakeOps::post_send,
        &FakeOps::post_recv,
        &FakeOps::create_ah,
        &FakeOps::destroy_ah,
        [](ibv_device *d) {
            for (FakeVerbs *f : g_slots) {
                if (f == nullptr) {
                    continue;
                }
                for (const auto &dev : f->st_->devices) {
                    if (&dev->dev == d) {
                        return dev->spec.mlx5;
                    }
                }
            }
            return false;
        },
        &FakeOps::mlx5dv_query_device,
        &FakeOps::mlx5dv_create_qp,
        &FakeOps::mlx5dv_modify_qp_lag_port,
        &FakeOps::mlx5dv_query_qp_lag_port,
        &FakeOps::mlx5dv_modify_qp_udp_sport,
        &FakeDcOps::qp_to_qp_ex,
        &FakeDcOps::mlx5dv_qp_ex_from_ibv_qp_ex,
        &FakeDcOps::wr_start,
        &FakeDcOps::wr_complete,
        &FakeDcOps::wr_abort,
        &FakeDcOps::wr_send,
        &FakeDcOps::wr_send_imm,
        &FakeDcOps::wr_rdma_write,
        &FakeDcOps::wr_rdma_read,
        &FakeDcOps::wr_atomic_cmp_swp,
        &FakeDcOps::wr_atomic_fetch_add,
        &FakeDcOps::wr_set_sge,
        &FakeDcOps::wr_set_sge_list,
        &FakeDcOps::wr_set_inline_data,
        &FakeDcOps::wr_set_dc_addr,
    };
}

FakeVerbs::FakeVerbs(const topo::Snapshot &snapshot) : FakeVerbs() {
    for (const auto &d : snapshot.devices) {
        FakeDevice dev;
        dev.name = d.name;
        dev.mlx5 = d.name.rfind("mlx5", 0) == 0;
        dev.checks_pkey_index = dev.mlx5;
        dev.raises_last_wqe = dev.mlx5;      // rxe on Linux 6.1 does not (fake_verbs.h)
        dev.cleans_cq_on_destroy = dev.mlx5; // rdma-core's mlx5 provider does
        dev.num_lag_ports = d.num_lag_ports;
        for (const auto &p : d.ports) {
            FakePort port;
            port.state = p.state == topo::PortState::kActive ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
            port.link_layer = p.link_layer == topo::LinkLayer::kInfiniBand
                                  ? IBV_LINK_LAYER_INFINIBAND
                                  : IBV_LINK_LAYER_ETHERNET;
            int mtu = p.active_mtu;
            if (mtu == 0) {
                const topo::NetdevInfo *nd =
                    p.gids.empty() ? nullptr : snapshot.find_netdev(p.gids.front().netdev);
                mtu = nd != nullptr ? select::iboe_mtu_bytes(nd->mtu) : 4096;
            }
            port.active_mtu = select::mtu_enum(mtu);
            port.gid_tbl_len = p.gid_tbl_len;
            port.pkeys = p.pkeys;
            for (const auto &g : p.gids) {
                FakeGid fg;
                fg.gid = g.gid;
                fg.type = g.type == topo::GidType::kRoceV2   ? IBV_GID_TYPE_ROCE_V2
                          : g.type == topo::GidType::kRoceV1 ? IBV_GID_TYPE_ROCE_V1
                                                             : IBV_GID_TYPE_IB;
                fg.ndev_ifindex = static_cast<uint32_t>(g.netdev_ifindex);
                port.gids[g.index] = fg;
            }
            dev.ports.push_back(std::move(port));
        }
        add_device(std::move(dev));
    }
}

FakeVerbs::~FakeVerbs() { g_slots[slot_] = nullptr; }

void FakeVerbs::add_device(FakeDevice device) {
    auto obj = std::make_unique<FakeDeviceObj>();
    std::snprintf(obj->dev.name, sizeof(obj->dev.name), "%s", device.name.c_str());
    std::snprintf(obj->dev.dev_name, sizeof(obj->dev.dev_name), "uverbs%zu", st_->devices.size());
    obj->dev.node_type = IBV_NODE_CA;
    obj->dev.transport_type = IBV_TRANSPORT_IB;
    obj->spec = std::move(device);
    st_->devices.push_back(std::move(obj));
}

FakeDevice &FakeVerbs::device(const std::string &name) {
    for (auto &d : st_->devices) {
        if (d->spec.name == name) {
            return d->spec;
        }
    }
    throw std::out_of_range("FakeVerbs: no device " + name);
}

void FakeVerbs::set_privileged(bool privileged) { st_->privileged = privileged; }
void FakeVerbs::set_auto_complete_sends(bool on) { st_->auto_complete = on; }

void FakeVerbs::fail(Call call, int err, int skip, int times) {
    st_->fail[static_cast<size_t>(call)] = State::FailSpec{err, skip, times};
}

void FakeVerbs::set_unreachable(const std::array<uint8_t, 16> &dgid, int err) {
    st_->unreachable[dgid] = err;
}

void FakeVerbs::push_completion(ibv_cq *cq, const ibv_wc &wc) { st_->cqs.at(cq)->wcs.push_back(wc); }

void FakeVerbs::push_async_event(ibv_context *ctx, const ibv_async_event &event) {
    FakeOps::queue_event(*this, ctx, event);
}

size_t FakeVerbs::busy_deregs() const { return st_->busy_deregs; }

size_t FakeVerbs::cq_depth(const ibv_cq *cq) const { return st_->cqs.at(cq)->wcs.size(); }

const ibv_mr *FakeVerbs::mr_by_key(uint32_t key, bool remote, int *access) const {
    for (const auto &[mr, obj] : st_->mrs) {
        if ((remote ? obj->mr.rkey : obj->mr.lkey) == key) {
            if (access != nullptr) {
                *access = obj->access;
            }
            return &obj->mr;
        }
    }
    return nullptr;
}

FakeContextObj::~FakeContextObj() {
    if (ctx.async_fd >= 0) {
        ::close(ctx.async_fd);
    }
}

size_t FakeVerbs::registered_bytes() const {
    size_t n = 0;
    for (const auto &m : st_->mrs) {
        n += m.first->length;
    }
    return n;
}

size_t FakeVerbs::live_objects() const {
    return st_->contexts.size() + st_->pds.size() + st_->mrs.size() + st_->channels.size() +
           st_->cqs.size() + st_->srqs.size() + st_->qps.size() + st_->ahs.size();
}

} // namespace roce::testing
