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

/// Writes a replayable capture to `dir`, which must not exist yet (it is
/// created with mode 0700) or be an empty directory owned by this process's
/// effective uid (fs::OutTree::create; anything else - a link, a non-empty
/// directory, someone else's directory - is refused before anything is
/// written). Every file is created new (0600) relative to its directory's
/// descriptor with O_EXCL|O_NOFOLLOW, so running as root in a directory
/// another user prepared cannot overwrite anything: see fs.h. Copies exactly
/// the files the sysfs reader reads, from INPUTS.sysfs_root (the kernel's
/// tree, Links::kFollow; never a recursive walk of sysfs, which has cycles
/// and huge counter trees), plus ip-addr.json, ip-link.json and a README.
/// read_capture(dir) then yields the snapshot of the machine at that moment.
/// sysfs symlinks that matter (a netdev's master, lower_* and upper_*) are
/// written as small files holding the link target ("../bond0"), so the
/// capture holds no links and survives tar -h, cp -L and zip (sysfs links
/// form cycles). Unreadable optional attributes (an empty GID slot's type, a
/// down netdev's carrier) are left out, as they read on the kernel; each file
/// that could not be copied for another reason adds a line to `warnings`.
/// Fails, with "writing capture DIR: " and the reason, when `dir` is refused
/// or cannot be written.
util::Status write_capture(const std::string &dir, const CaptureInputs &inputs,
                           std::vector<std::string> *warnings);

/// Runs argv[0] (looked up in PATH) with the arguments, without a shell,
/// and returns its standard output. Fails with the exit status and the
/// first line of its standard error (escaped, util::printable) when it does
/// not exit 0.
util::Result<std::string> run_command(const std::vector<std::string> &argv);

} // namespace roce::topo
