// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "select/options.h"
#include "topo/snapshot.h"

namespace roce::select {

/// The include/exclude lists of Options, resolved against one snapshot.
///
/// A bare name ("mlx5_bond_0", "bond0.3027") is an RDMA device rule when a
/// device of that name exists, otherwise a netdev rule when a netdev of that
/// name exists; a name matching neither stays a device rule that matches
/// nothing (so a typo in an include list selects nothing, loudly, instead of
/// everything) and is reported by notes().
///
/// Include: rules fall into three dimensions - device[:port], netdev,
/// subnet. A GID is included when, in every dimension that has rules, it
/// matches at least one of them ("mlx5_bond_0,198.19.0.0/24" = the GIDs of
/// mlx5_bond_0 in that subnet). Exclude: a GID is excluded when it matches
/// any rule. Netdev rules compare the GID's own netdev exactly (excluding
/// "bond0" does not exclude "bond0.3027").
///
/// Pure; cheap to build; thread-safe once built.
class RuleSet {
public:
    RuleSet(const Options &options, const topo::Snapshot &snapshot);

    /// "" when the device/port may be used; otherwise the reason, naming the
    /// parameter and entry ("excluded by btl_roce_if_exclude entry
    /// 'mlx5_bond_0'").
    std::string port_verdict(const std::string &device, int port) const;

    /// "" when a GID on `netdev` with `address` may be used; otherwise why.
    std::string gid_verdict(const std::string &netdev, const util::IpAddress &address) const;

    /// "" when GIDs on `netdev` are allowed by the netdev rules alone (the
    /// "netdev allowed" check of a GID index override); otherwise why.
    std::string netdev_verdict(const std::string &netdev) const;

    /// Remarks about entries that name nothing in this snapshot.
    const std::vector<std::string> &notes() const { return notes_; }

private:
    struct Rule {
        enum class Dim { kDevice, kNetdev, kSubnet } dim;
        InterfaceRule rule;
    };
    static bool matches_port(const Rule &r, const std::string &device, int port);

    std::string include_param_;
    std::string exclude_param_;
    std::vector<Rule> include_;
    std::vector<Rule> exclude_;
    std::vector<std::string> notes_;
};

} // namespace roce::select
