// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/dump.h"

#include "netmon/nl_parse.h"
#include "netmon/nl_socket.h"

namespace roce::netmon {

util::Result<Model> dump_model(std::chrono::milliseconds timeout) {
    auto sock = NlSocket::open({false, 0});
    if (!sock) {
        return sock.status();
    }
    for (int attempt = 0; attempt < 10; ++attempt) {
        Model m;
        util::Status failure;
        auto end = run_dump(
            **sock,
            [&](const nlmsghdr *h) {
                auto p = parse_message(h);
                if (!p) {
                    failure = p.status();
                } else if (p->type == ParsedMessage::Type::kLink) {
                    (void)m.apply(p->link);
                } else if (p->type == ParsedMessage::Type::kAddress) {
                    (void)m.apply(p->addr);
                }
            },
            -1, timeout, nullptr);
        if (!end) {
            return end.status();
        }
        if (!failure) {
            return failure;
        }
        if (*end == DumpEnd::kComplete) {
            (void)m.take_refresh_requests();
            return m;
        }
    }
    return util::Status(util::Code::kUnavailable,
                        "the rtnetlink dump was interrupted ten times in a row (netdevs changing "
                        "too fast to take a consistent picture)");
}

util::Result<topo::Snapshot> read_netdevs(std::chrono::milliseconds timeout) {
    auto m = dump_model(timeout);
    if (!m) {
        return m.status();
    }
    topo::Snapshot s;
    s.netdevs = m->netdevs();
    s.source = "netlink";
    return s;
}

} // namespace roce::netmon
