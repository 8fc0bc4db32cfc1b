// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "pml_roce_wire.h"

#include <cstdio>

namespace roce::pml::wire {

const char *kind_name(uint8_t kind) noexcept {
    switch (kind) {
    case 1: return "MATCH";
    case 2: return "RNDV";
    case 3: return "RGET";
    case 4: return "ACK";
    case 5: return "FRAG";
    case 6: return "FIN";
    case 7: return "EXT";
    case 8: return "STREAM";
    case 9:
        return "PUT";
    case 10:
        return "PUT-FIN";
    default: return "?";
    }
}

const char *defect_name(Defect d) noexcept {
    switch (d) {
    case Defect::kNone: return "ok";
    case Defect::kShort: return "truncated header";
    case Defect::kKind: return "header kind does not match its tag";
    case Defect::kVersion: return "unknown header version";
    case Defect::kFlags: return "undefined flag or reserved field set";
    case Defect::kSource: return "negative source rank";
    case Defect::kTag: return "MPI_ANY_TAG as a message tag";
    case Defect::kLength: return "inconsistent message length";
    case Defect::kRequest: return "request id 0";
    case Defect::kHandle: return "bad registration handle length";
    case Defect::kOffset: return "offset or size out of range";
    case Defect::kStatus: return "undefined status";
    case Defect::kContext: return "communicator index out of range";
    case Defect::kInner: return "inner header inconsistent with the extended header";
    }
    return "?";
}

namespace {

Defect check_rndv_fields(const RndvHdr &h, std::size_t payload) noexcept {
    Defect d = check_match_fields(h.match);
    if (d != Defect::kNone) {
        return d;
    }
    if (h.msg_len > kMaxLength || payload > h.msg_len) {
        return Defect::kLength;
    }
    if (h.src_req == 0) {
        return Defect::kRequest;
    }
    return Defect::kNone;
}

} // namespace

Defect decode_rndv(const void *p, std::size_t n, std::size_t payload, RndvHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Common c = out.match.common;
    const bool stream = c.flags == kRndvStream;
    if (stream) {
        c.flags = 0;
    }
    Defect d = check_common(c, Kind::kRndv);
    if (d == Defect::kNone) {
        d = check_rndv_fields(out, payload);
    }
    if (d == Defect::kNone && stream && (payload == 0 || out.msg_len > kMaxStream)) {
        d = Defect::kLength;
    }
    return d;
}

Defect decode_rget(const void *p, std::size_t n, std::size_t payload, RgetHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.rndv.match.common, Kind::kRget);
    if (d != Defect::kNone) {
        return d;
    }
    if ((out.reserved2 | out.reserved3) != 0) {
        return Defect::kFlags;
    }
    // The payload of an RGET is the handle, not message data.
    d = check_rndv_fields(out.rndv, 0);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.rndv.msg_len == 0) {
        return Defect::kLength;
    }
    if (out.handle_len > kMaxHandle || payload != out.handle_len) {
        return Defect::kHandle;
    }
    return Defect::kNone;
}

Defect decode_ack(const void *p, std::size_t n, std::size_t payload, AckHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Common c = out.common;
    const bool split = c.flags == kAckSplit;
    if (split) {
        c.flags = 0;
    }
    Defect d = check_common(c, Kind::kAck);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.reserved2 != 0) {
        return Defect::kFlags;
    }
    if (split && out.size == 0) {
        return Defect::kLength;
    }
    if (payload != 0) {
        return Defect::kLength;
    }
    if (out.src_req == 0 || (out.size != 0 && out.dst_req == 0)) {
        return Defect::kRequest;
    }
    if (out.offset > kMaxLength || out.size > kMaxLength) {
        return Defect::kOffset;
    }
    return Defect::kNone;
}

Defect decode_frag(const void *p, std::size_t n, std::size_t payload, FragHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kFrag);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.reserved2 != 0) {
        return Defect::kFlags;
    }
    if (out.dst_req == 0) {
        return Defect::kRequest;
    }
    if (payload == 0 || payload > kMaxLength) {
        return Defect::kLength;
    }
    if (out.offset > kMaxLength) {
        return Defect::kOffset;
    }
    return Defect::kNone;
}

Defect decode_stream(const void *p, std::size_t n, std::size_t payload, StreamHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kStream);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.reserved2 != 0) {
        return Defect::kFlags;
    }
    if (out.src < 0) {
        return Defect::kSource;
    }
    if (out.src_req == 0) {
        return Defect::kRequest;
    }
    if (out.msg_len == 0 || out.msg_len > kMaxStream || payload == 0 || payload > out.msg_len) {
        return Defect::kLength;
    }
    if (out.offset > out.msg_len - payload) {
        return Defect::kOffset;
    }
    return Defect::kNone;
}

Defect decode_fin(const void *p, std::size_t n, std::size_t payload, FinHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Common c = out.common;
    if (c.flags == kFinSplit) {
        c.flags = 0;
    }
    Defect d = check_common(c, Kind::kFin);
    if (d != Defect::kNone) {
        return d;
    }
    if (payload != 0) {
        return Defect::kLength;
    }
    if (out.src_req == 0) {
        return Defect::kRequest;
    }
    if (out.status != 0) {
        return Defect::kStatus;
    }
    if (out.size > kMaxLength) {
        return Defect::kOffset;
    }
    return Defect::kNone;
}

Defect decode_put(const void *p, std::size_t n, std::size_t payload, PutHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kPut);
    if (d != Defect::kNone) {
        return d;
    }
    if ((out.reserved2 | out.reserved3 | out.reserved4) != 0) {
        return Defect::kFlags;
    }
    if (out.src_req == 0 || out.dst_req == 0) {
        return Defect::kRequest;
    }
    if (out.offset == 0 || out.size == 0 || out.offset > kMaxLength ||
        out.size > kMaxLength - out.offset || out.dst_addr > UINT64_MAX - (out.offset + out.size)) {
        return Defect::kOffset;
    }
    if (out.handle_len > kMaxHandle || payload != out.handle_len) {
        return Defect::kHandle;
    }
    return Defect::kNone;
}

Defect decode_put_fin(const void *p, std::size_t n, std::size_t payload, PutFinHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kPutFin);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.reserved2 != 0) {
        return Defect::kFlags;
    }
    if (payload != 0) {
        return Defect::kLength;
    }
    if (out.dst_req == 0) {
        return Defect::kRequest;
    }
    if (out.size == 0 || out.offset > kMaxLength || out.size > kMaxLength - out.offset) {
        return Defect::kOffset;
    }
    return Defect::kNone;
}

RndvHdr make_rndv(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                  uint64_t src_req) noexcept {
    RndvHdr h{};
    h.match = make_match(ctx, seq, src, tag);
    h.match.common = make_common(Kind::kRndv);
    h.msg_len = msg_len;
    h.src_req = src_req;
    return h;
}

RgetHdr make_rget(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                  uint64_t src_req, uint64_t src_addr, uint16_t handle_len) noexcept {
    RgetHdr h{};
    h.rndv = make_rndv(ctx, seq, src, tag, msg_len, src_req);
    h.rndv.match.common = make_common(Kind::kRget);
    h.src_addr = src_addr;
    h.handle_len = handle_len;
    return h;
}

AckHdr make_ack(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size) noexcept {
    AckHdr h{};
    h.common = make_common(Kind::kAck);
    h.src_req = src_req;
    h.dst_req = dst_req;
    h.offset = offset;
    h.size = size;
    return h;
}

AckHdr make_ack_split(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size) noexcept {
    AckHdr h = make_ack(src_req, dst_req, offset, size);
    h.common.flags = kAckSplit;
    return h;
}

FragHdr make_frag(uint64_t dst_req, uint64_t offset) noexcept {
    FragHdr h{};
    h.common = make_common(Kind::kFrag);
    h.dst_req = dst_req;
    h.offset = offset;
    return h;
}

RndvHdr make_rndv_stream(uint16_t ctx, uint16_t seq, int32_t src, int32_t tag, uint64_t msg_len,
                         uint64_t src_req) noexcept {
    RndvHdr h = make_rndv(ctx, seq, src, tag, msg_len, src_req);
    h.match.common.flags = kRndvStream;
    return h;
}

StreamHdr make_stream(uint16_t ctx, int32_t src, uint32_t msg_len, uint64_t src_req,
                      uint64_t offset) noexcept {
    StreamHdr h{};
    h.common = make_common(Kind::kStream);
    h.ctx = ctx;
    h.src = src;
    h.msg_len = msg_len;
    h.src_req = src_req;
    h.offset = offset;
    return h;
}

FinHdr make_fin(uint64_t src_req, uint64_t size) noexcept {
    FinHdr h{};
    h.common = make_common(Kind::kFin);
    h.src_req = src_req;
    h.size = size;
    return h;
}

FinHdr make_fin_split(uint64_t src_req, uint64_t size) noexcept {
    FinHdr h = make_fin(src_req, size);
    h.common.flags = kFinSplit;
    return h;
}

PutHdr make_put(uint64_t src_req, uint64_t dst_req, uint64_t offset, uint64_t size,
                uint64_t dst_addr, uint16_t handle_len) noexcept {
    PutHdr h{};
    h.common = make_common(Kind::kPut);
    h.src_req = src_req;
    h.dst_req = dst_req;
    h.offset = offset;
    h.size = size;
    h.dst_addr = dst_addr;
    h.handle_len = handle_len;
    return h;
}

PutFinHdr make_put_fin(uint64_t dst_req, uint64_t offset, uint64_t size) noexcept {
    PutFinHdr h{};
    h.common = make_common(Kind::kPutFin);
    h.dst_req = dst_req;
    h.offset = offset;
    h.size = size;
    return h;
}

std::size_t match_header_size(uint8_t kind) noexcept {
    switch (kind) {
    case static_cast<uint8_t>(Kind::kMatch): return sizeof(MatchHdr);
    case static_cast<uint8_t>(Kind::kRndv): return sizeof(RndvHdr);
    case static_cast<uint8_t>(Kind::kRget): return sizeof(RgetHdr);
    default: return 0;
    }
}

Defect decode_ext(const void *p, std::size_t n, std::size_t payload, ExtMsg &out) noexcept {
    ExtHdr &e = out.ext;
    if (!load(p, n, e)) {
        return Defect::kShort;
    }
    if (e.common.kind != static_cast<uint8_t>(Kind::kExt)) {
        return Defect::kKind;
    }
    if (e.common.version != kVersion) {
        return Defect::kVersion;
    }
    if ((e.common.flags & ~kExtByIndex) != 0 || e.common.reserved != 0 ||
        (e.reserved2[0] | e.reserved2[1] | e.reserved2[2]) != 0 || e.reserved3 != 0) {
        return Defect::kFlags;
    }
    if (e.src < 0) {
        return Defect::kSource;
    }
    const bool by_index = (e.common.flags & kExtByIndex) != 0;
    if (e.src_ctx > kMaxContext || (by_index ? e.dst_ctx > kMaxContext : e.dst_ctx != 0)) {
        return Defect::kContext;
    }
    const std::size_t inner = match_header_size(e.inner);
    out.header_bytes = sizeof(ExtHdr) + inner;
    if (e.inner == 0) { // an answer: nothing may follow
        return n == sizeof(ExtHdr) && payload == 0 ? Defect::kNone : Defect::kLength;
    }
    if (inner == 0) {
        return Defect::kInner;
    }
    const auto *q = static_cast<const uint8_t *>(p) + sizeof(ExtHdr);
    const std::size_t m = n - sizeof(ExtHdr);
    Defect d = Defect::kShort;
    const MatchHdr *mh = &out.inner.match;
    switch (static_cast<Kind>(e.inner)) {
    case Kind::kMatch: d = decode_match(q, m, out.inner.match); break;
    case Kind::kRndv:
        d = decode_rndv(q, m, payload, out.inner.rndv);
        mh = &out.inner.rndv.match;
        if (d == Defect::kNone && mh->common.flags != 0) {
            return Defect::kInner; // a streamed message never travels by extended id
        }
        break;
    default: d = decode_rget(q, m, payload, out.inner.rget); mh = &out.inner.rget.rndv.match; break;
    }
    if (d != Defect::kNone) {
        return d;
    }
    if (mh->ctx != 0 || mh->src != e.src) {
        return Defect::kInner;
    }
    return Defect::kNone;
}

ExtHdr make_ext(Kind inner, bool by_index, uint32_t dst_ctx, uint32_t src_ctx, int32_t src,
                const uint64_t excid[2]) noexcept {
    ExtHdr h{};
    h.common = make_common(Kind::kExt);
    h.common.flags = by_index ? kExtByIndex : 0;
    h.inner = static_cast<uint8_t>(inner);
    h.dst_ctx = by_index ? dst_ctx : 0;
    h.src_ctx = src_ctx;
    h.src = src;
    h.excid[0] = excid[0];
    h.excid[1] = excid[1];
    return h;
}

ExtHdr make_ext_answer(uint32_t dst_ctx, uint32_t src_ctx, int32_t src, const uint64_t excid[2]) noexcept {
    ExtHdr h = make_ext(Kind::kMatch, true, dst_ctx, src_ctx, src, excid);
    h.inner = 0;
    return h;
}

std::string describe_rejected(uint8_t tag, const void *p, std::size_t n, std::size_t payload,
                              Defect d) {
    char head[160];
    uint8_t kind = static_cast<uint8_t>(tag - kTagBase);
    std::snprintf(head, sizeof head, "%s header (tag 0x%02x) of %zu bytes (+%zu payload): %s; bytes",
                  kind_name(kind), tag, n, payload, defect_name(d));
    std::string s(head);
    const auto *b = static_cast<const uint8_t *>(p);
    std::size_t shown = n < 48 ? n : 48;
    for (std::size_t i = 0; i < shown; ++i) {
        char hex[4];
        std::snprintf(hex, sizeof hex, " %02x", b[i]);
        s += hex;
    }
    if (shown < n) {
        s += " ...";
    }
    if (n == 0) {
        s += " (none)";
    }
    return s;
}

} // namespace roce::pml::wire
