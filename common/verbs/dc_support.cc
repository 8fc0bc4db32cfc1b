// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "verbs/dc_support.h"

#include <cerrno>
#include <cstring>

#include "util/strings.h"
#include "verbs/handles.h"

namespace roce::verbs {

namespace {

std::string failed(const std::string &name, const char *verb, int err) {
    return util::format("%s: %s failed: %s (%d); DC not used", name.c_str(), verb,
                        std::strerror(err), err);
}

int saved_errno() {
    return errno != 0 ? errno : EIO;
}

} // namespace

DcSupport query_dc_support(const VerbsApi &api, ibv_context *ctx, const std::string &name) {
    DcSupport out;
    if (api.mlx5dv_is_supported == nullptr || !api.mlx5dv_is_supported(ctx->device)) {
        out.reason = name + " is not an mlx5 device: DC needs mlx5 direct verbs";
        return out;
    }
    mlx5dv_context dv{};
    dv.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
    int rc = normalize_rc(api.mlx5dv_query_device(ctx, &dv), errno);
    if (rc != 0) {
        out.reason = failed(name, "mlx5dv_query_device", rc);
        return out;
    }
    if (dv.comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) {
        out.dc_odp_caps = dv.dc_odp_caps;
    }
    // The probe: declared in creation order, destroyed in reverse.
    errno = 0;
    Pd pd(api.alloc_pd(ctx), PdDeleter{&api});
    if (!pd) {
        out.reason = failed(name, "ibv_alloc_pd", saved_errno());
        return out;
    }
    Cq cq(api.create_cq(ctx, 1, nullptr, nullptr, 0), CqDeleter{&api});
    if (!cq) {
        out.reason = failed(name, "ibv_create_cq", saved_errno());
        return out;
    }
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 1;
    sa.attr.max_sge = 1;
    Srq srq(api.create_srq(pd.get(), &sa), SrqDeleter{&api});
    if (!srq) {
        out.reason = failed(name, "ibv_create_srq", saved_errno());
        return out;
    }
    ibv_qp_init_attr_ex ex{};
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd.get();
    ex.send_cq = cq.get();
    ex.recv_cq = cq.get();
    ex.srq = srq.get();
    ex.qp_type = IBV_QPT_DRIVER;
    mlx5dv_qp_init_attr m{};
    m.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    m.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
    m.dc_init_attr.dct_access_key = 0;
    Qp dct(api.mlx5dv_create_qp(ctx, &ex, &m), QpDeleter{&api});
    if (!dct) {
        int err = saved_errno();
        out.reason = failed(name, "mlx5dv_create_qp(DCT)", err);
        if (err == EOPNOTSUPP) {
            out.reason += " (the device or its firmware lacks the dct capability)";
        }
        return out;
    }
    out.supported = true;
    out.reason = util::format("%s: DC supported (a DC target could be created; DC ODP caps 0x%x)",
                              name.c_str(), out.dc_odp_caps);
    return out;
}

} // namespace roce::verbs
