// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace roce::topo::fs {

/// Small file helpers for the sysfs and capture readers. Every error carries
/// the path and the errno, e.g. "read /sys/class/infiniband/mlx5_0/ports/1/
/// gid_attrs/types/7 failed: Invalid argument (22)". Thread-safe (no state).

/// "a" + "/" + "b", without doubling slashes ("/" + "sys" -> "/sys").
std::string join(const std::string &a, const std::string &b);

/// The whole file (sysfs attributes are small; the cap is 4 MiB so a wrong
/// path to a huge file fails instead of eating memory).
util::Result<std::string> read_text(const std::string &path);

/// The first line of the file without the trailing newline and blanks.
util::Result<std::string> read_line(const std::string &path);

/// Names in a directory (no "." and ".."), sorted. A missing directory is an
/// error with kNotFound.
util::Result<std::vector<std::string>> list_dir(const std::string &path);

bool exists(const std::string &path);
/// True for a directory or a symlink to one.
bool is_dir(const std::string &path);

/// The last path component a link points to ("../bond0" -> "bond0"). In
/// sysfs `path` is a symlink; in a capture it is a regular file holding the
/// target ("../bond0\n"), because captures are tarred and copied by tools
/// that follow symlinks, and sysfs links form cycles.
util::Result<std::string> link_name(const std::string &path);

/// Creates a directory and its parents (like mkdir -p).
util::Status make_dirs(const std::string &path);

/// Writes (truncates) a file.
util::Status write_text(const std::string &path, const std::string &text);

} // namespace roce::topo::fs
