/* Which osc component serves a window.
 *
 * MPI has no call for it and osc_base_verbose does not print the choice, so
 * this looks at the window's module through Open MPI's installed development
 * headers (Debian's libopenmpi-dev has them) and asks the dynamic linker which
 * shared object the module's put function lives in: mca_osc_rdma.so -> "rdma"
 * (Open MPI 4.1 loads its components as such). Open MPI 5.0 builds them into
 * libmpi.so (Debian 13's does), which exports the functions: then the name of
 * the symbol at exactly that address, ompi_osc_sm_put -> "sm". Without those
 * headers (another MPI) it answers "unknown".
 */
#ifndef ROCE_MPI_TEST_OSC_WHICH_H
#define ROCE_MPI_TEST_OSC_WHICH_H

#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include("ompi_config.h") && __has_include("ompi/win/win.h")
#define OSC_WHICH_OMPI 1
#endif
#endif

#ifdef OSC_WHICH_OMPI
#include "ompi_config.h"
#include <stdbool.h>
#include "ompi/win/win.h"
#include "ompi/mca/osc/osc.h"
#include <dlfcn.h>
#endif
#include <string.h>

/* Writes the component name ("rdma", "sm", ...) into out. */
static void osc_component_name(MPI_Win win, char *out, size_t outlen) {
    snprintf(out, outlen, "unknown");
#ifdef OSC_WHICH_OMPI
    struct ompi_win_t *w = (struct ompi_win_t *)win;
    Dl_info di;
    if (!w || !w->w_osc_module || !w->w_osc_module->osc_put)
        return;
    if (!dladdr((void *)w->w_osc_module->osc_put, &di) || !di.dli_fname)
        return;
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    if (strncmp(base, "mca_osc_", 8) == 0) {
        snprintf(out, outlen, "%s", base + 8);
        char *dot = strchr(out, '.');
        if (dot)
            *dot = '\0';
    } else if (di.dli_sname && di.dli_saddr == (void *)w->w_osc_module->osc_put &&
               strncmp(di.dli_sname, "ompi_osc_", 9) == 0 && strchr(di.dli_sname + 9, '_')) {
        /* built into libmpi: ompi_osc_<component>_put */
        size_t n = (size_t)(strchr(di.dli_sname + 9, '_') - (di.dli_sname + 9));
        snprintf(out, outlen, "%.*s", (int)n, di.dli_sname + 9);
    } else {
        snprintf(out, outlen, "in %s", base); /* built into libmpi */
    }
#else
    (void)win;
#endif
}

#endif
