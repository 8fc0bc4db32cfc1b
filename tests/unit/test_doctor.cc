// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor end to end, in-process: arguments, exit statuses, the text
// and JSON reports over the fixtures, --check over FakeVerbs, --capture.
#include <sstream>

#include "catch.h"
#include "doctor.h"
#include "fake_verbs.h"
#include "doctor_test_util.h"
#include "fixtures.h"
#include "topo/fs.h"
#include "util/json.h"

using namespace roce;
using roce::testing::fixture;
using roce::testing::fixture_dir;
using util::Json;

namespace {

using testing::doctor_run;
using testing::Machine;
using testing::Run;

Run from(const char *fix, std::vector<std::string> more = {}) {
    Machine none;
    std::vector<std::string> args = {"--from", fixture_dir(fix)};
    args.insert(args.end(), more.begin(), more.end());
    return doctor_run(args, none.env());
}

Json parse(const Run &r) {
    auto j = Json::parse(r.out);
    INFO(r.out);
    REQUIRE(j.is_ok());
    return *j;
}

} // namespace

TEST_CASE("roce-doctor: help, version and bad arguments", "[doctor][args]") {
    Machine m;
    Run help = doctor_run({"--help"}, m.env());
    CHECK(help.status == 0);
    CHECK_THAT(help.out, contains_text("usage: roce-doctor [OPTION]..."));
    CHECK_THAT(help.out, contains_text("3  no RDMA devices"));
    Run version = doctor_run({"--version"}, m.env());
    CHECK(version.status == 0);
    CHECK(version.out == std::string("roce-doctor ") + ROCE_TEST_VERSION + "\n");

    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"--bogus"}, "unknown option '--bogus'"},
        {{"--peer"}, "--peer needs a value"},
        {{"--peer", "node7"},
         "peer 'node7' is not an IPv4 or IPv6 address (forms: 198.19.0.12, 198.19.0.12/24, "
         "::ffff:198.19.0.12, 2001:db8::12/64)"},
        {{"--from", "x", "--check"},
         "--check runs real QP transitions on this machine's devices and cannot be combined "
         "with --from"},
        {{"--from=x", "--capture=y"},
         "--capture records this machine and cannot be combined with --from"},
        {{"--gid-index", "abc"}, "--gid-index 'abc' is not a number (decimal or 0x-hexadecimal)"},
        {{"--gid-index=-7"},
         "btl_roce_gid_index = -7 is invalid: allowed values are -1 (automatic) or a GID table "
         "index 0..65535"},
        {{"--roce-version", "3"}, "--roce-version '3' is invalid: use auto, 1 or 2"},
        {{"--address-family", "ipx"}, "--address-family 'ipx' is invalid: use auto, ipv4 or ipv6"},
        {{"--if-include", "mlx5_0", "--if-exclude", "bond0"},
         "btl_roce_if_include and btl_roce_if_exclude are both set ('mlx5_0' and 'bond0'): set "
         "only one of them"},
        {{"--qkey", "0x80000001"},
         "btl_roce_qkey = 0x80000001 is invalid for this process: bit 31 is set"},
    };
    for (const auto &c : cases) {
        INFO(c.args.front());
        Run r = doctor_run(c.args, m.env());
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Catch::Matchers::StartsWith("roce-doctor: " + c.message));
        CHECK_THAT(r.err, Catch::Matchers::EndsWith("\nTry 'roce-doctor --help'.\n"));
        CHECK(r.out.empty());
    }
}

TEST_CASE("roce-doctor: unreadable captures exit 2 with the reason", "[doctor][capture]") {
    Machine m;
    Run r = doctor_run({"--from", "/nonexistent/cap"}, m.env());
    CHECK(r.status == 2);
    CHECK(r.err == "roce-doctor: capture directory /nonexistent/cap does not exist or is not a "
                   "directory\n");
    testing::TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    testing::write_file(t.path() + "/ip-addr.json", "[{");
    Run bad = doctor_run({"--from", t.path(), "--json"}, m.env());
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, contains_text("ip-addr.json: malformed JSON at byte 2"));
    CHECK(bad.out.empty());
}

TEST_CASE("roce-doctor: --json over the LAG capture", "[doctor][json]") {
    Run r = from("mlx5_lag", {"--json", "--peer", "198.19.0.12"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    Json j = parse(r);
    REQUIRE(j.find("ports") != nullptr);
    REQUIRE(j.find("ports")->items().size() == 1);
    const Json &p = j.find("ports")->items()[0];
    CHECK(p.find("device")->as_string() == "mlx5_bond_0");
    CHECK(p.find("port")->as_int() == 1);
    CHECK(p.find("peer")->as_string() == "198.19.0.12");
    CHECK(p.find("gid_index")->as_int() == 5);
    CHECK(p.find("gid")->as_string() == "::ffff:198.19.0.11");
    CHECK(p.find("gid_type")->as_string() == "RoCE v2");
    CHECK(p.find("netdev")->as_string() == "bond0.3027");
    CHECK(p.find("pkey_index")->as_int() == 0);
    CHECK(p.find("qkey")->as_int() == 0x1ee7a330);
    CHECK(p.find("qkey_hex")->as_string() == "0x1ee7a330");
    CHECK(p.find("path_mtu")->as_int() == 1024);
    CHECK(p.find("path_mtu_enum")->as_string() == "IBV_MTU_1024");
    CHECK(p.find("error") == nullptr);
    CHECK_THAT(p.find("explanation")->as_string(),
               contains_text("reaches peer 198.19.0.12 (in 198.19.0.0/24)"));
    const Json &gids = *j.find("devices")->items()[0].find("ports")->items()[0].find("gids");
    CHECK(gids.items().size() == 8);
    CHECK(j.find("source")->as_string() == "capture:" + fixture_dir("mlx5_lag"));

    Run none = from("mlx5_lag", {"--json", "--peer", "203.0.113.9"});
    CHECK(none.status == 1);
    Json none_doc = parse(none);
    const Json &q = none_doc.find("ports")->items()[0];
    CHECK(q.find("gid_index")->is_null());
    CHECK(q.find("gid")->is_null());
    CHECK(q.find("path_mtu")->is_null());
    CHECK_THAT(q.find("error")->as_string(),
               Catch::Matchers::StartsWith("no reachable GID on mlx5_bond_0:1 for peer "
                                           "203.0.113.9: local subnets"));

    Run two = from("mlx5_lag", {"--json", "--peer", "198.19.0.12", "--peer", "198.18.0.12"});
    Json two_doc = parse(two);
    const Json &ports = *two_doc.find("ports");
    REQUIRE(ports.items().size() == 2);
    CHECK(ports.items()[1].find("gid_index")->as_int() == 3);
}

TEST_CASE("roce-doctor: the human report marks the choice and shows the LAG", "[doctor][text]") {
    Run r = from("mlx5_lag");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Matchers::StartsWith("roce-doctor " ROCE_TEST_VERSION " - capture:"));
    for (const char *line :
         {"mlx5_bond_0 port 1: ACTIVE, Ethernet, 255 GID slots, pkey table [0xffff], active MTU "
          "unknown (not in sysfs)\n",
          "  bond0: bond 802.3ad (layer3+4, miimon 100 ms) over ens1f0np0 (UP), ens1f1np1 (UP), 2 "
          "in the active aggregator; MTU 9000; UP; 198.18.0.11/24, fe80::ba59:9fff:fe10:2a/64\n",
          "  bond0.3027: VLAN 3027 on bond0; MTU 1500; UP; 198.19.0.11/24, "
          "fe80::ba59:9fff:fe10:2a/64\n",
          "  LAG: mlx5_bond_0:1 carries bond0 (802.3ad over 2 members: ens1f0np0, ens1f1np1); "
          "num_lag_ports is not recorded in sysfs or captures\n",
          "  GID table (8 of 255 slots populated):\n",
          "     => [3]   ::ffff:198.18.0.11",
          "  selection: gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0) port 1 pkey_index 0 (0xffff) "
          "qkey 0x1ee7a330 path_mtu 4096 (IBV_MTU_4096)\n",
          "    - tie: gid[5] (bond0.3027) ranks the same"}) {
        CHECK_THAT(r.out, contains_text(line));
    }
    CHECK_THAT(r.out, !contains_text("=> [5]"));
}

TEST_CASE("roce-doctor: no RDMA devices", "[doctor][live]") {
    Machine none;
    Run r = doctor_run({}, none.env());
    CHECK(r.status == 3);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Matchers::StartsWith("roce-doctor: no RDMA devices found: rdma-core "
                                                  "lists none here"));
    CHECK_THAT(r.err, Catch::Matchers::EndsWith("[live]\n"));
    Run j = doctor_run({"--json"}, none.env());
    CHECK(j.status == 3);
    Json doc = parse(j);
    CHECK(doc.find("ports")->items().empty());
    CHECK_THAT(doc.find("error")->as_string(), Catch::Matchers::StartsWith("no RDMA devices"));
}

TEST_CASE("roce-doctor: --check runs the transitions on the live device", "[doctor][check]") {
    {
        Machine m("mlx5_lag");
        Run r = doctor_run({"--check"}, m.env());
        CHECK(r.status == 0);
        CHECK_THAT(r.out, contains_text("mlx5_bond_0:1 UD: pass - RESET->INIT->RTR->RTS "
                                        "ok"));
        CHECK_THAT(r.out, contains_text("mlx5_bond_0:1 RC: pass - RESET->INIT->RTR->RTS "
                                        "ok"));
        // mlx5 DC: a DC target and a DC initiator, each through preflight.
        CHECK_THAT(r.out, contains_text("mlx5_bond_0:1 DCT: pass - RESET->INIT->RTR ok (DCT 0x"));
        CHECK_THAT(r.out, contains_text("mlx5_bond_0:1 DCI: pass - RESET->INIT->RTR->RTS ok "
                                        "(DCI 0x"));
        // Live: active MTU and the LAG ports come from verbs.
        CHECK_THAT(r.out, contains_text("active MTU 4096"));
    }
    {
        // Soft-RoCE: the DC rows say SKIP and why, and do not fail the check.
        Machine m("rxe_bond");
        Run r = doctor_run({"--check"}, m.env());
        CHECK(r.status == 0);
        CHECK_THAT(r.out, contains_text("rxe_bond0:1 RC: pass - "));
        CHECK_THAT(r.out, contains_text("\n  rxe_bond0:1 DCT: SKIP: rxe_bond0 is not an mlx5 "
                                        "device: DC needs mlx5 direct verbs\n"));
        CHECK_THAT(r.out, contains_text("\n  rxe_bond0:1 DCI: SKIP: rxe_bond0 is not an mlx5 "
                                        "device: DC needs mlx5 direct verbs\n"));
        Run j = doctor_run({"--check", "--json"}, m.env());
        CHECK(j.status == 0);
        Json doc = parse(j);
        const auto &checks = doc.find("checks")->items();
        REQUIRE(checks.size() == 4);
        CHECK(checks[2].find("type")->as_string() == "DCT");
        CHECK(checks[2].find("skipped")->as_bool());
        CHECK_FALSE(checks[2].find("passed")->as_bool());
        CHECK_FALSE(checks[1].find("skipped")->as_bool());
    }
    {
        Machine m("mlx5_lag");
        m.fake.fail(testing::Call::kModifyQp, EINVAL, 3); // RC RESET->INIT fails
        Run r = doctor_run({"--check", "--json"}, m.env());
        CHECK(r.status == 1);
        Json j = parse(r);
        const auto &checks = j.find("checks")->items();
        REQUIRE(checks.size() == 4); // UD, RC, DCT, DCI
        CHECK(checks[0].find("passed")->as_bool());
        CHECK_FALSE(checks[1].find("passed")->as_bool());
        CHECK(checks[2].find("passed")->as_bool());
        CHECK(checks[3].find("passed")->as_bool());
        CHECK_THAT(checks[1].find("detail")->as_string(),
                   Catch::Matchers::StartsWith("ibv_modify_qp(RC, RESET->INIT) on mlx5_bond_0:1 "
                                               "pkey_index 0 (0xffff) gid[3] ::ffff:198.18.0.11 "
                                               "(RoCE v2, bond0) mtu 4096 failed: Invalid "
                                               "argument (22); likely cause: "));
    }
}

TEST_CASE("roce-doctor: --capture writes a capture that --from replays", "[doctor][capture]") {
    Machine m("mlx5_lag");
    testing::TempDir t;
    std::string dir = t.path() + "/cap";
    Run c = doctor_run({"--capture", dir}, m.env());
    CHECK(c.status == 0);
    CHECK(c.out == "roce-doctor: wrote a capture of this machine to " + dir +
                       " (1 RDMA device, 6 netdevs); replay it with: roce-doctor --from " + dir +
                       "\n");
    Run replay = doctor_run({"--from", dir, "--json"}, m.env());
    Run original = from("mlx5_lag", {"--json"});
    CHECK(replay.status == 0);
    Json a = parse(replay), b = parse(original);
    CHECK(a.find("ports")->dump() == b.find("ports")->dump());
    CHECK(a.find("devices")->dump() == b.find("devices")->dump());

    Machine none;
    Run fail = doctor_run({"--capture", t.path() + "/x"}, none.env());
    CHECK(fail.status == 2);
    CHECK(fail.err == "roce-doctor: cannot capture the netdevs: `ip` not found (iproute2's `ip` "
                      "is needed for --capture)\n");
}
