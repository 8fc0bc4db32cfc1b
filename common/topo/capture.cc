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

/// Copies SRC/rel to DST/rel when readable. Optional attributes that fail to
/// read are expected (EINVAL for empty GID slots and a down carrier).
Status copy_attr(const std::string &src_dir, const std::string &dst_dir, const std::string &rel,
                 bool optional, std::vector<std::string> *warnings) {
    auto text = fs::read_text(fs::join(src_dir, rel));
    if (!text) {
        if (!optional && warnings) {
            warnings->push_back(text.status().message() + "; not in the capture");
        }
        return Status::ok();
    }
    std::string dst = fs::join(dst_dir, rel);
    Status st = fs::make_dirs(dst.substr(0, dst.find_last_of('/')));
    if (!st) {
        return st;
    }
    return fs::write_text(dst, *text);
}

Status copy_numbered(const std::string &src_dir, const std::string &dst_dir,
                     const std::string &sub, bool optional, std::vector<std::string> *warnings) {
    auto names = fs::list_dir(fs::join(src_dir, sub));
    if (!names) {
        return Status::ok();
    }
    for (const auto &n : *names) {
        Status st = copy_attr(src_dir, dst_dir, sub + "/" + n, optional, warnings);
        if (!st) {
            return st;
        }
    }
    return Status::ok();
}

Status copy_rdma(const std::string &root, const std::string &dir,
                 std::vector<std::string> *warnings) {
    std::string src = fs::join(root, "sys/class/infiniband");
    auto devs = fs::list_dir(src);
    if (!devs) {
        return fs::make_dirs(fs::join(dir, "sys/class/infiniband"));
    }
    for (const auto &dev : *devs) {
        std::string sdev = fs::join(src, dev);
        std::string ddev = fs::join(dir, "sys/class/infiniband/" + dev);
        for (const char *a : {"node_type", "hca_type", "fw_ver", "board_id", "node_guid"}) {
            Status st = copy_attr(sdev, ddev, a, true, warnings);
            if (!st) {
                return st;
            }
        }
        auto ports = fs::list_dir(fs::join(sdev, "ports"));
        for (const auto &p : ports ? *ports : std::vector<std::string>{}) {
            std::string sp = fs::join(sdev, "ports/" + p);
            std::string dp = fs::join(ddev, "ports/" + p);
            for (const char *a : {"state", "phys_state", "link_layer", "rate"}) {
                Status st = copy_attr(sp, dp, a, false, warnings);
                if (!st) {
                    return st;
                }
            }
            Status st = copy_numbered(sp, dp, "gids", false, warnings);
            st = st ? copy_numbered(sp, dp, "gid_attrs/types", true, warnings) : st;
            st = st ? copy_numbered(sp, dp, "gid_attrs/ndevs", true, warnings) : st;
            st = st ? copy_numbered(sp, dp, "pkeys", false, warnings) : st;
            if (!st) {
                return st;
            }
        }
    }
    return Status::ok();
}

Status copy_netdev(const std::string &sdir, const std::string &ddir,
                   std::vector<std::string> *warnings) {
    Status st = fs::make_dirs(ddir);
    for (const char *a : {"ifindex", "mtu", "operstate", "address", "type", "uevent"}) {
        st = st ? copy_attr(sdir, ddir, a, false, warnings) : st;
    }
    st = st ? copy_attr(sdir, ddir, "carrier", true, warnings) : st;
    for (const char *a : {"mode", "slaves", "active_slave", "ad_num_ports", "xmit_hash_policy",
                          "miimon", "lacp_rate"}) {
        st = st ? copy_attr(sdir, ddir, std::string("bonding/") + a, true, warnings) : st;
    }
    if (!st) {
        return st;
    }
    auto entries = fs::list_dir(sdir);
    for (const auto &e : entries ? *entries : std::vector<std::string>{}) {
        if (e == "master" || e.rfind("lower_", 0) == 0 || e.rfind("upper_", 0) == 0) {
            // Stored as a file holding the target, not as a symlink: see fs::link_name.
            auto target = fs::link_name(fs::join(sdir, e));
            if (target) {
                st = fs::write_text(fs::join(ddir, e), "../" + *target + "\n");
                if (!st) {
                    return st;
                }
            }
        }
    }
    return Status::ok();
}

Status copy_net(const std::string &root, const std::string &dir,
                std::vector<std::string> *warnings) {
    std::string src = fs::join(root, "sys/class/net");
    auto names = fs::list_dir(src);
    if (!names) {
        if (warnings) {
            warnings->push_back(names.status().message() + "; no netdevs in the capture");
        }
        return fs::make_dirs(fs::join(dir, "sys/class/net"));
    }
    for (const auto &n : *names) {
        std::string s = fs::join(src, n);
        Status st = fs::is_dir(s) ? copy_netdev(s, fs::join(dir, "sys/class/net/" + n), warnings)
                                  : copy_attr(src, fs::join(dir, "sys/class/net"), n, true, warnings);
        if (!st) {
            return st;
        }
    }
    return copy_attr(root, dir, "proc/net/vlan/config", true, warnings);
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
    Status st = fs::make_dirs(dir);
    st = st ? copy_rdma(in.sysfs_root, dir, warnings) : st;
    st = st ? copy_net(in.sysfs_root, dir, warnings) : st;
    st = st ? fs::write_text(fs::join(dir, "ip-addr.json"), in.ip_addr_json) : st;
    st = st ? fs::write_text(fs::join(dir, "ip-link.json"), in.ip_link_json) : st;
    st = st ? fs::write_text(fs::join(dir, "README"),
                             "A roce-doctor capture: the sysfs files the RoCE address selection "
                             "reads (sys/class/infiniband, sys/class/net, proc/net/vlan/config), "
                             "`ip -j addr show` (ip-addr.json) and `ip -j -d link show` "
                             "(ip-link.json).\nReplay: roce-doctor --from " +
                                 dir + "\n" + in.note + "\n")
            : st;
    return st.with_context("writing capture " + dir);
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
        std::string first = err.substr(0, err.find('\n'));
        return Status(Code::kUnavailable,
                      util::format("`%s` %s %d%s%s", cmd.c_str(),
                                   WIFEXITED(wstatus) ? "exited with status" : "died of signal",
                                   WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus),
                                   first.empty() ? "" : ": ", first.c_str()));
    }
    return out;
}

} // namespace roce::topo
