// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// MPI_T performance variables of the roce BTL (btl_roce_*), registered with
// the component so that ompi_info lists them and MPI_T tools read them
// while a job runs.
#pragma once

#include "opal_cxx_compat.h"

#include <cstddef>

#include "counters.h"

namespace roce::btl {

/// Elements of the per-path array variables (btl_roce_path_*): the first
/// paths of this process in BtlCounters order; slots beyond the paths that
/// exist read 0 (path_state: -1 "none", path_peer: -1).
inline constexpr std::size_t kPvarPathSlots = 64;

/// Registers every btl_roce_* performance variable with the component
/// (called from register_params; mca_base_component_pvar_register makes
/// them invalid again when the component closes). Errors are ignored: a
/// variable that cannot be registered is simply not offered.
void register_pvars() noexcept;

/// The counters of every module of this process, read now (defined in
/// btl_roce_component_cxx.cc, where the modules live). Any thread; takes
/// each module's lock in turn.
BtlCounters collect_counters();

} // namespace roce::btl
