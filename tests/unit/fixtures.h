// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>

#include "select/selection.h"
#include "topo/snapshot.h"

namespace roce::testing {

/// tests/fixtures/<name> (absolute path in the source tree).
std::string fixture_dir(const std::string &name);

// The snapshot fixture() returns lives in its cache for the whole run, not in
// the `name` argument: GCC 14's -Wdangling-reference would otherwise flag
// every `const Snapshot &s = fixture("...")`.
#if defined(__has_cpp_attribute)
#if __has_cpp_attribute(gnu::no_dangling)
#define ROCE_NO_DANGLING [[gnu::no_dangling]]
#endif
#endif
#ifndef ROCE_NO_DANGLING
#define ROCE_NO_DANGLING
#endif

/// The snapshot of a committed capture fixture, read once with
/// topo::read_capture and cached. Fails the test (Catch2 FAIL) when the
/// fixture cannot be read.
ROCE_NO_DANGLING const topo::Snapshot &fixture(const std::string &name);

/// The policy's Selection for the first port of the "mlx5_lag" fixture with
/// btl_roce_gid_index pinned to `gid_index` (REQUIREs that the policy
/// accepts it): the starting point of the preflight and QueuePair tests.
select::Selection lag_selection(int gid_index = 3);

/// A fresh empty directory under $TMPDIR (removed by ~TempDir).
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

/// Copies a directory tree (files, directories and symlinks as symlinks).
void copy_tree(const std::string &from, const std::string &to);

/// Writes `text` to `path`, replacing what was there (a test editing a
/// copied fixture; REQUIREs success).
void write_file(const std::string &path, const std::string &text);

/// A readable one-line-per-field rendering of a snapshot, for comparing two
/// snapshots with a useful failure message. Leaves out `source`, `warnings`
/// and, when `with_active_mtu` is false, PortInfo::active_mtu (sysfs cannot
/// see it).
std::string dump(const topo::Snapshot &s, bool with_active_mtu = true);

} // namespace roce::testing
