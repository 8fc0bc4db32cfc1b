// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// main() of the netns tier: decides SKIP (exit 77, which Automake records as
// SKIP) before Catch2 runs, with the reason on stdout:
//   - not root (a network namespace needs CAP_SYS_ADMIN, links CAP_NET_ADMIN)
//   - unshare(CLONE_NEWNET) refused (container without the capability)
//   - no `ip` (iproute2)
//   - --require=KIND: the kernel cannot create links of that kind (vlan
//     needs 8021q, bond needs bonding; the host has neither, the VM does)
#define CATCH_CONFIG_RUNNER
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "catch.h"
#include "netns_util.h"

int main(int argc, char **argv) {
    std::vector<char *> args;
    std::vector<std::string> require;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--require=", 0) == 0) {
            require.push_back(a.substr(10));
        } else {
            args.push_back(argv[i]);
        }
    }
    if (geteuid() != 0) {
        std::printf("SKIP: the netns tests need root (a private network namespace and links "
                    "in it); run `make check` as root to include them\n");
        return 77;
    }
    if (unshare(CLONE_NEWNET) != 0) {
        std::printf("SKIP: unshare(CLONE_NEWNET) failed: %s (no CAP_SYS_ADMIN here?)\n",
                    std::strerror(errno));
        return 77;
    }
    if (std::system("ip -V >/dev/null 2>&1") != 0) {
        std::printf("SKIP: the netns tests drive the kernel with iproute2's `ip`, which is "
                    "missing (apt-get install iproute2)\n");
        return 77;
    }
    for (const auto &kind : require) {
        std::string why;
        if (!roce::netmon::netns::kernel_has_link_kind(kind, &why)) {
            std::printf("SKIP: this kernel cannot create '%s' links (%s: `ip link add ... type "
                        "%s` said: %s); these tests run in the VM tier (tests/vm/netmon_bond.sh)\n",
                        kind.c_str(),
                        kind == "vlan"   ? "8021q"
                        : kind == "bond" ? "bonding"
                                         : kind.c_str(),
                        kind.c_str(), why.c_str());
            return 77;
        }
    }
    return Catch::Session().run(static_cast<int>(args.size()), args.data());
}
