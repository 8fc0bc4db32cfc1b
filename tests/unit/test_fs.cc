// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// topo::fs: the reading rules (regular files only, a size cap, no link at
// the end of a path), the two link policies (the kernel's sysfs is made of
// links; a capture may hold none), and OutTree, which never follows or
// overwrites anything.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "bounded.h"
#include "catch.h"
#include "fixtures.h"
#include "topo/fs.h"
#include "topo/readers.h"
#include "topo/sysfs_reader.h"
#include "util/strings.h"

using namespace roce;
using roce::testing::fixture_dir;
using roce::testing::TempDir;
using topo::fs::Links;
using topo::fs::OutTree;
using topo::fs::Tree;
using util::Code;

TEST_CASE("fs: the live /sys and /proc read through their links", "[topo][fs]") {
    const Tree live("/", Links::kFollow);
    if (!live.is_dir("sys/class/net/lo")) {
        WARN("skipped: no /sys/class/net/lo here");
        return;
    }
    // /sys/class/net/lo is a link into /sys/devices: followed for the
    // kernel's tree, refused for a capture-like one.
    CHECK(live.is_link("sys/class/net/lo"));
    auto mtu = live.read_line("sys/class/net/lo/mtu"); // st_size says 4096
    REQUIRE(mtu.is_ok());
    CHECK(util::parse_int(*mtu).value_or(0) > 0);
    auto status = live.read_text("proc/self/status"); // st_size says 0
    REQUIRE(status.is_ok());
    CHECK(status->find("Name:") == 0);
    auto nd = topo::read_netdevs_sysfs(live, nullptr);
    REQUIRE(nd.is_ok());
    bool lo = false;
    for (const auto &n : *nd) {
        lo = lo || (n.name == "lo" && n.mtu > 0 && n.ifindex > 0);
    }
    CHECK(lo);

    const Tree strict("/", Links::kRefuse);
    CHECK_FALSE(strict.is_dir("sys/class/net/lo"));
    auto refused = strict.read_line("sys/class/net/lo/mtu");
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().message() ==
          "/sys/class/net/lo is a symbolic link; links inside a capture are not followed (a "
          "capture holds only directories and regular files)");
}

TEST_CASE("fs: a sysfs-shaped tree with device links reads under kFollow, not as a capture",
          "[topo][fs]") {
    TempDir t;
    testing::copy_tree(fixture_dir("mlx5_lag"), t.path());
    const std::string cls = t.path() + "/sys/class/infiniband/mlx5_bond_0";
    REQUIRE(::mkdir((t.path() + "/sys/devices").c_str(), 0755) == 0);
    REQUIRE(::rename(cls.c_str(), (t.path() + "/sys/devices/mlx5_bond_0").c_str()) == 0);
    REQUIRE(::symlink("../../devices/mlx5_bond_0", cls.c_str()) == 0);

    auto sysfs = topo::read_rdma_sysfs(Tree(t.path(), Links::kFollow), nullptr);
    REQUIRE(sysfs.is_ok());
    REQUIRE(sysfs->size() == 1);
    CHECK((*sysfs)[0].ports.at(0).gids.size() == 8);

    auto capture = topo::read_capture(t.path());
    REQUIRE_FALSE(capture.is_ok());
    CHECK(capture.status().code() == Code::kInvalidArgument);
    CHECK_THAT(capture.status().message(),
               contains_text(cls + " is a symbolic link; links inside a capture are "
                                   "not followed"));
}

TEST_CASE("fs: only regular files are read, and none past the cap", "[topo][fs]") {
    TempDir t;
    const Tree tree(t.path(), Links::kRefuse);
    const Tree live(t.path(), Links::kFollow);
    SECTION("a FIFO, for either policy, at once") {
        REQUIRE(::mkfifo((t.path() + "/fifo").c_str(), 0600) == 0);
        for (const Tree *tr : {&tree, &live}) {
            auto start = std::chrono::steady_clock::now();
            auto r = tr->read_text("fifo");
            REQUIRE_FALSE(r.is_ok());
            CHECK(r.status().message() == t.path() + "/fifo is not a regular file (a FIFO)");
            CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
        }
    }
    SECTION("a socket, a device, a directory") {
        int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        REQUIRE(s >= 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        const std::string sock = t.path() + "/sock";
        REQUIRE(sock.size() < sizeof(a.sun_path));
        std::memcpy(a.sun_path, sock.c_str(), sock.size() + 1);
        REQUIRE(::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
        ::close(s);
        CHECK(tree.read_text("sock").status().message() ==
              sock + " is not a regular file (a socket)");
        CHECK(topo::fs::read_text("/dev/null").status().message() ==
              "/dev/null is not a regular file (a character device)");
        CHECK(tree.read_text("").status().message() ==
              t.path() + " is not a regular file (a directory)");
    }
    SECTION("the cap: exactly the cap reads, one byte more does not") {
        const size_t cap = 4096;
        testing::write_file(t.path() + "/full", std::string(cap, 'x'));
        testing::write_file(t.path() + "/over", std::string(cap + 1, 'x'));
        auto full = tree.read_text("full", cap);
        REQUIRE(full.is_ok());
        CHECK(full->size() == cap);
        auto over = tree.read_text("over", cap);
        REQUIRE_FALSE(over.is_ok());
        CHECK(over.status().code() == Code::kResourceExhausted);
        CHECK(over.status().message() == t.path() + "/over is larger than 4096 bytes, too big for "
                                                    "a sysfs attribute or a capture file");
    }
    SECTION("a huge sparse file is refused by its size, without reading it") {
        const std::string huge = t.path() + "/huge";
        testing::write_file(huge, "");
        REQUIRE(::truncate(huge.c_str(), 64LL << 30) == 0); // 64 GiB of holes
        auto start = std::chrono::steady_clock::now();
        auto r = tree.read_text("huge");
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == Code::kResourceExhausted);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200));
    }
    SECTION("a link as the last component, for either policy") {
        testing::write_file(t.path() + "/target", "x\n");
        REQUIRE(::symlink("target", (t.path() + "/link").c_str()) == 0);
        CHECK(tree.read_text("link").status().message() ==
              t.path() + "/link is a symbolic link; links inside a capture are not followed (a "
                         "capture holds only directories and regular files)");
        CHECK(live.read_text("link").status().message() ==
              t.path() + "/link is a symbolic link where a regular file belongs; not followed");
        auto name = tree.link_name("link"); // the text of a link is read, not followed
        REQUIRE(name.is_ok());
        CHECK(*name == "target");
    }
    SECTION("'..' does not leave a capture") {
        REQUIRE(::mkdir((t.path() + "/d").c_str(), 0755) == 0);
        auto r = tree.read_text("d/../../etc/passwd");
        REQUIRE_FALSE(r.is_ok());
        CHECK_THAT(r.status().message(), contains_text("'..' does not stay inside"));
    }
}

TEST_CASE("fs: OutTree creates, never follows, never overwrites", "[topo][fs]") {
    TempDir t;
    const std::string root = t.path() + "/out";
    auto out = OutTree::create(root);
    REQUIRE(out.is_ok());
    struct stat st {};
    REQUIRE(::stat(root.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(out->write_file("a/b/c", "1").is_ok());
    REQUIRE(out->write_file("a/b/d", "2").is_ok());
    REQUIRE(out->make_dirs("a/b").is_ok()); // its own directories are reused
    REQUIRE(::stat((root + "/a/b/c").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat((root + "/a/b").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    auto twice = out->write_file("a/b/c", "x");
    REQUIRE_FALSE(twice.is_ok());
    CHECK(twice.message() == root + "/a/b/c already exists; a capture file is never overwritten");

    // Something planted while the tree is being written fails the write.
    testing::write_file(t.path() + "/victim", "precious");
    REQUIRE(::symlink((t.path() + "/victim").c_str(), (root + "/a/planted").c_str()) == 0);
    CHECK_FALSE(out->write_file("a/planted", "x").is_ok());
    REQUIRE(::mkdir((root + "/sys").c_str(), 0777) == 0);
    auto dir = out->write_file("sys/class", "x");
    REQUIRE_FALSE(dir.is_ok());
    CHECK(dir.message() == root + "/sys already exists: something else is writing into the "
                                  "capture directory");
    REQUIRE(::symlink(t.path().c_str(), (root + "/lnk").c_str()) == 0);
    CHECK_FALSE(out->write_file("lnk/x", "x").is_ok());
    CHECK(*topo::fs::read_text(t.path() + "/victim") == "precious");
    CHECK_FALSE(::access((t.path() + "/x").c_str(), F_OK) == 0);

    // Existing: a file, a link, a non-empty directory are refused.
    CHECK(OutTree::create(t.path() + "/victim").status().message() ==
          t.path() + "/victim already exists and is not a directory: a capture is written only "
                     "into a new directory or an empty one you own");
    CHECK(OutTree::create(root + "/lnk").status().message() ==
          root + "/lnk is a symbolic link: a capture is written only into a new directory or an "
                 "empty one you own");
    CHECK(OutTree::create(root).status().message() ==
          root + " already exists and is not empty: a capture is written only into a new "
                 "directory or an empty one you own");
    CHECK(OutTree::create(t.path() + "/no/such/parent").status().message() ==
          "mkdir " + t.path() + "/no/such/parent failed: No such file or directory (2)");
}
