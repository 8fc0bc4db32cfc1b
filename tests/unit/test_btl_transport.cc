// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The transport choice (proto/transport.h): the MCA values checked, RC or
// DC per port from job-wide inputs and the device's answer, DC per peer
// only when both ends publish a DC target; and the modex fields that carry
// the target (proto/wire.h, kPortFlagDct).
#include <string>
#include <vector>

#include "catch.h"
#include "proto/transport.h"
#include "proto/wire.h"

using namespace roce::btl;
using roce::util::Code;

namespace {

/// A probe that counts its calls and answers `supported`.
struct Probe {
    bool supported = true;
    int calls = 0;
    std::function<DcCapability()> fn() {
        return [this] {
            ++calls;
            return supported ? DcCapability{true, "mlx5_bond_0: DC supported"}
                             : DcCapability{false, "rxe_bond0 is not an mlx5 device: DC needs "
                                                   "mlx5 direct verbs"};
        };
    }
};

TransportConfig mode(TransportMode m, uint32_t threshold = kDefaultDcPeerThreshold) {
    TransportConfig c;
    c.mode = m;
    c.dc_peer_threshold = threshold;
    return c;
}

wire::PortAdvert dc_port() {
    wire::PortAdvert p;
    p.device = "mlx5_bond_0";
    p.port = 1;
    p.path_mtu = 3;
    p.ud_qpn = 0x11;
    p.qkey = 0x1ee7a330;
    p.flags = wire::kPortFlagDct;
    p.dct_number = 0x1234;
    p.dc_key = 0x8badf00ddeadbeefULL;
    return p;
}

} // namespace

TEST_CASE("transport: the MCA values are checked, with the parameter named", "[btl][transport]") {
    auto ok = parse_transport(0, 256, 8);
    REQUIRE(ok);
    CHECK(ok->mode == TransportMode::kAuto);
    CHECK(ok->dc_peer_threshold == 256);
    CHECK(ok->dc_dcis == 8);
    auto dc = parse_transport(2, 0, kMaxDcis);
    REQUIRE(dc);
    CHECK(dc->mode == TransportMode::kDc);

    auto bad_mode = parse_transport(3, 256, 8);
    REQUIRE_FALSE(bad_mode);
    CHECK(bad_mode.status().code() == Code::kInvalidArgument);
    CHECK(bad_mode.status().message() ==
          "btl_roce_transport = 3 is invalid: allowed values are auto, rc or dc (0, 1, 2)");
    auto neg = parse_transport(0, -1, 8);
    REQUIRE_FALSE(neg);
    CHECK(neg.status().message() ==
          "btl_roce_dc_peer_threshold = -1 is invalid: allowed values are 0..16777216");
    for (int64_t dcis : {int64_t{0}, int64_t{kMaxDcis} + 1}) {
        auto r = parse_transport(0, 256, dcis);
        INFO("dcis " << dcis);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.status().message(), contains_text("btl_roce_dc_dcis = "));
        CHECK_THAT(r.status().message(), contains_text("allowed values are 1..64"));
    }
}

TEST_CASE("transport: rc never asks the device", "[btl][transport]") {
    Probe p;
    TransportChoice c = choose_transport(mode(TransportMode::kRc), 100000, "mlx5_bond_0:1", p.fn());
    CHECK_FALSE(c.dc);
    CHECK_FALSE(c.refused);
    CHECK(c.why == "mlx5_bond_0:1: RC (btl_roce_transport = rc)");
    CHECK(p.calls == 0);
}

TEST_CASE("transport: auto is RC up to the threshold and DC above it, where DC runs",
          "[btl][transport]") {
    Probe p;
    // 257 processes: 256 peers, not above 256.
    TransportChoice at = choose_transport(mode(TransportMode::kAuto), 257, "mlx5_bond_0:1", p.fn());
    CHECK_FALSE(at.dc);
    CHECK(at.why == "mlx5_bond_0:1: RC (256 peers, not above btl_roce_dc_peer_threshold 256)");
    CHECK(p.calls == 0); // no DCT is created to decide that
    // 258 processes: 257 peers.
    TransportChoice above =
        choose_transport(mode(TransportMode::kAuto), 258, "mlx5_bond_0:1", p.fn());
    CHECK(above.dc);
    CHECK_FALSE(above.refused);
    CHECK(above.why == "mlx5_bond_0:1: DC (257 peers above btl_roce_dc_peer_threshold 256; "
                       "mlx5_bond_0: DC supported)");
    CHECK(p.calls == 1);
    // The same job on a device without DC: RC, saying why, not a warning.
    p.supported = false;
    TransportChoice nodc =
        choose_transport(mode(TransportMode::kAuto), 65537, "rxe_bond0:1", p.fn());
    CHECK_FALSE(nodc.dc);
    CHECK_FALSE(nodc.refused);
    CHECK(nodc.why == "rxe_bond0:1: RC (65536 peers above btl_roce_dc_peer_threshold 256, but "
                      "rxe_bond0 is not an mlx5 device: DC needs mlx5 direct verbs)");
    // A lower threshold moves the line.
    p.supported = true;
    CHECK(choose_transport(mode(TransportMode::kAuto, 3), 5, "mlx5_bond_0:1", p.fn()).dc);
    CHECK_FALSE(choose_transport(mode(TransportMode::kAuto, 4), 5, "mlx5_bond_0:1", p.fn()).dc);
    // Without PMIx's job size auto cannot compare: RC, and no probe.
    int before = p.calls;
    TransportChoice unknown =
        choose_transport(mode(TransportMode::kAuto), 0, "mlx5_bond_0:1", p.fn());
    CHECK_FALSE(unknown.dc);
    CHECK_THAT(unknown.why, contains_text("the job size is unknown"));
    CHECK(p.calls == before);
}

TEST_CASE("transport: dc is DC wherever it runs, else RC with a warning naming the fix",
          "[btl][transport]") {
    Probe p;
    // Forced: the peer count does not matter (2 processes).
    TransportChoice yes = choose_transport(mode(TransportMode::kDc), 2, "mlx5_bond_0:1", p.fn());
    CHECK(yes.dc);
    CHECK(yes.why == "mlx5_bond_0:1: DC (btl_roce_transport = dc; mlx5_bond_0: DC supported)");
    p.supported = false;
    TransportChoice no = choose_transport(mode(TransportMode::kDc), 2, "rxe_bond0:1", p.fn());
    CHECK_FALSE(no.dc);
    CHECK(no.refused);
    CHECK(no.why == "rxe_bond0:1: btl_roce_transport = dc, but DC cannot run here (rxe_bond0 is "
                    "not an mlx5 device: DC needs mlx5 direct verbs); using RC instead. Fix: "
                    "btl_roce_transport = auto or rc, or an mlx5 device whose firmware has DC "
                    "(roce-doctor --check shows it)");
}

TEST_CASE("transport: both ends of every pair agree on DC or RC", "[btl][transport]") {
    // Two processes of one job, each deciding alone from the job-wide
    // inputs and its own device, then reading the other's modex port.
    int dc_pairs = 0, rc_pairs = 0;
    for (TransportMode m : {TransportMode::kAuto, TransportMode::kRc, TransportMode::kDc}) {
        for (uint32_t job : {2u, 257u, 258u, 70000u}) {
            for (bool a_dc : {false, true}) {
                for (bool b_dc : {false, true}) {
                    Probe pa, pb;
                    pa.supported = a_dc;
                    pb.supported = b_dc;
                    TransportChoice ca = choose_transport(mode(m), job, "a:1", pa.fn());
                    TransportChoice cb = choose_transport(mode(m), job, "b:1", pb.fn());
                    // What each publishes: a DCT exactly when it chose DC.
                    wire::PortAdvert adv_a = dc_port(), adv_b = dc_port();
                    if (!ca.dc) {
                        adv_a.flags = 0, adv_a.dct_number = 0, adv_a.dc_key = 0;
                    }
                    if (!cb.dc) {
                        adv_b.flags = 0, adv_b.dct_number = 0, adv_b.dc_key = 0;
                    }
                    bool a_to_b = dc_with_peer(ca.dc, adv_b);
                    bool b_to_a = dc_with_peer(cb.dc, adv_a);
                    INFO("mode " << to_string(m) << " job " << job << " devices " << a_dc << "/"
                                 << b_dc);
                    CHECK(a_to_b == b_to_a);
                    // DC only where both devices run it and the mode allows it.
                    bool want =
                        a_dc && b_dc &&
                        (m == TransportMode::kDc || (m == TransportMode::kAuto && job - 1 > 256));
                    CHECK(a_to_b == want);
                    (a_to_b ? dc_pairs : rc_pairs) += 1;
                }
            }
        }
    }
    CHECK(dc_pairs == 6); // auto at 258 and 70000, dc at all four sizes
    CHECK(rc_pairs == 42);
}

TEST_CASE("wire: a port's DC target round-trips and is parsed strictly", "[btl][wire][transport]") {
    wire::ModexAddress m;
    m.token = 0x0123456789abcdefULL;
    m.ports.push_back(dc_port());
    auto bytes = wire::encode(m);
    auto back = wire::parse_modex(bytes.data(), bytes.size());
    REQUIRE(back);
    CHECK(*back == m);
    CHECK(back->ports[0].dct_number == 0x1234);
    CHECK(back->ports[0].dc_key == 0x8badf00ddeadbeefULL);

    // Without the flag the fields are not on the wire: 12 bytes fewer, and
    // the format of a port without DC is what it was.
    wire::ModexAddress rc = m;
    rc.ports[0].flags = 0;
    rc.ports[0].dct_number = 0;
    rc.ports[0].dc_key = 0;
    auto rc_bytes = wire::encode(rc);
    CHECK(rc_bytes.size() + 12 == bytes.size());
    auto rc_back = wire::parse_modex(rc_bytes.data(), rc_bytes.size());
    REQUIRE(rc_back);
    CHECK(*rc_back == rc);

    // Every truncation is refused.
    for (size_t n = 0; n < bytes.size(); ++n) {
        INFO("length " << n);
        CHECK_FALSE(wire::parse_modex(bytes.data(), n));
    }
    // The flag set on an RC port's bytes: the GID count is read as part of
    // the DCT fields and what follows runs out.
    auto forged = rc_bytes;
    const size_t flags_at = 4 + 1 + 8 + 1 + 1 + m.ports[0].device.size() + 3;
    REQUIRE(forged[flags_at] == 0);
    forged[flags_at] = wire::kPortFlagDct;
    CHECK_FALSE(wire::parse_modex(forged.data(), forged.size()));

    auto refused = [](wire::PortAdvert p) {
        wire::ModexAddress x;
        x.token = 1;
        x.ports.push_back(std::move(p));
        auto b = wire::encode(x);
        auto r = wire::parse_modex(b.data(), b.size());
        REQUIRE_FALSE(r);
        CHECK(r.status().code() == Code::kProtocol);
        return r.status().message();
    };
    wire::PortAdvert unknown = dc_port();
    unknown.flags = 0x02;
    CHECK(refused(unknown) == "roce modex address: port 0 of mlx5_bond_0 has unknown flags 0x02 "
                              "(a newer ompi-roce in the same job?)");
    wire::PortAdvert no_number = dc_port();
    no_number.dct_number = 0;
    CHECK(refused(no_number) == "roce modex address: port 0 of mlx5_bond_0 advertises a DC target "
                                "out of range (DCT number 0x0, a key)");
    wire::PortAdvert wide = dc_port();
    wide.dct_number = 0x1000000;
    CHECK_THAT(refused(wide), contains_text("DCT number 0x1000000"));
    wire::PortAdvert no_key = dc_port();
    no_key.dc_key = 0;
    CHECK_THAT(refused(no_key), contains_text("(DCT number 0x1234, no key)"));
}

TEST_CASE("transport: a peer without a published DC target gets RC", "[btl][transport]") {
    wire::PortAdvert p = dc_port();
    CHECK(dc_with_peer(true, p));
    CHECK_FALSE(dc_with_peer(false, p));
    p.flags = 0;
    CHECK_FALSE(dc_with_peer(true, p));
    p = dc_port();
    p.dct_number = 0; // not parseable, but a caller's struct may hold it
    CHECK_FALSE(dc_with_peer(true, p));
}
