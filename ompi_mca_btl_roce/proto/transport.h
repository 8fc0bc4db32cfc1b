// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "proto/wire.h"
#include "util/status.h"

/// Which transport carries a module's data: RC (a connection, and QPs, per
/// peer and path) or mlx5's DC (a DC target per port and a small pool of DC
/// initiators, whatever the number of peers). Pure: no verbs, no Open MPI;
/// the device's DC capability comes in as a probe.
namespace roce::btl {

/// btl_roce_transport: auto picks DC when the job has more peers than
/// btl_roce_dc_peer_threshold and the device runs DC; rc and dc force one
/// (dc still falls back to RC, with a warning, where DC cannot run).
enum class TransportMode : int { kAuto = 0, kRc = 1, kDc = 2 };
const char *to_string(TransportMode m) noexcept;

/// The default of btl_roce_dc_peer_threshold. Why 256: an RC peer costs a
/// QP and its send queue per path (64 KiB of send-queue buffer on mlx5 at
/// the default btl_roce_sq_depth 128, common/qp/memory_model.h), so 256
/// peers x 2 paths are 512 QPs and 32 MiB per process - still within what
/// the host and the NIC's QP cache hold, and RC is the cheaper transport
/// per message (no address vector per WQE, no DCI to share). UCX draws a
/// line of the same kind: its rc transports have an endpoint cap
/// (UCX_RC_MLX5_MAX_NUM_EPS, 256 in the UCX defaults we know of; `ucx_info
/// -c` shows a site's), above which a job goes over DC.
inline constexpr uint32_t kDefaultDcPeerThreshold = 256;
/// The default of btl_roce_dc_dcis (DCIs per port). Why 8: a DCI carries
/// one peer's work at a time in order (the hardware reconnects it when the
/// next request names another target), so the pool bounds how many peers a
/// process talks to in parallel; 8 is the DCI pool UCX uses by default as
/// far as we know (UCX_DC_MLX5_NUM_DCI), and the pool's send queues are
/// 64 KiB per port (8 x 8 KiB at qp::DciCaps' depth 64), whatever the job
/// size.
inline constexpr uint32_t kDefaultDcis = 8;
/// Bounds of btl_roce_dc_dcis: at least one; 64 is far above what a
/// process keeps busy and bounds the pool's memory.
inline constexpr uint32_t kMaxDcis = 64;

/// The validated transport parameters (part of ModuleConfig).
struct TransportConfig {
    TransportMode mode = TransportMode::kAuto;
    uint32_t dc_peer_threshold = kDefaultDcPeerThreshold;
    uint32_t dc_dcis = kDefaultDcis;
};

/// Checks the raw MCA values (btl_roce_transport 0..2 - Open MPI's enum
/// already turned auto/rc/dc into these -, btl_roce_dc_peer_threshold
/// 0..16777216, btl_roce_dc_dcis 1..kMaxDcis). The error names the
/// parameter, the value and what is allowed (util::check_range).
util::Result<TransportConfig> parse_transport(int mode, int64_t dc_peer_threshold, int64_t dc_dcis);

/// What a device says about DC (verbs::query_dc_support's answer).
struct DcCapability {
    bool supported = false;
    std::string reason; ///< one line, naming the device
};

/// The transport of one module (port), chosen once at init from job-wide
/// inputs (the parameters and the job size, the same in every process) and
/// this device's capability - so two processes that both choose DC do so
/// for the same reason, and a device without DC is the only difference
/// between them (which dc_with_peer settles: see there).
struct TransportChoice {
    bool dc = false;
    /// The user asked for DC (btl_roce_transport = dc) and does not get it:
    /// `why` is a warning, not a verbose line.
    bool refused = false;
    /// One line: what was chosen and why ("mlx5_bond_0:1: DC: 1023 peers
    /// above btl_roce_dc_peer_threshold 256 and ...").
    std::string why;
};

/// Decides for the port `rail` ("device:port") of a process in a job of
/// `job_size` processes (0: unknown, as without PMIx; then RC unless dc is
/// forced). `probe` is asked only when the mode and the peer count would
/// pick DC (it creates and destroys a DC target on the device). Pure apart
/// from `probe`; never throws beyond what `probe` throws.
///  - rc: RC.
///  - auto: DC when job_size - 1 peers > dc_peer_threshold and the device
///    supports DC; otherwise RC, saying which of the two was missing.
///  - dc: DC when the device supports it; otherwise RC with `refused` set,
///    the line naming the device, why, and the fix (btl_roce_transport =
///    auto or rc, or an mlx5 device with DC).
TransportChoice choose_transport(const TransportConfig &cfg, uint32_t job_size,
                                 const std::string &rail,
                                 const std::function<DcCapability()> &probe);

/// Whether data to a peer goes over DC: only when this module chose DC and
/// so published a DC target, and the peer's port published one too
/// (wire::kPortFlagDct). Symmetric by construction: each side publishes a
/// DCT exactly when it chose DC, so A uses DC towards B exactly when B uses
/// DC towards A; otherwise both use RC (e.g. one of them has no DC device).
bool dc_with_peer(bool we_publish_dct, const wire::PortAdvert &peer);

} // namespace roce::btl
