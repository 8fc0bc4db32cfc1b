/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The modex. 4.1 wraps PMIx in its own framework (opal/mca/pmix/pmix.h,
 * keys OPAL_PMIX_*, types OPAL_*); 5.0 calls PMIx directly
 * (opal/mca/pmix/pmix-internal.h, PMIx's PMIX_* keys and types). The
 * OPAL_MODEX_SEND / OPAL_MODEX_RECV / OPAL_MODEX_RECV_VALUE_OPTIONAL macros
 * keep their names and arguments in both; only the scope, key and type
 * names below differ. Their status is 0 on success in both (PMIX_SUCCESS ==
 * OPAL_SUCCESS).
 */
#ifndef ROCE_OPAL_PMIX_COMPAT_H
#define ROCE_OPAL_PMIX_COMPAT_H

#include "opal_cxx_compat.h"

#include "ompi_series.h"

#if ROCE_OMPI_SERIES == 41
#include "opal/mca/pmix/pmix.h"
#define ROCE_PMIX_GLOBAL OPAL_PMIX_GLOBAL
#define ROCE_PMIX_JOB_SIZE OPAL_PMIX_JOB_SIZE
#define ROCE_PMIX_UINT32 OPAL_UINT32
#else
#include "opal/mca/pmix/pmix-internal.h"
#define ROCE_PMIX_GLOBAL PMIX_GLOBAL
#define ROCE_PMIX_JOB_SIZE PMIX_JOB_SIZE
#define ROCE_PMIX_UINT32 PMIX_UINT32
#endif

#endif
