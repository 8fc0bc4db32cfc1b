// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Writing a capture (roce-doctor --capture) and replaying it.
#include "catch.h"
#include "fixtures.h"
#include "topo/capture.h"
#include "topo/fs.h"
#include "topo/readers.h"
#include "topo/sysfs_reader.h"

using namespace roce;
using roce::testing::fixture;
using roce::testing::fixture_dir;
using roce::testing::TempDir;

TEST_CASE("capture: a capture of a sysfs tree replays as the same snapshot", "[topo][capture]") {
    for (const char *name : {"mlx5_lag", "mlx4_two_ports", "rxe_bond"}) {
        INFO("fixture " << name);
        TempDir out;
        topo::CaptureInputs in;
        in.sysfs_root = fixture_dir(name); // stands in for "/"
        in.ip_addr_json = *topo::fs::read_text(fixture_dir(name) + "/ip-addr.json");
        in.ip_link_json = *topo::fs::read_text(fixture_dir(name) + "/ip-link.json");
        in.note = "test";
        std::vector<std::string> warnings;
        REQUIRE(topo::write_capture(out.path(), in, &warnings).is_ok());
        CHECK(warnings.empty());
        auto replay = topo::read_capture(out.path());
        REQUIRE(replay.is_ok());
        CHECK(testing::dump(*replay) == testing::dump(fixture(name)));
        // Empty slots have no type file, as on the kernel (EINVAL on read).
        const topo::fs::Tree cap(out.path(), topo::fs::Links::kRefuse);
        CHECK_FALSE(cap.exists("sys/class/infiniband/" + fixture(name).devices[0].name +
                               "/ports/1/gid_attrs/types/100"));
        CHECK(cap.exists("README"));
        // The sysfs-root reader sees the captured tree too (bond, VLAN links).
        auto nd = topo::read_netdevs_sysfs(cap, nullptr);
        REQUIRE(nd.is_ok());
        CHECK(nd->size() == fixture(name).netdevs.size());
    }
}

TEST_CASE("capture: an unwritable destination fails with the path", "[topo][capture]") {
    topo::CaptureInputs in;
    in.sysfs_root = fixture_dir("mlx5_lag");
    auto st = topo::write_capture("/proc/roce-capture-test", in, nullptr);
    REQUIRE_FALSE(st.is_ok());
    CHECK(st.message().find("writing capture /proc/roce-capture-test: mkdir "
                            "/proc/roce-capture-test failed") == 0);
}

TEST_CASE("capture: run_command returns stdout or says why it failed", "[topo][capture]") {
    auto ok = topo::run_command({"sh", "-c", "echo out; echo err >&2"});
    REQUIRE(ok.is_ok());
    CHECK(*ok == "out\n");
    auto bad = topo::run_command({"sh", "-c", "echo first line >&2; echo second >&2; exit 3"});
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().message() ==
          "`sh -c echo first line >&2; echo second >&2; exit 3` exited with status 3: first line");
    auto missing = topo::run_command({"/nonexistent/ip", "-j"});
    REQUIRE_FALSE(missing.is_ok());
    CHECK(missing.status().message() ==
          "running `/nonexistent/ip -j` failed: No such file or directory (2)");
}
