// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "select/options.h"
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
    select::RawOptions raw;          ///< --if-include ... --qkey, prefix "btl_roce_"
};

/// Parses argv[1..] ("--opt VALUE" and "--opt=VALUE" both work). Errors
/// (unknown option, missing or malformed value, an empty --from or
/// --capture, conflicting modes) name the option and what is expected.
util::Result<Args> parse_args(const std::vector<std::string> &argv);

/// The --help text.
const char *usage() noexcept;

} // namespace roce::doctor
