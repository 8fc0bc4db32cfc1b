// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "args.h"

#include <algorithm>

#include "util/strings.h"

namespace roce::doctor {

using util::Code;
using util::Result;
using util::Status;

namespace {

Status bad(const std::string &what) { return Status(Code::kInvalidArgument, what); }

/// The MCA name behind each selection option.
const char *mca_name(const std::string &option) {
    if (option == "--if-include") {
        return "btl_roce_if_include";
    }
    if (option == "--if-exclude") {
        return "btl_roce_if_exclude";
    }
    if (option == "--gid-index") {
        return "btl_roce_gid_index";
    }
    if (option == "--roce-version") {
        return "btl_roce_roce_version";
    }
    if (option == "--address-family") {
        return "btl_roce_address_family";
    }
    if (option == "--qkey") {
        return "btl_roce_qkey";
    }
    return nullptr;
}

/// Applies one option that takes a value; false when `name` is not one.
Status apply_value(Args &a, const std::string &name, const std::string &value, bool &known) {
    known = true;
    if (name == "--peer") {
        a.peers.push_back(value);
    } else if (name == "--capture" || name == "--from") {
        // An empty value would read as "not given": --from= would silently
        // report on this machine instead of the capture.
        if (value.empty()) {
            return bad(name + " needs a directory, not an empty value");
        }
        (name == "--capture" ? a.capture_dir : a.from_dir) = value;
    } else if (const char *mca = mca_name(name)) {
        select::RawOptions check;
        Status st = apply_setting(mca, value, name, check);
        if (!st) {
            return st;
        }
        a.settings.push_back(Setting{mca, value, name, {}});
    } else {
        known = false;
    }
    return Status::ok();
}

} // namespace

Result<Args> parse_args(const std::vector<std::string> &argv) {
    Args a;
    for (size_t i = 0; i < argv.size(); ++i) {
        std::string arg = argv[i];
        if (arg == "--mca") {
            if (i + 2 >= argv.size()) {
                return bad("--mca needs a NAME and a VALUE (e.g. --mca btl_roce_gid_index 3)");
            }
            std::string name = argv[i + 1], value = argv[i + 2];
            i += 2;
            const auto &known = known_names();
            if (std::find(known.begin(), known.end(), name) != known.end()) {
                select::RawOptions check;
                Status st = apply_setting(name, value, "--mca " + name, check);
                if (!st) {
                    return st;
                }
            }
            a.settings.push_back(Setting{name, value, "--mca " + name, {}});
            continue;
        }
        if (arg == "-h" || arg == "--help") {
            a.help = true;
            continue;
        }
        if (arg == "--version") {
            a.version = true;
            continue;
        }
        if (arg == "--check" || arg == "--json") {
            (arg == "--check" ? a.check : a.json) = true;
            continue;
        }
        std::string name = arg, value;
        size_t eq = arg.find('=');
        bool inline_value = arg.rfind("--", 0) == 0 && eq != std::string::npos;
        if (inline_value) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
        }
        bool known = false;
        Args probe;
        (void)apply_value(probe, name, "0", known);
        if (!known) {
            return bad("unknown option '" + arg + "'");
        }
        if (!inline_value) {
            if (i + 1 >= argv.size()) {
                return bad(name + " needs a value");
            }
            value = argv[++i];
        }
        Status st = apply_value(a, name, value, known);
        if (!st) {
            return st;
        }
    }
    if (!a.from_dir.empty() && a.check) {
        return bad("--check runs real QP transitions on this machine's devices and cannot be "
                   "combined with --from");
    }
    if (!a.from_dir.empty() && !a.capture_dir.empty()) {
        return bad("--capture records this machine and cannot be combined with --from");
    }
    return a;
}

const char *usage() noexcept {
    return R"(usage: roce-doctor [OPTION]...

Shows, for every RDMA device and port, the GID table with the entry ompi-roce
would use marked, the bond/VLAN/LAG picture behind it, the chosen GID index,
pkey index, qkey, port and path MTU, and why.

Modes:
  (none)              read this machine (rdma-core, sysfs, getifaddrs)
  --from DIR          replay a capture made with --capture instead (regular
                      files only; links inside DIR are not followed)
  --capture DIR       write a replayable capture of this machine to DIR
                      (DIR/sys/..., DIR/ip-addr.json, DIR/ip-link.json);
                      DIR must be new (made 0700) or an empty one you own
  --check             also run real UD and RC QP transitions (RESET->INIT->
                      RTR->RTS) with the selected attributes on each port and
                      report pass or the diagnostic

Output:
  --peer ADDR         what would be chosen to reach this peer address
                      (198.19.0.12, 198.19.0.12/24, 2001:db8::12/64); repeatable
  --json              machine-readable output: an object with a "ports" array
  -h, --help          this text
  --version           the version

Selection settings (the same as the btl's MCA parameters):
  --if-include LIST   btl_roce_if_include: DEVICE, DEVICE:PORT, NETDEV, ADDR/LEN
  --if-exclude LIST   btl_roce_if_exclude
  --gid-index N       btl_roce_gid_index (-1 automatic); checked, never used blindly
  --roce-version V    btl_roce_roce_version: auto, 1 or 2
  --address-family F  btl_roce_address_family: auto, ipv4 or ipv6
  --qkey N            btl_roce_qkey (bit 31 set needs CAP_NET_RAW)
  --mca NAME VALUE    any of the above by its MCA name, as with mpirun

Where settings come from (as an Open MPI 4.1 job reads them; highest first):
  $sysconfdir/openmpi-mca-params-override.conf (beats everything), then
  this command line, then OMPI_MCA_btl_roce_* (and OMPI_MCA_opal_btl_roce_*)
  in the environment, then the parameter files: OMPI_MCA_mca_base_param_files
  (comma-separated, the first listed wins) or else ~/.openmpi/mca-params.conf
  before $sysconfdir/openmpi-mca-params.conf; then the btl's defaults.
  $sysconfdir is OPAL_SYSCONFDIR or Open MPI's (ompi_info --path sysconfdir).
  The report prints each setting with its source, e.g.
    btl_roce_gid_index = 3 (from OMPI_MCA_btl_roce_gid_index)

Exit status:
  0  a selection was made for at least one port (and every --check passed);
     for --capture: the capture was written and reads back
  1  no port could be selected, or a --check failed
  2  bad arguments, or an unreadable or malformed capture
  3  no RDMA devices (on this machine, or in the capture)
)";
}

} // namespace roce::doctor
