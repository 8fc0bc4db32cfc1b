// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "select/options.h"
#include "util/status.h"

namespace roce::doctor {

/// The btl's settings as an Open MPI 4.1 job would see them, so that
/// roce-doctor shows what the job does. Learnt from Open MPI 4.1's
/// opal/mca/base/mca_base_var.c and opal/util/keyval (no Open MPI code or
/// headers here). Where a value can come from, highest precedence first:
///
///  1. the override file, $sysconfdir/openmpi-mca-params-override.conf:
///     it beats everything, the command line included;
///  2. the command line (mpirun --mca, which reaches the ranks as
///     OMPI_MCA_* variables and replaces an inherited one; here roce-doctor's
///     own --mca NAME VALUE and --gid-index style options);
///  3. the environment: OMPI_MCA_opal_btl_roce_X (the long name, looked up
///     first), then OMPI_MCA_btl_roce_X;
///  4. the parameter files: the comma-separated list in
///     OMPI_MCA_mca_base_param_files (also spelt opal_mca_base_param_files,
///     or the deprecated mca_param_files) when set, which then replaces the
///     default list "$HOME/.openmpi/mca-params.conf,$sysconfdir/
///     openmpi-mca-params.conf"; a file earlier in the list wins over a
///     later one, and within one file the last line for a name wins;
///  5. the btl's default.
/// $sysconfdir is OPAL_SYSCONFDIR when set (Open MPI's installdirs/env),
/// else the one configure asked ompi_info for (Debian: /etc/openmpi).

/// The names roce-doctor understands, full form ("btl_roce_gid_index").
const std::vector<std::string> &known_names();

/// One name = value line of a parameter file.
struct FileEntry {
    std::string name;
    std::string value;
    int line = 0;           ///< 1-based
};

/// Parses mca-params.conf text as Open MPI's keyval lexer does: blank
/// lines, "# ..." and "// ..." comment lines and "/* ... */" blocks are
/// skipped; "NAME = VALUE" (spaces around '=' optional) sets NAME to the
/// rest of the line without trailing blanks - a '#' after the value is part
/// of it, as in Open MPI; "NAME =" sets an empty value; "--mca NAME VALUE"
/// (or "-mca") lines set NAME too, with one pair of quotes around VALUE
/// removed. NAME is letters, digits, '_', '-', '.'. A line Open MPI would
/// refuse (no '=', a bad name) is skipped and described in `problems`
/// ("line 4: ... not NAME = VALUE"), and so are "-x" environment lines, which
/// set no parameter. Entries are in file order (duplicates kept).
std::vector<FileEntry> parse_param_file(std::string_view text, std::vector<std::string> *problems);

/// One setting, where it came from, and the lower-ranked places that set it
/// too (shadowed by it).
struct Setting {
    std::string name;       ///< full name, "btl_roce_gid_index"
    std::string value;
    /// "OMPI_MCA_btl_roce_gid_index", "/etc/openmpi/...conf:12", "--gid-index"
    std::string source;
    std::vector<std::string> shadows; ///< sources it overrides, highest first
};

/// What the resolution reads. main() passes the process's; tests a fake.
struct McaInputs {
    std::map<std::string, std::string> environment; ///< every variable (HOME, OMPI_MCA_*, ...)
    std::string sysconfdir;                          ///< Open MPI's, from configure
    /// Reads one file (topo::fs::read_text in main); an error with
    /// kNotFound means absent. Unset: no file is read.
    std::function<util::Result<std::string>(const std::string &path)> read_file;
};

/// The resolved configuration for the known names.
struct McaConfig {
    std::map<std::string, Setting> settings;   ///< only names set somewhere
    /// The files looked at, in precedence order, each with what happened:
    /// "/etc/openmpi/openmpi-mca-params.conf (read)", "... (absent)".
    std::vector<std::string> files;
    /// Skipped lines, unreadable files, command-line names roce-doctor does
    /// not use.
    std::vector<std::string> notes;
};

/// Resolves the known names over the override file, `command_line` (in the
/// order given: a later one for the same name wins), the environment and the
/// parameter files, in the order above. Names in `command_line` that are not
/// known are noted and ignored. Never fails: what cannot be read is a note.
McaConfig resolve_mca(const McaInputs &in, const std::vector<Setting> &command_line);

/// Sets the field of `raw` for one known setting, converting VALUE as the
/// btl does (integers decimal or 0x-hex; roce_version auto/v1/v2/0/1/2;
/// address_family auto/ipv4/ipv6/0/4/6). `what` names the value in errors:
/// "--gid-index" or "btl_roce_gid_index (from OMPI_MCA_btl_roce_gid_index)".
/// kInvalidArgument for a malformed value or an unknown name.
util::Status apply_setting(const std::string &name, const std::string &value,
                           const std::string &what, select::RawOptions &raw);

} // namespace roce::doctor
