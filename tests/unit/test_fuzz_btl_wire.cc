// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Fuzz target: what a peer puts in an RC fragment of the btl (issue 16 added
// the forwarded send of a lost rail): the fragment header, then a
// ForwardHeader and its payload. Mutated valid fragments and random bytes
// must parse into exactly what re-encodes to the input - a forwarded header
// only with its payload exactly the bytes that follow, ports in range, the
// reserved bytes zero - or fail with a kProtocol error that names the field.
// Fixed seeds (ROCE_FUZZ_SEED / ROCE_FUZZ_SCALE for longer runs).
#include <cstring>
#include <string>
#include <vector>

#include "catch.h"
#include "fuzz_util.h"
#include "proto/wire.h"

using namespace roce::btl::wire;
using namespace roce::testing::fuzz;

namespace {

/// A valid kForward fragment: FragHeader, ForwardHeader, `payload`.
std::string forward_fragment(Rng &r, const std::string &payload) {
    FragHeader f;
    f.tag = r.byte();
    f.type = FragType::kForward;
    f.credits = static_cast<uint16_t>(r.below(0x10000));
    f.seq = static_cast<uint32_t>(r.next());
    ForwardHeader h;
    h.tag = r.byte();
    h.origin_src_port = static_cast<uint16_t>(r.below(kMaxPorts));
    h.origin_dst_port = static_cast<uint16_t>(r.below(kMaxPorts));
    h.seq = static_cast<uint32_t>(r.next());
    h.length = static_cast<uint32_t>(payload.size());
    std::string s(kFragHeaderSize + kForwardHeaderSize, '\0');
    encode(f, reinterpret_cast<uint8_t *>(s.data()));
    encode(h, reinterpret_cast<uint8_t *>(s.data()) + kFragHeaderSize);
    return s + payload;
}

/// Checks one input; returns whether a forwarded send was accepted.
bool check(const std::string &s) {
    const auto *b = reinterpret_cast<const uint8_t *>(s.data());
    auto f = parse_frag_header(b, s.size());
    if (!f) {
        REQUIRE(f.status().code() == roce::util::Code::kProtocol);
        REQUIRE(f.status().message().rfind("roce fragment", 0) == 0);
        return false;
    }
    uint8_t again[kFragHeaderSize];
    encode(*f, again);
    REQUIRE(std::memcmp(again, b, kFragHeaderSize) == 0);
    if (f->type != FragType::kForward) {
        return false;
    }
    const uint8_t *body = b + kFragHeaderSize;
    const size_t len = s.size() - kFragHeaderSize;
    auto h = parse_forward(body, len);
    if (!h) {
        REQUIRE(h.status().code() == roce::util::Code::kProtocol);
        REQUIRE(h.status().message().rfind("forwarded fragment", 0) == 0);
        return false;
    }
    REQUIRE(h->length == len - kForwardHeaderSize);
    REQUIRE(h->origin_src_port < kMaxPorts);
    REQUIRE(h->origin_dst_port < kMaxPorts);
    uint8_t hdr[kForwardHeaderSize];
    encode(*h, hdr);
    REQUIRE(std::memcmp(hdr, body, kForwardHeaderSize) == 0);
    return true;
}

} // namespace

TEST_CASE("fuzz btl wire: mutated forwarded fragments parse exactly or fail cleanly",
          "[fuzz][btl]") {
    Rng r(seed(0xb7f0d1));
    const std::vector<std::string> dict = {std::string(1, '\x03'), std::string(2, '\0'),
                                           std::string(4, '\xff'), std::string(16, '\0')};
    const size_t n = cases(20000);
    size_t accepted = 0;
    for (size_t i = 0; i < n; ++i) {
        INFO("case " << i << " (seed " << seed(0xb7f0d1) << ")");
        std::string payload = random_bytes(r, 64);
        std::string valid = forward_fragment(r, payload);
        REQUIRE(check(valid)); // the seed itself is accepted
        std::string m = mutate(valid, r, dict, forward_fragment(r, random_bytes(r, 8)), 160);
        accepted += check(m) ? 1 : 0;
        (void)check(random_bytes(r, 48));
    }
    CHECK(accepted > 0); // some mutations keep it valid (a changed tag, seq, payload byte)
}
