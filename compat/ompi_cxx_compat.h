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
 * Also the communicator ids: the index the pml matches on, whether it is
 * global, the extended id (see ompi_series.h).
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

/// True when communicators may have per-process indexes or indexes above
/// 16 bits (Open MPI 5.0 with MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID); false
/// under 4.1, where every branch on it folds away.
inline constexpr bool kExtendedIds = ROCE_OMPI_SERIES != 41;
/// The largest communicator index Open MPI gives out with pml roce
/// (pml_max_contextid, ompi_series.h).
inline constexpr uint32_t kMaxContextId = ROCE_PML_MAX_CONTEXTID;

/// This process's index of the communicator, the id the pml matches
/// arriving messages on and pml_max_contextid bounds: 4.1's c_contextid;
/// 5.0's c_index (5.0's c_contextid is the 128-bit extended id).
inline uint32_t comm_cid(const ompi_communicator_t *comm) {
#if ROCE_OMPI_SERIES == 41
    return comm->c_contextid;
#else
    return ompi_comm_get_local_cid(comm);
#endif
}

/// True when every process of the communicator has the same index of it:
/// always under 4.1; under 5.0 for communicators made from a parent
/// (OMPI_COMM_GLOBAL_INDEX), false for those made from a group or a session.
inline bool comm_has_global_index(const ompi_communicator_t *comm) {
#if ROCE_OMPI_SERIES == 41
    (void)comm;
    return true;
#else
    return OMPI_COMM_IS_GLOBAL_INDEX(comm) != 0;
#endif
}

/// The communicator's extended id (5.0: c_contextid's cid_base and
/// cid_sub), the same on every process; {0, 0} under 4.1, which has none.
inline void comm_excid(const ompi_communicator_t *comm, uint64_t out[2]) {
#if ROCE_OMPI_SERIES == 41
    (void)comm;
    out[0] = out[1] = 0;
#else
    const ompi_comm_extended_cid_t id = ompi_comm_get_extended_cid(comm);
    out[0] = id.cid_base;
    out[1] = id.cid_sub.u64;
#endif
}

} // namespace roce::compat

#endif
