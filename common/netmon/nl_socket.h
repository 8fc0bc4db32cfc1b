// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <linux/netlink.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "util/status.h"

struct nl_sock; // libnl; only nl_socket.cc sees the definition

namespace roce::netmon {

/// A libnl3 NETLINK_ROUTE socket for the monitor: non-blocking, close-on-exec,
/// subscribed to RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR,
/// with NETLINK_NO_ENOBUFS left off so that an overrun is reported (and the
/// monitor resynchronises) instead of silently dropping notifications.
/// Owns the libnl socket. Not thread-safe: one thread uses it.
class NlSocket {
public:
    struct Options {
        bool subscribe = true; ///< join the link and address groups
        /// SO_RCVBUF in bytes (the kernel doubles it and enforces a minimum);
        /// SO_RCVBUFFORCE is tried first so root may exceed rmem_max.
        /// 0 keeps libnl's default (32 KiB).
        int rcvbuf_bytes = 4 << 20;
    };
    /// Called with every datagram read, before it is parsed (recording).
    using DatagramHook = std::function<void(const uint8_t *data, size_t len)>;

    /// Errors: kUnavailable (with errno) when the socket cannot be created,
    /// bound or subscribed (netlink blocked by a sandbox, no NETLINK_ROUTE).
    static util::Result<std::unique_ptr<NlSocket>> open(const Options &opt);
    ~NlSocket();
    NlSocket(const NlSocket &) = delete;
    NlSocket &operator=(const NlSocket &) = delete;

    int fd() const noexcept;
    uint32_t portid() const noexcept;
    /// The receive buffer the kernel actually granted (getsockopt SO_RCVBUF).
    int rcvbuf() const noexcept;

    /// Sends an RTM_GETLINK or RTM_GETADDR dump request (all families, no
    /// statistics); returns its sequence number.
    util::Result<uint32_t> request_dump(uint16_t rtm_type);
    /// Asks for one link's full state (the reply arrives as an RTM_NEWLINK).
    util::Result<uint32_t> request_link(int ifindex);

    enum class Read { kData, kAgain, kOverflow };
    /// Reads one datagram without blocking and calls `fn` for each message in
    /// it. kAgain: nothing queued. kOverflow: the kernel dropped messages
    /// (ENOBUFS) since the last read; later reads return what was queued
    /// after the drop. Datagrams not sent by the kernel are discarded.
    util::Result<Read> read(const std::function<void(const nlmsghdr *)> &fn);

    void set_datagram_hook(DatagramHook hook) { hook_ = std::move(hook); }

private:
    NlSocket() = default;
    nl_sock *sk_ = nullptr;
    DatagramHook hook_;
};

/// How one run_dump() ended.
enum class DumpEnd {
    kComplete,    ///< both dumps finished consistently
    kOverflow,    ///< an overrun happened meanwhile: the picture may miss changes, redo
    kInterrupted, ///< the kernel flagged the dump inconsistent (NLM_F_DUMP_INTR): redo
    kStopped,     ///< `stop_fd` became readable
};

/// Dumps links, then addresses, on `sock`, passing every message read in the
/// meantime - dump replies and notifications, interleaved in arrival order -
/// to `sink`. Blocks in poll() on the socket and `stop_fd` (-1: none); each
/// wait is bounded by `quiet_timeout` (kTimeout error when the kernel stays
/// silent that long). On an overrun the current dump is still read to its
/// end so the next request is not refused with EBUSY.
util::Result<DumpEnd> run_dump(NlSocket &sock, const std::function<void(const nlmsghdr *)> &sink,
                               int stop_fd, std::chrono::milliseconds quiet_timeout,
                               uint64_t *overflows);

} // namespace roce::netmon
