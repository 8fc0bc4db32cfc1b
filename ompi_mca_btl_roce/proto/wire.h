// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

/// Everything the roce BTL puts on the wire or into the modex, as plain
/// structs with explicit little-endian encoders and bounds-checked parsers.
/// Pure C++ (no Open MPI, no verbs): unit-tested and fuzzed on its own.
/// A parser never trusts a length, count or enum from a peer: anything
/// malformed, truncated, of another version or oversized is a kProtocol
/// Status naming the field, never a crash or an out-of-bounds read.
namespace roce::btl::wire {

inline constexpr uint32_t kModexMagic = 0x45434f52; // "ROCE"
inline constexpr uint32_t kCmMagic = 0x4d43434f;    // "OCCM"
/// 2: connection tokens in the modex and in every CM message, and the REP
/// names the requester's REQ it supersedes.
inline constexpr uint8_t kVersion = 2;
inline constexpr size_t kMaxDeviceName = 64;
inline constexpr size_t kMaxGidsPerPort = 32;
inline constexpr size_t kMaxPorts = 16;
inline constexpr size_t kMaxPaths = 16;
inline constexpr size_t kMaxRejectText = 200;
/// Receive credits a REQ/REP may grant (the credit field of the RC header
/// is 16 bits; no receiver posts more buffers per path).
inline constexpr uint32_t kMaxCredits = 0xffff;
/// LAG members a port may advertise (mlx5 LAG has 2 or 4; a Linux bond at
/// most as many as paths).
inline constexpr uint8_t kMaxLagMembers = 16;

using Gid = std::array<uint8_t, 16>;

/// One GID a process offers to its peers, with enough to judge reachability.
struct GidAdvert {
    Gid gid{};
    uint8_t type = 0;       ///< 0 IB, 1 RoCE v1, 2 RoCE v2 (topo::GidType order)
    uint8_t prefix_len = 0; ///< of the netdev address the GID carries; 0: not known
    uint16_t index = 0;     ///< local table index, for diagnostics only
    bool operator==(const GidAdvert &o) const {
        return gid == o.gid && type == o.type && prefix_len == o.prefix_len && index == o.index;
    }
};

/// PortAdvert::flags: the port has a DC target (mlx5 DC, proto/transport.h)
/// that peers choosing DC send to; its number and access key follow the
/// qkey in the encoding.
inline constexpr uint8_t kPortFlagDct = 0x01;
/// Every flag this build knows; a parser refuses the others.
inline constexpr uint8_t kPortFlagsKnown = kPortFlagDct;

/// What a process publishes for one of its RoCE ports.
struct PortAdvert {
    std::string device;     ///< rdma-core name, for diagnostics
    uint8_t port = 0;
    uint8_t lag_members = 1;
    uint8_t path_mtu = 0;   ///< ibv_mtu enum value
    uint8_t flags = 0;      ///< kPortFlag*
    uint32_t ud_qpn = 0;
    uint32_t qkey = 0;
    /// With kPortFlagDct only (0 otherwise): the DCT number (24 bits, not 0)
    /// and its DC access key (not 0), encoded after the qkey.
    uint32_t dct_number = 0;
    uint64_t dc_key = 0;
    std::vector<GidAdvert> gids;
    bool operator==(const PortAdvert &o) const {
        return device == o.device && port == o.port && lag_members == o.lag_members &&
               path_mtu == o.path_mtu && flags == o.flags && ud_qpn == o.ud_qpn && qkey == o.qkey &&
               dct_number == o.dct_number && dc_key == o.dc_key && gids == o.gids;
    }
};

/// The modex blob: all ports of one process. Parsed ports are in range:
/// port 1..255, lag_members 1..kMaxLagMembers, path_mtu an ibv_mtu (1..5),
/// ud_qpn a 24-bit QPN other than 0 and 1, flags within kPortFlagsKnown,
/// and with kPortFlagDct a 24-bit DCT number other than 0 and a key other
/// than 0 (without it both are 0: the encoder writes them only with the
/// flag).
struct ModexAddress {
    /// The process's connection token: every CM message to this process
    /// must carry it, and every CM message from it does (see CmMessage).
    uint64_t token = 0;
    std::vector<PortAdvert> ports;
    bool operator==(const ModexAddress &o) const { return token == o.token && ports == o.ports; }
};

std::vector<uint8_t> encode(const ModexAddress &m);
util::Result<ModexAddress> parse_modex(const uint8_t *data, size_t len);

/// Connection-management messages, exchanged over the UD QPs.
enum class CmType : uint8_t { kRequest = 1, kReply = 2, kReadyToUse = 3, kReject = 4 };
const char *to_string(CmType t) noexcept;

/// One RC queue pair offered for a connection (one per LAG path).
struct PathInfo {
    uint32_t qpn = 0;
    uint32_t psn = 0; ///< 24 bits used
    bool operator==(const PathInfo &o) const { return qpn == o.qpn && psn == o.psn; }
};

enum class RejectReason : uint16_t {
    kUnknown = 0,
    kNoResources = 1,   ///< receiver could not create QPs
    kUnreachable = 2,   ///< no local GID reaches the sender
    kVersion = 3,       ///< incompatible protocol version
    kShuttingDown = 4,
    kStale = 5,         ///< answers a REQ the requester abandoned (it lost a race)
    kStaleRequest = 6,  ///< a REQ answered before (or that lost a race): start over
};

/// A connection-management message. src_token/dst_token are the sender's
/// and the receiver's connection tokens as each published them in its modex
/// address: proof that the sender is the process it names (other users'
/// processes on the fabric cannot read a job's modex).
struct CmMessage {
    CmType type = CmType::kRequest;
    uint64_t src_name = 0;   ///< opal_process_name_t as 64 bits (jobid << 32 | vpid)
    uint64_t dst_name = 0;
    uint64_t src_token = 0;
    uint64_t dst_token = 0;
    uint32_t conn_id = 0;    ///< identifies one connection attempt of the requester
    uint32_t src_ud_qpn = 0;
    uint16_t src_port = 0;   ///< index into the sender's ModexAddress::ports
    uint16_t dst_port = 0;   ///< index into the receiver's ModexAddress::ports
    // kRequest / kReply:
    uint8_t first_path = 0;  ///< index of paths[0] among the connection's paths
    uint8_t path_mtu = 0;
    uint32_t credits = 0;    ///< receive credits the sender grants (1..kMaxCredits)
    /// kReply: the id of the responder's own REQ for these paths that this
    /// reply replaces (it lost a race; its late copies are stale), 0 if none.
    uint32_t superseded = 0;
    Gid src_gid{};           ///< GID the sender transmits from
    Gid dst_gid{};           ///< GID the sender addresses
    std::vector<PathInfo> paths;
    // kReject:
    RejectReason reason = RejectReason::kUnknown;
    std::string text;

    bool operator==(const CmMessage &o) const;
};

std::vector<uint8_t> encode(const CmMessage &m);
util::Result<CmMessage> parse_cm(const uint8_t *data, size_t len);

/// The source address of a received UD datagram, from the 40 bytes the
/// device writes before it: a RoCE v2 IPv4 packet leaves its IPv4 header in
/// the last 20 (source address -> an IPv4-mapped GID), RoCE v2 IPv6 and
/// RoCE v1 leave an IPv6 header / GRH (source GID at byte 8). False when the
/// bytes hold neither.
bool grh_source_gid(const uint8_t *grh, Gid *out);

/// Header of every message on an RC connection (8 bytes, in front of the
/// payload). `credits` returns receive credits of the path it travels on;
/// `seq` numbers the data fragments of the connection (all paths together)
/// so the receiver drops the copies a failover resends. kForward is a data
/// fragment of this connection (numbered, windowed and credited like kData)
/// whose payload is a fragment of another rail's connection to the same
/// peer: a ForwardHeader, then that fragment's payload.
enum class FragType : uint8_t { kData = 1, kCredit = 2, kForward = 3 };
struct FragHeader {
    uint8_t tag = 0;
    FragType type = FragType::kData;
    uint16_t credits = 0;
    uint32_t seq = 0;
};
inline constexpr size_t kFragHeaderSize = 8;
void encode(const FragHeader &h, uint8_t *out) noexcept;
util::Result<FragHeader> parse_frag_header(const uint8_t *data, size_t len);

/// What a forwarded fragment carries (issue 16, a rail lost: docs/architecture.md,
/// "Losing a rail"): a send of the origin rail (kSend; RDMA is never
/// forwarded, the carrier posts it as its own), or the notice that the
/// sender's port of the origin rail went down (kPortDown: tag, seq and
/// length 0, no payload), so that the receiver fails its paths to that port
/// at once instead of when their retries run out.
enum class ForwardKind : uint8_t { kSend = 1, kPortDown = 2 };

/// The header of a kForward fragment's payload (16 bytes): a send of the
/// sender's endpoint on another rail (the origin rail), carried over this
/// one while the origin rail has no live path to the receiver. The origin
/// rail is named by both ends' port indices as each published them in its
/// modex address, so the receiver finds its own module for that rail
/// (`origin_dst_port`) and checks that its endpoint there for the sender is
/// the sender's port `origin_src_port`; `seq` is the fragment's number on
/// that endpoint, run through that endpoint's duplicate window.
///
///   0 kind  1 tag  2-3 origin_src_port  4-5 origin_dst_port  6-7 reserved (0)
///   8-11 seq  12-15 length (the payload bytes that follow, exactly)
struct ForwardHeader {
    ForwardKind kind = ForwardKind::kSend;
    uint8_t tag = 0;              ///< the PML's tag of the forwarded send
    uint16_t origin_src_port = 0; ///< the sender's port index of the origin rail
    uint16_t origin_dst_port = 0; ///< the receiver's port index of the origin rail
    uint32_t seq = 0;             ///< the fragment's number on the origin endpoint
    uint32_t length = 0;          ///< payload bytes after the header
    bool operator==(const ForwardHeader &o) const {
        return kind == o.kind && tag == o.tag && origin_src_port == o.origin_src_port &&
               origin_dst_port == o.origin_dst_port && seq == o.seq && length == o.length;
    }
};
inline constexpr size_t kForwardHeaderSize = 16;
void encode(const ForwardHeader &h, uint8_t *out) noexcept;
/// Parses the payload of a kForward fragment (`len` bytes after its
/// FragHeader). kProtocol, naming the field, when it is shorter than the
/// header, of an unknown kind, has reserved bits set, names a port index
/// beyond kMaxPorts, or its length is not exactly the bytes that follow.
util::Result<ForwardHeader> parse_forward(const uint8_t *data, size_t len);

/// Who sent a fragment over DC (issue 19): DC has no connection, so the
/// receiver cannot tell the sender from the QP a fragment arrived on (it
/// arrives on our one DC target). Every DC data fragment ends with this
/// 16-byte trailer, after its payload:
///
///   0-7 sender's process name (jobid << 32 | vpid, not 0)
///   8-9 sender's port index in its modex address   10-15 reserved (0)
///
/// A trailer, not a header: the payload starts right after the FragHeader
/// in every slot, where the PML writes it (alloc, prepare_src).
struct DcSender {
    uint64_t name = 0;
    uint16_t port = 0;
    bool operator==(const DcSender &o) const { return name == o.name && port == o.port; }
};
inline constexpr size_t kDcSenderSize = 16;
void encode(const DcSender &s, uint8_t *out) noexcept;
/// Parses exactly kDcSenderSize bytes. kProtocol, naming the field, when
/// `len` is not 16, the name is 0, the port index is kMaxPorts or more, or
/// a reserved byte is set.
util::Result<DcSender> parse_dc_sender(const uint8_t *data, size_t len);

} // namespace roce::btl::wire
