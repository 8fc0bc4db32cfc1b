// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "mca_config.h"
#include "util/status.h"

namespace roce::doctor {

/// The command line of roce-doctor, parsed but not yet validated against a
/// machine. Option values are checked by select::parse_options later.
struct Args {
    std::vector<std::string> peers;  ///< --peer ADDR (repeatable)
    bool check = false;              ///< --check
    std::string capture_dir;         ///< --capture DIR
    std::string from_dir;            ///< --from DIR
    bool json = false;               ///< --json
    bool help = false;               ///< --help, -h
    bool version = false;            ///< --version
    /// --if-include ... --qkey and --mca NAME VALUE, in command-line order,
    /// each with its MCA name and the option that set it as source
    /// ("--gid-index", "--mca btl_roce_gid_index"); values already checked
    /// with apply_setting. Resolved with the environment and the
    /// mca-params.conf files by resolve_mca.
    std::vector<Setting> settings;
};

/// Parses argv[1..] ("--opt VALUE" and "--opt=VALUE" both work; --mca takes
/// NAME VALUE, as mpirun's does). Errors
/// (unknown option, missing or malformed value, an empty --from or
/// --capture, conflicting modes) name the option and what is expected.
util::Result<Args> parse_args(const std::vector<std::string> &argv);

/// The --help text.
const char *usage() noexcept;

} // namespace roce::doctor
