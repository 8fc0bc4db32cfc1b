// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The pml's wire headers and their codec. Pure C++ (no MPI types), so the
// unit tests link it alone (libpml_roce_pure.la).
//
// Every header starts with the same 4 bytes {kind, version, flags, reserved};
// the btl active-message tag is kTagBase + kind, so a header arriving on one
// tag must also name that kind. Headers are written in the sender's byte
// order: this pml refuses heterogeneous jobs (Open MPI 4.1 as built here has
// no heterogeneous support either), so all peers share one byte order.
//
// Decoding never trusts the peer: a header is accepted only if the bytes
// present cover it, its kind and version are the expected ones, no
// undefined flag or reserved bit is set, and its fields are within the
// limits below. Whatever else a field claims (a context id, a source rank,
// a request id, an offset) is checked again by the pml against its own
// state before it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace roce::pml::wire {

/// The header format version this build speaks. A peer speaking another
/// version is rejected header by header (the pml logs it once per peer).
inline constexpr uint8_t kVersion = 1;

/// Active-message tags: kTagBase + kind, inside the PML range 0x40..0x5f.
inline constexpr uint8_t kTagBase = 0x50;

enum class Kind : uint8_t {
    kMatch = 1, ///< eager message: match header + all the data
    kRndv = 2,  ///< rendezvous: match header + length + the first bytes; receiver ACKs
    kRget = 3,  ///< rendezvous for RDMA get: + source address + registration handle
    kAck = 4,   ///< receiver matched a RNDV/RGET: send [offset, offset + size)
    kFrag = 5,  ///< a piece of a rendezvous message at an offset
    kFin = 6,   ///< receiver finished its RDMA get: the sender may complete
    kExt = 7,   ///< extended communicator id (Open MPI 5.0): ExtHdr, then a MATCH/RNDV/RGET or nothing
    kStream = 8, ///< a piece of a streamed message (RNDV with kRndvStream): sent without waiting for an ACK

    /// split RGET: the receiver asks the sender to put [offset, offset + size) into its buffer
    kPut = 9,
    /// split RGET: the sender's put of that range completed
    kPutFin = 10,
};
inline constexpr uint8_t kFirstKind = 1;
inline constexpr uint8_t kLastKind = 10;

constexpr uint8_t tag_of(Kind k) noexcept { return static_cast<uint8_t>(kTagBase + static_cast<uint8_t>(k)); }
/// Short upper-case name ("MATCH", ...) or "?" for an unknown kind.
const char *kind_name(uint8_t kind) noexcept;

/// The largest message length and offset a header may carry (2^62): keeps
/// offset + size arithmetic far from overflow.
inline constexpr uint64_t kMaxLength = uint64_t{1} << 62;
/// The largest btl registration handle an RGET may carry
/// (MCA_BTL_REG_HANDLE_MAX_SIZE in Open MPI 4.1).
inline constexpr uint16_t kMaxHandle = 256;
/// MPI_ANY_TAG: never carried by a message.
inline constexpr int32_t kAnyTag = -1;

struct Common {
    uint8_t kind;
    uint8_t version;
    uint8_t flags; ///< 0, but for the kinds that define one (RNDV: kRndvStream; EXT: kExtByIndex)
    uint8_t reserved;
};

/// Eager message; also the first 16 bytes of RNDV and RGET.
struct MatchHdr {
    Common common;
    uint16_t ctx; ///< communicator context id
    uint16_t seq; ///< per (communicator, sender -> receiver) sequence number
    int32_t src;  ///< sender's rank in the communicator
    int32_t tag;  ///< MPI tag (negative: collectives); never kAnyTag
};

struct RndvHdr {
    MatchHdr match;
    uint64_t msg_len; ///< packed length of the whole message (>= the bytes that follow)
    uint64_t src_req; ///< sender's request id (for ACK and FIN), never 0
};

/// RndvHdr::match.common.flags: the sender streams the rest of the message
/// in STREAM fragments right after this header and expects no ACK (the
/// send is complete once they are out). Only on a plain RNDV (never inside
/// an EXT header) and only for messages up to kMaxStream bytes.
inline constexpr uint8_t kRndvStream = 0x01;
/// The largest message a streamed RNDV or a STREAM fragment may announce
/// (1 MiB): bounds what a receiver keeps for a message whose header has
/// not matched yet. pml_roce_stream_limit cannot be set above it.
inline constexpr uint64_t kMaxStream = uint64_t{1} << 20;

struct RgetHdr {
    RndvHdr rndv;
    uint64_t src_addr;   ///< address of the contiguous packed data at the sender
    uint16_t handle_len; ///< bytes of registration handle that follow (0: none needed)
    uint16_t reserved2;
    uint32_t reserved3;
};

/// AckHdr::common.flags: the ACK of a split RGET's receiver whose get
/// failed, asking for the rest of [0, k) (it replaces the split FIN).
inline constexpr uint8_t kAckSplit = 0x01;

struct AckHdr {
    Common common; ///< flags 0 or kAckSplit
    uint32_t reserved2;
    uint64_t src_req; ///< the sender's request id from the RNDV/RGET, never 0
    uint64_t dst_req; ///< receiver's request id for FRAGs; 0 only when size == 0
    uint64_t offset;  ///< first byte the sender must send
    uint64_t size;    ///< bytes to send from offset (0: nothing, the send is complete)
};

struct FragHdr {
    Common common;
    uint32_t reserved2;
    uint64_t dst_req; ///< receiver's request id from the ACK, never 0
    uint64_t offset;  ///< where the (non-empty) data that follows belongs
};

/// A piece of a streamed message. Nothing names the receiver's request: the
/// receiver finds the message by (its communicator index ctx, the sender's
/// rank src, the sender's id src_req) as the RNDV carried them, and keeps
/// pieces that arrive before the RNDV matched (the btl may deliver them
/// before it: fragments of one message can take different paths).
struct StreamHdr {
    Common common;
    uint16_t ctx;     ///< the receiver's index of the communicator, as in the RNDV
    uint16_t reserved2;
    int32_t src;      ///< sender's rank in the communicator (>= 0)
    uint32_t msg_len; ///< packed length of the whole message, as in the RNDV (<= kMaxStream)
    uint64_t src_req; ///< the id the RNDV carried, never 0
    uint64_t offset;  ///< where the (non-empty) data that follows belongs; within msg_len
};

/// A split RGET (pml_roce_split_min): the receiver, before getting
/// [0, offset) itself, asks the sender to put [offset, offset + size) of
/// the message at dst_addr + offset. Exactly handle_len bytes of the
/// receiver's registration handle follow (0: its btl needs none). The
/// sender answers with PUT-FIN, or sends the range in FRAGs naming dst_req
/// when it cannot put.
struct PutHdr {
    Common common;
    uint32_t reserved2;
    uint64_t src_req;    ///< the sender's request id from the RGET, never 0
    uint64_t dst_req;    ///< the receiver's id for that range (PUT-FIN, FRAGs), never 0
    uint64_t offset;     ///< first byte of the range (> 0: the receiver gets [0, offset))
    uint64_t size;       ///< bytes of the range, > 0
    uint64_t dst_addr;   ///< address of the receive buffer's byte 0 at the receiver
    uint16_t handle_len; ///< bytes of registration handle that follow (<= kMaxHandle)
    uint16_t reserved3;
    uint32_t reserved4;
};

/// The sender's put of the range a PUT named completed.
struct PutFinHdr {
    Common common;
    uint32_t reserved2;
    uint64_t dst_req; ///< the receiver's id from the PUT, never 0
    uint64_t offset;  ///< the range put: exactly the PUT's
    uint64_t size;
};

/// FinHdr::common.flags: the receiver split the RGET and sent a PUT for the
/// bytes after `size`; the sender completes once its put (or the FRAGs that
/// replaced it) completed too.
inline constexpr uint8_t kFinSplit = 0x01;

struct FinHdr {
    Common common;    ///< flags 0 or kFinSplit
    int32_t status;   ///< 0 (no other value is defined in version 1)
    uint64_t src_req; ///< the sender's request id from the RGET, never 0
    uint64_t size;    ///< bytes the receiver got
};

/// The largest communicator index (a process's local id of a communicator)
/// an EXT header may name: 2^20 - 1, the pml_max_contextid pml roce
/// announces under Open MPI 5.0 (compat/ompi_series.h). MATCH, RNDV and RGET
/// carry 16 bits; larger indexes travel in an EXT header.
inline constexpr uint32_t kMaxContext = (uint32_t{1} << 20) - 1;

/// ExtHdr::common.flags: the receiver is named by its index (dst_ctx);
/// without it, by the communicator's extended id (excid).
inline constexpr uint8_t kExtByIndex = 0x01;

/// Extended-id header (Open MPI 5.0; a 4.1 build never sends one). A
/// communicator made without a parent (MPI_Comm_create_from_group,
/// sessions) has a 128-bit extended id that is the same everywhere and an
/// index that each process chooses for itself; one with an index above
/// 16 bits does not fit a MATCH header. A sender that does not know the
/// receiver's index yet sends [ExtHdr by excid][MATCH/RNDV/RGET, ctx 0]
/// [data]; the receiver finds the communicator by its extended id (or keeps
/// the message until it creates it), learns the sender's index (src_ctx)
/// and answers once with a bare ExtHdr (inner 0) by index that carries its
/// own; from then on the sender uses plain headers with that index (EXT by
/// index when it exceeds 16 bits).
struct ExtHdr {
    Common common;        ///< kind kExt; flags 0 or kExtByIndex; reserved 0
    uint8_t inner;        ///< kind of the header that follows (MATCH, RNDV, RGET) or 0: none (an answer)
    uint8_t reserved2[3]; ///< 0
    uint32_t dst_ctx;     ///< kExtByIndex: the receiver's index (<= kMaxContext); else 0
    uint32_t src_ctx;     ///< the sender's index (<= kMaxContext)
    int32_t src;          ///< the sender's rank in the communicator (>= 0)
    uint32_t reserved3;   ///< 0
    uint64_t excid[2];    ///< the communicator's extended id (by index to a communicator with a global index: 0)
};

/// A decoded EXT fragment: the extended header and, unless ext.inner is 0,
/// the match-type header after it.
struct ExtMsg {
    ExtHdr ext;
    union {
        MatchHdr match;
        RndvHdr rndv;
        RgetHdr rget;
    } inner;
    /// Bytes of segment 0 taken by both headers (where the data starts).
    std::size_t header_bytes;
};

static_assert(sizeof(Common) == 4);
static_assert(sizeof(ExtHdr) == 40);
static_assert(sizeof(MatchHdr) == 16);
static_assert(sizeof(RndvHdr) == 32);
static_assert(sizeof(RgetHdr) == 48);
static_assert(sizeof(AckHdr) == 40);
static_assert(sizeof(FragHdr) == 24);
static_assert(sizeof(FinHdr) == 24);
static_assert(sizeof(StreamHdr) == 32);
static_assert(sizeof(PutHdr) == 56);
static_assert(sizeof(PutFinHdr) == 32);

/// Why a header was refused (kNone: accepted).
enum class Defect : uint8_t {
    kNone = 0,
    kShort,    ///< fewer bytes than the header
    kKind,     ///< kind byte is not the one of the tag it arrived on
    kVersion,  ///< another header version
    kFlags,    ///< an undefined flag or a reserved field is set
    kSource,   ///< negative source rank
    kTag,      ///< MPI_ANY_TAG as a message tag
    kLength,   ///< message length or payload size inconsistent or too large
    kRequest,  ///< a request id that must be set is 0
    kHandle,   ///< registration handle too large or not matching the payload
    kOffset,   ///< offset/size too large or overflowing
    kStatus,   ///< undefined FIN status
    kContext,  ///< a communicator index above kMaxContext, or set where it must be 0
    kInner,    ///< EXT: unknown inner kind, or an inner header inconsistent with the EXT header
};
/// Short stable name of a defect ("truncated header", ...).
const char *defect_name(Defect d) noexcept;

inline Common make_common(Kind k) noexcept { return Common{static_cast<uint8_t>(k), kVersion, 0, 0}; }

/// The header's first 4 bytes, checked for kind, version and zero flags.
inline Defect check_common(const Common &c, Kind expected) noexcept {
    if (c.kind != static_cast<uint8_t>(expected)) {
        return Defect::kKind;
    }
    if (c.version != kVersion) {
        return Defect::kVersion;
    }
    if ((c.flags | c.reserved) != 0) {
        return Defect::kFlags;
    }
    return Defect::kNone;
}

/// Reads a header of type H from `n` readable bytes at `p` (alignment-free).
template <typename H>
inline bool load(const void *p, std::size_t n, H &out) noexcept {
    if (n < sizeof(H)) {
        return false;
    }
    std::memcpy(&out, p, sizeof(H));
    return true;
}

inline Defect check_match_fields(const MatchHdr &h) noexcept {
    if (h.src < 0) {
        return Defect::kSource;
    }
    if (h.tag == kAnyTag) {
        return Defect::kTag;
    }
    return Defect::kNone;
}

/// Decodes an eager MATCH header from the first segment (`n` bytes).
inline Defect decode_match(const void *p, std::size_t n, MatchHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kMatch);
    return d != Defect::kNone ? d : check_match_fields(out);
}

/// Decodes a RNDV header; `payload` is the number of data bytes that follow
/// the header in the fragment (they must not exceed msg_len). The only flag
/// allowed is kRndvStream, and with it msg_len is at most kMaxStream and
/// at least one data byte follows.
Defect decode_rndv(const void *p, std::size_t n, std::size_t payload, RndvHdr &out) noexcept;
/// Decodes an RGET header; exactly handle_len bytes must follow it.
Defect decode_rget(const void *p, std::size_t n, std::size_t payload, RgetHdr &out) noexcept;
/// Decodes an ACK (no payload allowed; the only flag is kAckSplit, and
/// only with size > 0).
Defect decode_ack(const void *p, std::size_t n, std::size_t payload, AckHdr &out) noexcept;
/// Decodes a FRAG header; `payload` (> 0) bytes of data follow it.
Defect decode_frag(const void *p, std::size_t n, std::size_t payload, FragHdr &out) noexcept;
/// Decodes a STREAM header; `payload` (> 0) bytes of data follow it, all
/// within [0, msg_len).
Defect decode_stream(const void *p, std::size_t n, std::size_t payload, StreamHdr &out) noexcept;
/// Decodes a FIN (no payload allowed; the only flag is kFinSplit).
Defect decode_fin(const void *p, std::size_t n, std::size_t payload, FinHdr &out) noexcept;
/// Decodes a PUT: exactly handle_len (<= kMaxHandle) bytes follow it, both
/// ids set, offset > 0, size > 0, offset + size <= kMaxLength, and
/// dst_addr + offset + size does not wrap.
Defect decode_put(const void *p, std::size_t n, std::size_t payload, PutHdr &out) noexcept;
/// Decodes a PUT-FIN (no payload allowed; id set, size > 0, offset + size
/// <= kMaxLength).
Defect decode_put_fin(const void *p, std::size_t n, std::size_t payload, PutFinHdr &out) noexcept;

/// Decodes an EXT fragment whose segment 0 has `n` bytes at `p` and
/// `payload` further bytes follow the inner header (over all segments):
/// the ExtHdr's own rules (flags, reserved bytes, indexes within
/// kMaxContext, a source rank >= 0, a known inner kind; an answer has
/// nothing after it), then the inner header by its own decoder, whose
/// context id must be 0 and whose source must be the ExtHdr's; an inner
/// RNDV must not stream (kRndvStream is refused as kInner).
Defect decode_ext(const void *p, std::size_t n, std::size_t payload, ExtMsg &out) noexcept;
/// Size of the match-type header of `kind` (MATCH, RNDV, RGET), else 0.
std::size_t match_header_size(uint8_t kind) noexcept;

/// Builders: complete, valid headers (the pml fills nothing else in).
inline MatchHdr make_match(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag) noexcept {
    return MatchHdr{make_common(Kind::kMatch), ctx, seq, src, tag};
}
RndvHdr make_rndv(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                  uint64_t src_req) noexcept;
RgetHdr make_rget(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                  uint64_t src_req, uint64_t src_addr, uint16_t handle_len) noexcept;
AckHdr make_ack(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size) noexcept;
/// The ACK of a split RGET (kAckSplit), size > 0.
AckHdr make_ack_split(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size) noexcept;
FragHdr make_frag(uint64_t dst_req, uint64_t offset) noexcept;
/// A streamed RNDV (kRndvStream set); msg_len <= kMaxStream.
RndvHdr make_rndv_stream(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                         uint64_t src_req) noexcept;
StreamHdr make_stream(uint16_t ctx, int32_t src, uint32_t msg_len, uint64_t src_req,
                      uint64_t offset) noexcept;
FinHdr make_fin(uint64_t src_req, uint64_t size) noexcept;
/// The FIN of a split RGET (kFinSplit): `size` bytes got, the rest put.
FinHdr make_fin_split(uint64_t src_req, uint64_t size) noexcept;
PutHdr make_put(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size,
                uint64_t dst_addr, uint16_t handle_len) noexcept;
PutFinHdr make_put_fin(uint64_t dst_req, uint64_t offset, uint64_t size) noexcept;
/// An EXT header: by index when `by_index` (dst_ctx is the receiver's
/// index), else by the extended id; `inner` 0 makes an answer.
ExtHdr make_ext(Kind inner, bool by_index, uint32_t dst_ctx, uint32_t src_ctx, int32_t src,
                const uint64_t excid[2]) noexcept;
ExtHdr make_ext_answer(uint32_t dst_ctx, uint32_t src_ctx, int32_t src, const uint64_t excid[2]) noexcept;

/// A one-line description of a refused header for the log, e.g.
/// "RNDV header of 20 bytes (+0 payload): truncated header; bytes 4f 01 00 ...".
/// Shows at most the first 48 bytes in hex; never reads beyond `n`.
std::string describe_rejected(uint8_t tag, const void *p, std::size_t n, std::size_t payload,
                              Defect d);

} // namespace roce::pml::wire
