// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "mca_config.h"

#include <algorithm>

#include "util/strings.h"

namespace roce::doctor {

using util::Code;
using util::Result;
using util::Status;

namespace {

constexpr std::string_view kEnvPrefix = "OMPI_MCA_";
constexpr std::string_view kProject = "opal_"; // the btl's project: its long names

// Open MPI's lexer: WHITE is [\f\t\v ], a name character [A-Za-z0-9_\-.].
bool white(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }
bool name_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
}

std::string_view strip(std::string_view s) {
    while (!s.empty() && white(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && white(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

/// The leading name of `s` (possibly empty) and the rest after it.
std::string_view take_name(std::string_view &s) {
    size_t n = 0;
    while (n < s.size() && name_char(s[n])) {
        ++n;
    }
    std::string_view name = s.substr(0, n);
    s.remove_prefix(n);
    return name;
}

/// "--mca NAME VALUE" / "-mca NAME VALUE" (the rest after the flag).
void mca_line(std::string_view rest, int line, std::vector<FileEntry> &out,
              std::vector<std::string> *problems) {
    rest = strip(rest);
    std::string_view name = take_name(rest);
    std::string_view value = strip(rest);
    if (name.empty() || value.empty() || (!rest.empty() && !white(rest.front()))) {
        if (problems != nullptr) {
            problems->push_back(util::format("line %d: not --mca NAME VALUE; skipped", line));
        }
        return;
    }
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') &&
        value.back() == value.front()) {
        value = value.substr(1, value.size() - 2);
    } else {
        value = value.substr(0, std::find_if(value.begin(), value.end(), white) - value.begin());
    }
    out.push_back({std::string(name), std::string(value), line});
}

/// The value of one environment variable, or nullptr.
const std::string *env(const McaInputs &in, const std::string &name) {
    auto it = in.environment.find(name);
    return it == in.environment.end() ? nullptr : &it->second;
}

/// The parameter files in precedence order (highest first), and what set
/// the list.
std::vector<std::string> param_files(const McaInputs &in, const std::string &sysconfdir,
                                     std::string *set_by) {
    for (const char *n : {"opal_mca_base_param_files", "mca_base_param_files", "mca_param_files"}) {
        std::string var = std::string(kEnvPrefix) + n;
        if (const std::string *v = env(in, var)) {
            *set_by = var;
            return util::split_list(*v, ',');
        }
    }
    std::vector<std::string> files;
    if (const std::string *home = env(in, "HOME")) {
        files.push_back(*home + "/.openmpi/mca-params.conf");
    }
    files.push_back(sysconfdir + "/openmpi-mca-params.conf");
    return files;
}

/// The file's entries for the known names (the last line per name wins
/// within a file), recording what happened in cfg.files / cfg.notes.
std::map<std::string, FileEntry> read_params(const McaInputs &in, const std::string &path,
                                             McaConfig &cfg) {
    std::map<std::string, FileEntry> out;
    if (!in.read_file) {
        return out;
    }
    auto text = in.read_file(path);
    if (!text) {
        bool absent = text.status().code() == Code::kNotFound;
        cfg.files.push_back(path + (absent ? " (absent)" : " (not read)"));
        if (!absent) {
            cfg.notes.push_back(path + " not read: " + text.status().message());
        }
        return out;
    }
    std::vector<std::string> problems;
    for (auto &e : parse_param_file(*text, &problems)) {
        const auto &known = known_names();
        std::string full = e.name.rfind(kProject, 0) == 0 ? e.name.substr(kProject.size()) : e.name;
        if (std::find(known.begin(), known.end(), full) != known.end()) {
            e.name = full;
            out[full] = e;
        }
    }
    for (const auto &p : problems) {
        cfg.notes.push_back(path + ": " + p);
    }
    cfg.files.push_back(path + util::format(" (read, %zu btl_roce_ setting%s)", out.size(),
                                            out.size() == 1 ? "" : "s"));
    return out;
}

Status bad(const std::string &what) { return Status(Code::kInvalidArgument, what); }

} // namespace

const std::vector<std::string> &known_names() {
    static const std::vector<std::string> kNames = {
        "btl_roce_if_include",   "btl_roce_if_exclude",     "btl_roce_gid_index",
        "btl_roce_roce_version", "btl_roce_address_family", "btl_roce_qkey"};
    return kNames;
}

std::vector<FileEntry> parse_param_file(std::string_view text, std::vector<std::string> *problems) {
    std::vector<FileEntry> out;
    bool in_comment = false;
    int line = 0;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view l = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++line;
        if (in_comment) {
            size_t end = l.find("*/");
            if (end == std::string_view::npos) {
                continue;
            }
            in_comment = false;
            l.remove_prefix(end + 2);
        }
        l = strip(l);
        if (l.empty() || l.front() == '#' || l.rfind("//", 0) == 0) {
            continue;
        }
        if (l.rfind("/*", 0) == 0) {
            in_comment = l.find("*/", 2) == std::string_view::npos;
            continue;
        }
        if (l.rfind("--mca", 0) == 0 || l.rfind("-mca", 0) == 0) {
            mca_line(l.substr(l.find("mca") + 3), line, out, problems);
            continue;
        }
        if (l.rfind("-x", 0) == 0 || l.rfind("--x", 0) == 0) {
            if (problems != nullptr) {
                problems->push_back(util::format(
                    "line %d: an environment line (-x), not a parameter; skipped", line));
            }
            continue;
        }
        std::string_view rest = l;
        std::string_view name = take_name(rest);
        rest = strip(rest);
        if (name.empty() || rest.empty() || rest.front() != '=') {
            if (problems != nullptr) {
                problems->push_back(util::format(
                    "line %d: '%s' is not NAME = VALUE; Open MPI skips it too", line,
                    util::printable(std::string(l)).c_str()));
            }
            continue;
        }
        out.push_back({std::string(name), std::string(strip(rest.substr(1))), line});
    }
    return out;
}

McaConfig resolve_mca(const McaInputs &in, const std::vector<Setting> &command_line) {
    McaConfig cfg;
    std::string sysconfdir = in.sysconfdir;
    if (const std::string *s = env(in, "OPAL_SYSCONFDIR")) {
        sysconfdir = *s;
    }
    // Lowest precedence first: each later source replaces the value and
    // keeps the one it replaced in `shadows`.
    auto set = [&cfg](const std::string &name, const std::string &value,
                      const std::string &source) {
        auto it = cfg.settings.find(name);
        if (it == cfg.settings.end()) {
            cfg.settings[name] = Setting{name, value, source, {}};
            return;
        }
        it->second.shadows.insert(it->second.shadows.begin(), it->second.source);
        it->second.value = value;
        it->second.source = source;
    };
    std::string list_set_by;
    std::vector<std::string> files = param_files(in, sysconfdir, &list_set_by);
    if (!list_set_by.empty()) {
        cfg.notes.push_back("parameter files from " + list_set_by + " (instead of the default "
                            "~/.openmpi/mca-params.conf and the system file)");
    }
    std::vector<std::map<std::string, FileEntry>> read;
    for (const auto &f : files) {
        read.push_back(read_params(in, f, cfg));
    }
    for (size_t i = files.size(); i-- > 0;) { // the leftmost file wins
        for (const auto &[name, e] : read[i]) {
            set(name, e.value, util::format("%s:%d", files[i].c_str(), e.line));
        }
    }
    for (const auto &name : known_names()) {
        // Open MPI looks the long name up first.
        for (const std::string &var : {std::string(kEnvPrefix) + std::string(kProject) + name,
                                      std::string(kEnvPrefix) + name}) {
            if (const std::string *v = env(in, var)) {
                set(name, *v, var);
                break;
            }
        }
    }
    const auto &known = known_names();
    for (const auto &s : command_line) {
        std::string full = s.name.rfind(kProject, 0) == 0 ? s.name.substr(kProject.size()) : s.name;
        if (std::find(known.begin(), known.end(), full) == known.end()) {
            cfg.notes.push_back(s.source + " " + s.name + ": not a setting roce-doctor uses; "
                                "ignored");
            continue;
        }
        set(full, s.value, s.source);
    }
    std::string override_file = sysconfdir + "/openmpi-mca-params-override.conf";
    auto over = read_params(in, override_file, cfg);
    for (const auto &[name, e] : over) {
        set(name, e.value, util::format("%s:%d (the override file beats everything)",
                                        override_file.c_str(), e.line));
    }
    return cfg;
}

Status apply_setting(const std::string &name, const std::string &value, const std::string &what,
                     select::RawOptions &raw) {
    if (name == "btl_roce_if_include") {
        raw.if_include = value;
        return Status::ok();
    }
    if (name == "btl_roce_if_exclude") {
        raw.if_exclude = value;
        return Status::ok();
    }
    std::string v(util::trim(value));
    if (name == "btl_roce_roce_version") {
        if (v == "auto" || v == "0" || v == "1" || v == "v1" || v == "2" || v == "v2") {
            raw.roce_version = v == "auto" || v == "0" ? 0 : v.back() - '0';
            return Status::ok();
        }
        return bad(what + " '" + value + "' is invalid: use auto, 1 or 2");
    }
    if (name == "btl_roce_address_family") {
        if (v == "auto" || v == "0" || v == "ipv4" || v == "4" || v == "ipv6" || v == "6") {
            raw.address_family = v == "auto" || v == "0" ? 0 : v.back() - '0';
            return Status::ok();
        }
        return bad(what + " '" + value + "' is invalid: use auto, ipv4 or ipv6");
    }
    if (name == "btl_roce_gid_index" || name == "btl_roce_qkey") {
        auto n = util::parse_int(v);
        if (!n) {
            return bad(what + " '" + value + "' is not a number (decimal or 0x-hexadecimal)");
        }
        (name == "btl_roce_gid_index" ? raw.gid_index : raw.qkey) = *n;
        return Status::ok();
    }
    return bad(what + ": '" + name + "' is not a setting roce-doctor knows");
}

} // namespace roce::doctor
