// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netns_util.h"

#include <dirent.h>
#include <sched.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "catch.h"

namespace roce::netmon::netns {

namespace {

std::string run_capture(const std::string &cmd, int *status) {
    std::string out;
    FILE *p = popen((cmd + " 2>&1").c_str(), "r");
    if (p == nullptr) {
        *status = -1;
        return "popen failed";
    }
    std::array<char, 512> buf{};
    while (fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) {
        out += buf.data();
    }
    int rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    return out;
}

int count_dir(const char *path) {
    int n = 0;
    DIR *d = opendir(path);
    if (d == nullptr) {
        return -1;
    }
    while (dirent *e = readdir(d)) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

} // namespace

void fresh_netns() {
    REQUIRE(unshare(CLONE_NEWNET) == 0);
    // /proc/sys/net follows the opener's namespace: this is the new one's.
    std::ofstream f("/proc/sys/net/ipv6/conf/default/addr_gen_mode");
    if (f) {
        f << "1\n"; // IN6_ADDR_GEN_MODE_NONE: no fe80:: on new links
    }
}

void sh(const std::string &cmd) {
    int status = 0;
    std::string out = run_capture(cmd, &status);
    INFO("$ " << cmd << "\n" << out);
    REQUIRE(status == 0);
}

int sh_status(const std::string &cmd) {
    int status = 0;
    (void)run_capture(cmd, &status);
    return status;
}

bool kernel_has_link_kind(const std::string &kind, std::string *why) {
    int status = 0;
    std::string out =
        run_capture("unshare -n sh -c 'ip link add nmchk0 type veth peer name nmchk1 && "
                    "ip link add " +
                        std::string(kind == "vlan" ? "link nmchk0 name nmchk0.5 type vlan id 5"
                                                   : "nmchk2 type " + kind) +
                        "'",
                    &status);
    if (status != 0 && why != nullptr) {
        *why = out;
        while (!why->empty() && (why->back() == '\n' || why->back() == ' ')) {
            why->pop_back();
        }
    }
    return status == 0;
}

std::vector<Event> only(const std::vector<Event> &ev, std::initializer_list<EventKind> kinds) {
    std::vector<Event> out;
    for (const auto &e : ev) {
        for (EventKind k : kinds) {
            if (e.kind == k) {
                out.push_back(e);
                break;
            }
        }
    }
    return out;
}

std::vector<std::string> brief(const std::vector<Event> &ev) {
    std::vector<std::string> out;
    for (const auto &e : ev) {
        std::string s = std::string(to_string(e.kind)) + " " + e.netdev;
        if (!e.bond.empty() && e.bond != e.netdev) {
            s += " bond=" + e.bond;
        }
        switch (e.kind) {
        case EventKind::kMtuChanged:
        case EventKind::kLagMemberCountChanged:
            s += " " + std::to_string(e.old_value) + "->" + std::to_string(e.new_value);
            break;
        case EventKind::kActiveSlaveChanged:
            s += " " + e.old_name + "->" + e.new_name;
            break;
        case EventKind::kAddressAdded:
        case EventKind::kAddressRemoved:
            s += " " + e.address.address.to_string() + "/" + std::to_string(e.address.prefix_len);
            break;
        default:
            break;
        }
        out.push_back(s);
    }
    return out;
}

int open_fd_count() {
    return count_dir("/proc/self/fd");
}
int thread_count() {
    return count_dir("/proc/self/task");
}

} // namespace roce::netmon::netns
