// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/rules.h"

#include "util/strings.h"

namespace roce::select {

namespace {

using Kind = InterfaceRule::Kind;

std::string quoted_list(const std::vector<std::string> &texts) {
    return util::join(texts, ",");
}

} // namespace

RuleSet::RuleSet(const Options &options, const topo::Snapshot &snapshot)
    : include_param_(options.prefix + "if_include"), exclude_param_(options.prefix + "if_exclude") {
    auto resolve = [&](const InterfaceRule &r, const std::string &param, std::vector<Rule> &out) {
        if (r.kind == Kind::kSubnet) {
            out.push_back({Rule::Dim::kSubnet, r});
            return;
        }
        const topo::DeviceInfo *dev = snapshot.find_device(r.name);
        if (r.kind == Kind::kDevicePort) {
            if (dev == nullptr) {
                notes_.push_back(util::format("%s entry '%s' names no RDMA device here",
                                              param.c_str(), r.text.c_str()));
            } else if (dev->find_port(r.port) == nullptr) {
                notes_.push_back(util::format(
                    "%s entry '%s' names port %d, but %s has %d port%s", param.c_str(),
                    r.text.c_str(), r.port, dev->name.c_str(), dev->phys_port_cnt,
                    dev->phys_port_cnt == 1 ? "" : "s"));
            }
            out.push_back({Rule::Dim::kDevice, r});
            return;
        }
        if (dev != nullptr) {
            out.push_back({Rule::Dim::kDevice, r});
        } else if (snapshot.find_netdev(r.name) != nullptr) {
            out.push_back({Rule::Dim::kNetdev, r});
        } else {
            notes_.push_back(util::format(
                "%s entry '%s' names neither an RDMA device nor a netdev here", param.c_str(),
                r.text.c_str()));
            out.push_back({Rule::Dim::kDevice, r});
        }
    };
    for (const auto &r : options.include) {
        resolve(r, include_param_, include_);
    }
    for (const auto &r : options.exclude) {
        resolve(r, exclude_param_, exclude_);
    }
}

bool RuleSet::matches_port(const Rule &r, const std::string &device, int port) {
    if (r.rule.name != device) {
        return false;
    }
    return r.rule.kind != Kind::kDevicePort || r.rule.port == port;
}

std::string RuleSet::port_verdict(const std::string &device, int port) const {
    for (const auto &r : exclude_) {
        if (r.dim == Rule::Dim::kDevice && matches_port(r, device, port)) {
            return util::format("excluded by %s entry '%s'", exclude_param_.c_str(),
                                r.rule.text.c_str());
        }
    }
    std::vector<std::string> listed;
    for (const auto &r : include_) {
        if (r.dim != Rule::Dim::kDevice) {
            continue;
        }
        if (matches_port(r, device, port)) {
            return {};
        }
        listed.push_back(r.rule.text);
    }
    if (listed.empty()) {
        return {};
    }
    return util::format("not selected: %s (%s) does not list %s:%d", include_param_.c_str(),
                        quoted_list(listed).c_str(), device.c_str(), port);
}

std::string RuleSet::netdev_verdict(const std::string &netdev) const {
    for (const auto &r : exclude_) {
        if (r.dim == Rule::Dim::kNetdev && r.rule.name == netdev) {
            return util::format("netdev %s is excluded by %s entry '%s'", netdev.c_str(),
                                exclude_param_.c_str(), r.rule.text.c_str());
        }
    }
    std::vector<std::string> listed;
    for (const auto &r : include_) {
        if (r.dim != Rule::Dim::kNetdev) {
            continue;
        }
        if (r.rule.name == netdev) {
            return {};
        }
        listed.push_back(r.rule.text);
    }
    if (listed.empty()) {
        return {};
    }
    return util::format("netdev %s is not in %s (%s)", netdev.c_str(), include_param_.c_str(),
                        quoted_list(listed).c_str());
}

std::string RuleSet::gid_verdict(const std::string &netdev, const util::IpAddress &address) const {
    std::string why = netdev_verdict(netdev);
    if (!why.empty()) {
        return why;
    }
    for (const auto &r : exclude_) {
        if (r.dim == Rule::Dim::kSubnet && r.rule.subnet.contains(address)) {
            return util::format("address %s is excluded by %s entry '%s'",
                                address.to_string().c_str(), exclude_param_.c_str(),
                                r.rule.text.c_str());
        }
    }
    std::vector<std::string> listed;
    for (const auto &r : include_) {
        if (r.dim != Rule::Dim::kSubnet) {
            continue;
        }
        if (r.rule.subnet.contains(address)) {
            return {};
        }
        listed.push_back(r.rule.text);
    }
    if (listed.empty()) {
        return {};
    }
    return util::format("address %s is not in %s (%s)", address.to_string().c_str(),
                        include_param_.c_str(), quoted_list(listed).c_str());
}

} // namespace roce::select
