// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Fuzz target: reading capture directories. A fixture is copied and harmed
// at random - files and directories turned into links to canary content
// outside the capture, dangling and looping links, FIFOs, sockets, huge
// sparse files, truncated and garbage attributes, odd names, slot numbers
// the kernel cannot have - and then read as a capture (Links::kRefuse) and
// as a sysfs tree (Links::kFollow). Properties: every read ends quickly (the
// whole run is in a child with a deadline, so a hang fails instead of hanging
// make check); an error is a Status with a printable message; a capture read
// never shows canary content (no link was followed) and yields printable
// strings and slot numbers within the kernel's limits.
#include <ftw.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "bounded.h"
#include "catch.h"
#include "fixtures.h"
#include "fuzz_util.h"
#include "topo/readers.h"
#include "topo/sysfs_reader.h"
#include "util/strings.h"

using namespace roce;
using namespace roce::testing::fuzz;
using roce::testing::fixture_dir;
using roce::testing::TempDir;

namespace {

const char *const kCanaryGid = "fe80:0000:0000:0000:dead:beef:0000:0001";
const char *const kCanaryName = "CANARY";

struct Entry {
    std::string path;
    bool dir = false;
};

std::vector<Entry> entries_below(const std::string &root) {
    static std::vector<Entry> *sink;
    std::vector<Entry> out;
    sink = &out;
    ::nftw(
        root.c_str(),
        [](const char *p, const struct stat *st, int, FTW *f) {
            if (f->level > 0) {
                sink->push_back({p, S_ISDIR(st->st_mode)});
            }
            return 0;
        },
        32, FTW_PHYS);
    return out;
}

/// Replaces `path` with a regular file holding `text`. Unlinked first: an
/// earlier harm may have left a FIFO there, which an open for writing would
/// wait on forever (the fuzzer's own hang, found by its watchdog).
void put(const std::string &path, const std::string &text) {
    ::unlink(path.c_str());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

void remove_tree(const std::string &path) {
    ::nftw(
        path.c_str(),
        [](const char *p, const struct stat *, int flag, FTW *) {
            return flag == FTW_DP ? ::rmdir(p) : ::unlink(p);
        },
        32, FTW_DEPTH | FTW_PHYS);
}

/// Moves directory `dir` outside (below `out`), writes canary content into
/// every attribute a reader would take from it, and returns the new path.
std::string canaried_copy(const std::string &dir, const std::string &out, int n) {
    std::string moved = out + "/dir" + std::to_string(n);
    if (::rename(dir.c_str(), moved.c_str()) != 0) {
        return "";
    }
    for (const auto &e : entries_below(moved)) {
        if (e.dir) {
            continue;
        }
        const std::string &p = e.path;
        if (p.find("/gids/") != std::string::npos) {
            put(p, std::string(kCanaryGid) + "\n");
        } else if (p.find("/ndevs/") != std::string::npos || p.find(".json") != std::string::npos) {
            put(p, std::string(kCanaryName) + "\n");
        } else if (p.find("/types/") != std::string::npos) {
            put(p, "RoCE v2\n");
        }
    }
    return moved;
}

/// Harms one random entry of the tree (or adds an odd one).
void harm(Rng &r, const std::string &root, const std::string &outside, int n) {
    std::vector<Entry> all = entries_below(root);
    if (all.empty()) {
        return;
    }
    const Entry e = r.pick(all);
    const std::string &p = e.path;
    const std::string canary_file =
        outside + (p.find("/gids/") != std::string::npos ? "/canary-gid" : "/canary-name");
    switch (r.below(14)) {
    case 0: // a link out of the capture
        if (e.dir) {
            std::string moved = canaried_copy(p, outside, n);
            if (!moved.empty()) {
                ::symlink(moved.c_str(), p.c_str());
            }
        } else {
            ::unlink(p.c_str());
            ::symlink(canary_file.c_str(), p.c_str());
        }
        break;
    case 1: // a relative link out
        if (!e.dir) {
            ::unlink(p.c_str());
            std::string up;
            for (size_t i = root.size(); i < p.size(); ++i) {
                up += p[i] == '/' ? "../" : "";
            }
            ::symlink((up + "../" + outside.substr(outside.rfind('/') + 1) +
                       canary_file.substr(canary_file.rfind('/')))
                          .c_str(),
                      p.c_str());
        }
        break;
    case 2: // dangling, or a loop
        if (!e.dir) {
            ::unlink(p.c_str());
            ::symlink(r.chance(50) ? "/nonexistent/x" : p.substr(p.rfind('/') + 1).c_str(),
                      p.c_str());
        }
        break;
    case 3: // a FIFO
        if (!e.dir) {
            ::unlink(p.c_str());
            ::mkfifo(p.c_str(), 0600);
        }
        break;
    case 4: { // a socket
        if (e.dir) {
            break;
        }
        ::unlink(p.c_str());
        int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        if (s >= 0 && p.size() < sizeof(a.sun_path)) {
            std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
            ::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a));
        }
        if (s >= 0) {
            ::close(s);
        }
        break;
    }
    case 5: // huge and sparse
        if (!e.dir) {
            ::truncate(p.c_str(), static_cast<off_t>(r.chance(50) ? (4u << 20) + 1 : 1ull << 34));
        }
        break;
    case 6: { // truncated
        if (e.dir) {
            break;
        }
        auto text = topo::fs::read_text(p);
        if (text) {
            put(p, text->substr(0, r.below(text->size() + 1)));
        }
        break;
    }
    case 7: // garbage, control bytes included
        if (!e.dir) {
            put(p, random_bytes(r, 64, "0123456789abcdef:x \n\x1b\x07\x9b"));
        }
        break;
    case 8: // gone
        if (e.dir) {
            remove_tree(p);
        } else {
            ::unlink(p.c_str());
        }
        break;
    case 9: // a directory where a file was
        if (!e.dir) {
            ::unlink(p.c_str());
            ::mkdir(p.c_str(), 0755);
        }
        break;
    case 10: { // an odd name next to it
        const std::string dir = e.dir ? p : p.substr(0, p.rfind('/'));
        static const std::vector<std::string> kNames = {
            "\x1b[2J", "a\nb",  " ",   "..x",        std::string(255, 'n'),    "007", "-1", "1e3",
            "65534",   "65535", "256", "4294967296", "99999999999999999999999"};
        const std::string name = r.pick(kNames);
        if (r.chance(50)) {
            put(dir + "/" + name, r.chance(50) ? std::string(kCanaryGid) + "\n" : "0x7fff\n");
        } else {
            ::mkdir((dir + "/" + name).c_str(), 0755);
        }
        break;
    }
    case 11: // empty
        if (!e.dir) {
            put(p, "");
        }
        break;
    case 12: // a directory link, within the capture (still a link)
        if (e.dir && p.find("/ports/") != std::string::npos) {
            remove_tree(p);
            ::symlink(".", p.c_str());
        }
        break;
    default: // a long line
        if (!e.dir) {
            put(p, std::string(r.below(100000), 'f') + "\n");
        }
        break;
    }
}

/// The promises of a successful read, "" when they hold: no canary when no
/// link may be followed, printable strings from read_capture, slots within
/// the kernel's limits, printable warnings.
std::string check_snapshot(const topo::Snapshot &s, bool no_links, bool printable) {
    const std::string text = testing::dump(s);
    if (no_links && (text.find(kCanaryName) != std::string::npos ||
                     text.find("dead:beef") != std::string::npos)) {
        return "canary content read through a link:\n" + util::printable(text, true);
    }
    if (printable && !is_printable(text, true)) {
        return "a capture string is not printable:\n" + util::printable(text, true);
    }
    for (const auto &w : s.warnings) {
        if (!is_printable(w)) {
            return "warning not printable: " + util::printable(w);
        }
    }
    for (const auto &d : s.devices) {
        for (const auto &p : d.ports) {
            if (p.port < 0 || p.port > topo::kMaxPort || p.gid_tbl_len > topo::kMaxGidSlots ||
                p.pkey_tbl_len > topo::kMaxPkeySlots ||
                p.pkeys.size() != static_cast<size_t>(p.pkey_tbl_len)) {
                return "port or table beyond the kernel's limits";
            }
            for (const auto &g : p.gids) {
                if (g.index < 0 || g.index >= p.gid_tbl_len) {
                    return "GID index outside its table";
                }
            }
        }
    }
    return "";
}

std::string check_error(const util::Status &st) {
    if (st.is_ok() || st.code() == util::Code::kInternal || st.message().empty() ||
        !is_printable(st.message())) {
        return "bad error: " + util::printable(st.message());
    }
    return "";
}

/// Reads `root` as a capture and as a sysfs tree; "" when every property
/// holds, else what did not.
std::string read_all_ways(const std::string &root, std::string *outcome) {
    // CPU seconds: a hang shows as the child's deadline, too much work here.
    const double slow = 1.0 * testing::kSlowdown;
    double start = testing::thread_cpu_seconds();
    auto cap = topo::read_capture(root);
    if (testing::thread_cpu_seconds() - start > slow) {
        return "read_capture too slow";
    }
    std::string bad = cap ? check_snapshot(*cap, true, true) : check_error(cap.status());
    if (!bad.empty()) {
        return "read_capture: " + bad;
    }
    *outcome = cap ? "ok" : "error";
    for (auto links : {topo::fs::Links::kRefuse, topo::fs::Links::kFollow}) {
        const topo::fs::Tree tree(root, links);
        std::vector<std::string> warnings;
        start = testing::thread_cpu_seconds();
        auto rdma = topo::read_rdma_sysfs(tree, &warnings);
        auto net = topo::read_netdevs_sysfs(tree, &warnings);
        if (testing::thread_cpu_seconds() - start > slow) {
            return "sysfs readers too slow";
        }
        topo::Snapshot s;
        if (rdma) {
            s.devices = *rdma;
        }
        if (net) {
            s.netdevs = *net;
        }
        s.warnings = warnings;
        bad = !rdma ? check_error(rdma.status()) : !net ? check_error(net.status()) : "";
        bad = bad.empty() ? check_snapshot(s, links == topo::fs::Links::kRefuse, false) : bad;
        if (!bad.empty()) {
            return std::string(links == topo::fs::Links::kRefuse ? "kRefuse" : "kFollow") +
                   " sysfs readers: " + bad;
        }
    }
    return "";
}

char g_hung[128];

/// In the child: SIGALRM after 20 s (times the sanitizer slowdown) of one
/// case writes which case hung and ends the child.
void arm_watchdog(uint64_t seed, size_t i) {
    std::snprintf(g_hung, sizeof(g_hung), "fuzz capture: case %zu (seed %llu) hung\n", i,
                  static_cast<unsigned long long>(seed));
    std::signal(SIGALRM, [](int) {
        ssize_t rc = ::write(2, g_hung, std::strlen(g_hung));
        (void)rc;
        ::_exit(3);
    });
    ::alarm(static_cast<unsigned>(20 * testing::kSlowdown));
}

} // namespace

TEST_CASE("fuzz capture: harmed capture directories read quickly and safely, or fail cleanly",
          "[fuzz][capture]") {
    const uint64_t s = seed(0x63617001);
    const size_t n = cases(100);
    auto run = testing::run_bounded(
        [&](std::string &out) {
            // Hundreds of small files per case: on tmpfs when there is one
            // (creating a file on a busy ext4 took 4 ms here, on tmpfs 0.05).
            if (::access("/dev/shm", W_OK | X_OK) == 0) {
                ::setenv("TMPDIR", "/dev/shm", 1); // the child's environment only
            }
            Rng r(s);
            TempDir work, outside;
            put(outside.path() + "/canary-gid", std::string(kCanaryGid) + "\n");
            put(outside.path() + "/canary-name", std::string(kCanaryName) + "\n");
            size_t ok = 0, err = 0;
            for (size_t i = 0; i < n; ++i) {
                // A case that hangs names itself before the deadline ends all.
                arm_watchdog(s, i);
                const std::string root = work.path() + "/c" + std::to_string(i);
                testing::copy_tree(fixture_dir(r.chance(50) ? "mlx5_lag" : "mlx5_ipv6_only"), root);
                for (int64_t k = 0, m = r.range(1, 4); k < m; ++k) {
                    harm(r, root, outside.path(), static_cast<int>(i * 8 + k));
                }
                std::string outcome;
                std::string bad = read_all_ways(root, &outcome);
                if (!bad.empty()) {
                    out = "case " + std::to_string(i) + " (seed " + std::to_string(s) + "): " + bad;
                    return 1;
                }
                (outcome == "ok" ? ok : err) += 1;
                remove_tree(root);
            }
            ::alarm(0);
            out = std::to_string(ok) + " " + std::to_string(err);
            return 0;
        },
        (30.0 + 1.0 * static_cast<double>(n)) * testing::kSlowdown);
    INFO(run.output);
    REQUIRE(run.finished); // a hang (a FIFO read) ends here
    REQUIRE(run.exit_code == 0);
    size_t ok = 0, err = 0;
    std::sscanf(run.output.c_str(), "%zu %zu", &ok, &err);
    WARN("fuzz capture: " << n << " harmed captures in " << run.seconds << " s: " << ok << " read, "
                          << err << " refused");
    // Both outcomes must be reached, or the target tests little.
    CHECK(ok > n / 20);
    CHECK(err > n / 20);
}
