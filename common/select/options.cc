// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/options.h"

#include <cerrno>

#include "util/params.h"
#include "util/strings.h"

namespace roce::select {

using util::Code;
using util::Result;
using util::Status;

const char *to_string(RoceVersion v) noexcept {
    switch (v) {
    case RoceVersion::kAuto: return "auto";
    case RoceVersion::kV1: return "1";
    case RoceVersion::kV2: return "2";
    }
    return "?";
}

const char *to_string(AddressFamily f) noexcept {
    switch (f) {
    case AddressFamily::kAuto: return "auto";
    case AddressFamily::kIPv4: return "ipv4";
    case AddressFamily::kIPv6: return "ipv6";
    }
    return "?";
}

namespace {

constexpr const char *kRuleForms =
    "accepted forms are DEVICE (e.g. mlx5_bond_0), DEVICE:PORT (e.g. mlx5_bond_0:1), "
    "NETDEV (e.g. bond0.3027) or ADDRESS/PREFIXLEN (e.g. 198.18.0.0/24)";

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > 64) {
        return false;
    }
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == '@';
        if (!ok) {
            return false;
        }
    }
    return true;
}

Result<InterfaceRule> parse_rule(std::string_view param, const std::string &entry) {
    auto bad = [&](const std::string &why) {
        return Status(Code::kInvalidArgument,
                      util::format("%.*s: entry '%s' is invalid: %s; %s",
                                   static_cast<int>(param.size()), param.data(), entry.c_str(),
                                   why.c_str(), kRuleForms));
    };
    InterfaceRule rule;
    rule.text = entry;
    if (entry.find('/') != std::string::npos) {
        std::string why;
        auto subnet = util::Subnet::parse(entry, &why);
        if (!subnet) {
            return bad(why);
        }
        rule.kind = InterfaceRule::Kind::kSubnet;
        rule.subnet = *subnet;
        return rule;
    }
    // A bare IPv6 address contains ':' too; tell the user to add a prefix.
    if (util::IpAddress::parse(entry)) {
        return bad("an address needs a prefix length (write it as a subnet)");
    }
    size_t colon = entry.rfind(':');
    if (colon != std::string::npos) {
        std::string dev = entry.substr(0, colon);
        auto port = util::parse_uint(std::string_view(entry).substr(colon + 1));
        if (!valid_name(dev)) {
            return bad("'" + dev + "' is not a device name");
        }
        if (!port || *port < 1 || *port > 255) {
            return bad("the port after ':' must be a number 1..255");
        }
        rule.kind = InterfaceRule::Kind::kDevicePort;
        rule.name = dev;
        rule.port = static_cast<int>(*port);
        return rule;
    }
    if (!valid_name(entry)) {
        return bad("names may contain only letters, digits, '_', '-', '.' and '@'");
    }
    rule.kind = InterfaceRule::Kind::kName;
    rule.name = entry;
    return rule;
}

} // namespace

Result<std::vector<InterfaceRule>> parse_rules(std::string_view param, std::string_view text) {
    std::vector<InterfaceRule> rules;
    for (const auto &entry : util::split_list(text)) {
        auto rule = parse_rule(param, entry);
        if (!rule) {
            return rule.status();
        }
        rules.push_back(std::move(rule.value()));
    }
    return rules;
}

Result<Options> parse_options(const RawOptions &raw, bool privileged) {
    const std::string &p = raw.prefix;
    Options opt;
    opt.prefix = raw.prefix;

    auto include = parse_rules(p + "if_include", raw.if_include);
    if (!include) {
        return include.status();
    }
    auto exclude = parse_rules(p + "if_exclude", raw.if_exclude);
    if (!exclude) {
        return exclude.status();
    }
    if (!include->empty() && !exclude->empty()) {
        return Status(Code::kInvalidArgument,
                      util::format("%sif_include and %sif_exclude are both set ('%s' and '%s'): "
                                   "set only one of them",
                                   p.c_str(), p.c_str(), raw.if_include.c_str(),
                                   raw.if_exclude.c_str()));
    }
    opt.include = std::move(include.value());
    opt.exclude = std::move(exclude.value());

    Status s = util::check_range(p + "gid_index", raw.gid_index, -1, kMaxGidIndex,
                                 "-1 (automatic) or a GID table index 0..65535");
    if (!s) {
        return s;
    }
    opt.gid_index = static_cast<int>(raw.gid_index);

    switch (raw.roce_version) {
    case 0: opt.roce_version = RoceVersion::kAuto; break;
    case 1: opt.roce_version = RoceVersion::kV1; break;
    case 2: opt.roce_version = RoceVersion::kV2; break;
    default:
        return Status(Code::kInvalidArgument,
                      util::format("%sroce_version = %lld is invalid: allowed values are "
                                   "auto (prefer v2), 1 or 2",
                                   p.c_str(), static_cast<long long>(raw.roce_version)));
    }

    switch (raw.address_family) {
    case 0: opt.address_family = AddressFamily::kAuto; break;
    case 4: opt.address_family = AddressFamily::kIPv4; break;
    case 6: opt.address_family = AddressFamily::kIPv6; break;
    default:
        return Status(Code::kInvalidArgument,
                      util::format("%saddress_family = %lld is invalid: allowed values are "
                                   "auto, ipv4 or ipv6",
                                   p.c_str(), static_cast<long long>(raw.address_family)));
    }

    s = util::check_range(p + "qkey", raw.qkey, 1, 0xffffffffLL,
                          "1..0xffffffff (bit 31 only for privileged processes)");
    if (!s) {
        return s;
    }
    opt.qkey = static_cast<uint32_t>(raw.qkey);
    if ((opt.qkey & kControlledQkeyBit) && !privileged) {
        return Status(Code::kPermissionDenied,
                      util::format("%sqkey = %s is invalid for this process: bit 31 is set "
                                   "(a controlled qkey), which the kernel refuses with "
                                   "'Operation not permitted' unless the process has "
                                   "CAP_NET_RAW; use a qkey below 0x80000000, e.g. the "
                                   "default %s",
                                   p.c_str(), util::hex32(opt.qkey).c_str(),
                                   util::hex32(kDefaultQkey).c_str()),
                      EPERM);
    }
    return opt;
}

} // namespace roce::select
