// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "conn_args.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace roce::bench {

namespace {

bool parse_list(const char *s, std::vector<int> *out) {
    out->clear();
    while (*s != '\0') {
        char *end = nullptr;
        long v = std::strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1000000 || (*end != ',' && *end != '\0')) {
            return false;
        }
        out->push_back(static_cast<int>(v));
        s = *end == ',' ? end + 1 : end;
    }
    return !out->empty();
}

} // namespace

std::optional<ConnArgs> parse_conn_args(const char *program, int argc, char **argv) {
    ConnArgs a;
    bool ok = argc % 2 == 1;
    for (int i = 1; ok && i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--peers") == 0) {
            ok = parse_list(argv[i + 1], &a.peers);
        } else if (std::strcmp(argv[i], "--mode") == 0) {
            std::string m = argv[i + 1];
            ok = m == "before" || m == "after" || m == "both";
            a.before = m != "after";
            a.after = m != "before";
        } else {
            ok = false;
        }
    }
    if (!ok) {
        std::fprintf(stderr, "usage: %s [--peers N,N,...] [--mode before|after|both]\n", program);
        return std::nullopt;
    }
    return a;
}

} // namespace roce::bench
