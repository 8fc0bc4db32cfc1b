// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/lag_port.h"

#include <cerrno>

#include "util/strings.h"

namespace roce::qp {

util::Result<LagPort> set_lag_port(const verbs::VerbsApi &api, ibv_qp *qp, uint32_t qpn,
                                   uint8_t want) {
    int rc = api.mlx5dv_modify_qp_lag_port(qp, want);
    if (rc != 0) {
        return util::Status::from_errno(
            verbs::normalize_rc(rc, errno),
            util::format("mlx5dv_modify_qp_lag_port(qpn 0x%x, port %u)", qpn, want));
    }
    LagPort got;
    rc = api.mlx5dv_query_qp_lag_port(qp, &got.port, &got.active);
    if (rc != 0) {
        return util::Status::from_errno(verbs::normalize_rc(rc, errno),
                                        util::format("mlx5dv_query_qp_lag_port(qpn 0x%x)", qpn));
    }
    if (got.port != want) {
        return util::Status(util::Code::kInternal,
                            util::format("qpn 0x%x: LAG port %u requested, %u in effect", qpn,
                                         want, got.port));
    }
    return got;
}

} // namespace roce::qp
