// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace roce::topo {

/// What goes into a capture besides the sysfs files.
struct CaptureInputs {
    std::string sysfs_root = "/"; ///< where sys/ and proc/ are read from
    std::string ip_addr_json;     ///< output of `ip -j addr show`
    std::string ip_link_json;     ///< output of `ip -j -d link show`
    std::string note;             ///< free text for DIR/README (tool, version, date)
};

/// Writes a replayable capture to `dir` (created if needed; existing files
/// are overwritten): exactly the files the sysfs reader reads, copied from
/// INPUTS.sysfs_root (never a recursive walk of sysfs, which has cycles and
/// huge counter trees), plus ip-addr.json, ip-link.json and a README.
/// read_capture(dir) then yields the snapshot of the machine at that moment.
/// sysfs symlinks that matter (a netdev's master, lower_* and upper_*) are
/// written as small files holding the link target ("../bond0"), so the
/// capture survives tar -h, cp -L and zip (sysfs links form cycles).
/// Unreadable optional attributes (an empty GID slot's type, a down netdev's
/// carrier) are left out, as they read on the kernel; each file that could
/// not be copied for another reason adds a line to `warnings`. Fails only
/// when `dir` cannot be written.
util::Status write_capture(const std::string &dir, const CaptureInputs &inputs,
                           std::vector<std::string> *warnings);

/// Runs argv[0] (looked up in PATH) with the arguments, without a shell,
/// and returns its standard output. Fails with the exit status and the
/// first line of its standard error when it does not exit 0.
util::Result<std::string> run_command(const std::vector<std::string> &argv);

} // namespace roce::topo
