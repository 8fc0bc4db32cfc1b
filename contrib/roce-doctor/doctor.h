// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "topo/readers.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::doctor {

/// Exit statuses (also in --help and roce-doctor(1)).
enum Exit : int {
    kExitOk = 0,           ///< a selection for at least one port; every --check passed
    kExitNoSelection = 1,  ///< no port could be selected, or a --check failed
    kExitUsage = 2,        ///< bad arguments, unreadable/malformed capture, unreadable machine
    kExitNoDevices = 3,    ///< no RDMA devices (here, or in the capture)
};

/// What roce-doctor talks to. main() passes the real machine; tests pass a
/// FakeVerbs table, a fixture's netdevs and a stub for `ip`.
struct Env {
    const verbs::VerbsApi *api = nullptr;  ///< rdma-core (live mode, --check)
    topo::NetdevReader netdevs;            ///< the live netdev view
    bool privileged = false;               ///< may use a controlled qkey
    std::string sysfs_root = "/";          ///< what --capture copies
    /// Runs a command and returns its stdout (topo::run_command).
    std::function<util::Result<std::string>(const std::vector<std::string> &)> run;
    /// The process environment (main: environ): OMPI_MCA_*, HOME,
    /// OPAL_SYSCONFDIR. Read only here, never with getenv (mca_config.h).
    std::map<std::string, std::string> environment;
    /// Open MPI's sysconfdir, where its mca-params.conf lives (configure
    /// asks ompi_info; Debian: /etc/openmpi).
    std::string ompi_sysconfdir;
    /// Reads an mca-params.conf (main: topo::fs::read_text). Unset: the
    /// files are not read (tests that do not care).
    std::function<util::Result<std::string>(const std::string &)> read_file;
};

/// The whole tool: parses `args` (argv without the program name), resolves
/// the btl_roce_* settings as a job would see them (mca_config.h: the
/// command line, env.environment, the mca-params.conf files), reads the
/// machine or the capture, selects, optionally checks, and writes the report
/// to `out` and problems to `err`. Returns the exit status. Never throws.
int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        const Env &env) noexcept;

} // namespace roce::doctor
