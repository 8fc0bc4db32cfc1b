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
    Defect d = check_common(out.match.common, Kind::kRndv);
    return d != Defect::kNone ? d : check_rndv_fields(out, payload);
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
    Defect d = check_common(out.common, Kind::kAck);
    if (d != Defect::kNone) {
        return d;
    }
    if (out.reserved2 != 0) {
        return Defect::kFlags;
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

Defect decode_fin(const void *p, std::size_t n, std::size_t payload, FinHdr &out) noexcept {
    if (!load(p, n, out)) {
        return Defect::kShort;
    }
    Defect d = check_common(out.common, Kind::kFin);
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

FragHdr make_frag(uint64_t dst_req, uint64_t offset) noexcept {
    FragHdr h{};
    h.common = make_common(Kind::kFrag);
    h.dst_req = dst_req;
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
