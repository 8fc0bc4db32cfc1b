/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Include first in every C++ file that uses Open MPI headers. A few Open MPI
 * 4.1 and 5.0 headers declare C functions without extern "C" (mca_base_var_group.h,
 * mca_base_var_enum.h, reached from mca_base_var.h; opal/util/proc.h): C++ would then look for
 * mangled names that libopen-pal does not export. Including them here, inside extern "C", before
 * anything else reaches them fixes their linkage for the whole file.
 */
#ifndef ROCE_OPAL_CXX_COMPAT_H
#define ROCE_OPAL_CXX_COMPAT_H

#include "opal_config.h"

#include "ompi_series.h"

/* Open MPI 5.0.7's opal/util/event.h opens BEGIN_C_DECLS twice and closes it
 * once; configure defines this when it finds the block left open, and the
 * header is then included here first and its block closed. */
#if defined(__cplusplus) && defined(ROCE_OPAL_EVENT_H_OPENS_EXTERN_C)
#include "opal/util/event.h"
} /* the extern "C" { opal/util/event.h left open */
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "opal/mca/base/mca_base_var.h" /* reaches _group.h and _enum.h */
#include "opal/util/proc.h"
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <cstdlib>
#include <string>

namespace roce::compat {

/// The host name of `proc`, "?" when unknown: 4.1 keeps it in
/// proc->proc_hostname; 5.0 has no such field and asks PMIx through
/// opal_get_proc_hostname, which returns a copy the caller frees (a local
/// lookup, PMIX_OPTIONAL: it does not wait for the server).
inline std::string proc_hostname(const opal_proc_t *proc) {
    if (proc == nullptr) {
        return "?";
    }
#if ROCE_OMPI_SERIES == 41
    return proc->proc_hostname != nullptr ? proc->proc_hostname : "?";
#else
    char *h = opal_get_proc_hostname(proc);
    std::string s = h != nullptr ? h : "?";
    std::free(h);
    return s;
#endif
}

/// Names the host of a process the caller made up (the unit tests' fake
/// peers): 4.1 keeps it in the proc; 5.0 has nowhere to keep it (PMIx
/// answers for real processes), so this does nothing there.
inline void set_proc_hostname(opal_proc_t *proc, const char *host) {
#if ROCE_OMPI_SERIES == 41
    proc->proc_hostname = const_cast<char *>(host);
#else
    (void)proc;
    (void)host;
#endif
}

} // namespace roce::compat
#endif

#endif
