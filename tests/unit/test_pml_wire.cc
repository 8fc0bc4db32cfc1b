// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The pml's wire headers: round trips, every refusal rule, and a randomized
// fuzz test (random bytes and mutations of valid headers never decode into
// something that violates the header invariants).
#include <cstring>
#include <random>
#include <vector>

#include "catch.h"
#include "pml_roce_handles.h"
#include "pml_roce_wire.h"

using namespace roce::pml;
using namespace roce::pml::wire;

namespace {

template <typename H>
std::vector<uint8_t> bytes_of(const H &h, std::size_t extra = 0) {
    std::vector<uint8_t> v(sizeof(H) + extra, 0xab);
    std::memcpy(v.data(), &h, sizeof(H));
    return v;
}

// Decodes `v` as `kind`, with the bytes after the header as payload.
Defect decode_as(Kind kind, const std::vector<uint8_t> &v, std::size_t header_bytes) {
    std::size_t n = v.size();
    std::size_t payload = n > header_bytes ? n - header_bytes : 0;
    switch (kind) {
    case Kind::kMatch: {
        MatchHdr h;
        return decode_match(v.data(), n, h);
    }
    case Kind::kRndv: {
        RndvHdr h;
        return decode_rndv(v.data(), n, payload, h);
    }
    case Kind::kRget: {
        RgetHdr h;
        return decode_rget(v.data(), n, payload, h);
    }
    case Kind::kAck: {
        AckHdr h;
        return decode_ack(v.data(), n, payload, h);
    }
    case Kind::kFrag: {
        FragHdr h;
        return decode_frag(v.data(), n, payload, h);
    }
    case Kind::kFin: {
        FinHdr h;
        return decode_fin(v.data(), n, payload, h);
    }
    case Kind::kStream: {
        StreamHdr h;
        return decode_stream(v.data(), n, payload, h);
    }
    case Kind::kPut: {
        PutHdr h;
        return decode_put(v.data(), n, payload, h);
    }
    case Kind::kPutFin: {
        PutFinHdr h;
        return decode_put_fin(v.data(), n, payload, h);
    }
    case Kind::kExt: break; // tests/unit/test_pml_excid.cc
    }
    return Defect::kKind;
}

std::size_t header_size(Kind k) {
    switch (k) {
    case Kind::kMatch: return sizeof(MatchHdr);
    case Kind::kRndv: return sizeof(RndvHdr);
    case Kind::kRget: return sizeof(RgetHdr);
    case Kind::kAck: return sizeof(AckHdr);
    case Kind::kFrag: return sizeof(FragHdr);
    case Kind::kFin: return sizeof(FinHdr);
    case Kind::kExt: return sizeof(ExtHdr);
    case Kind::kStream: return sizeof(StreamHdr);
    case Kind::kPut:
        return sizeof(PutHdr);
    case Kind::kPutFin:
        return sizeof(PutFinHdr);
    }
    return 0;
}

} // namespace

TEST_CASE("pml wire: layouts and tags", "[pml][wire]") {
    CHECK(tag_of(Kind::kMatch) == 0x51);
    CHECK(tag_of(Kind::kFin) == 0x56);
    CHECK(tag_of(Kind::kFin) < 0x60); // inside the PML's active-message range
    CHECK(std::string(kind_name(3)) == "RGET");
    CHECK(std::string(kind_name(7)) == "EXT");
    CHECK(tag_of(Kind::kExt) == 0x57);
    CHECK(std::string(kind_name(8)) == "STREAM");
    CHECK(tag_of(Kind::kStream) == 0x58);
    CHECK(std::string(kind_name(9)) == "PUT");
    CHECK(tag_of(Kind::kPut) == 0x59);
    CHECK(std::string(kind_name(10)) == "PUT-FIN");
    CHECK(tag_of(Kind::kPutFin) == 0x5a);
    CHECK(std::string(kind_name(11)) == "?");
    MatchHdr m = make_match(7, 65535, 3, -12);
    auto v = bytes_of(m);
    CHECK(v[0] == 1);        // kind
    CHECK(v[1] == kVersion); // version
    CHECK(v[2] == 0);
    CHECK(v[3] == 0);
}

TEST_CASE("pml wire: round trips", "[pml][wire]") {
    MatchHdr m = make_match(65535, 12, 40000, -5), m2{};
    auto v = bytes_of(m, 8);
    REQUIRE(decode_match(v.data(), v.size(), m2) == Defect::kNone);
    CHECK(std::memcmp(&m, &m2, sizeof m) == 0);

    RndvHdr r = make_rndv(3, 4, 5, 6, 100000, 0x100000001ULL), r2{};
    v = bytes_of(r, 100);
    REQUIRE(decode_rndv(v.data(), v.size(), 100, r2) == Defect::kNone);
    CHECK(r2.msg_len == 100000);
    CHECK(r2.src_req == 0x100000001ULL);
    CHECK(r2.match.tag == 6);

    RgetHdr g = make_rget(3, 4, 5, 6, 1 << 20, 9, 0x7fff0000, 16), g2{};
    v = bytes_of(g, 16);
    REQUIRE(decode_rget(v.data(), v.size(), 16, g2) == Defect::kNone);
    CHECK(g2.src_addr == 0x7fff0000);
    CHECK(g2.handle_len == 16);
    CHECK(g2.rndv.match.common.kind == static_cast<uint8_t>(Kind::kRget));

    AckHdr a = make_ack(1, 2, 3, 4), a2{};
    v = bytes_of(a);
    REQUIRE(decode_ack(v.data(), v.size(), 0, a2) == Defect::kNone);
    CHECK(a2.offset == 3);
    CHECK(a2.size == 4);

    FragHdr f = make_frag(5, 1 << 30), f2{};
    v = bytes_of(f, 1);
    REQUIRE(decode_frag(v.data(), v.size(), 1, f2) == Defect::kNone);
    CHECK(f2.offset == 1u << 30);

    FinHdr fi = make_fin(77, 12345), fi2{};
    v = bytes_of(fi);
    REQUIRE(decode_fin(v.data(), v.size(), 0, fi2) == Defect::kNone);
    CHECK(fi2.size == 12345);

    RndvHdr rs = make_rndv_stream(3, 4, 5, 6, 65536, 42), rs2{};
    v = bytes_of(rs, 8000);
    REQUIRE(decode_rndv(v.data(), v.size(), 8000, rs2) == Defect::kNone);
    CHECK(rs2.match.common.flags == kRndvStream);
    CHECK(rs2.msg_len == 65536);

    StreamHdr s = make_stream(65535, 7, 65536, 42, 65536 - 100), s2{};
    v = bytes_of(s, 100);
    REQUIRE(decode_stream(v.data(), v.size(), 100, s2) == Defect::kNone);
    CHECK(s2.ctx == 65535);
    CHECK(s2.src == 7);
    CHECK(s2.msg_len == 65536);
    CHECK(s2.src_req == 42);
    CHECK(s2.offset == 65536 - 100);

    AckHdr as = make_ack_split(1, 2, 4096, 8192), as2{};
    v = bytes_of(as);
    REQUIRE(decode_ack(v.data(), v.size(), 0, as2) == Defect::kNone);
    CHECK(as2.common.flags == kAckSplit);
    CHECK(as2.offset == 4096);
    CHECK(as2.size == 8192);

    FinHdr fs = make_fin_split(78, 524288), fs2{};
    v = bytes_of(fs);
    REQUIRE(decode_fin(v.data(), v.size(), 0, fs2) == Defect::kNone);
    CHECK(fs2.common.flags == kFinSplit);
    CHECK(fs2.size == 524288);

    PutHdr p = make_put(0x200000003ULL, 0x400000005ULL, 524288, 524288, 0x7f0000001000ULL, 24),
           p2{};
    v = bytes_of(p, 24);
    REQUIRE(decode_put(v.data(), v.size(), 24, p2) == Defect::kNone);
    CHECK(p2.src_req == 0x200000003ULL);
    CHECK(p2.dst_req == 0x400000005ULL);
    CHECK(p2.offset == 524288);
    CHECK(p2.size == 524288);
    CHECK(p2.dst_addr == 0x7f0000001000ULL);
    CHECK(p2.handle_len == 24);
    v = bytes_of(make_put(1, 2, 64, 1, 0, 0));
    REQUIRE(decode_put(v.data(), v.size(), 0, p2) == Defect::kNone);
    CHECK(p2.handle_len == 0);

    PutFinHdr pf = make_put_fin(0x400000005ULL, 524288, 524288), pf2{};
    v = bytes_of(pf);
    REQUIRE(decode_put_fin(v.data(), v.size(), 0, pf2) == Defect::kNone);
    CHECK(pf2.dst_req == 0x400000005ULL);
    CHECK(pf2.offset == 524288);
    CHECK(pf2.size == 524288);
}

TEST_CASE("pml wire: every refusal rule", "[pml][wire]") {
    MatchHdr m = make_match(1, 2, 3, 4), out{};
    auto v = bytes_of(m);
    CHECK(decode_match(v.data(), 15, out) == Defect::kShort);
    CHECK(decode_match(v.data(), 0, out) == Defect::kShort);
    v[0] = 2;
    CHECK(decode_match(v.data(), v.size(), out) == Defect::kKind);
    v = bytes_of(m);
    v[1] = 2;
    CHECK(decode_match(v.data(), v.size(), out) == Defect::kVersion);
    v = bytes_of(m);
    v[2] = 1;
    CHECK(decode_match(v.data(), v.size(), out) == Defect::kFlags);
    v = bytes_of(m);
    v[3] = 0x80;
    CHECK(decode_match(v.data(), v.size(), out) == Defect::kFlags);
    CHECK(decode_match(bytes_of(make_match(1, 2, -1, 4)).data(), 16, out) == Defect::kSource);
    CHECK(decode_match(bytes_of(make_match(1, 2, 0, kAnyTag)).data(), 16, out) == Defect::kTag);
    CHECK(decode_match(bytes_of(make_match(1, 2, 0, -2)).data(), 16, out) == Defect::kNone);

    RndvHdr r{};
    v = bytes_of(make_rndv(1, 2, 3, 4, 10, 1), 11);
    CHECK(decode_rndv(v.data(), v.size(), 11, r) == Defect::kLength); // more data than msg_len
    v = bytes_of(make_rndv(1, 2, 3, 4, kMaxLength + 1, 1));
    CHECK(decode_rndv(v.data(), v.size(), 0, r) == Defect::kLength);
    v = bytes_of(make_rndv(1, 2, 3, 4, 10, 0));
    CHECK(decode_rndv(v.data(), v.size(), 0, r) == Defect::kRequest);
    v = bytes_of(make_match(1, 2, 3, 4), 16); // a MATCH sent on the RNDV tag
    CHECK(decode_rndv(v.data(), v.size(), 0, r) == Defect::kKind);

    RgetHdr g{};
    v = bytes_of(make_rget(1, 2, 3, 4, 10, 1, 0x1000, 8), 7);
    CHECK(decode_rget(v.data(), v.size(), 7, g) == Defect::kHandle);
    v = bytes_of(make_rget(1, 2, 3, 4, 10, 1, 0x1000, kMaxHandle + 1), kMaxHandle + 1);
    CHECK(decode_rget(v.data(), v.size(), kMaxHandle + 1, g) == Defect::kHandle);
    v = bytes_of(make_rget(1, 2, 3, 4, 0, 1, 0x1000, 0));
    CHECK(decode_rget(v.data(), v.size(), 0, g) == Defect::kLength);
    RgetHdr gr = make_rget(1, 2, 3, 4, 10, 1, 0x1000, 0);
    gr.reserved3 = 1;
    v = bytes_of(gr);
    CHECK(decode_rget(v.data(), v.size(), 0, g) == Defect::kFlags);

    AckHdr a{};
    v = bytes_of(make_ack(0, 2, 0, 1));
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kRequest);
    v = bytes_of(make_ack(1, 0, 0, 1)); // data asked for but nowhere to put it
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kRequest);
    v = bytes_of(make_ack(1, 0, 5, 0)); // sync acknowledgement: no data
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kNone);
    v = bytes_of(make_ack(1, 2, kMaxLength + 1, 0));
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kOffset);
    v = bytes_of(make_ack(1, 2, 0, 1), 1);
    CHECK(decode_ack(v.data(), v.size(), 1, a) == Defect::kLength);

    FragHdr f{};
    v = bytes_of(make_frag(1, 0));
    CHECK(decode_frag(v.data(), v.size(), 0, f) == Defect::kLength); // empty FRAG
    v = bytes_of(make_frag(0, 0), 4);
    CHECK(decode_frag(v.data(), v.size(), 4, f) == Defect::kRequest);
    v = bytes_of(make_frag(1, kMaxLength + 1), 4);
    CHECK(decode_frag(v.data(), v.size(), 4, f) == Defect::kOffset);

    // A streamed RNDV: at least one byte with it, at most kMaxStream in all,
    // no other flag; never inside an EXT header (test_pml_excid.cc).
    v = bytes_of(make_rndv_stream(1, 2, 3, 4, 10, 1));
    CHECK(decode_rndv(v.data(), v.size(), 0, r) == Defect::kLength);
    v = bytes_of(make_rndv_stream(1, 2, 3, 4, kMaxStream + 1, 1), 1);
    CHECK(decode_rndv(v.data(), v.size(), 1, r) == Defect::kLength);
    v = bytes_of(make_rndv_stream(1, 2, 3, 4, kMaxStream, 1), 1);
    CHECK(decode_rndv(v.data(), v.size(), 1, r) == Defect::kNone);
    RndvHdr rf = make_rndv_stream(1, 2, 3, 4, 10, 1);
    rf.match.common.flags = kRndvStream | 0x02;
    v = bytes_of(rf, 1);
    CHECK(decode_rndv(v.data(), v.size(), 1, r) == Defect::kFlags);
    RgetHdr gs = make_rget(1, 2, 3, 4, 10, 1, 0x1000, 0); // RGET defines no flag
    gs.rndv.match.common.flags = kRndvStream;
    v = bytes_of(gs);
    CHECK(decode_rget(v.data(), v.size(), 0, g) == Defect::kFlags);

    StreamHdr s{};
    v = bytes_of(make_stream(1, 2, 100, 1, 0));
    CHECK(decode_stream(v.data(), v.size(), 0, s) == Defect::kLength); // empty
    v = bytes_of(make_stream(1, 2, 100, 1, 0), 101);
    CHECK(decode_stream(v.data(), v.size(), 101, s) == Defect::kLength); // more than the message
    v = bytes_of(make_stream(1, 2, 100, 1, 91), 10);
    CHECK(decode_stream(v.data(), v.size(), 10, s) == Defect::kOffset); // ends past it
    v = bytes_of(make_stream(1, 2, 100, 1, 90), 10);
    CHECK(decode_stream(v.data(), v.size(), 10, s) == Defect::kNone); // ends at it
    v = bytes_of(make_stream(1, 2, 0, 1, 0), 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kLength);
    v = bytes_of(make_stream(1, 2, static_cast<uint32_t>(kMaxStream + 1), 1, 0), 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kLength);
    v = bytes_of(make_stream(1, 2, 100, 0, 0), 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kRequest);
    v = bytes_of(make_stream(1, -1, 100, 1, 0), 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kSource);
    StreamHdr sr = make_stream(1, 2, 100, 1, 0);
    sr.reserved2 = 1;
    v = bytes_of(sr, 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kFlags);
    sr = make_stream(1, 2, 100, 1, 0);
    sr.common.flags = 1;
    v = bytes_of(sr, 1);
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kFlags);
    v = bytes_of(make_frag(1, 0), 8 + 1); // a FRAG sent on the STREAM tag
    CHECK(decode_stream(v.data(), v.size(), 1, s) == Defect::kKind);

    FinHdr fi{};
    FinHdr bad = make_fin(1, 0);
    bad.status = -1;
    v = bytes_of(bad);
    CHECK(decode_fin(v.data(), v.size(), 0, fi) == Defect::kStatus);
    v = bytes_of(make_fin(0, 0));
    CHECK(decode_fin(v.data(), v.size(), 0, fi) == Defect::kRequest);
    AckHdr ab = make_ack_split(1, 2, 0, 0); // a split ACK asks for bytes
    v = bytes_of(ab);
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kLength);
    ab = make_ack_split(1, 2, 0, 5);
    ab.common.flags = 0x02;
    v = bytes_of(ab);
    CHECK(decode_ack(v.data(), v.size(), 0, a) == Defect::kFlags);
    FinHdr fb = make_fin_split(1, 0);
    fb.common.flags = kFinSplit | 0x02; // the only FIN flag is kFinSplit
    v = bytes_of(fb);
    CHECK(decode_fin(v.data(), v.size(), 0, fi) == Defect::kFlags);

    PutHdr p{};
    v = bytes_of(make_put(0, 2, 64, 64, 0x1000, 0));
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kRequest);
    v = bytes_of(make_put(1, 0, 64, 64, 0x1000, 0));
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kRequest);
    v = bytes_of(make_put(1, 2, 0, 64, 0x1000, 0)); // the receiver gets [0, offset): never empty
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kOffset);
    v = bytes_of(make_put(1, 2, 64, 0, 0x1000, 0)); // length 0
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kOffset);
    v = bytes_of(make_put(1, 2, kMaxLength, 1, 0x1000, 0)); // ends past the length limit
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kOffset);
    v = bytes_of(make_put(1, 2, 64, ~0ull - 32, 0x1000, 0)); // offset + size wraps
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kOffset);
    v = bytes_of(make_put(1, 2, 64, 64, ~0ull - 100, 0)); // address + range wraps
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kOffset);
    v = bytes_of(make_put(1, 2, 64, 64, 0x1000, 8), 7); // handle shorter than announced
    CHECK(decode_put(v.data(), v.size(), 7, p) == Defect::kHandle);
    v = bytes_of(make_put(1, 2, 64, 64, 0x1000, 8), 9); // bytes after the handle
    CHECK(decode_put(v.data(), v.size(), 9, p) == Defect::kHandle);
    v = bytes_of(make_put(1, 2, 64, 64, 0x1000, kMaxHandle + 1), kMaxHandle + 1);
    CHECK(decode_put(v.data(), v.size(), kMaxHandle + 1, p) == Defect::kHandle);
    PutHdr pr = make_put(1, 2, 64, 64, 0x1000, 0);
    pr.reserved4 = 1;
    v = bytes_of(pr);
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kFlags);
    pr = make_put(1, 2, 64, 64, 0x1000, 0);
    pr.common.flags = 1;
    v = bytes_of(pr);
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kFlags);
    v = bytes_of(make_put(1, 2, 64, 64, 0x1000, 0));
    CHECK(decode_put(v.data(), sizeof(PutHdr) - 1, 0, p) == Defect::kShort);
    v = bytes_of(make_ack(1, 2, 3, 4), 16); // an ACK sent on the PUT tag
    CHECK(decode_put(v.data(), v.size(), 0, p) == Defect::kKind);

    PutFinHdr pf{};
    v = bytes_of(make_put_fin(0, 64, 64));
    CHECK(decode_put_fin(v.data(), v.size(), 0, pf) == Defect::kRequest);
    v = bytes_of(make_put_fin(1, 64, 0));
    CHECK(decode_put_fin(v.data(), v.size(), 0, pf) == Defect::kOffset);
    v = bytes_of(make_put_fin(1, kMaxLength, 1));
    CHECK(decode_put_fin(v.data(), v.size(), 0, pf) == Defect::kOffset);
    v = bytes_of(make_put_fin(1, 64, 64), 1);
    CHECK(decode_put_fin(v.data(), v.size(), 1, pf) == Defect::kLength);
    PutFinHdr pfr = make_put_fin(1, 64, 64);
    pfr.reserved2 = 7;
    v = bytes_of(pfr);
    CHECK(decode_put_fin(v.data(), v.size(), 0, pf) == Defect::kFlags);
    v = bytes_of(make_fin(1, 64), 8); // a FIN sent on the PUT-FIN tag
    CHECK(decode_put_fin(v.data(), v.size(), 0, pf) == Defect::kKind);
}

TEST_CASE("pml wire: rejected headers are described without overreading", "[pml][wire]") {
    uint8_t b[3] = {0x02, 0x01, 0x00};
    std::string s = describe_rejected(tag_of(Kind::kRndv), b, 3, 0, Defect::kShort);
    CHECK(s == "RNDV header (tag 0x52) of 3 bytes (+0 payload): truncated header; bytes 02 01 00");
    s = describe_rejected(0x5f, nullptr, 0, 0, Defect::kShort);
    CHECK(s.find("? header (tag 0x5f) of 0 bytes") == 0);
    std::vector<uint8_t> big(100, 0x11);
    s = describe_rejected(tag_of(Kind::kMatch), big.data(), big.size(), 0, Defect::kVersion);
    CHECK(s.find(" ...") != std::string::npos);
}

// The invariants any accepted header must satisfy, whatever the bytes were.
static void check_invariants(Kind kind, const std::vector<uint8_t> &v) {
    std::size_t hs = header_size(kind);
    REQUIRE(v.size() >= hs);
    std::size_t payload = v.size() - hs;
    Common c;
    std::memcpy(&c, v.data(), sizeof c);
    CHECK(c.kind == static_cast<uint8_t>(kind));
    CHECK(c.version == kVersion);
    CHECK((c.flags == 0 || (kind == Kind::kRndv && c.flags == kRndvStream) ||
           (kind == Kind::kFin && c.flags == kFinSplit) ||
           (kind == Kind::kAck && c.flags == kAckSplit)));
    CHECK(c.reserved == 0);
    if (kind == Kind::kMatch || kind == Kind::kRndv || kind == Kind::kRget) {
        MatchHdr m;
        std::memcpy(&m, v.data(), sizeof m);
        CHECK(m.src >= 0);
        CHECK(m.tag != kAnyTag);
    }
    if (kind == Kind::kRndv) {
        RndvHdr r;
        std::memcpy(&r, v.data(), sizeof r);
        CHECK(r.msg_len >= payload);
        CHECK(r.msg_len <= kMaxLength);
        CHECK(r.src_req != 0);
        if (c.flags == kRndvStream) {
            CHECK(payload > 0);
            CHECK(r.msg_len <= kMaxStream);
        }
    }
    if (kind == Kind::kStream) {
        StreamHdr s;
        std::memcpy(&s, v.data(), sizeof s);
        CHECK(payload > 0);
        CHECK(s.src >= 0);
        CHECK(s.src_req != 0);
        CHECK(s.msg_len <= kMaxStream);
        CHECK(s.offset + payload <= s.msg_len); // inside the message
        CHECK(s.reserved2 == 0);
    }
    if (kind == Kind::kRget) {
        RgetHdr g;
        std::memcpy(&g, v.data(), sizeof g);
        CHECK(g.handle_len == payload);
        CHECK(g.handle_len <= kMaxHandle);
        CHECK(g.rndv.msg_len > 0);
    }
    if (kind == Kind::kAck) {
        AckHdr a;
        std::memcpy(&a, v.data(), sizeof a);
        CHECK(payload == 0);
        CHECK(a.offset + a.size >= a.offset); // no overflow
        CHECK((a.size == 0 || a.dst_req != 0));
        CHECK((c.flags == 0 || a.size > 0));
    }
    if (kind == Kind::kFrag) {
        FragHdr f;
        std::memcpy(&f, v.data(), sizeof f);
        CHECK(payload > 0);
        CHECK(f.offset + payload >= f.offset);
        CHECK(f.dst_req != 0);
    }
    if (kind == Kind::kFin) {
        CHECK(payload == 0);
    }
    if (kind == Kind::kPut) {
        PutHdr p;
        std::memcpy(&p, v.data(), sizeof p);
        CHECK(p.handle_len == payload);
        CHECK(p.handle_len <= kMaxHandle);
        CHECK(p.src_req != 0);
        CHECK(p.dst_req != 0);
        CHECK(p.offset > 0);
        CHECK(p.size > 0);
        CHECK(p.offset + p.size <= kMaxLength);
        CHECK(p.dst_addr + p.offset + p.size >= p.dst_addr); // no wrap
        CHECK((p.reserved2 | p.reserved3 | p.reserved4) == 0);
    }
    if (kind == Kind::kPutFin) {
        PutFinHdr f;
        std::memcpy(&f, v.data(), sizeof f);
        CHECK(payload == 0);
        CHECK(f.dst_req != 0);
        CHECK(f.size > 0);
        CHECK(f.offset + f.size <= kMaxLength);
    }
}

static std::vector<uint8_t> valid_random(Kind kind, std::mt19937_64 &rng) {
    auto u = [&](uint64_t max) { return std::uniform_int_distribution<uint64_t>(0, max)(rng); };
    auto i32 = [&] { return static_cast<int32_t>(u(0xffffffffu)); };
    int32_t tag = i32();
    if (tag == kAnyTag) {
        tag = 0;
    }
    int32_t src = static_cast<int32_t>(u(INT32_MAX));
    switch (kind) {
    case Kind::kMatch: return bytes_of(make_match(uint16_t(u(65535)), uint16_t(u(65535)), src, tag), u(64));
    case Kind::kRndv: {
        std::size_t inl = u(64);
        if (u(1) == 0) {
            inl += 1;
            return bytes_of(make_rndv_stream(uint16_t(u(65535)), 1, src, tag,
                                             inl + u(kMaxStream - inl), 1 + u(1000)),
                            inl);
        }
        return bytes_of(make_rndv(uint16_t(u(65535)), 1, src, tag, inl + u(1 << 20), 1 + u(1000)), inl);
    }
    case Kind::kStream: {
        auto len = static_cast<uint32_t>(1 + u(kMaxStream - 1));
        std::size_t n = 1 + u(len < 64 ? len - 1 : 63);
        return bytes_of(make_stream(uint16_t(u(65535)), src, len, 1 + u(~0ull - 1), u(len - n)), n);
    }
    case Kind::kRget: {
        auto hl = static_cast<uint16_t>(u(kMaxHandle));
        return bytes_of(make_rget(1, 2, src, tag, 1 + u(1 << 30), 1 + u(99), u(~0ull), hl), hl);
    }
    case Kind::kAck:
        return bytes_of(
            u(1) ? make_ack(1 + u(99), 1 + u(99), u(kMaxLength), u(kMaxLength))
                 : make_ack_split(1 + u(99), 1 + u(99), u(kMaxLength), 1 + u(kMaxLength - 1)));
    case Kind::kFrag: return bytes_of(make_frag(1 + u(99), u(kMaxLength)), 1 + u(64));
    case Kind::kFin:
        return bytes_of(u(1) ? make_fin(1 + u(99), u(kMaxLength))
                             : make_fin_split(1 + u(99), u(kMaxLength)));
    case Kind::kPut: {
        auto hl = static_cast<uint16_t>(u(kMaxHandle));
        uint64_t off = 1 + u(kMaxLength - 1);
        uint64_t size = 1 + u(kMaxLength - off);
        return bytes_of(make_put(1 + u(99), 1 + u(99), off, size, u(~0ull - off - size), hl), hl);
    }
    case Kind::kPutFin: {
        uint64_t off = u(kMaxLength - 1);
        return bytes_of(make_put_fin(1 + u(99), off, 1 + u(kMaxLength - off - 1)));
    }
    case Kind::kExt: break; // tests/unit/test_pml_excid.cc
    }
    return {};
}

TEST_CASE("pml wire: randomized fuzz (random bytes, mutated and truncated headers)",
          "[pml][wire][fuzz]") {
    std::mt19937_64 rng(20261130);
    std::size_t accepted = 0, rejected = 0;
    for (int iter = 0; iter < 200000; ++iter) {
        static const Kind kKinds[] = {Kind::kMatch,  Kind::kRndv, Kind::kRget,
                                      Kind::kAck,    Kind::kFrag, Kind::kFin,
                                      Kind::kStream, Kind::kPut,  Kind::kPutFin};
        Kind kind = kKinds[iter % 9];
        std::vector<uint8_t> v;
        int how = static_cast<int>(rng() % 4);
        if (how == 0) { // pure noise, any length up to 2 headers
            v.resize(rng() % 100);
            for (auto &b : v) {
                b = static_cast<uint8_t>(rng());
            }
            if (!v.empty() && rng() % 2) { // give noise a chance to pass the first check
                v[0] = static_cast<uint8_t>(kind);
                if (v.size() > 1) {
                    v[1] = kVersion;
                }
            }
        } else {
            v = valid_random(kind, rng);
            REQUIRE(decode_as(kind, v, header_size(kind)) == Defect::kNone);
            check_invariants(kind, v);
            if (how == 1) { // flip 1..4 random bits
                for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
                    v[rng() % v.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
                }
            } else if (how == 2) { // truncate inside the header: always refused
                v.resize(rng() % header_size(kind));
                REQUIRE(decode_as(kind, v, header_size(kind)) == Defect::kShort);
                ++rejected;
                continue;
            } else { // overwrite a random 8-byte window with noise
                std::size_t at = rng() % v.size();
                for (std::size_t k = at; k < v.size() && k < at + 8; ++k) {
                    v[k] = static_cast<uint8_t>(rng());
                }
            }
        }
        // Exact-size copy: the decoder sees only these bytes.
        std::vector<uint8_t> exact(v);
        Defect d = decode_as(kind, exact, header_size(kind));
        if (d == Defect::kNone) {
            ++accepted;
            check_invariants(kind, exact);
        } else {
            ++rejected;
            CHECK(!describe_rejected(tag_of(kind), exact.data(), exact.size(), 0, d).empty());
        }
    }
    // Both outcomes must actually occur, or the test proves nothing.
    CHECK(accepted > 10000);
    CHECK(rejected > 10000);
}

TEST_CASE("pml handles: ids are checked, stale ids refused", "[pml][handles]") {
    HandleTable t;
    int a = 0, b = 0, c = 0;
    uint64_t ia = t.insert(&a), ib = t.insert(&b);
    REQUIRE(ia != 0);
    REQUIRE(ib != 0);
    CHECK(ia != ib);
    CHECK(t.find(ia) == &a);
    CHECK(t.find(ib) == &b);
    CHECK(t.live() == 2);
    CHECK(t.find(0) == nullptr);
    CHECK(t.find(ia + (uint64_t{1} << 32)) == nullptr); // wrong generation
    CHECK(t.find(12345) == nullptr);                     // slot out of range
    CHECK(t.insert(nullptr) == 0);
    CHECK(t.erase(ia) == &a);
    CHECK(t.erase(ia) == nullptr); // twice
    CHECK(t.find(ia) == nullptr);
    uint64_t ic = t.insert(&c); // reuses a's slot with a new generation
    CHECK((ic & 0xffffffffu) == (ia & 0xffffffffu));
    CHECK(ic != ia);
    CHECK(t.find(ia) == nullptr);
    CHECK(t.find(ic) == &c);
    CHECK(t.live() == 2);
    CHECK(t.capacity() == 2);
}

TEST_CASE("pml handles: randomized against a map", "[pml][handles]") {
    HandleTable t;
    std::mt19937 rng(7);
    std::vector<std::pair<uint64_t, void *>> live;
    std::vector<uint64_t> dead;
    std::vector<int> objs(1000);
    for (int i = 0; i < 100000; ++i) {
        if (live.empty() || rng() % 2) {
            void *o = &objs[rng() % objs.size()];
            uint64_t id = t.insert(o);
            REQUIRE(id != 0);
            live.emplace_back(id, o);
        } else {
            std::size_t k = rng() % live.size();
            REQUIRE(t.erase(live[k].first) == live[k].second);
            dead.push_back(live[k].first);
            live[k] = live.back();
            live.pop_back();
        }
        if (!dead.empty()) {
            REQUIRE(t.find(dead[rng() % dead.size()]) == nullptr);
        }
    }
    for (auto &l : live) {
        REQUIRE(t.find(l.first) == l.second);
    }
    CHECK(t.live() == live.size());
}
