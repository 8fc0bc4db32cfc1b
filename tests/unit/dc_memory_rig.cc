// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "dc_memory_rig.h"

#include <algorithm>

#include "opal/class/opal_bitmap.h"

namespace roce::testing {

namespace {

constexpr uint32_t kJob = 0x1234; // BtlFabric's jobid

FabricOptions rig_options(bool dc) {
    FabricOptions o;
    o.fixture = "mlx5_lag";
    o.procs = 1;
    o.tweak = [dc](btl::ModuleConfig &c) {
        c.transport.mode = dc ? btl::TransportMode::kDc : btl::TransportMode::kRc;
        // The sizes a real job runs with (the MCA defaults), not the
        // fabric's small ones: the per-process part of the measurement.
        c.device = btl::DeviceConfig{};
    };
    return o;
}

} // namespace

DcMemoryRig::DcMemoryRig(bool dc, size_t peers, size_t per_node)
    : fabric_(std::make_unique<BtlFabric>(rig_options(dc))), per_node_(per_node) {
    ours_ = module().advert();
    procs_.resize(peers);
    for (size_t k = 0; k < peers; ++k) {
        procs_[k].proc_name.jobid = kJob;
        procs_[k].proc_name.vpid = static_cast<opal_vpid_t>(k + 1);
    }
    // Open MPI's array of handles, not the module's memory: made here,
    // outside what add_all is measured for.
    handles_.assign(peers, nullptr);
    fabric_->more_peers = [this](opal_proc_t *p) { return modex_of(p); };
}

DcMemoryRig::~DcMemoryRig() {
    fabric_->more_peers = nullptr;
}

util::Result<btl::wire::ModexAddress> DcMemoryRig::modex_of(opal_proc_t *proc) const {
    if (proc < procs_.data() || proc >= procs_.data() + procs_.size()) {
        return util::Status(util::Code::kNotFound, "not a fake peer");
    }
    auto k = static_cast<size_t>(proc - procs_.data());
    btl::wire::ModexAddress a;
    a.token = 0x70000000ull + k + 1;
    btl::wire::PortAdvert p = ours_;
    // The node's address: ours with the host part replaced (nodes above 253
    // carry into the third octet; the prefix is published as /16 so that
    // every node is on our link).
    const size_t node = node_of(k) + 1;
    for (auto &g : p.gids) {
        g.gid[15] = static_cast<uint8_t>(node % 250 + 2);
        g.gid[14] = static_cast<uint8_t>(g.gid[14] + node / 250);
        g.prefix_len = 16;
    }
    if (p.flags & btl::wire::kPortFlagDct) {
        p.dct_number = static_cast<uint32_t>(0x100 + k) & 0xffffff;
        p.dc_key = 0xdc00000000000000ull | (k + 1);
    }
    a.ports.push_back(p);
    return a;
}

size_t DcMemoryRig::add_all(size_t batch) {
    mca_btl_base_module_t *b = module().base();
    size_t reached = 0;
    for (size_t first = 0; first < procs_.size(); first += batch) {
        size_t n = std::min(batch, procs_.size() - first);
        std::vector<opal_proc_t *> ps(n);
        for (size_t k = 0; k < n; ++k) {
            ps[k] = &procs_[first + k];
        }
        opal_bitmap_t reach;
        OBJ_CONSTRUCT(&reach, opal_bitmap_t);
        opal_bitmap_init(&reach, static_cast<int>(n));
        if (b->btl_add_procs(b, n, ps.data(), handles_.data() + first, &reach) == OPAL_SUCCESS) {
            for (size_t k = 0; k < n; ++k) {
                reached += opal_bitmap_is_set_bit(&reach, static_cast<int>(k)) ? 1 : 0;
            }
        }
        OBJ_DESTRUCT(&reach);
    }
    return reached;
}

} // namespace roce::testing
