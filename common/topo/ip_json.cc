// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/ip_json.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "util/json.h"
#include "util/strings.h"

namespace roce::topo {

using util::Code;
using util::Json;
using util::Result;
using util::Status;

namespace {

std::string str_member(const Json &obj, const char *key) {
    const Json *v = obj.find(key);
    return v != nullptr ? v->as_string() : std::string();
}

int int_member(const Json &obj, const char *key, int fallback) {
    const Json *v = obj.find(key);
    if (v == nullptr) {
        return fallback;
    }
    // A number that is not an int (4294967297, 1.5) is as wrong as a string
    // here: it reads as absent instead of wrapping around.
    int64_t n = v->as_int(INT64_MIN);
    return n >= INT_MIN && n <= INT_MAX ? static_cast<int>(n) : fallback;
}

OperState operstate_of(const std::string &s) {
    for (int i = 0; i <= 6; ++i) {
        if (s == to_string(static_cast<OperState>(i))) {
            return static_cast<OperState>(i);
        }
    }
    return OperState::kUnknown;
}

BondMode bond_mode_of(const std::string &s) {
    for (int i = 0; i <= 6; ++i) {
        if (s == to_string(static_cast<BondMode>(i))) {
            return static_cast<BondMode>(i);
        }
    }
    return BondMode::kUnknown;
}

BondInfo bond_of(const Json &data) {
    BondInfo b;
    b.mode = bond_mode_of(str_member(data, "mode"));
    b.active_slave = str_member(data, "active_slave");
    b.xmit_hash_policy = str_member(data, "xmit_hash_policy");
    b.miimon_ms = int_member(data, "miimon", -1);
    if (const Json *ad = data.find("ad_info")) {
        b.ad_num_ports = int_member(*ad, "num_ports", -1);
    }
    return b;
}

Result<NetdevInfo> link_of(const Json &e, size_t i, const std::string &what) {
    if (!e.is_object()) {
        return Status(Code::kInvalidArgument,
                      util::format("%s: entry %zu is not an object", what.c_str(), i));
    }
    NetdevInfo n;
    n.name = str_member(e, "ifname");
    n.ifindex = int_member(e, "ifindex", 0);
    if (n.name.empty() || n.ifindex <= 0) {
        return Status(Code::kInvalidArgument,
                      util::format("%s: entry %zu has no \"ifname\" or \"ifindex\" (is this the "
                                   "output of `ip -j -d link show`?)",
                                   what.c_str(), i));
    }
    n.mtu = int_member(e, "mtu", 0);
    n.operstate = operstate_of(str_member(e, "operstate"));
    if (const Json *flags = e.find("flags")) {
        for (const auto &f : flags->items()) {
            n.carrier = n.carrier || f.as_string() == "LOWER_UP";
        }
    }
    n.mac = str_member(e, "address");
    n.master = str_member(e, "master");
    if (const Json *info = e.find("linkinfo")) {
        n.kind = str_member(*info, "info_kind");
        const Json *data = info->find("info_data");
        if (n.kind == "bond" && data != nullptr) {
            n.bond = bond_of(*data);
        } else if (n.kind == "bond") {
            n.bond = BondInfo{};
        }
        if (n.kind == "vlan" && data != nullptr) {
            n.vlan_id = int_member(*data, "id", -1);
        }
    }
    if (n.kind == "vlan" || n.kind == "macvlan" || n.kind == "macvtap" || n.kind == "ipvlan" ||
        n.kind == "ipvtap") {
        n.parent = str_member(e, "link");
    }
    return n;
}

} // namespace

Result<std::vector<NetdevInfo>> parse_ip_link_json(std::string_view text, const std::string &what) {
    auto doc = Json::parse(text);
    if (!doc) {
        return doc.status().with_context(what);
    }
    if (!doc->is_array()) {
        return Status(Code::kInvalidArgument,
                      what + ": expected a JSON array (the output of `ip -j -d link show`)");
    }
    std::vector<NetdevInfo> out;
    const auto &items = doc->items();
    for (size_t i = 0; i < items.size(); ++i) {
        auto n = link_of(items[i], i, what);
        if (!n) {
            return n.status();
        }
        out.push_back(std::move(n.value()));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const NetdevInfo &a, const NetdevInfo &b) { return a.ifindex < b.ifindex; });
    for (auto &bond : out) {
        if (!bond.bond) {
            continue;
        }
        for (const auto &member : out) {
            if (member.master == bond.name) {
                bond.bond->slaves.push_back(member.name);
            }
        }
    }
    return out;
}

Result<AddressMap> parse_ip_addr_json(std::string_view text, const std::string &what) {
    auto doc = Json::parse(text);
    if (!doc) {
        return doc.status().with_context(what);
    }
    if (!doc->is_array()) {
        return Status(Code::kInvalidArgument,
                      what + ": expected a JSON array (the output of `ip -j addr show`)");
    }
    AddressMap out;
    for (const auto &e : doc->items()) {
        std::string name = str_member(e, "ifname");
        if (name.empty()) {
            return Status(Code::kInvalidArgument,
                          what + ": an entry has no \"ifname\" (is this `ip -j addr show`?)");
        }
        auto &list = out[name];
        const Json *infos = e.find("addr_info");
        for (const auto &a : infos ? infos->items() : std::vector<Json>{}) {
            std::string local = str_member(a, "local");
            auto addr = util::IpAddress::parse(local);
            int len = int_member(a, "prefixlen", -1);
            if (!addr || len < 0 || len > addr->bits()) {
                return Status(Code::kInvalidArgument,
                              what + ": " + util::printable(name) + " has a malformed address '" +
                                  util::printable(local) + "/" + std::to_string(len) + "'");
            }
            list.push_back(AddressInfo{*addr, len});
        }
    }
    return out;
}

void attach_addresses(std::vector<NetdevInfo> &netdevs, const AddressMap &addresses) {
    for (auto &n : netdevs) {
        auto it = addresses.find(n.name);
        n.addresses = it != addresses.end() ? it->second : std::vector<AddressInfo>{};
    }
}

} // namespace roce::topo
