// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "args.h"

#include "util/strings.h"

namespace roce::doctor {

using util::Code;
using util::Result;
using util::Status;

namespace {

Status bad(const std::string &what) { return Status(Code::kInvalidArgument, what); }

/// "auto"/"1"/"2"/"v1"/"v2" -> 0/1/2.
Result<int64_t> roce_version(const std::string &v) {
    if (v == "auto" || v == "0") {
        return int64_t{0};
    }
    if (v == "1" || v == "v1") {
        return int64_t{1};
    }
    if (v == "2" || v == "v2") {
        return int64_t{2};
    }
    return bad("--roce-version '" + v + "' is invalid: use auto, 1 or 2");
}

Result<int64_t> family(const std::string &v) {
    if (v == "auto" || v == "0") {
        return int64_t{0};
    }
    if (v == "ipv4" || v == "4") {
        return int64_t{4};
    }
    if (v == "ipv6" || v == "6") {
        return int64_t{6};
    }
    return bad("--address-family '" + v + "' is invalid: use auto, ipv4 or ipv6");
}

Result<int64_t> integer(const std::string &opt, const std::string &v) {
    auto n = util::parse_int(v);
    if (!n) {
        return bad(opt + " '" + v + "' is not a number (decimal or 0x-hexadecimal)");
    }
    return *n;
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
    } else if (name == "--if-include") {
        a.raw.if_include = value;
    } else if (name == "--if-exclude") {
        a.raw.if_exclude = value;
    } else if (name == "--gid-index" || name == "--roce-version" || name == "--address-family" ||
               name == "--qkey") {
        auto n = name == "--roce-version"     ? roce_version(value)
                 : name == "--address-family" ? family(value)
                                              : integer(name, value);
        if (!n) {
            return n.status();
        }
        (name == "--gid-index"        ? a.raw.gid_index
         : name == "--roce-version"   ? a.raw.roce_version
         : name == "--address-family" ? a.raw.address_family
                                      : a.raw.qkey) = *n;
    } else {
        known = false;
    }
    return Status::ok();
}

} // namespace

Result<Args> parse_args(const std::vector<std::string> &argv) {
    Args a;
    a.raw.prefix = "btl_roce_";
    for (size_t i = 0; i < argv.size(); ++i) {
        std::string arg = argv[i];
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

Exit status:
  0  a selection was made for at least one port (and every --check passed);
     for --capture: the capture was written and reads back
  1  no port could be selected, or a --check failed
  2  bad arguments, or an unreadable or malformed capture
  3  no RDMA devices (on this machine, or in the capture)
)";
}

} // namespace roce::doctor
