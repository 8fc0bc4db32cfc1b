// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Heap accounting for the C++ benchmarks: linking alloc_count.cc into a
// program replaces its global operator new/delete with counting ones.
#pragma once

#include <cstdint>

namespace roce::bench {

/// operator new calls since the program started.
uint64_t allocations() noexcept;
/// Bytes allocated through operator new and not yet deleted (usable sizes).
int64_t live_bytes() noexcept;

} // namespace roce::bench
