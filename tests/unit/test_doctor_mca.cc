// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor reads the btl_roce_* settings as an Open MPI 4.1 job does:
// the mca-params.conf syntax of Open MPI's keyval lexer, and the precedence
// override file > command line > OMPI_MCA_* > parameter files (the first
// listed wins) > default (mca_base_var.c).
#include <map>

#include "catch.h"
#include "doctor_test_util.h"
#include "mca_config.h"
#include "util/json.h"

using namespace roce;
using doctor::McaInputs;
using doctor::parse_param_file;
using doctor::resolve_mca;
using doctor::Setting;

namespace {

/// A fake file system for McaInputs::read_file.
struct Files {
    std::map<std::string, std::string> content;
    std::function<util::Result<std::string>(const std::string &)> reader() const {
        auto c = content;
        return [c](const std::string &path) -> util::Result<std::string> {
            auto it = c.find(path);
            if (it == c.end()) {
                return util::Status(util::Code::kNotFound, path + ": No such file");
            }
            return it->second;
        };
    }
};

McaInputs inputs(const Files &f, std::map<std::string, std::string> env) {
    McaInputs in;
    in.environment = std::move(env);
    in.sysconfdir = "/etc/openmpi";
    in.read_file = f.reader();
    return in;
}

const char *const kUser = "/home/u/.openmpi/mca-params.conf";
const char *const kSystem = "/etc/openmpi/openmpi-mca-params.conf";

} // namespace

TEST_CASE("mca-params.conf: Open MPI's syntax", "[doctor][mca]") {
    std::vector<std::string> problems;
    auto e = parse_param_file("# a comment\n"
                              "\n"
                              "btl = ^openib\n"
                              "btl_roce_gid_index=3\n"
                              "   btl_roce_if_include =  bond0.3027, 198.19.0.0/24   \n"
                              "// another comment\n"
                              "/* a block\n"
                              "btl_roce_qkey = 1\n"
                              "*/\n"
                              "btl_roce_roce_version = 2 # not a comment in Open MPI\n"
                              "btl_roce_if_exclude =\n"
                              "--mca btl_roce_address_family 'ipv4'\n"
                              "-x LD_LIBRARY_PATH\n"
                              "just words\n"
                              "btl_roce_gid_index = 5",
                              &problems);
    REQUIRE(e.size() == 7);
    CHECK((e[0].name == "btl" && e[0].value == "^openib" && e[0].line == 3));
    CHECK((e[1].name == "btl_roce_gid_index" && e[1].value == "3" && e[1].line == 4));
    CHECK(e[2].value == "bond0.3027, 198.19.0.0/24");
    CHECK(e[3].value == "2 # not a comment in Open MPI");
    CHECK((e[4].name == "btl_roce_if_exclude" && e[4].value.empty()));
    CHECK((e[5].name == "btl_roce_address_family" && e[5].value == "ipv4" && e[5].line == 12));
    CHECK((e[6].value == "5" && e[6].line == 15));
    CHECK(problems ==
          std::vector<std::string>{
              "line 13: an environment line (-x), not a parameter; skipped",
              "line 14: 'just words' is not NAME = VALUE; Open MPI skips it too"});
}

TEST_CASE("mca settings: command line > environment > user file > system file > default",
          "[doctor][mca]") {
    Files f;
    f.content[kSystem] = "btl_roce_gid_index = 1\nbtl_roce_qkey = 0x11\n"
                         "btl_roce_if_include = bond0\nbtl_roce_roce_version = v1\n";
    f.content[kUser] = "btl_roce_gid_index = 2\nbtl_roce_qkey = 0x22\nbtl_roce_if_include = x\n"
                       "btl_roce_if_include = bond0.3027\n";
    auto in = inputs(f, {{"HOME", "/home/u"},
                         {"OMPI_MCA_btl_roce_gid_index", "3"},
                         {"OMPI_MCA_btl_roce_address_family", "ipv6"}});
    auto cfg = resolve_mca(in, {{"btl_roce_gid_index", "4", "--gid-index", {}}});

    REQUIRE(cfg.settings.size() == 5); // all but if_exclude
    const Setting &gid = cfg.settings.at("btl_roce_gid_index");
    CHECK(gid.value == "4");
    CHECK(gid.source == "--gid-index");
    CHECK(gid.shadows == std::vector<std::string>{"OMPI_MCA_btl_roce_gid_index",
                                                  std::string(kUser) + ":1",
                                                  std::string(kSystem) + ":1"});
    CHECK(cfg.settings.at("btl_roce_address_family").source ==
          "OMPI_MCA_btl_roce_address_family");
    CHECK(cfg.settings.at("btl_roce_qkey").value == "0x22");
    CHECK(cfg.settings.at("btl_roce_qkey").source == std::string(kUser) + ":2");
    // Within one file the last line wins.
    CHECK(cfg.settings.at("btl_roce_if_include").value == "bond0.3027");
    CHECK(cfg.settings.at("btl_roce_if_include").source == std::string(kUser) + ":4");
    CHECK(cfg.settings.at("btl_roce_roce_version").source == std::string(kSystem) + ":4");
    CHECK(cfg.files == std::vector<std::string>{
                           std::string(kUser) + " (read, 3 btl_roce_ settings)",
                           std::string(kSystem) + " (read, 4 btl_roce_ settings)",
                           "/etc/openmpi/openmpi-mca-params-override.conf (absent)"});
}

TEST_CASE("mca settings: param_files, the long name, OPAL_SYSCONFDIR, the override file",
          "[doctor][mca]") {
    Files f;
    f.content["/job/a.conf"] = "btl_roce_gid_index = 7\n";
    f.content["/job/b.conf"] = "btl_roce_gid_index = 8\nbtl_roce_qkey = 9\n";
    f.content[kUser] = "btl_roce_qkey = 10\n";
    SECTION("OMPI_MCA_mca_base_param_files replaces the default list; the first file wins") {
        auto cfg = resolve_mca(inputs(f, {{"HOME", "/home/u"},
                                          {"OMPI_MCA_mca_base_param_files",
                                           "/job/a.conf,/job/b.conf"}}),
                               {});
        CHECK(cfg.settings.at("btl_roce_gid_index").source == "/job/a.conf:1");
        CHECK(cfg.settings.at("btl_roce_qkey").source == "/job/b.conf:2"); // the user file unread
        CHECK(cfg.files.size() == 3);
        CHECK(cfg.notes == std::vector<std::string>{
                               "parameter files from OMPI_MCA_mca_base_param_files (instead of "
                               "the default ~/.openmpi/mca-params.conf and the system file)"});
    }
    SECTION("the long name OMPI_MCA_opal_btl_roce_* is looked up first") {
        auto cfg = resolve_mca(inputs(f, {{"OMPI_MCA_btl_roce_gid_index", "1"},
                                          {"OMPI_MCA_opal_btl_roce_gid_index", "2"}}),
                               {});
        CHECK(cfg.settings.at("btl_roce_gid_index").value == "2");
        CHECK(cfg.settings.at("btl_roce_gid_index").source ==
              "OMPI_MCA_opal_btl_roce_gid_index");
    }
    SECTION("OPAL_SYSCONFDIR moves the system and override files") {
        f.content["/opt/ompi/etc/openmpi-mca-params.conf"] = "btl_roce_gid_index = 5\n";
        f.content["/opt/ompi/etc/openmpi-mca-params-override.conf"] = "btl_roce_qkey = 6\n";
        auto cfg = resolve_mca(inputs(f, {{"OPAL_SYSCONFDIR", "/opt/ompi/etc"},
                                          {"OMPI_MCA_btl_roce_qkey", "7"}}),
                               {{"btl_roce_qkey", "8", "--qkey", {}}});
        CHECK(cfg.settings.at("btl_roce_gid_index").source ==
              "/opt/ompi/etc/openmpi-mca-params.conf:1");
        // The override file beats the command line and the environment.
        CHECK(cfg.settings.at("btl_roce_qkey").value == "6");
        CHECK(cfg.settings.at("btl_roce_qkey").shadows ==
              std::vector<std::string>{"--qkey", "OMPI_MCA_btl_roce_qkey"});
    }
    SECTION("names roce-doctor does not use are noted, not applied") {
        auto cfg = resolve_mca(inputs(f, {}), {{"btl", "self,vader,roce", "--mca btl", {}}});
        CHECK(cfg.settings.empty());
        CHECK(cfg.notes == std::vector<std::string>{
                               "--mca btl btl: not a setting roce-doctor uses; ignored"});
    }
}

TEST_CASE("roce-doctor: the job's settings decide, and the report says where each came from",
          "[doctor][mca]") {
    testing::Machine none;
    doctor::Env env = none.env();
    Files f;
    f.content[kSystem] = "btl_roce_gid_index = 3\n";
    env.environment = {{"HOME", "/home/u"}, {"OMPI_MCA_btl_roce_if_include", "bond0.3027"}};
    env.ompi_sysconfdir = "/etc/openmpi";
    env.read_file = f.reader();
    const std::vector<std::string> from = {"--from", testing::fixture_dir("mlx5_lag")};

    SECTION("environment: if_include picks the VLAN's GID") {
        env.environment.erase("HOME");
        f.content.clear();
        env.read_file = f.reader();
        auto r = testing::doctor_run(from, env);
        INFO(r.out << r.err);
        CHECK(r.status == 0);
        CHECK_THAT(r.out, contains_text(
                              "setting: btl_roce_if_include = bond0.3027 (from "
                              "OMPI_MCA_btl_roce_if_include)"));
        CHECK_THAT(r.out, contains_text("selection: gid[5] ::ffff:198.19.0.11"));
    }
    SECTION("system file + environment: both apply, and the doctor shows the clash") {
        auto r = testing::doctor_run(from, env);
        INFO(r.out << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, contains_text(
                              "selection: none: btl_roce_gid_index = 3: gid[3] "
                              "::ffff:198.18.0.11 (RoCE v2, bond0, 198.18.0.11/24) is not usable: "
                              "netdev bond0 is not in btl_roce_if_include (bond0.3027)"));
    }
    SECTION("the system file, and the command line over it") {
        env.environment.erase("OMPI_MCA_btl_roce_if_include");
        auto r = testing::doctor_run(from, env);
        INFO(r.out << r.err);
        CHECK_THAT(r.out, contains_text(
                              "setting: btl_roce_gid_index = 3 (from "
                              "/etc/openmpi/openmpi-mca-params.conf:1)"));
        CHECK_THAT(r.out, contains_text("selection: gid[3]"));
        auto cli = from;
        cli.insert(cli.end(), {"--mca", "btl_roce_gid_index", "5"});
        auto r2 = testing::doctor_run(cli, env);
        INFO(r2.out << r2.err);
        CHECK_THAT(r2.out, contains_text(
                               "setting: btl_roce_gid_index = 5 (from --mca btl_roce_gid_index; "
                               "overrides /etc/openmpi/openmpi-mca-params.conf:1)"));
        CHECK_THAT(r2.out, contains_text("selection: gid[5]"));
        CHECK_THAT(r2.out, contains_text(
                               "decided by: btl_roce_gid_index = 5, set explicitly"));
    }
    SECTION("a bad value names its source") {
        env.environment["OMPI_MCA_btl_roce_roce_version"] = "3";
        auto r = testing::doctor_run(from, env);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, contains_text(
                              "btl_roce_roce_version (from OMPI_MCA_btl_roce_roce_version) '3' "
                              "is invalid: use auto, 1 or 2"));
    }
    SECTION("--json carries the effective settings") {
        f.content[kSystem] = "btl_roce_gid_index = 5\n";
        env.read_file = f.reader();
        auto args = from;
        args.push_back("--json");
        auto r = testing::doctor_run(args, env);
        auto j = util::Json::parse(r.out);
        REQUIRE(j.is_ok());
        const util::Json *cfg = j->find("configuration");
        REQUIRE(cfg != nullptr);
        const auto &settings = cfg->find("settings")->items();
        REQUIRE(settings.size() == 2);
        CHECK(settings[0].find("name")->as_string() == "btl_roce_gid_index");
        CHECK(settings[0].find("source")->as_string() ==
              "/etc/openmpi/openmpi-mca-params.conf:1");
        CHECK(settings[1].find("source")->as_string() == "OMPI_MCA_btl_roce_if_include");
        const util::Json &port = j->find("ports")->items().at(0);
        CHECK(port.find("decided_by")->as_string() ==
              "btl_roce_gid_index = 5, set explicitly (the automatic ranking was not used)");
    }
}
