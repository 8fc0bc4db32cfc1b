// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Extended communicator ids (Open MPI 5.0): the EXT header's codec (round
// trips, every refusal rule, a randomized fuzz of mutated and truncated
// fragments) and the extended-id table (publish/find, messages waiting for
// a communicator not created yet, the bound on unknown ids).
#include <cstring>
#include <random>
#include <vector>

#include "catch.h"
#include "pml_roce_excid.h"
#include "pml_roce_wire.h"

using namespace roce::pml;
using namespace roce::pml::wire;

namespace {

const uint64_t kId[2] = {0x1122334455667788ull, 0x0000000100000002ull};

// An EXT fragment's segment: the EXT header, then `inner` (if any), then
// `payload` bytes of 0xab.
template <typename H>
std::vector<uint8_t> ext_bytes(const ExtHdr &e, const H *inner, std::size_t payload) {
    std::vector<uint8_t> v(sizeof e + (inner ? sizeof(H) : 0) + payload, 0xab);
    std::memcpy(v.data(), &e, sizeof e);
    if (inner) {
        std::memcpy(v.data() + sizeof e, inner, sizeof(H));
    }
    return v;
}

Defect decode(const std::vector<uint8_t> &v, std::size_t header_bytes, ExtMsg &m) {
    std::size_t payload = v.size() > header_bytes ? v.size() - header_bytes : 0;
    return decode_ext(v.data(), v.size(), payload, m);
}

} // namespace

TEST_CASE("pml excid wire: layout and round trips", "[pml][excid]") {
    ExtHdr e = make_ext(Kind::kMatch, false, 0, 70000, 3, kId);
    auto raw = ext_bytes<MatchHdr>(e, nullptr, 0);
    CHECK(raw[0] == 7); // kind
    CHECK(raw[1] == kVersion);
    CHECK(raw[2] == 0); // by extended id
    CHECK(raw[4] == static_cast<uint8_t>(Kind::kMatch));

    // By extended id, a MATCH with 5 data bytes.
    MatchHdr m = make_match(0, 9, 3, 42);
    auto v = ext_bytes(e, &m, 5);
    ExtMsg out{};
    REQUIRE(decode(v, sizeof(ExtHdr) + sizeof(MatchHdr), out) == Defect::kNone);
    CHECK(out.header_bytes == sizeof(ExtHdr) + sizeof(MatchHdr));
    CHECK(out.ext.src_ctx == 70000);
    CHECK(out.ext.excid[0] == kId[0]);
    CHECK(out.ext.excid[1] == kId[1]);
    CHECK(out.inner.match.seq == 9);
    CHECK(out.inner.match.tag == 42);

    // By index (an index above 16 bits), a RNDV with 10 inline bytes.
    ExtHdr ei = make_ext(Kind::kRndv, true, kMaxContext, 5, 1, kId);
    RndvHdr r = make_rndv(0, 1, 1, 7, 1000, 77);
    v = ext_bytes(ei, &r, 10);
    REQUIRE(decode(v, sizeof(ExtHdr) + sizeof(RndvHdr), out) == Defect::kNone);
    CHECK((out.ext.common.flags & kExtByIndex) != 0);
    CHECK(out.ext.dst_ctx == kMaxContext);
    CHECK(out.inner.rndv.msg_len == 1000);
    CHECK(out.inner.rndv.src_req == 77);

    // RGET with an 8-byte handle.
    ExtHdr eg = make_ext(Kind::kRget, false, 0, 4, 0, kId);
    RgetHdr g = make_rget(0, 2, 0, 1, 1 << 20, 5, 0x1000, 8);
    v = ext_bytes(eg, &g, 8);
    REQUIRE(decode(v, sizeof(ExtHdr) + sizeof(RgetHdr), out) == Defect::kNone);
    CHECK(out.inner.rget.handle_len == 8);

    // An answer: nothing after the EXT header.
    ExtHdr a = make_ext_answer(12, 70000, 2, kId);
    v = ext_bytes<MatchHdr>(a, nullptr, 0);
    REQUIRE(decode(v, sizeof(ExtHdr), out) == Defect::kNone);
    CHECK(out.ext.inner == 0);
    CHECK(out.ext.dst_ctx == 12);
    CHECK(out.header_bytes == sizeof(ExtHdr));
}

TEST_CASE("pml excid wire: every refusal rule", "[pml][excid]") {
    ExtMsg out{};
    MatchHdr m = make_match(0, 1, 3, 4);
    ExtHdr e = make_ext(Kind::kMatch, false, 0, 9, 3, kId);
    const std::size_t hb = sizeof(ExtHdr) + sizeof(MatchHdr);
    auto good = ext_bytes(e, &m, 0);
    REQUIRE(decode(good, hb, out) == Defect::kNone);

    auto v = good;
    CHECK(decode_ext(v.data(), sizeof(ExtHdr) - 1, 0, out) == Defect::kShort);
    CHECK(decode_ext(v.data(), sizeof(ExtHdr) + 3, 0, out) == Defect::kShort); // inner cut
    v[0] = static_cast<uint8_t>(Kind::kMatch);
    CHECK(decode(v, hb, out) == Defect::kKind);
    v = good;
    v[1] = 9;
    CHECK(decode(v, hb, out) == Defect::kVersion);
    for (std::size_t at : {std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{7},
                           offsetof(ExtHdr, reserved3)}) {
        v = good;
        v[at] = at == 2 ? 0x02 : 0x01; // an undefined flag, or a reserved byte
        CHECK(decode(v, hb, out) == Defect::kFlags);
    }
    CHECK(decode(ext_bytes(make_ext(Kind::kMatch, false, 0, 9, -1, kId), &m, 0), hb, out) ==
          Defect::kSource);
    CHECK(decode(ext_bytes(make_ext(Kind::kMatch, false, 0, kMaxContext + 1, 3, kId), &m, 0), hb,
                 out) == Defect::kContext);
    CHECK(decode(ext_bytes(make_ext(Kind::kMatch, true, kMaxContext + 1, 9, 3, kId), &m, 0), hb,
                 out) == Defect::kContext);
    ExtHdr stray = e; // by extended id with an index set
    stray.dst_ctx = 4;
    CHECK(decode(ext_bytes(stray, &m, 0), hb, out) == Defect::kContext);
    ExtHdr unknown = e;
    unknown.inner = static_cast<uint8_t>(Kind::kAck);
    CHECK(decode(ext_bytes(unknown, &m, 0), hb, out) == Defect::kInner);
    // A streamed RNDV never travels by extended id (its STREAM fragments
    // name the receiver's 16-bit index).
    ExtHdr er = make_ext(Kind::kRndv, false, 0, 9, 3, kId);
    RndvHdr rs = make_rndv_stream(0, 1, 3, 4, 100, 5);
    CHECK(decode(ext_bytes(er, &rs, 10), sizeof(ExtHdr) + sizeof(RndvHdr), out) == Defect::kInner);
    RndvHdr rp = make_rndv(0, 1, 3, 4, 100, 5);
    CHECK(decode(ext_bytes(er, &rp, 10), sizeof(ExtHdr) + sizeof(RndvHdr), out) == Defect::kNone);
    // The inner header: its own rules, a context id of 0, the same source.
    MatchHdr bad = make_match(0, 1, 3, kAnyTag);
    CHECK(decode(ext_bytes(e, &bad, 0), hb, out) == Defect::kTag);
    MatchHdr ctx = make_match(5, 1, 3, 4);
    CHECK(decode(ext_bytes(e, &ctx, 0), hb, out) == Defect::kInner);
    MatchHdr other = make_match(0, 1, 2, 4);
    CHECK(decode(ext_bytes(e, &other, 0), hb, out) == Defect::kInner);
    RndvHdr r = make_rndv(0, 1, 3, 4, 10, 1); // a RNDV where the EXT header says MATCH
    CHECK(decode(ext_bytes(e, &r, 0), hb, out) == Defect::kKind);
    // An answer carries nothing else.
    ExtHdr a = make_ext_answer(1, 2, 3, kId);
    CHECK(decode(ext_bytes(a, &m, 0), sizeof(ExtHdr), out) == Defect::kLength);
    CHECK(decode_ext(ext_bytes<MatchHdr>(a, nullptr, 0).data(), sizeof(ExtHdr), 1, out) ==
          Defect::kLength);
    CHECK(describe_rejected(tag_of(Kind::kExt), good.data(), good.size(), 0, Defect::kInner)
              .find("EXT header (tag 0x57)") == 0);
}

TEST_CASE("pml excid wire: randomized fuzz (mutated, truncated, noise)", "[pml][excid][fuzz]") {
    std::mt19937_64 rng(20261202);
    auto u = [&](uint64_t max) { return std::uniform_int_distribution<uint64_t>(0, max)(rng); };
    std::size_t accepted = 0, rejected = 0;
    for (int iter = 0; iter < 100000; ++iter) {
        const uint8_t kinds[] = {0, 1, 2, 3};
        const uint8_t inner = kinds[iter % 4];
        const uint64_t id[2] = {rng(), rng()};
        const auto src = static_cast<int32_t>(u(INT32_MAX));
        ExtHdr e = inner == 0 ? make_ext_answer(static_cast<uint32_t>(u(kMaxContext)),
                                                static_cast<uint32_t>(u(kMaxContext)), src, id)
                              : make_ext(static_cast<Kind>(inner), u(1) != 0,
                                         static_cast<uint32_t>(u(kMaxContext)),
                                         static_cast<uint32_t>(u(kMaxContext)), src, id);
        std::vector<uint8_t> v;
        std::size_t payload = 0;
        if (inner == 1) {
            MatchHdr m = make_match(0, uint16_t(u(65535)), src, 1);
            payload = u(64);
            v = ext_bytes(e, &m, payload);
        } else if (inner == 2) {
            payload = u(64);
            RndvHdr r = make_rndv(0, 1, src, 2, payload + u(1000), 1 + u(99));
            v = ext_bytes(e, &r, payload);
        } else if (inner == 3) {
            payload = u(kMaxHandle);
            RgetHdr g = make_rget(0, 1, src, 3, 1 + u(1000), 1 + u(99), rng(), uint16_t(payload));
            v = ext_bytes(e, &g, payload);
        } else {
            v = ext_bytes<MatchHdr>(e, nullptr, 0);
        }
        const std::size_t hb = v.size() - payload;
        ExtMsg out{};
        REQUIRE(decode(v, hb, out) == Defect::kNone);
        switch (rng() % 3) {
        case 0: // flip 1..4 bits
            for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
                v[rng() % v.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
            }
            break;
        case 1: // cut inside the headers: always refused
            v.resize(rng() % hb);
            REQUIRE(decode_ext(v.data(), v.size(), 0, out) != Defect::kNone);
            ++rejected;
            continue;
        default: // noise over an 8-byte window
            for (std::size_t at = rng() % v.size(), k = at; k < v.size() && k < at + 8; ++k) {
                v[k] = static_cast<uint8_t>(rng());
            }
        }
        // The receiver computes the header size from the (possibly mutated)
        // inner kind, as mca_pml_roce_cb_ext does.
        std::size_t hb2 = sizeof(ExtHdr) + match_header_size(v[offsetof(ExtHdr, inner)]);
        std::size_t pl = v.size() > hb2 ? v.size() - hb2 : 0;
        Defect d = decode_ext(v.data(), v.size(), pl, out);
        if (d != Defect::kNone) {
            ++rejected;
            continue;
        }
        ++accepted;
        // What an accepted fragment guarantees.
        const ExtHdr &x = out.ext;
        CHECK(x.common.kind == static_cast<uint8_t>(Kind::kExt));
        CHECK((x.common.flags & ~kExtByIndex) == 0);
        CHECK(x.src >= 0);
        CHECK(x.src_ctx <= kMaxContext);
        CHECK(x.dst_ctx <= kMaxContext);
        CHECK(out.header_bytes == hb2);
        CHECK(out.header_bytes <= v.size());
        if (x.inner == 0) {
            CHECK(v.size() == sizeof(ExtHdr));
        } else {
            CHECK(match_header_size(x.inner) != 0);
            CHECK(out.inner.match.ctx == 0);
            CHECK(out.inner.match.src == x.src);
            CHECK(out.inner.match.tag != kAnyTag);
        }
    }
    CHECK(accepted > 5000);
    CHECK(rejected > 5000);
}

using excid::Announcement;
using excid::ExcId;
using excid::ExcIdTable;

TEST_CASE("pml excid table: publish, find, unpublish", "[pml][excid]") {
    ExcIdTable t;
    const ExcId a{1, 2}, b{1, 3};
    CHECK_FALSE(t.find(a).has_value());
    auto r = t.publish(a, 70000);
    REQUIRE(r.is_ok());
    CHECK_FALSE(r->has_value()); // nothing waited
    CHECK(t.find(a) == std::optional<uint32_t>(70000));
    CHECK_FALSE(t.find(b).has_value());
    auto dup = t.publish(a, 5);
    REQUIRE_FALSE(dup.is_ok());
    CHECK(dup.status().code() == roce::util::Code::kInvalidArgument);
    CHECK_THAT(dup.status().message(), contains_text("already communicator 70000"));
    CHECK(t.find(a) == std::optional<uint32_t>(70000)); // unchanged
    CHECK(t.unpublish(a));
    CHECK_FALSE(t.unpublish(a));
    CHECK_FALSE(t.find(a).has_value());
    CHECK(t.published() == 0);
}

TEST_CASE("pml excid table: messages wait for their communicator", "[pml][excid]") {
    ExcIdTable t;
    const ExcId a{7, 7}, b{8, 8};
    auto k1 = t.hold(a, Announcement{1, 40});
    auto k2 = t.hold(b, Announcement{0, 41});
    auto k3 = t.hold(a, Announcement{2, 42});
    REQUIRE(k1.is_ok());
    REQUIRE(k2.is_ok());
    REQUIRE(k3.is_ok());
    CHECK(*k1 == *k3); // one key per extended id
    CHECK(*k1 != *k2);
    CHECK(*k1 >= excid::kFirstWaitingKey); // never a communicator index
    CHECK(*k2 >= excid::kFirstWaitingKey);
    CHECK(t.waiting() == 2);
    auto r = t.publish(a, 9);
    REQUIRE(r.is_ok());
    REQUIRE(r->has_value());
    const excid::Waiting &w = **r;
    CHECK(w.key == *k1);
    REQUIRE(w.announced.size() == 2); // in arrival order
    CHECK(w.announced[0].src == 1);
    CHECK(w.announced[0].src_ctx == 40);
    CHECK(w.announced[1].src == 2);
    CHECK(w.announced[1].src_ctx == 42);
    CHECK(t.waiting() == 1);
    // Published: later messages find it, nothing waits for it any more.
    CHECK(t.find(a) == std::optional<uint32_t>(9));
    auto again = t.publish(b, 10);
    REQUIRE(again.is_ok());
    REQUIRE(again->has_value());
    CHECK((**again).key == *k2);
    CHECK(t.waiting() == 0);
}

TEST_CASE("pml excid table: unknown ids from the wire are bounded", "[pml][excid]") {
    ExcIdTable t(3);
    for (uint64_t i = 0; i < 3; ++i) {
        REQUIRE(t.hold(ExcId{i, 0}, Announcement{0, 1}).is_ok());
    }
    auto over = t.hold(ExcId{99, 0}, Announcement{0, 1});
    REQUIRE_FALSE(over.is_ok());
    CHECK(over.status().code() == roce::util::Code::kResourceExhausted);
    CHECK_THAT(over.status().message(), contains_text("is dropped"));
    CHECK(t.hold(ExcId{1, 0}, Announcement{0, 1}).is_ok()); // a waiting id still takes more
    REQUIRE(t.publish(ExcId{0, 0}, 5).is_ok());             // one leaves ...
    CHECK(t.hold(ExcId{99, 0}, Announcement{0, 1}).is_ok()); // ... and another may wait
    t.clear();
    CHECK(t.waiting() == 0);
    CHECK(t.published() == 0);
}
