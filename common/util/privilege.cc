// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/privilege.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace roce::util {

namespace {
constexpr int kCapNetRaw = 13; // linux/capability.h
} // namespace

bool may_use_controlled_qkey() noexcept {
    if (geteuid() == 0) {
        return true;
    }
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return false;
    }
    char line[256];
    bool cap = false;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::strncmp(line, "CapEff:", 7) == 0) {
            unsigned long long mask = std::strtoull(line + 7, nullptr, 16);
            cap = (mask >> kCapNetRaw) & 1ULL;
            break;
        }
    }
    std::fclose(f);
    return cap;
}

} // namespace roce::util
