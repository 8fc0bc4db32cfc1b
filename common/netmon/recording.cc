// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/recording.h"

#include <fstream>

#include "netmon/nl_parse.h"
#include "util/strings.h"

namespace roce::netmon {

std::string to_hex_line(const uint8_t *data, size_t len) {
    static const char kHex[] = "0123456789abcdef";
    std::string s;
    s.reserve(len * 2);
    for (size_t i = 0; i < len; ++i) {
        s += kHex[data[i] >> 4];
        s += kHex[data[i] & 0xf];
    }
    return s;
}

util::Result<Datagram> from_hex_line(const std::string &line) {
    std::string_view t = util::trim(line);
    if (t.size() % 2 != 0) {
        return util::Status(util::Code::kInvalidArgument, "odd number of hex digits");
    }
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    };
    Datagram d;
    d.reserve(t.size() / 2);
    for (size_t i = 0; i < t.size(); i += 2) {
        int hi = nibble(t[i]);
        int lo = nibble(t[i + 1]);
        if (hi < 0 || lo < 0) {
            return util::Status(util::Code::kInvalidArgument,
                                util::format("not a hex digit at column %zu", i + 1));
        }
        d.push_back(static_cast<uint8_t>(hi << 4 | lo));
    }
    return d;
}

util::Result<std::vector<Datagram>> read_recording(const std::string &path) {
    std::ifstream in(path);
    if (!in) {
        return util::Status(util::Code::kNotFound, "cannot open recording " + path);
    }
    std::vector<Datagram> out;
    std::string line;
    for (int lineno = 1; std::getline(in, line); ++lineno) {
        auto t = util::trim(line);
        if (t.empty() || t[0] == '#') {
            continue;
        }
        auto d = from_hex_line(line);
        if (!d) {
            return d.status().with_context(util::format("%s:%d", path.c_str(), lineno));
        }
        out.push_back(std::move(*d));
    }
    return out;
}

util::Result<std::vector<Event>> replay(Model &model, const std::vector<Datagram> &datagrams) {
    std::vector<Event> out;
    util::Status failure;
    for (size_t i = 0; i < datagrams.size(); ++i) {
        const Datagram &d = datagrams[i];
        bool whole = for_each_message(d.data(), d.size(), [&](const nlmsghdr *h) {
            if (!failure) {
                return;
            }
            auto p = parse_message(h);
            if (!p) {
                failure = p.status().with_context(util::format("datagram %zu", i + 1));
                return;
            }
            std::vector<Event> ev;
            if (p->type == ParsedMessage::Type::kLink) {
                ev = model.apply(p->link);
            } else if (p->type == ParsedMessage::Type::kAddress) {
                ev = model.apply(p->addr);
            }
            out.insert(out.end(), ev.begin(), ev.end());
        });
        if (!failure) {
            return failure;
        }
        if (!whole) {
            return util::Status(util::Code::kProtocol,
                                util::format("datagram %zu ends inside a message", i + 1));
        }
    }
    for (size_t i = 0; i < out.size(); ++i) {
        out[i].seq = i + 1;
    }
    return out;
}

} // namespace roce::netmon
