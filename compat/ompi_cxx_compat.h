/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Include first in every C++ file of the pml. Open MPI 4.1's
 * OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR passes a void* where a void** is
 * expected, which C accepts and C++ rejects (ompi/request/request.h). The
 * redefinition below only adds the casts C performs implicitly.
 */
#ifndef ROCE_OMPI_CXX_COMPAT_H
#define ROCE_OMPI_CXX_COMPAT_H

#include "ompi_config.h"
#include "opal_cxx_compat.h"
#include "opal/threads/thread_usage.h"

#undef OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR
#define OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_PTR(x, y, z)                                           \
    opal_thread_compare_exchange_strong_ptr((volatile intptr_t *)(x), (void **)(y), (void *)(z))

#endif
