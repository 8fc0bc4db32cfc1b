/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Include first in every C++ file that uses Open MPI headers. A few Open MPI
 * 4.1 headers declare C functions without extern "C" (mca_base_var_group.h,
 * mca_base_var_enum.h, reached from mca_base_var.h; opal/util/proc.h): C++ would then look for mangled names that
 * libopen-pal does not export. Including them here, inside extern "C",
 * before anything else reaches them fixes their linkage for the whole file.
 */
#ifndef ROCE_OPAL_CXX_COMPAT_H
#define ROCE_OPAL_CXX_COMPAT_H

#include "opal_config.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "opal/mca/base/mca_base_var.h" /* reaches _group.h and _enum.h */
#include "opal/util/proc.h"
#ifdef __cplusplus
}
#endif

#endif
