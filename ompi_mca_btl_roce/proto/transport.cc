// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "proto/transport.h"

#include "util/params.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

const char *to_string(TransportMode m) noexcept {
    switch (m) {
    case TransportMode::kAuto:
        return "auto";
    case TransportMode::kRc:
        return "rc";
    case TransportMode::kDc:
        return "dc";
    }
    return "?";
}

Result<TransportConfig> parse_transport(int mode, int64_t dc_peer_threshold, int64_t dc_dcis) {
    Status s = util::check_range("btl_roce_transport", mode, 0, 2, "auto, rc or dc (0, 1, 2)");
    if (!s) {
        return s;
    }
    // 2^24: a QP number's width, far above any job a process could address.
    s = util::check_range("btl_roce_dc_peer_threshold", dc_peer_threshold, 0, 1 << 24);
    if (!s) {
        return s;
    }
    s = util::check_range("btl_roce_dc_dcis", dc_dcis, 1, kMaxDcis);
    if (!s) {
        return s;
    }
    TransportConfig c;
    c.mode = static_cast<TransportMode>(mode);
    c.dc_peer_threshold = static_cast<uint32_t>(dc_peer_threshold);
    c.dc_dcis = static_cast<uint32_t>(dc_dcis);
    return c;
}

TransportChoice choose_transport(const TransportConfig &cfg, uint32_t job_size,
                                 const std::string &rail,
                                 const std::function<DcCapability()> &probe) {
    TransportChoice c;
    const char *r = rail.c_str();
    if (cfg.mode == TransportMode::kRc) {
        c.why = util::format("%s: RC (btl_roce_transport = rc)", r);
        return c;
    }
    // The job size is the one input that is the same in every process
    // (PMIx gives it to all); the peers this btl ends up serving (those not
    // on our node) differ from process to process and are known only later.
    const uint32_t peers = job_size > 0 ? job_size - 1 : 0;
    if (cfg.mode == TransportMode::kAuto) {
        if (job_size == 0) {
            c.why = util::format("%s: RC (the job size is unknown, so auto cannot compare it "
                                 "with btl_roce_dc_peer_threshold %u)",
                                 r, cfg.dc_peer_threshold);
            return c;
        }
        if (peers <= cfg.dc_peer_threshold) {
            c.why = util::format("%s: RC (%u peers, not above btl_roce_dc_peer_threshold %u)", r,
                                 peers, cfg.dc_peer_threshold);
            return c;
        }
    }
    DcCapability cap = probe ? probe() : DcCapability{false, "no DC probe"};
    if (cap.supported) {
        c.dc = true;
        c.why = cfg.mode == TransportMode::kDc
                    ? util::format("%s: DC (btl_roce_transport = dc; %s)", r, cap.reason.c_str())
                    : util::format("%s: DC (%u peers above btl_roce_dc_peer_threshold %u; %s)", r,
                                   peers, cfg.dc_peer_threshold, cap.reason.c_str());
        return c;
    }
    if (cfg.mode == TransportMode::kDc) {
        c.refused = true;
        c.why = util::format("%s: btl_roce_transport = dc, but DC cannot run here (%s); using RC "
                             "instead. Fix: btl_roce_transport = auto or rc, or an mlx5 device "
                             "whose firmware has DC (roce-doctor --check shows it)",
                             r, cap.reason.c_str());
        return c;
    }
    c.why = util::format("%s: RC (%u peers above btl_roce_dc_peer_threshold %u, but %s)", r, peers,
                         cfg.dc_peer_threshold, cap.reason.c_str());
    return c;
}

bool dc_with_peer(bool we_publish_dct, const wire::PortAdvert &peer) {
    return we_publish_dct && (peer.flags & wire::kPortFlagDct) != 0 && peer.dct_number != 0;
}

} // namespace roce::btl
