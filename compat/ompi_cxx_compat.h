/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Include first in every C++ file of the pml. Open MPI 4.1's
 * OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR passes a void* where a void** is
 * expected, which C accepts and C++ rejects (ompi/request/request.h). The
 * redefinition below only adds the casts C performs implicitly; 5.0's macro
 * has them already. 5.0's communicator.h passes a void* as a void** to
 * opal_hash_table_get_value_ptr (ompi_comm_lookup_cid): the same cast, by a
 * macro of the function's own name around that one header.
 *
 * Also the communicator id the pml matches on (see ompi_series.h).
 */
#ifndef ROCE_OMPI_CXX_COMPAT_H
#define ROCE_OMPI_CXX_COMPAT_H

#include "ompi_config.h"
#include "opal_cxx_compat.h"
#include "ompi_series.h"
#include "opal/threads/thread_usage.h" /* compat/ompi-5.0 maps it for 5.0 */

#if ROCE_OMPI_SERIES == 41
#undef OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR
#define OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR(x, y, z)                                           \
    opal_thread_compare_exchange_strong_ptr((volatile intptr_t *)(x), (void **)(y), (void *)(z))
#include "ompi/communicator/communicator.h"
#else
#include "opal/class/opal_hash_table.h"
#define opal_hash_table_get_value_ptr(table, key, keylen, ptr)                                     \
    opal_hash_table_get_value_ptr((table), (key), (keylen), (void **)(ptr))
#include "ompi/communicator/communicator.h"
#undef opal_hash_table_get_value_ptr
#endif

namespace roce::compat {

/// The communicator's id as the pml matches on it and as
/// pml_max_contextid bounds it: 4.1's c_contextid; 5.0's local index
/// (c_index), equal on every process of the communicator as long as the pml
/// does not announce MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID (5.0's c_contextid
/// is then the 128-bit extended id, which pml roce does not carry).
inline uint32_t comm_cid(const ompi_communicator_t *comm) {
#if ROCE_OMPI_SERIES == 41
    return comm->c_contextid;
#else
    return ompi_comm_get_local_cid(comm);
#endif
}

} // namespace roce::compat

#endif
