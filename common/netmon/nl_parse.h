// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>

#include "netmon/nl_message.h"
#include "util/status.h"

namespace roce::netmon {

/// One netlink message, classified and decoded.
struct ParsedMessage {
    enum class Type {
        kLink,    ///< RTM_NEWLINK/RTM_DELLINK, family AF_UNSPEC: `link` is set
        kAddress, ///< RTM_NEWADDR/RTM_DELADDR, AF_INET/AF_INET6: `addr` is set
        kDone,    ///< NLMSG_DONE (end of a dump)
        kError,   ///< NLMSG_ERROR: `error` is the positive errno, 0 for an ACK
        kIgnored, ///< anything else (bridge port info, other families, NOOP)
    };
    Type type = Type::kIgnored;
    uint32_t seq = 0;      ///< nlmsg_seq (0 for kernel notifications)
    uint32_t portid = 0;   ///< nlmsg_pid
    uint16_t nl_flags = 0; ///< nlmsg_flags (NLM_F_MULTI, NLM_F_DUMP_INTR, ...)
    uint16_t nl_type = 0;  ///< nlmsg_type
    int error = 0;
    LinkMessage link;
    AddrMessage addr;
};

/// Decodes one rtnetlink message with libnl's attribute parser. Pure: no
/// socket, no global state; safe from any thread. `h` must point at
/// `h->nlmsg_len` readable bytes (the caller checked NLMSG_OK).
/// Errors: kProtocol for a truncated header, an attribute shorter than its
/// type requires or an address prefix longer than the address (the message
/// is then skipped, never half-applied); names from the message are escaped
/// in the error (util::printable).
util::Result<ParsedMessage> parse_message(const nlmsghdr *h);

/// Walks a buffer holding one or more netlink messages (as one recvmsg or
/// one recorded datagram returns them) and calls `fn(const nlmsghdr *)` for
/// each whole message. Returns false when the buffer ends inside a message.
template <typename Fn>
bool for_each_message(const void *buf, size_t len, Fn &&fn) {
    auto *h = static_cast<const nlmsghdr *>(buf);
    auto rem = static_cast<int>(len);
    while (NLMSG_OK(h, rem)) {
        fn(h);
        h = NLMSG_NEXT(h, rem);
    }
    return rem == 0;
}

/// "RTM_NEWLINK", "NLMSG_DONE", "type 42" (for logs).
const char *nl_type_name(uint16_t type) noexcept;

} // namespace roce::netmon
