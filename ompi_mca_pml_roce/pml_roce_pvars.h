// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// MPI_T performance variables of the roce PML (pml_roce_*): queue lengths,
// match attempts, rendezvous in flight and the protocol counters.
#pragma once

namespace roce::pml {

/// Registers every pml_roce_* performance variable with the component
/// (from register_params, so ompi_info lists them; they become invalid when
/// the component closes). Values are read from the application's thread
/// (MPI_T_pvar_read): the queue lengths walk the communicators under the
/// pml's locks when threads are in use; counters are relaxed reads. Before
/// enable and after finalize every variable reads 0. Never throws.
void register_pvars() noexcept;

} // namespace roce::pml
