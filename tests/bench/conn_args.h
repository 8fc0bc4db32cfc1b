// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The command line of the connection benchmarks (conn_bench, btl_conn_bench).
#pragma once

#include <optional>
#include <vector>

namespace roce::bench {

/// What to run: the peer counts, and which of the two modes.
struct ConnArgs {
    std::vector<int> peers{1, 64, 1024, 4096};
    bool before = true; ///< a full machine read per check (the btl at 668a22a)
    bool after = true;  ///< topo::SnapshotCache
};

/// Parses `--peers N,N,...` (each 1..1,000,000) and `--mode
/// before|after|both`. On anything else prints the usage line of `program`
/// on stderr and returns nullopt.
std::optional<ConnArgs> parse_conn_args(const char *program, int argc, char **argv);

} // namespace roce::bench
