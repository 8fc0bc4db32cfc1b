// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Tier 2 helpers: every test case runs in a network namespace of its own,
// made with unshare(CLONE_NEWNET) on the test thread and gone when the next
// case makes another one (or the process exits): nothing touches the host's
// network, nothing needs cleaning up even after a failure.
#pragma once

#include <string>
#include <vector>

#include "netmon/event.h"

namespace roce::netmon::netns {

/// Moves the calling thread (the Catch2 thread; no monitor running) into a
/// brand-new network namespace and turns off IPv6 link-local generation
/// there, so that only the addresses a test adds show up. REQUIREs success.
void fresh_netns();

/// Runs a shell command (`ip ...`) in the current namespace; REQUIREs exit 0
/// and reports the command and its output otherwise.
void sh(const std::string &cmd);
/// The same, returning the exit status instead of failing.
int sh_status(const std::string &cmd);

/// Whether `ip link add ... type <kind>` works in this kernel (checked in a
/// throw-away namespace created by a child process).
bool kernel_has_link_kind(const std::string &kind, std::string *why);

/// Events of the given kinds, in order (for comparing sequences).
std::vector<Event> only(const std::vector<Event> &ev, std::initializer_list<EventKind> kinds);
/// "kind netdev [bond=..] [detail]" per event.
std::vector<std::string> brief(const std::vector<Event> &ev);

/// Number of open fds / threads of this process (leak checks).
int open_fd_count();
int thread_count();

} // namespace roce::netmon::netns
