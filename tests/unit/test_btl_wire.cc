// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "catch.h"
#include "proto/credits.h"
#include "proto/lag.h"
#include "proto/locality.h"
#include "proto/seq_window.h"
#include "proto/wire.h"

using namespace roce::btl;
using namespace roce::btl::wire;

namespace {

ModexAddress sample_modex() {
    ModexAddress m;
    m.token = 0x0123456789abcdefULL;
    PortAdvert p;
    p.device = "rxe_bond0";
    p.port = 1;
    p.lag_members = 2;
    p.path_mtu = 3;
    p.ud_qpn = 0x11;
    p.qkey = 0x1ee7a330;
    GidAdvert g;
    g.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1};
    g.type = 2;
    g.prefix_len = 24;
    g.index = 1;
    p.gids.push_back(g);
    g.gid[13] = 19;
    g.index = 2;
    p.gids.push_back(g);
    m.ports.push_back(p);
    return m;
}

CmMessage sample_req() {
    CmMessage m;
    m.type = CmType::kRequest;
    m.src_name = 0x0000123400000001ULL;
    m.dst_name = 0x0000123400000002ULL;
    m.src_token = 0xfeedfacecafebeefULL;
    m.dst_token = 0x0123456789abcdefULL;
    m.conn_id = 7;
    m.src_ud_qpn = 0x11;
    m.src_port = 0;
    m.dst_port = 0;
    m.path_mtu = 3;
    m.credits = 32;
    m.src_gid[15] = 1;
    m.dst_gid[15] = 2;
    m.paths.push_back({0x12, 0xabcdef});
    return m;
}

} // namespace

TEST_CASE("wire: modex address round trip", "[btl][wire]") {
    ModexAddress m = sample_modex();
    auto bytes = encode(m);
    auto back = parse_modex(bytes.data(), bytes.size());
    REQUIRE(back.is_ok());
    CHECK(*back == m);
}

TEST_CASE("wire: modex rejects truncation, trailing bytes, versions and counts",
          "[btl][wire]") {
    auto bytes = encode(sample_modex());
    for (size_t n = 0; n < bytes.size(); ++n) {
        auto r = parse_modex(bytes.data(), n);
        INFO("length " << n);
        CHECK_FALSE(r.is_ok());
        CHECK(r.status().code() == roce::util::Code::kProtocol);
    }
    auto longer = bytes;
    longer.push_back(0);
    auto r = parse_modex(longer.data(), longer.size());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message() == "roce modex address: 1 trailing bytes");

    auto v3 = bytes;
    v3[4] = 3;
    r = parse_modex(v3.data(), v3.size());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("version 3, this build speaks 2") != std::string::npos);

    auto many = bytes;
    many[13] = 200; // port count
    r = parse_modex(many.data(), many.size());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message() == "roce modex address: 200 ports exceeds 16");

    ModexAddress none = sample_modex();
    none.token = 0;
    auto nb = encode(none);
    r = parse_modex(nb.data(), nb.size());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message() == "roce modex address: no connection token");
}

TEST_CASE("wire: modex port fields out of range are refused", "[btl][wire]") {
    struct Case {
        const char *what;
        void (*set)(PortAdvert &);
    };
    const Case cases[] = {
        {"port 0", [](PortAdvert &p) { p.port = 0; }},
        {"0 LAG members", [](PortAdvert &p) { p.lag_members = 0; }},
        {"17 LAG members", [](PortAdvert &p) { p.lag_members = 17; }},
        {"path MTU 0", [](PortAdvert &p) { p.path_mtu = 0; }},
        {"path MTU 6", [](PortAdvert &p) { p.path_mtu = 6; }},
        {"UD QPN 0", [](PortAdvert &p) { p.ud_qpn = 0; }},
        {"UD QPN 1 (GSI)", [](PortAdvert &p) { p.ud_qpn = 1; }},
        {"UD QPN beyond 24 bits", [](PortAdvert &p) { p.ud_qpn = 0x1000000; }},
    };
    for (const auto &c : cases) {
        ModexAddress m = sample_modex();
        c.set(m.ports[0]);
        auto b = encode(m);
        auto r = parse_modex(b.data(), b.size());
        INFO(c.what);
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message().find("out of range") != std::string::npos);
    }
    ModexAddress ok = sample_modex();
    ok.ports[0].lag_members = 16;
    ok.ports[0].path_mtu = 5;
    ok.ports[0].ud_qpn = 0xffffff;
    auto b = encode(ok);
    CHECK(parse_modex(b.data(), b.size()).is_ok());
}

TEST_CASE("wire: CM messages round trip for every type", "[btl][wire]") {
    CmMessage req = sample_req();
    CmMessage rep = req;
    rep.type = CmType::kReply;
    rep.paths = {{0x99, 0x1}, {0x9a, 0x2}};
    rep.first_path = 3;
    CmMessage rtu = req;
    rtu.type = CmType::kReadyToUse;
    rtu.paths.clear();
    rtu.first_path = 0;
    rtu.path_mtu = 0;
    rtu.credits = 0;
    rtu.src_gid = {};
    rtu.dst_gid = {};
    CmMessage rej = rtu;
    rej.type = CmType::kReject;
    rej.reason = RejectReason::kNoResources;
    rej.text = "ibv_create_qp failed: Cannot allocate memory (12)";
    for (const CmMessage &m : {req, rep, rtu, rej}) {
        auto bytes = encode(m);
        // UD receive buffers are larger than the message: padding is ignored.
        bytes.resize(bytes.size() + 100, 0xee);
        auto back = parse_cm(bytes.data(), bytes.size());
        INFO(to_string(m.type));
        REQUIRE(back.is_ok());
        CHECK(*back == m);
    }
}

TEST_CASE("wire: CM parser names what is wrong", "[btl][wire]") {
    auto bytes = encode(sample_req());
    auto check = [](std::vector<uint8_t> b, const char *needle) {
        auto r = parse_cm(b.data(), b.size());
        INFO(needle);
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().message().find(needle) != std::string::npos);
    };
    auto bad = bytes;
    bad[0] ^= 1;
    check(bad, "bad magic");
    bad = bytes;
    bad[5] = 9;
    check(bad, "unknown type 9");
    bad = bytes;
    bad.resize(bytes.size() - 1);
    check(bad, "declares");
    bad = bytes;
    bad[52] = 0; // path count
    check(bad, "path count 0 outside 1..16");
    bad = bytes;
    bad[53] = 16; // first path: 16 + 1 path > 16
    check(bad, "paths 16..16 beyond the 16 allowed");
    bad = bytes;
    bad[54] = 9; // path mtu
    check(bad, "path MTU enum 9 outside 1..5");
    bad = bytes;
    bad[55] = bad[56] = bad[57] = bad[58] = 0; // credits
    check(bad, "0 credits outside 1..65535");
    bad = bytes;
    bad[58] = 0x80; // credits 0x80000020
    check(bad, "credits outside 1..65535");
    bad = bytes;
    bad[bytes.size() - 1] = 0xff; // PSN high byte: 32-bit value beyond 24 bits
    check(bad, "PSN");
    bad = bytes;
    // Declared length longer than the body: trailing bytes inside the length.
    bad.push_back(0);
    bad[6] = static_cast<uint8_t>(bad.size());
    check(bad, "bytes after the REQ body");
}

TEST_CASE("wire: randomized fuzzing never crashes and never accepts garbage silently",
          "[btl][wire][fuzz]") {
    const char *env = std::getenv("ROCE_FUZZ_SEED");
    uint32_t seed = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                        : std::random_device{}();
    INFO("seed " << seed << " (set ROCE_FUZZ_SEED to replay)");
    std::mt19937 rng(seed);
    std::vector<std::vector<uint8_t>> seeds = {encode(sample_req()), encode(sample_modex())};
    CmMessage rej;
    rej.type = CmType::kReject;
    rej.text = "x";
    seeds.push_back(encode(rej));
    // A port with a DC target (issue 19): the fields behind kPortFlagDct.
    {
        ModexAddress dc = sample_modex();
        dc.ports[0].flags = kPortFlagDct;
        dc.ports[0].dct_number = 0x4321;
        dc.ports[0].dc_key = 0x1122334455667788ULL;
        seeds.push_back(encode(dc));
    }
    // A forwarded send (issue 16): its ForwardHeader and 5 payload bytes.
    {
        ForwardHeader fw;
        fw.tag = 0x42;
        fw.origin_src_port = 1;
        fw.origin_dst_port = 1;
        fw.seq = 77;
        fw.length = 5;
        std::vector<uint8_t> b(kForwardHeaderSize + 5, 0xab);
        encode(fw, b.data());
        seeds.push_back(b);
    }
    size_t accepted = 0;
    size_t forwards = 0;
    size_t dc_ports = 0;
    for (int iter = 0; iter < 200000; ++iter) {
        std::vector<uint8_t> b = seeds[rng() % seeds.size()];
        int mutations = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < mutations; ++k) {
            switch (rng() % 4) {
            case 0: // flip a byte
                if (!b.empty()) {
                    b[rng() % b.size()] = static_cast<uint8_t>(rng());
                }
                break;
            case 1: // truncate
                b.resize(rng() % (b.size() + 1));
                break;
            case 2: // append garbage
                b.push_back(static_cast<uint8_t>(rng()));
                break;
            case 3: // insert
                b.insert(b.begin() + static_cast<long>(rng() % (b.size() + 1)),
                         static_cast<uint8_t>(rng()));
                break;
            }
        }
        auto cm = parse_cm(b.data(), b.size());
        auto mx = parse_modex(b.data(), b.size());
        auto fh = parse_frag_header(b.data(), b.size());
        auto fw = parse_forward(b.data(), b.size());
        if (fw) {
            // Accepted only when it is exactly right: its payload is the rest,
            // and it encodes back to the same header bytes.
            ++forwards;
            REQUIRE(b.size() == kForwardHeaderSize + fw->length);
            REQUIRE(fw->origin_src_port < kMaxPorts);
            REQUIRE(fw->origin_dst_port < kMaxPorts);
            uint8_t again[kForwardHeaderSize];
            encode(*fw, again);
            REQUIRE(std::equal(again, again + kForwardHeaderSize, b.begin()));
        }
        // Whatever is accepted must encode back to what was parsed.
        if (cm) {
            ++accepted;
            auto again = encode(*cm);
            auto re = parse_cm(again.data(), again.size());
            REQUIRE(re.is_ok());
            REQUIRE(*re == *cm);
        }
        if (mx) {
            auto again = encode(*mx);
            REQUIRE(again == b);
            for (const auto &p : mx->ports) {
                if ((p.flags & kPortFlagDct) != 0) {
                    ++dc_ports;
                    REQUIRE(p.dct_number != 0);
                    REQUIRE(p.dct_number <= 0xffffffu);
                    REQUIRE(p.dc_key != 0);
                }
            }
        }
        (void)fh;
    }
    CHECK(accepted > 0); // the mutator leaves some messages valid (e.g. one changed GID)
    CHECK(forwards > 0); // and some forwarded headers (a changed tag, sequence number)
    CHECK(dc_ports > 0); // and some ports with a DC target (a changed GID or key byte)
}

TEST_CASE("wire: DC sender trailer round trip and every refusal", "[btl][wire][dc]") {
    DcSender d{0x0000123400000005ull, 15};
    std::vector<uint8_t> b(kDcSenderSize, 0xee);
    encode(d, b.data());
    auto p = parse_dc_sender(b.data(), b.size());
    REQUIRE(p.is_ok());
    CHECK(*p == d);
    CHECK(b[0] == 0x05);
    CHECK(b[4] == 0x34);
    CHECK(b[8] == 15);
    for (size_t i = 10; i < kDcSenderSize; ++i) {
        CHECK(b[i] == 0); // reserved: encoded as 0
    }
    auto refused = [](std::vector<uint8_t> v, const std::string &why) {
        auto r = parse_dc_sender(v.data(), v.size());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == roce::util::Code::kProtocol);
        CHECK_THAT(r.status().message(), contains_text(why));
    };
    refused(std::vector<uint8_t>(b.begin(), b.begin() + 15), "DC sender trailer of 15 bytes");
    std::vector<uint8_t> longer = b;
    longer.push_back(0);
    refused(longer, "DC sender trailer of 17 bytes");
    for (size_t i = 10; i < kDcSenderSize; ++i) {
        std::vector<uint8_t> bad = b;
        bad[i] = 1;
        refused(bad, "reserved byte " + std::to_string(i) + " set");
    }
    std::vector<uint8_t> bad = b;
    std::fill(bad.begin(), bad.begin() + 8, 0);
    refused(bad, "names process 0");
    bad = b;
    bad[8] = 16;
    refused(bad, "names port 16: at most 16 ports");
    bad = b;
    bad[9] = 1; // port 271
    refused(bad, "names port 271");
}

TEST_CASE("wire: forwarded fragment header round trip and every refusal", "[btl][wire]") {
    ForwardHeader h;
    h.tag = 0x41;
    h.origin_src_port = 3;
    h.origin_dst_port = 2;
    h.seq = 0xfffffffe;
    h.length = 4;
    std::vector<uint8_t> b(kForwardHeaderSize + 4, 0);
    encode(h, b.data());
    auto p = parse_forward(b.data(), b.size());
    REQUIRE(p.is_ok());
    CHECK(*p == h);
    auto refused = [](std::vector<uint8_t> v, const std::string &why) {
        auto r = parse_forward(v.data(), v.size());
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == roce::util::Code::kProtocol);
        CHECK_THAT(r.status().message(), contains_text(why));
    };
    refused(std::vector<uint8_t>(b.begin(), b.begin() + 15), "shorter than its 16-byte header");
    std::vector<uint8_t> bad = b;
    bad[0] = 3;
    refused(bad, "unknown kind 3");
    bad = b;
    bad[0] = 0;
    refused(bad, "unknown kind 0");
    bad = b;
    bad[7] = 1;
    refused(bad, "reserved bytes set");
    bad = b;
    bad[2] = 16; // sender port 16
    refused(bad, "names ports 16 (sender) and 2 (receiver)");
    bad = b;
    bad[4] = 0;
    bad[5] = 1; // receiver port 256
    refused(bad, "at most 16 ports");
    bad = b;
    bad.push_back(0); // one byte more than declared
    refused(bad, "declares 4 payload bytes, carries 5");
    bad = b;
    bad.pop_back();
    refused(bad, "declares 4 payload bytes, carries 3");
    bad = b;
    bad[12] = 0xff;
    bad[13] = 0xff;
    bad[14] = 0xff;
    bad[15] = 0xff; // a length that would wrap
    refused(bad, "declares 4294967295 payload bytes, carries 4");
    // A port-down notice: no payload, tag and number 0; anything else in
    // it is refused.
    ForwardHeader n;
    n.kind = ForwardKind::kPortDown;
    n.origin_src_port = 1;
    n.origin_dst_port = 0;
    std::vector<uint8_t> nb(kForwardHeaderSize, 0);
    encode(n, nb.data());
    auto np = parse_forward(nb.data(), nb.size());
    REQUIRE(np.is_ok());
    CHECK(*np == n);
    bad = nb;
    bad[1] = 0x41;
    refused(bad, "port-down notice with tag 65, number 0, 0 payload bytes (all must be 0)");
    bad = nb;
    bad[8] = 7;
    refused(bad, "port-down notice with tag 0, number 7");
    bad = nb;
    bad[12] = 2;
    bad.push_back(0);
    bad.push_back(0);
    refused(bad, "port-down notice with tag 0, number 0, 2 payload bytes");
    // The fragment type of a forwarded send parses; one past it does not.
    uint8_t fh[kFragHeaderSize];
    FragHeader f;
    f.type = FragType::kForward;
    f.seq = 9;
    encode(f, fh);
    auto pf = parse_frag_header(fh, sizeof fh);
    REQUIRE(pf.is_ok());
    CHECK(pf->type == FragType::kForward);
    fh[1] = 4;
    CHECK_FALSE(parse_frag_header(fh, sizeof fh).is_ok());
}

TEST_CASE("wire: fragment header", "[btl][wire]") {
    uint8_t buf[8];
    encode(FragHeader{0x41, FragType::kData, 513, 0xfedcba98}, buf);
    auto h = parse_frag_header(buf, sizeof buf);
    REQUIRE(h.is_ok());
    CHECK(h->tag == 0x41);
    CHECK(h->type == FragType::kData);
    CHECK(h->credits == 513);
    CHECK(h->seq == 0xfedcba98);
    CHECK_FALSE(parse_frag_header(buf, 7).is_ok());
    buf[1] = 7;
    auto bad = parse_frag_header(buf, 8);
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().message() == "roce fragment with unknown type 7");
}

TEST_CASE("credits: data never uses the control reserve", "[btl][credits]") {
    CreditLedger c(1, 4);
    c.set_initial(3);
    CHECK(c.take_for_data());
    CHECK(c.take_for_data());
    CHECK_FALSE(c.take_for_data()); // the last one is the reserve
    CHECK(c.take_for_control());
    CHECK_FALSE(c.take_for_control());
    c.add(2);
    CHECK(c.take_for_data());
    c.untake();
    CHECK(c.available() == 2);
}

TEST_CASE("credits: owed credits piggyback and trigger credit messages at the threshold",
          "[btl][credits]") {
    CreditLedger c(1, 4);
    c.owe(3);
    CHECK_FALSE(c.credit_message_due());
    c.owe();
    CHECK(c.credit_message_due());
    CHECK(c.take_owed() == 4);
    CHECK(c.owed() == 0);
    c.owe(70000);
    CHECK(c.take_owed() == 65535);
    CHECK(c.take_owed() == 70000 - 65535);
}

TEST_CASE("credits: what a peer returns beyond its window is refused, never wraps",
          "[btl][credits]") {
    CreditLedger c(1, 8);
    c.set_initial(32);
    for (int i = 0; i < 10; ++i) {
        REQUIRE(c.take_for_data());
    }
    CHECK(c.add(4) == 0);
    CHECK(c.available() == 26);
    // A forged or broken header returning 65535 credits: only the 6 that
    // can be real are taken.
    CHECK(c.add(0xffff) == 0xffff - 6);
    CHECK(c.available() == 32);
    // Repeated, it cannot wrap the count around to a small number.
    for (int i = 0; i < 100000; ++i) {
        (void)c.add(0xffff);
    }
    CHECK(c.available() == 32);
    CHECK(c.window() == 32);
}

TEST_CASE("credits: two ledgers exchanging only credit messages settle", "[btl][credits]") {
    // A and B both exhaust their data credits, then only return credits.
    // The threshold guarantees that credit messages do not answer each other
    // forever: count the messages until quiet.
    CreditLedger a(1, 4), b(1, 4);
    a.set_initial(8);
    b.set_initial(8);
    for (int i = 0; i < 7; ++i) {
        REQUIRE(a.take_for_data());
        b.owe(); // B reposts the buffer A's message used
    }
    int messages = 0;
    for (int round = 0; round < 100; ++round) {
        bool sent = false;
        if (b.credit_message_due() && b.take_for_control()) {
            a.add(b.take_owed());
            a.owe(); // the credit message consumed one of A's buffers
            ++messages;
            sent = true;
        }
        if (a.credit_message_due() && a.take_for_control()) {
            b.add(a.take_owed());
            b.owe();
            ++messages;
            sent = true;
        }
        if (!sent) {
            break;
        }
    }
    CHECK(messages <= 3);
    CHECK(a.available() == 8);
}

TEST_CASE("locality: the devices on the process's NUMA nodes win, ties are kept",
          "[btl][locality]") {
    std::vector<DeviceLocality> devs = {
        {"mlx5_0", 0}, {"mlx5_1", 1}, {"mlx5_2", 1}, {"rxe0", -1}};
    std::string why;
    CHECK(nearest_devices(devs, {1}, &why) == std::vector<std::string>{"mlx5_1", "mlx5_2"});
    CHECK(why == "using mlx5_1, mlx5_2: on the NUMA node(s) this process is bound to; not using "
                 "the other 2 device(s)");
    CHECK(nearest_devices(devs, {0}) == std::vector<std::string>{"mlx5_0"});
    // Unbound (or single-node) processes: nothing is nearer, use all.
    CHECK(nearest_devices(devs, {}, &why).size() == 4);
    CHECK(why == "no device is local to this process's binding: using all");
    // Bound across every node with a device: all are local.
    std::vector<DeviceLocality> two = {{"a", 0}, {"b", 1}};
    CHECK(nearest_devices(two, {0, 1}, &why).size() == 2);
    CHECK(why == "every device is local to this process's binding");
    CHECK(nearest_devices({{"only", 3}}, {0}, &why) == std::vector<std::string>{"only"});
    CHECK(why == "one RDMA device");
}

TEST_CASE("locality: distance decides between equal rails, a faster far rail stays",
          "[btl][locality][rails]") {
    std::string why;
    // Two equal rails, one per socket: each rank keeps its own.
    std::vector<DeviceLocality> equal = {{"mlx5_bond_0", 0, 50000}, {"mlx5_bond_1", 1, 50000}};
    CHECK(nearest_devices(equal, {1}, &why) == std::vector<std::string>{"mlx5_bond_1"});
    CHECK(why == "using mlx5_bond_1: on the NUMA node(s) this process is bound to; not using "
                 "the other 1 device(s)");
    // A 2 x 25G LAG near, a 100G port far: the faster rail is kept as well.
    std::vector<DeviceLocality> unequal = {{"mlx5_bond_0", 0, 50000}, {"mlx5_2", 1, 100000}};
    CHECK(nearest_devices(unequal, {0}, &why) ==
          std::vector<std::string>{"mlx5_bond_0", "mlx5_2"});
    CHECK(why == "using mlx5_bond_0: on the NUMA node(s) this process is bound to; also using "
                 "mlx5_2 (NUMA node 1, 100000 Mb/s): faster than the local rails (50000 Mb/s)");
    // ... but not a slower one, and not on a guess when a local speed is unknown.
    CHECK(nearest_devices(unequal, {1}) == std::vector<std::string>{"mlx5_2"});
    std::vector<DeviceLocality> unknown = {{"mlx5_bond_0", 0, 0}, {"mlx5_2", 1, 100000}};
    CHECK(nearest_devices(unknown, {0}) == std::vector<std::string>{"mlx5_bond_0"});
    // Without a loaded topology nothing is known about the binding.
    CHECK(process_numa_nodes(nullptr).empty());
}

TEST_CASE("seq window: new, duplicate, out of order, wraparound", "[btl][seq]") {
    SeqWindow w(16);
    CHECK(w.accept(0) == SeqWindow::Verdict::kNew);
    CHECK(w.accept(0) == SeqWindow::Verdict::kDuplicate);
    CHECK(w.accept(2) == SeqWindow::Verdict::kNew);
    CHECK(w.next_expected() == 1);
    CHECK(w.accept(2) == SeqWindow::Verdict::kDuplicate);
    CHECK(w.accept(1) == SeqWindow::Verdict::kNew);
    CHECK(w.next_expected() == 3);
    CHECK(w.accept(1) == SeqWindow::Verdict::kDuplicate); // behind the window
    CHECK(w.accept(3 + 16) == SeqWindow::Verdict::kTooFar);
    CHECK(w.accept(3 + 15) == SeqWindow::Verdict::kNew);

}

TEST_CASE("seq window: random reorder within the credit window delivers each number once",
          "[btl][seq]") {
    std::mt19937 rng(12345);
    SeqWindow w(256);
    std::vector<uint32_t> inflight;
    std::set<uint32_t> delivered;
    uint32_t base_offset = 0;
    int dups = 0;
    for (int round = 0; round < 20000; ++round) {
        // The sender's rule: a new number only within the window of the
        // oldest one not yet completed (here: delivered).
        while (inflight.size() < 64 && base_offset - w.next_expected() < 256) {
            inflight.push_back(base_offset++);
        }
        size_t k = rng() % inflight.size();
        uint32_t s = inflight[k];
        bool resend = rng() % 8 == 0; // a failover resends it: the copy may arrive twice
        auto v = w.accept(s);
        if (delivered.count(s)) {
            REQUIRE(v == SeqWindow::Verdict::kDuplicate);
            ++dups;
        } else {
            REQUIRE(v == SeqWindow::Verdict::kNew);
            delivered.insert(s);
        }
        if (!resend) {
            inflight.erase(inflight.begin() + static_cast<long>(k));
        }
    }
    CHECK(dups > 0);
    CHECK(delivered.size() > 15000);
    CHECK(w.next_expected() <= base_offset);
}

TEST_CASE("seq window: a span that is not a power of two, and numbers across 2^32",
          "[btl][seq]") {
    // 100 numbers ahead of the oldest missing one are accepted, not the 101st,
    // although the bitmap behind them holds 128.
    SeqWindow w(100);
    CHECK(w.accept(99) == SeqWindow::Verdict::kNew);
    CHECK(w.accept(100) == SeqWindow::Verdict::kTooFar);
    CHECK(w.accept(127) == SeqWindow::Verdict::kTooFar);
    CHECK(w.accept(128) == SeqWindow::Verdict::kTooFar); // would share 0's bit
    CHECK(w.accept(0) == SeqWindow::Verdict::kNew);
    CHECK(w.next_expected() == 1);
    CHECK(w.accept(99) == SeqWindow::Verdict::kDuplicate);

    // A connection whose numbers wrap: 0xfffffffe, 0xffffffff, 0, 1 in any order.
    SeqWindow x(64, 0xfffffffeu);
    CHECK(x.accept(1) == SeqWindow::Verdict::kNew);
    CHECK(x.accept(0xffffffffu) == SeqWindow::Verdict::kNew);
    CHECK(x.next_expected() == 0xfffffffeu);
    CHECK(x.accept(0xfffffffeu) == SeqWindow::Verdict::kNew);
    CHECK(x.next_expected() == 0); // 0 is still missing
    CHECK(x.accept(1) == SeqWindow::Verdict::kDuplicate);
    CHECK(x.accept(0xffffffffu) == SeqWindow::Verdict::kDuplicate); // behind now
    CHECK(x.accept(0) == SeqWindow::Verdict::kNew);
    CHECK(x.next_expected() == 2);
    CHECK(x.accept(2 + 64) == SeqWindow::Verdict::kTooFar);
    CHECK(x.accept(2 + 63) == SeqWindow::Verdict::kNew);
}

TEST_CASE("seq window: any number from the wire gets the reference model's verdict",
          "[btl][seq]") {
    // The reference: the oldest missing number and the set received beyond
    // it, nothing else. Numbers come from an untrusted wire: in order, out of
    // order, copies, just beyond the window, far behind, anywhere.
    struct Model {
        uint32_t span, base;
        std::set<uint32_t> ahead;
        SeqWindow::Verdict accept(uint32_t seq) {
            uint32_t d = seq - base;
            if (d >= 0x80000000u) {
                return SeqWindow::Verdict::kDuplicate;
            }
            if (d >= span) {
                return SeqWindow::Verdict::kTooFar;
            }
            if (!ahead.insert(seq).second) {
                return SeqWindow::Verdict::kDuplicate;
            }
            while (ahead.erase(base) != 0) {
                ++base;
            }
            return SeqWindow::Verdict::kNew;
        }
    };
    std::mt19937 rng(20261202);
    for (uint32_t span : {1u, 7u, 64u, 65u, 200u, 8192u}) {
        for (uint32_t start : {0u, 0xffffff00u, 0x7ffffff0u}) {
            SeqWindow w(span, start);
            Model m{span, start, {}};
            for (int i = 0; i < 20000; ++i) {
                uint32_t seq = 0;
                switch (rng() % 6) {
                case 0: seq = m.base; break;                                  // in order
                case 1: seq = m.base + rng() % span; break;                   // inside
                case 2: seq = m.base + span + rng() % 4; break;               // just beyond
                case 3: seq = m.base - 1 - rng() % (2 * span); break;         // behind
                case 4: seq = static_cast<uint32_t>(rng()); break;            // anything
                default: seq = m.base + static_cast<uint32_t>(rng() % 3); break;
                }
                SeqWindow::Verdict want = m.accept(seq);
                SeqWindow::Verdict got = w.accept(seq);
                if (got != want || w.next_expected() != m.base) {
                    FAIL("span " << span << " start " << start << " step " << i << " seq "
                                 << seq << ": verdict " << static_cast<int>(got) << " want "
                                 << static_cast<int>(want) << ", next " << w.next_expected()
                                 << " want " << m.base);
                }
            }
            CHECK(w.next_expected() == m.base);
        }
    }
}

TEST_CASE("lag: flow label to UDP source port as the kernel folds it", "[btl][lag]") {
    CHECK(flow_label_to_sport(0) == 0xc000);
    CHECK(flow_label_to_sport(0x1234) == (0xc000 | 0x1234));
    CHECK(flow_label_to_sport(0xfc000) == (0xc000 | 0x3f));
    // The port is always in the RoCE v2 source-port range.
    for (uint32_t fl = 0; fl < (1u << 20); fl += 4099) {
        CHECK(flow_label_to_sport(fl) >= 0xc000);
    }
}

TEST_CASE("lag: the flow label of a QP pair is symmetric, as the kernel computes it",
          "[btl][lag]") {
    // Observed with tcpdump on Linux 6.1 rxe: QPs 0x13 <-> 0x13 sent from
    // UDP port 0xc169.
    CHECK(calc_flow_label(0x13, 0x13) == 0x169);
    CHECK(flow_label_to_sport(calc_flow_label(0x13, 0x13)) == 0xc169);
    for (uint32_t a = 0x11; a < 0x400; a += 37) {
        for (uint32_t b = 0x11; b < 0x400; b += 53) {
            CHECK(calc_flow_label(a, b) == calc_flow_label(b, a));
            CHECK(calc_flow_label(a, b) < (1u << 20));
        }
    }
}

TEST_CASE("lag: bond layer3+4 hash and the member of a QP pair", "[btl][lag]") {
    auto a = *roce::util::IpAddress::parse("198.18.0.1");
    auto b = *roce::util::IpAddress::parse("198.18.0.2");
    // Reference values computed by hand from the kernel's __bond_xmit_hash
    // (ports as a little-endian u32 of two big-endian u16, XOR addresses,
    // fold >>16 and >>8, drop the lowest bit).
    uint32_t ports = 0x00c0u | (0xb712u << 16); // bswap16(0xc000)=0x00c0, bswap16(4791)=0xb712
    uint32_t addrs = (198u | 18u << 8 | 0u << 16 | 1u << 24) ^ (198u | 18u << 8 | 0u << 16 | 2u << 24);
    uint32_t h = ports ^ addrs;
    h ^= h >> 16;
    h ^= h >> 8;
    h >>= 1;
    CHECK(bond_l34_member(a, b, 0xc000, 4791, 2) == h % 2);
    CHECK(bond_l34_member(a, b, 0xc000, 4791, 3) == h % 3);
    // Members seen on the guests' tx counters (802.3ad, two members).
    CHECK(bond_l34_member(a, b, 0xc169, 4791, 2) == 1);
    CHECK(bond_l34_member(a, b, 0xc190, 4791, 2) == 1);
    CHECK(bond_l34_member(a, b, 0xdf94, 4791, 2) == 0);
    CHECK(bond_l34_member(a, b, 0xc18f, 4791, 2) == 0);
    CHECK(bond_l34_member(a, b, 0xc17c, 4791, 2) == 1);
    // The hash is symmetric in the addresses: both ends agree.
    for (uint16_t sp = 0xc000; sp < 0xc400; sp += 7) {
        CHECK(bond_l34_member(a, b, sp, 4791, 2) == bond_l34_member(b, a, sp, 4791, 2));
    }

    auto model = spread_model(2, "layer3+4", a, b);
    REQUIRE(model.predictable);
    auto s = spread_of(model, 0x13, 0x13);
    CHECK(s.flow_label == 0x169);
    CHECK(s.sport == 0xc169);
    CHECK(s.member == 1);
    CHECK(model.member_of(0x13, 0x13) == model.member_of(0x13, 0x13));
    // Both members are reachable by choosing QP numbers.
    std::set<int> members;
    for (uint32_t q = 0x11; q < 0x40; ++q) {
        members.insert(model.member_of(0x20, q));
    }
    CHECK(members == std::set<int>{0, 1});

    // Not predictable: another hash policy, one member, or IPv6.
    CHECK_FALSE(spread_model(2, "layer2", a, b).predictable);
    CHECK(spread_model(2, "layer2", a, b).member_of(0x13, 0x13) == -1);
    CHECK_FALSE(spread_model(1, "layer3+4", a, b).predictable);
    auto v6a = *roce::util::IpAddress::parse("fd00::1");
    auto v6b = *roce::util::IpAddress::parse("fd00::2");
    CHECK_FALSE(spread_model(2, "layer3+4", v6a, v6b).predictable);
    auto u = spread_of(spread_model(2, "layer2", a, b), 0x13, 0x14);
    CHECK(u.member == -1);
    CHECK(u.sport == flow_label_to_sport(calc_flow_label(0x13, 0x14)));
}

namespace {

// A 20-byte IPv4 header (no options) from `src` with a correct checksum.
void ipv4_header(uint8_t *h, const uint8_t src[4]) {
    std::memset(h, 0, 20);
    h[0] = 0x45;
    h[3] = 60;  // total length
    h[8] = 64;  // TTL
    h[9] = 17;  // UDP
    std::memcpy(h + 12, src, 4);
    h[16] = 198;
    h[17] = 18;
    h[19] = 1;
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) {
        sum += static_cast<uint32_t>(h[i]) << 8 | h[i + 1];
    }
    while (sum > 0xffff) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    uint16_t check = static_cast<uint16_t>(~sum);
    h[10] = static_cast<uint8_t>(check >> 8);
    h[11] = static_cast<uint8_t>(check);
}

} // namespace

TEST_CASE("wire: the sender's address from the 40 bytes before a UD datagram", "[btl][wire]") {
    uint8_t grh[40] = {};
    Gid g{};
    // Nothing recognisable: no answer.
    CHECK_FALSE(grh_source_gid(grh, &g));
    // RoCE v2 over IPv4: the IPv4 header sits in the last 20 bytes.
    const uint8_t src4[4] = {198, 18, 0, 101};
    ipv4_header(grh + 20, src4);
    REQUIRE(grh_source_gid(grh, &g));
    Gid want4{};
    want4[10] = want4[11] = 0xff;
    std::memcpy(want4.data() + 12, src4, 4);
    CHECK(g == want4);
    // The first 20 bytes are left over from an earlier IPv6 datagram in the
    // same buffer: the checksummed IPv4 header still decides.
    grh[0] = 0x60;
    REQUIRE(grh_source_gid(grh, &g));
    CHECK(g == want4);
    // RoCE v2 over IPv6 (and v1's GRH): the source GID at byte 8.
    uint8_t grh6[40] = {};
    grh6[0] = 0x60;
    for (int i = 0; i < 16; ++i) {
        grh6[8 + i] = static_cast<uint8_t>(0xf0 + i);
    }
    REQUIRE(grh_source_gid(grh6, &g));
    CHECK(g[0] == 0xf0);
    CHECK(g[15] == 0xff);
}

TEST_CASE("wire: an IPv6 sender whose address has 0x45 at GRH byte 20 is read as IPv6",
          "[btl][wire]") {
    // Byte 20 of the GRH is byte 12 of the source GID: one IPv6 peer address
    // in 256 has 0x45 there. Without the IPv4 checksum every such peer was
    // taken for an IPv4 one (its "address" made up of GID bytes). With it,
    // only the bytes that happen to form a valid IPv4 header checksum (one
    // in 65536) are, as in rdma-core: at most a few of these 20000.
    size_t misread = 0, tried = 0;
    std::mt19937 rng(45);
    for (int k = 0; k < 20000; ++k) {
        uint8_t grh[40] = {};
        grh[0] = 0x60;
        grh[4] = 0x00;
        grh[5] = 0x40; // payload length
        grh[6] = 17;   // next header UDP
        grh[7] = 64;
        for (int i = 8; i < 40; ++i) {
            grh[i] = static_cast<uint8_t>(rng());
        }
        grh[20] = 0x45;
        ++tried;
        Gid g{};
        REQUIRE(grh_source_gid(grh, &g));
        misread += std::memcmp(g.data(), grh + 8, 16) != 0 ? 1 : 0;
    }
    CHECK(tried == 20000);
    CHECK(misread <= 3);
}
