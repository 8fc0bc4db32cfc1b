// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace roce::btl {

class Module;

/// The btl modules (rails) of one process, and which peers each reaches
/// now: what a module that lost every path to a peer consults to find a
/// sibling rail that still reaches it (issue 16; docs/architecture.md,
/// "Losing a rail"). The component owns one and hands it to every module
/// (ModuleEnv::rails); a module joins when its port index is known
/// (Module::set_port_index) and leaves when it is destroyed.
///
/// "Reaches" means the module's endpoint for the peer has at least one path
/// up: the module says so when a path comes up and when it loses the last
/// one or the peer fails (set_reach), so a lookup costs one hash probe per
/// rail under a mutex, and is made only off the hot path (when a module has
/// no live path to a peer).
///
/// Locks: its own mutex, a leaf - taken with at most one module lock held
/// and never while calling a module. A Module* it returns is used without
/// that mutex: modules leave the set only in their destructor, at
/// MPI_Finalize, when no other module's progress runs.
class Rails {
public:
    /// `m` is the rail published at `port_index` of this process's modex
    /// address (again: its index is updated).
    void join(Module *m, uint16_t port_index);
    /// `m` is going: never returned again.
    void leave(Module *m);
    /// Whether `m` has a live path to the process named `peer` now.
    void set_reach(const Module *m, uint64_t peer, bool reached);
    /// A rail other than `self` with a live path to `peer` (the one with the
    /// lowest port index), or nullptr.
    Module *sibling(const Module *self, uint64_t peer) const;
    /// The rail published at `port_index`, or nullptr.
    Module *at_port(uint16_t port_index) const;
    /// The port index `m` joined with (-1: not a member).
    int port_of(const Module *m) const;
    /// Every rail now, with its port index, in the order they joined.
    std::vector<std::pair<uint16_t, Module *>> members() const;

private:
    struct Rail {
        Module *module = nullptr;
        uint16_t port = 0;
        std::unordered_set<uint64_t> reached;
    };
    mutable std::mutex mu_;
    std::vector<Rail> rails_;
};

} // namespace roce::btl
