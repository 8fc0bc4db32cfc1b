// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/nl_socket.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

#include "netmon/nl_parse.h"
#include "util/strings.h"

namespace roce::netmon {

namespace {

using util::Code;
using util::Status;

// libnl reports errors as -NLE_*; keep its text and, when one was involved,
// the errno the caller can branch on.
Status nl_error(int nlerr, const char *what, int sys_errno) {
    return Status(sys_errno != 0 ? util::code_from_errno(sys_errno) : Code::kUnavailable,
                  util::format("%s failed: %s", what, nl_geterror(nlerr)), sys_errno);
}

// Large enough for the biggest skb a dump fills (the kernel caps dump
// buffers at 32 KiB), so no datagram is ever truncated and libnl does not
// need a MSG_PEEK round trip per read.
constexpr int kMsgBufSize = 64 * 1024;

struct MsgDeleter {
    void operator()(nl_msg *m) const noexcept { nlmsg_free(m); }
};
using MsgPtr = std::unique_ptr<nl_msg, MsgDeleter>;

} // namespace

util::Result<std::unique_ptr<NlSocket>> NlSocket::open(const Options &opt) {
    std::unique_ptr<NlSocket> s(new NlSocket());
    s->sk_ = nl_socket_alloc();
    if (s->sk_ == nullptr) {
        return Status(Code::kResourceExhausted, "nl_socket_alloc failed");
    }
    // Notifications carry sequence number 0 and dump replies ours: libnl's
    // sequence check would reject the former.
    nl_socket_disable_seq_check(s->sk_);
    nl_socket_disable_auto_ack(s->sk_);
    errno = 0;
    int rc = nl_connect(s->sk_, NETLINK_ROUTE);
    if (rc < 0) {
        return nl_error(rc, "nl_connect(NETLINK_ROUTE)", errno);
    }
    if (opt.subscribe) {
        errno = 0;
        rc = nl_socket_add_memberships(s->sk_, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
                                       RTNLGRP_IPV6_IFADDR, 0);
        if (rc < 0) {
            return nl_error(rc, "joining RTNLGRP_LINK/IPV4_IFADDR/IPV6_IFADDR", errno);
        }
    }
    errno = 0;
    rc = nl_socket_set_nonblocking(s->sk_);
    if (rc < 0) {
        return nl_error(rc, "nl_socket_set_nonblocking", errno);
    }
    nl_socket_disable_msg_peek(s->sk_);
    rc = nl_socket_set_msg_buf_size(s->sk_, kMsgBufSize);
    if (rc < 0) {
        return nl_error(rc, "nl_socket_set_msg_buf_size", 0);
    }
    if (opt.rcvbuf_bytes > 0) {
        // After nl_connect: it resets the buffers to libnl's 32 KiB default.
        int fd = nl_socket_get_fd(s->sk_);
        int v = opt.rcvbuf_bytes;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0 &&
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0) {
            return Status::from_errno(errno, util::format("setsockopt(SO_RCVBUF, %d)", v));
        }
    }
    return s;
}

NlSocket::~NlSocket() {
    if (sk_ != nullptr) {
        nl_socket_free(sk_); // closes the fd
    }
}

int NlSocket::fd() const noexcept {
    return nl_socket_get_fd(sk_);
}

uint32_t NlSocket::portid() const noexcept {
    return nl_socket_get_local_port(sk_);
}

int NlSocket::rcvbuf() const noexcept {
    int v = 0;
    socklen_t len = sizeof(v);
    return getsockopt(fd(), SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? v : -1;
}

util::Result<uint32_t> NlSocket::request_dump(uint16_t rtm_type) {
    MsgPtr msg(nlmsg_alloc_simple(rtm_type, NLM_F_REQUEST | NLM_F_DUMP));
    if (!msg) {
        return Status(Code::kResourceExhausted, "nlmsg_alloc_simple failed");
    }
    int rc = 0;
    if (rtm_type == RTM_GETLINK) {
        ifinfomsg ifi{};
        ifi.ifi_family = AF_UNSPEC;
        rc = nlmsg_append(msg.get(), &ifi, sizeof(ifi), NLMSG_ALIGNTO);
        if (rc == 0) {
            // Statistics are half of every link message and the model has no use for them.
            rc = nla_put_u32(msg.get(), IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        }
    } else {
        ifaddrmsg ifa{};
        ifa.ifa_family = AF_UNSPEC;
        rc = nlmsg_append(msg.get(), &ifa, sizeof(ifa), NLMSG_ALIGNTO);
    }
    if (rc < 0) {
        return nl_error(rc, "building a dump request", 0);
    }
    errno = 0;
    rc = nl_send_auto(sk_, msg.get());
    if (rc < 0) {
        return nl_error(
            rc, util::format("sending the %s dump request", nl_type_name(rtm_type)).c_str(), errno);
    }
    return nlmsg_hdr(msg.get())->nlmsg_seq;
}

util::Result<uint32_t> NlSocket::request_link(int ifindex) {
    MsgPtr msg(nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST));
    if (!msg) {
        return Status(Code::kResourceExhausted, "nlmsg_alloc_simple failed");
    }
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex;
    int rc = nlmsg_append(msg.get(), &ifi, sizeof(ifi), NLMSG_ALIGNTO);
    if (rc == 0) {
        rc = nla_put_u32(msg.get(), IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    }
    if (rc < 0) {
        return nl_error(rc, "building an RTM_GETLINK request", 0);
    }
    errno = 0;
    rc = nl_send_auto(sk_, msg.get());
    if (rc < 0) {
        return nl_error(rc, util::format("RTM_GETLINK for ifindex %d", ifindex).c_str(), errno);
    }
    return nlmsg_hdr(msg.get())->nlmsg_seq;
}

util::Result<NlSocket::Read> NlSocket::read(const std::function<void(const nlmsghdr *)> &fn) {
    sockaddr_nl from{};
    unsigned char *buf = nullptr;
    errno = 0;
    int n = nl_recv(sk_, &from, &buf, nullptr);
    std::unique_ptr<unsigned char, decltype(&std::free)> owned(buf, &std::free);
    if (n == -NLE_AGAIN || n == 0) {
        return Read::kAgain;
    }
    if (n == -NLE_NOMEM && errno == ENOBUFS) {
        return Read::kOverflow;
    }
    if (n < 0) {
        return nl_error(n, "nl_recv on the rtnetlink socket", errno);
    }
    if (from.nl_pid != 0) {
        return Read::kData; // only the kernel speaks rtnetlink to us
    }
    if (hook_) {
        hook_(buf, static_cast<size_t>(n));
    }
    for_each_message(buf, static_cast<size_t>(n), fn);
    return Read::kData;
}

util::Result<DumpEnd> run_dump(NlSocket &sock, const std::function<void(const nlmsghdr *)> &sink,
                               int stop_fd, std::chrono::milliseconds quiet_timeout,
                               uint64_t *overflows) {
    bool overflowed = false;
    bool interrupted = false;
    for (uint16_t type : {uint16_t(RTM_GETLINK), uint16_t(RTM_GETADDR)}) {
        auto seq = sock.request_dump(type);
        if (!seq) {
            return seq.status();
        }
        bool done = false;
        Status failure;
        auto on_msg = [&](const nlmsghdr *h) {
            if (h->nlmsg_seq == *seq && h->nlmsg_pid == sock.portid()) {
                if ((h->nlmsg_flags & NLM_F_DUMP_INTR) != 0) {
                    interrupted = true;
                }
                if (h->nlmsg_type == NLMSG_DONE) {
                    done = true;
                    return;
                }
                if (h->nlmsg_type == NLMSG_ERROR) {
                    auto p = parse_message(h);
                    int err = p ? p->error : EPROTO;
                    failure = Status::from_errno(err, util::format("%s dump", nl_type_name(type)));
                    done = true;
                    return;
                }
            }
            sink(h);
        };
        while (!done) {
            auto r = sock.read(on_msg);
            if (!r) {
                return r.status();
            }
            if (*r == NlSocket::Read::kOverflow) {
                overflowed = true;
                if (overflows != nullptr) {
                    ++*overflows;
                }
                continue;
            }
            if (*r == NlSocket::Read::kData) {
                continue;
            }
            pollfd fds[2] = {{sock.fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
            int n = poll(fds, stop_fd >= 0 ? 2 : 1, static_cast<int>(quiet_timeout.count()));
            if (n < 0 && errno != EINTR) {
                return Status::from_errno(errno, "poll on the rtnetlink socket during a dump");
            }
            if (n == 0) {
                return Status(Code::kTimeout,
                              util::format("the kernel sent nothing for %lld ms during the %s dump",
                                           static_cast<long long>(quiet_timeout.count()),
                                           nl_type_name(type)));
            }
            if (stop_fd >= 0 && (fds[1].revents & POLLIN) != 0) {
                return DumpEnd::kStopped;
            }
        }
        if (!failure) {
            return failure;
        }
    }
    if (overflowed) {
        return DumpEnd::kOverflow;
    }
    return interrupted ? DumpEnd::kInterrupted : DumpEnd::kComplete;
}

} // namespace roce::netmon
