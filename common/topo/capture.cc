// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/capture.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "topo/fs.h"
#include "util/strings.h"

extern char **environ;

namespace roce::topo {

using util::Code;
using util::Result;
using util::Status;

namespace {

/// Where a capture is copied from (the kernel's tree, links followed as
/// sysfs needs) and to (a new private directory, nothing followed). Both use
/// the same relative paths ("sys/class/net/bond0/mtu").
struct Copy {
    const fs::Tree &src;
    fs::OutTree &out;
    std::vector<std::string> *warnings;

    void warn(std::string line) const {
        if (warnings != nullptr) {
            warnings->push_back(std::move(line));
        }
    }
};

/// Copies REL when readable. Optional attributes that fail to read are
/// expected (EINVAL for empty GID slots and a down carrier).
Status copy_attr(const Copy &c, const std::string &rel, bool optional) {
    auto text = c.src.read_text(rel);
    if (!text) {
        if (!optional) {
            c.warn(text.status().message() + "; not in the capture");
        }
        return Status::ok();
    }
    return c.out.write_file(rel, *text);
}

Status copy_numbered(const Copy &c, const std::string &dir, bool optional) {
    auto names = c.src.list_dir(dir);
    if (!names) {
        return Status::ok();
    }
    for (const auto &n : *names) {
        Status st = copy_attr(c, dir + "/" + n, optional);
        if (!st) {
            return st;
        }
    }
    return Status::ok();
}

Status copy_rdma(const Copy &c) {
    const std::string top = "sys/class/infiniband";
    auto devs = c.src.list_dir(top);
    if (!devs) {
        return c.out.make_dirs(top);
    }
    for (const auto &dev : *devs) {
        const std::string d = top + "/" + dev;
        Status st = c.out.make_dirs(d);
        for (const char *a : {"node_type", "hca_type", "fw_ver", "board_id", "node_guid"}) {
            st = st ? copy_attr(c, d + "/" + a, true) : st;
        }
        if (!st) {
            return st;
        }
        auto ports = c.src.list_dir(d + "/ports");
        for (const auto &p : ports ? *ports : std::vector<std::string>{}) {
            const std::string port = d + "/ports/" + p;
            for (const char *a : {"state", "phys_state", "link_layer", "rate"}) {
                st = st ? copy_attr(c, port + "/" + a, false) : st;
            }
            st = st ? copy_numbered(c, port + "/gids", false) : st;
            st = st ? copy_numbered(c, port + "/gid_attrs/types", true) : st;
            st = st ? copy_numbered(c, port + "/gid_attrs/ndevs", true) : st;
            st = st ? copy_numbered(c, port + "/pkeys", false) : st;
            if (!st) {
                return st;
            }
        }
    }
    return Status::ok();
}

Status copy_netdev(const Copy &c, const std::string &dir) {
    Status st = c.out.make_dirs(dir);
    for (const char *a : {"ifindex", "mtu", "operstate", "address", "type", "uevent"}) {
        st = st ? copy_attr(c, dir + "/" + a, false) : st;
    }
    st = st ? copy_attr(c, dir + "/carrier", true) : st;
    st = st ? copy_attr(c, dir + "/speed", true) : st; // fails when down or virtual
    for (const char *a : {"mode", "slaves", "active_slave", "ad_num_ports", "xmit_hash_policy",
                          "miimon", "lacp_rate"}) {
        st = st ? copy_attr(c, dir + "/bonding/" + a, true) : st;
    }
    if (!st) {
        return st;
    }
    auto entries = c.src.list_dir(dir);
    for (const auto &e : entries ? *entries : std::vector<std::string>{}) {
        if (e == "master" || e.rfind("lower_", 0) == 0 || e.rfind("upper_", 0) == 0) {
            // Stored as a file holding the target, not as a symlink: see
            // fs::Tree::link_name.
            auto target = c.src.link_name(dir + "/" + e);
            if (target) {
                st = c.out.write_file(dir + "/" + e, "../" + *target + "\n");
                if (!st) {
                    return st;
                }
            }
        }
    }
    return Status::ok();
}

Status copy_net(const Copy &c) {
    const std::string top = "sys/class/net";
    auto names = c.src.list_dir(top);
    if (!names) {
        c.warn(names.status().message() + "; no netdevs in the capture");
        return c.out.make_dirs(top);
    }
    Status st = c.out.make_dirs(top);
    for (const auto &n : *names) {
        const std::string rel = top + "/" + n;
        st = st ? (c.src.is_dir(rel) ? copy_netdev(c, rel) : copy_attr(c, rel, true)) : st;
    }
    return st ? copy_attr(c, "proc/net/vlan/config", true) : st;
}

/// Reads both pipes until EOF without risking a deadlock on a full pipe.
void drain(int out_fd, int err_fd, std::string &out, std::string &err) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    int open = 2;
    char buf[4096];
    while (open > 0) {
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
            if (n > 0) {
                (i == 0 ? out : err).append(buf, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                fds[i].fd = -1;
                --open;
            }
        }
    }
}

} // namespace

Status write_capture(const std::string &dir, const CaptureInputs &in,
                     std::vector<std::string> *warnings) {
    const std::string context = "writing capture " + util::printable(dir);
    auto out = fs::OutTree::create(dir);
    if (!out) {
        return out.status().with_context(context);
    }
    const fs::Tree src(in.sysfs_root, fs::Links::kFollow);
    const Copy c{src, out.value(), warnings};
    Status st = copy_rdma(c);
    st = st ? copy_net(c) : st;
    st = st ? out->write_file("ip-addr.json", in.ip_addr_json) : st;
    st = st ? out->write_file("ip-link.json", in.ip_link_json) : st;
    st = st ? out->write_file("README",
                              "A roce-doctor capture: the sysfs files the RoCE address selection "
                              "reads (sys/class/infiniband, sys/class/net, proc/net/vlan/config), "
                              "`ip -j addr show` (ip-addr.json) and `ip -j -d link show` "
                              "(ip-link.json).\nReplay: roce-doctor --from " +
                                  dir + "\n" + in.note + "\n")
            : st;
    return st.with_context(context);
}

Result<std::string> run_command(const std::vector<std::string> &argv) {
    if (argv.empty()) {
        return Status(Code::kInvalidArgument, "run_command: empty command");
    }
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        return Status::from_errno(errno, "pipe");
    }
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
        int err = errno;
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        return Status::from_errno(err, "pipe");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    std::vector<char *> args;
    for (const auto &a : argv) {
        args.push_back(const_cast<char *>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    std::string out, err;
    if (rc == 0) {
        drain(out_pipe[0], err_pipe[0], out, err);
    }
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    std::string cmd = util::join(argv, " ");
    if (rc != 0) {
        return Status::from_errno(rc, "running `" + cmd + "`");
    }
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        std::string first = util::printable(err.substr(0, err.find('\n')));
        return Status(Code::kUnavailable,
                      util::format("`%s` %s %d%s%s", cmd.c_str(),
                                   WIFEXITED(wstatus) ? "exited with status" : "died of signal",
                                   WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus),
                                   first.empty() ? "" : ": ", first.c_str()));
    }
    return out;
}

} // namespace roce::topo
