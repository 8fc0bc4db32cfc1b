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
 * Also the communicator ids the pml matches on and sends (see ompi_series.h).
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

/// This process's id of the communicator, the one the pml matches arriving
/// messages on and pml_max_contextid bounds: 4.1's c_contextid; 5.0's local
/// index (c_index). 5.0's c_contextid is the 128-bit extended id, which the
/// pml does not carry on the wire.
inline uint32_t comm_cid(const ompi_communicator_t *comm) {
#if ROCE_OMPI_SERIES == 41
    return comm->c_contextid;
#else
    return ompi_comm_get_local_cid(comm);
#endif
}

/// Rank `dst`'s id of the communicator (its comm_cid), which a message to
/// it carries. 4.1, and 5.0 for a communicator made from a parent one: the
/// same on every process (Open MPI agrees on it), so our own. 5.0 with
/// extended ids (MPI_Comm_create_from_group, sessions: no global index):
/// each process numbers it locally; Open MPI publishes each one's index
/// through PMIx keyed by the extended id, and ompi_comm_get_remote_cid looks
/// it up once per peer (a blocking PMIx_Get, bounded by Open MPI's connect
/// timeout) and keeps it. Fails with an OMPI error code.
inline int peer_comm_cid(ompi_communicator_t *comm, int dst, uint32_t *cid) {
#if ROCE_OMPI_SERIES == 41
    (void)dst;
    *cid = comm->c_contextid;
    return OMPI_SUCCESS;
#else
    return ompi_comm_get_remote_cid(comm, dst, cid);
#endif
}

} // namespace roce::compat

#endif
