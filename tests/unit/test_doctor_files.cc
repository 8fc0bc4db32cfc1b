// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor's file handling, tried the way an attacker or an unlucky user
// would: --capture into a directory somebody else prepared, --from over a
// capture with links, FIFOs, control bytes and impossible slot numbers, and
// empty option values.
#include <ftw.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "bounded.h"
#include "catch.h"
#include "doctor_test_util.h"
#include "fixtures.h"

using namespace roce;
using roce::testing::doctor_run;
using roce::testing::fixture_dir;
using roce::testing::Machine;
using roce::testing::Run;
using roce::testing::TempDir;

namespace {

constexpr uid_t kOtherUid = 65534; // "nobody": the unprivileged other user
constexpr gid_t kOtherGid = 65534;

void put(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    REQUIRE(f.good());
}

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool am_root() {
    return ::geteuid() == 0;
}

/// Runs fn as uid/gid 65534 in a child process (the caller must be root).
bool as_other_user(const std::function<bool()> &fn) {
    pid_t pid = ::fork();
    if (pid == 0) {
        bool ok = ::setgroups(0, nullptr) == 0 && ::setgid(kOtherGid) == 0 &&
                  ::setuid(kOtherUid) == 0 && fn();
        ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

std::vector<std::string> names_in(const std::string &dir) {
    std::vector<std::string> out;
    auto names = topo::fs::list_dir(dir);
    return names ? *names : out;
}

/// Every entry below `dir` as "mode type path" lines (type f, d, l, o).
std::string tree_modes(const std::string &dir) {
    static std::ostringstream *sink;
    std::ostringstream o;
    sink = &o;
    ::nftw(
        dir.c_str(),
        [](const char *p, const struct stat *st, int, FTW *) {
            char type = S_ISREG(st->st_mode)   ? 'f'
                        : S_ISDIR(st->st_mode) ? 'd'
                        : S_ISLNK(st->st_mode) ? 'l'
                                               : 'o';
            *sink << std::oct << (st->st_mode & 07777) << std::dec << " " << type << " " << p
                  << "\n";
            return 0;
        },
        16, FTW_PHYS);
    return o.str();
}

const std::string kPort = "/sys/class/infiniband/mlx5_bond_0/ports/1";

} // namespace

TEST_CASE("roce-doctor --capture: a directory planted with symlinks is refused, nothing outside "
          "is written",
          "[doctor][files]") {
    TempDir t;
    const std::string victim = t.path() + "/victim";
    const std::string victim_dir = t.path() + "/victim_dir";
    const std::string cap = t.path() + "/roce-capture";
    put(victim, "precious\n");
    REQUIRE(::mkdir(victim_dir.c_str(), 0755) == 0);
    // The attacker pre-creates the directory the man page suggests, with
    // links to files only root may write.
    auto plant = [&]() {
        bool ok = ::mkdir(cap.c_str(), 0755) == 0;
        for (const char *name : {"ip-addr.json", "ip-link.json", "README"}) {
            ok = ok && ::symlink(victim.c_str(), (cap + "/" + name).c_str()) == 0;
        }
        return ok && ::symlink(victim_dir.c_str(), (cap + "/sys").c_str()) == 0;
    };
    if (am_root()) {
        REQUIRE(::chmod(t.path().c_str(), 01777) == 0); // like /tmp
        REQUIRE(as_other_user(plant));
        struct stat st {};
        REQUIRE(::lstat(cap.c_str(), &st) == 0);
        REQUIRE(st.st_uid == kOtherUid);
    } else {
        REQUIRE(plant());
    }
    Machine m("mlx5_lag");
    Run r = doctor_run({"--capture", cap}, m.env());
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Matchers::StartsWith("roce-doctor: writing capture " + cap + ": " +
                                                  cap + " already exists"));
    CHECK(slurp(victim) == "precious\n");
    CHECK(names_in(victim_dir).empty());

    // A link named like the capture directory, to an empty directory the
    // caller owns, is a link all the same: refused, not followed.
    const std::string link = t.path() + "/cap-link";
    REQUIRE(::symlink(victim_dir.c_str(), link.c_str()) == 0);
    Run l = doctor_run({"--capture", link}, m.env());
    CHECK(l.status == 2);
    CHECK_THAT(l.err, Catch::Matchers::StartsWith("roce-doctor: writing capture " + link + ": " +
                                                  link + " is a symbolic link"));
    CHECK(names_in(victim_dir).empty());
}

TEST_CASE("roce-doctor --capture: an empty directory owned by another user is refused",
          "[doctor][files]") {
    if (!am_root()) {
        WARN("skipped: only root can make a directory owned by another user here");
        return;
    }
    TempDir t;
    const std::string cap = t.path() + "/theirs";
    REQUIRE(::mkdir(cap.c_str(), 0777) == 0);
    REQUIRE(::chown(cap.c_str(), kOtherUid, kOtherGid) == 0);
    Machine m("mlx5_lag");
    Run r = doctor_run({"--capture", cap}, m.env());
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.err ==
          "roce-doctor: writing capture " + cap + ": " + cap +
              " is owned by uid 65534, not by you (uid 0): a capture is written only into a "
              "new directory or an empty one you own\n");
    CHECK(names_in(cap).empty());
}

TEST_CASE("roce-doctor --capture: a private new directory, never an existing capture",
          "[doctor][files]") {
    TempDir t;
    const std::string cap = t.path() + "/cap";
    Machine m("mlx5_lag");
    Run r = doctor_run({"--capture", cap}, m.env());
    REQUIRE(r.status == 0);
    // The directory 0700, every directory in it 0700, every file 0600, no links.
    std::string modes = tree_modes(cap);
    std::istringstream lines(modes);
    std::string mode, type, path;
    int files = 0;
    while (lines >> mode >> type >> path) {
        INFO(path);
        CHECK((type == "f" || type == "d"));
        CHECK(mode == (type == "d" ? "700" : "600"));
        files += type == "f";
    }
    CHECK(files > 100);

    // Writing again over an existing capture is refused and changes nothing.
    const std::string readme = slurp(cap + "/README");
    Run again = doctor_run({"--capture", cap}, m.env());
    CHECK(again.status == 2);
    CHECK_THAT(again.err, contains_text(cap + " already exists and is not empty"));
    CHECK(slurp(cap + "/README") == readme);

    // An empty directory of one's own is fine (mkdir first, then capture).
    const std::string own = t.path() + "/own";
    REQUIRE(::mkdir(own.c_str(), 0750) == 0);
    Run mine = doctor_run({"--capture", own}, m.env());
    CHECK(mine.status == 0);
    CHECK(topo::read_capture(own).is_ok());
}

TEST_CASE("roce-doctor --from: a FIFO in a capture is an error within a second, not a hang",
          "[doctor][files]") {
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    std::string fifo;
    SECTION("ip-link.json") {
        fifo = t.path() + "/ip-link.json";
    }
    SECTION("a GID attribute") {
        fifo = t.path() + kPort + "/gids/3";
    }
    REQUIRE(::unlink(fifo.c_str()) == 0);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto r = testing::run_bounded(
        [&](std::string &out) {
            Machine none;
            Run x = doctor_run({"--from", t.path()}, none.env());
            out = x.err;
            return x.status;
        },
        10.0);
    INFO(r.output);
    INFO("took " << r.seconds << " s");
    REQUIRE(r.finished);
    CHECK(r.seconds < 1.0 * testing::kSlowdown);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, contains_text(fifo + " is not a regular file (a FIFO)"));
}

TEST_CASE("roce-doctor --from: links inside a capture are not followed", "[doctor][files]") {
    TempDir t, elsewhere;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    std::string link;
    SECTION("a JSON file") {
        link = t.path() + "/ip-addr.json";
        REQUIRE(::rename(link.c_str(), (elsewhere.path() + "/ip-addr.json").c_str()) == 0);
        REQUIRE(::symlink((elsewhere.path() + "/ip-addr.json").c_str(), link.c_str()) == 0);
    }
    SECTION("an RDMA device directory") {
        link = t.path() + "/sys/class/infiniband/mlx5_bond_0";
        REQUIRE(::rename(link.c_str(), (elsewhere.path() + "/dev").c_str()) == 0);
        REQUIRE(::symlink((elsewhere.path() + "/dev").c_str(), link.c_str()) == 0);
    }
    SECTION("a GID attribute") {
        link = t.path() + kPort + "/gids/3";
        REQUIRE(::rename(link.c_str(), (elsewhere.path() + "/gid").c_str()) == 0);
        REQUIRE(::symlink((elsewhere.path() + "/gid").c_str(), link.c_str()) == 0);
    }
    Machine none;
    Run r = doctor_run({"--from", t.path()}, none.env());
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, contains_text(link + " is a symbolic link"));
}

TEST_CASE("roce-doctor: an empty --from= or --capture= is an error naming the option",
          "[doctor][files]") {
    Machine m("mlx5_lag"); // a live machine with a device: a fall-back would exit 0
    for (const std::vector<std::string> &args :
         {std::vector<std::string>{"--from="}, {"--from", ""}, {"--capture="}}) {
        INFO(args[0]);
        Run r = doctor_run(args, m.env());
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        const std::string opt = args[0].substr(0, args[0].find('='));
        CHECK_THAT(r.err, Catch::Matchers::StartsWith("roce-doctor: " + opt +
                                                      " needs a directory, not an empty value"));
    }
}

TEST_CASE("roce-doctor --from: slot and port numbers beyond what the kernel allows are errors",
          "[doctor][files]") {
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    const std::string zero_gid = "0000:0000:0000:0000:0000:0000:0000:0000\n";
    std::string bad, what;
    SECTION("GID slot 65535") {
        bad = t.path() + kPort + "/gids/65535";
        put(bad, zero_gid);
        what = "GID slot 65535 is beyond the kernel's limit (a GID table has at most 65535 "
               "slots, 0..65534)";
    }
    SECTION("GID slot 2^20 - 1") {
        bad = t.path() + kPort + "/gids/1048575";
        put(bad, zero_gid);
        what = "GID slot 1048575 is beyond the kernel's limit";
    }
    SECTION("pkey slot 65535") {
        bad = t.path() + kPort + "/pkeys/65535";
        put(bad, "0xffff\n");
        what = "pkey slot 65535 is beyond the kernel's limit (a pkey table has at most 65535 "
               "slots, 0..65534)";
    }
    SECTION("port 256") {
        bad = t.path() + "/sys/class/infiniband/mlx5_bond_0/ports/256";
        REQUIRE(::mkdir(bad.c_str(), 0755) == 0);
        what = "port 256 is beyond the kernel's limit (port numbers are 8 bits, at most 255)";
    }
    Machine none;
    Run r = doctor_run({"--from", t.path()}, none.env());
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, contains_text(bad + ": " + what));
}

TEST_CASE("roce-doctor: bytes from files reach messages and reports escaped", "[doctor][files]") {
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    Machine none;
    auto no_raw_controls = [](const std::string &s) {
        for (char c : s) {
            auto u = static_cast<unsigned char>(c);
            if ((u < 0x20 && c != '\n') || u >= 0x7f) {
                return false;
            }
        }
        return true;
    };
    SECTION("a GID file with a terminal title escape") {
        put(t.path() + kPort + "/gids/3", "\x1b]0;owned\x07::1\n");
        Run r = doctor_run({"--from", t.path()}, none.env());
        CHECK(r.status == 2);
        CHECK(no_raw_controls(r.err));
        CHECK_THAT(r.err, contains_text("'\\x1b]0;owned\\x07::1' is not a GID"));
    }
    SECTION("a pkey with a C1 control byte") {
        put(t.path() + kPort + "/pkeys/0", "0x\x9b"
                                           "31m\n");
        Run r = doctor_run({"--from", t.path()}, none.env());
        CHECK(r.status == 2);
        CHECK(no_raw_controls(r.err));
        CHECK_THAT(r.err, contains_text("'0x\\x9b31m' is not a pkey"));
    }
    SECTION("a JSON file with a raw control byte") {
        put(t.path() + "/ip-addr.json", "[\x1b[2J]");
        Run r = doctor_run({"--from", t.path()}, none.env());
        CHECK(r.status == 2);
        CHECK(no_raw_controls(r.err));
        CHECK_THAT(r.err, contains_text("(found '\\x1b')"));
    }
    SECTION("a GID's netdev name with an escape sequence, in the text and JSON reports") {
        put(t.path() + kPort + "/gid_attrs/ndevs/3", "bond0\x1b[8m\n");
        Run r = doctor_run({"--from", t.path()}, none.env());
        CHECK(r.status == 0);
        CHECK(no_raw_controls(r.out));
        CHECK_THAT(r.out, contains_text("bond0\\x1b[8m"));
        Run j = doctor_run({"--from", t.path(), "--json"}, none.env());
        CHECK(j.status == 0);
        CHECK(no_raw_controls(j.out));
        // A capture's strings are made printable when it is read, so the
        // JSON string holds the escaped text itself.
        CHECK_THAT(j.out, contains_text("bond0\\\\x1b[8m"));
    }
}
