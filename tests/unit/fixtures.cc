// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "fixtures.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "catch.h"
#include "topo/fs.h"
#include "topo/readers.h"

namespace roce::testing {

std::string fixture_dir(const std::string &name) { return std::string(ROCE_FIXTURES) + "/" + name; }

select::Selection lag_selection(int gid_index) {
    const topo::Snapshot &s = fixture("mlx5_lag");
    select::Options o;
    o.gid_index = gid_index;
    auto pc = select::select_port(s, s.devices[0], s.devices[0].ports[0], o, nullptr, false);
    REQUIRE(pc.ok());
    return *pc.selection;
}

const topo::Snapshot &fixture(const std::string &name) {
    static std::map<std::string, topo::Snapshot> cache;
    auto it = cache.find(name);
    if (it == cache.end()) {
        auto snap = topo::read_capture(fixture_dir(name));
        if (!snap) {
            FAIL("fixture " << name << ": " << snap.status().to_string());
        }
        it = cache.emplace(name, std::move(snap.value())).first;
    }
    return it->second;
}

TempDir::TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/roce-test-XXXXXX";
    char *p = mkdtemp(tmpl.data());
    if (p == nullptr) {
        FAIL("mkdtemp " << tmpl << " failed");
    }
    path_ = p;
}

TempDir::~TempDir() {
    nftw(
        path_.c_str(),
        [](const char *p, const struct stat *, int flag, FTW *) {
            return flag == FTW_DP ? rmdir(p) : unlink(p);
        },
        16, FTW_DEPTH | FTW_PHYS);
}

void write_file(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    REQUIRE(f.good());
}

void copy_tree(const std::string &from, const std::string &to) {
    REQUIRE((::mkdir(to.c_str(), 0755) == 0 || errno == EEXIST));
    auto names = topo::fs::list_dir(from);
    REQUIRE(names.is_ok());
    for (const auto &n : *names) {
        std::string src = from + "/" + n, dst = to + "/" + n;
        struct stat st {};
        REQUIRE(lstat(src.c_str(), &st) == 0);
        if (S_ISLNK(st.st_mode)) {
            char buf[4096];
            ssize_t len = readlink(src.c_str(), buf, sizeof(buf) - 1);
            REQUIRE(len > 0);
            REQUIRE(symlink(std::string(buf, static_cast<size_t>(len)).c_str(), dst.c_str()) == 0);
        } else if (S_ISDIR(st.st_mode)) {
            copy_tree(src, dst);
        } else {
            auto text = topo::fs::read_text(src);
            REQUIRE(text.is_ok());
            write_file(dst, *text);
        }
    }
}

std::string dump(const topo::Snapshot &s, bool with_active_mtu) {
    std::ostringstream o;
    for (const auto &d : s.devices) {
        o << "device " << d.name << " ports " << d.phys_port_cnt << " lag " << d.num_lag_ports
          << "\n";
        for (const auto &p : d.ports) {
            o << "  port " << p.port << " " << topo::to_string(p.state) << " "
              << topo::to_string(p.link_layer) << " mtu "
              << (with_active_mtu ? p.active_mtu : -1) << " gids " << p.gid_tbl_len << " pkeys "
              << p.pkey_tbl_len << "\n";
            for (const auto &g : p.gids) {
                o << "    gid[" << g.index << "] " << topo::gid_to_string(g.gid) << " "
                  << topo::to_string(g.type) << " " << g.netdev << " ifindex " << g.netdev_ifindex
                  << "\n";
            }
            for (size_t i = 0; i < p.pkeys.size(); ++i) {
                o << "    pkey[" << i << "] " << p.pkeys[i] << "\n";
            }
        }
    }
    for (const auto &n : s.netdevs) {
        o << "netdev " << n.name << " ifindex " << n.ifindex << " kind '" << n.kind << "' mtu "
          << n.mtu << " " << topo::to_string(n.operstate) << " carrier " << n.carrier << " mac "
          << n.mac << " master '" << n.master << "' parent '" << n.parent << "' vlan "
          << n.vlan_id << " speed " << n.speed_mbps << "\n";
        if (n.bond) {
            o << "  bond " << topo::to_string(n.bond->mode) << " slaves";
            for (const auto &sl : n.bond->slaves) {
                o << " " << sl;
            }
            o << " active '" << n.bond->active_slave << "' ad_num_ports " << n.bond->ad_num_ports
              << " hash " << n.bond->xmit_hash_policy << " miimon " << n.bond->miimon_ms << "\n";
        }
        for (const auto &a : n.addresses) {
            o << "  addr " << a.address.to_string() << "/" << a.prefix_len << "\n";
        }
    }
    return o.str();
}

} // namespace roce::testing
