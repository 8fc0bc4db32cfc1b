// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

namespace roce::util {

/// True when this process may create QPs with a controlled qkey (bit 31 set):
/// effective uid 0 or CAP_NET_RAW in the effective capability set (what the
/// kernel checks since Linux 6.4). Reads /proc/self/status; false if unreadable.
bool may_use_controlled_qkey() noexcept;

} // namespace roce::util
