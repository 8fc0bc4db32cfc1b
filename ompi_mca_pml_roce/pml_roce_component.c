/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The component structure and the module table, in C because Open MPI's
 * version macros are designated initialisers. All behaviour is in C++.
 */
#include "ompi_config.h"

#include "pml_roce.h"
#include "ompi_series.h"

static int pml_roce_register(void) { return mca_pml_roce_component_register_params(); }
static int pml_roce_open(void) { return mca_pml_roce_component_open_cxx(); }
static int pml_roce_close(void) { return mca_pml_roce_component_close_cxx(); }
static int pml_roce_fini(void) { return mca_pml_roce_component_fini_cxx(); }

static mca_pml_base_module_t *pml_roce_init(int *priority, bool enable_progress_threads,
                                            bool enable_mpi_threads)
{
    return mca_pml_roce_component_init_cxx(priority, enable_progress_threads, enable_mpi_threads);
}

/* The module the component's init returns: every entry is C++ behind a C
 * prototype (pml_roce.h). The limits: context ids travel as 16 bits on the
 * wire, tags as 32 bits. The entries and flags of one series only are in
 * compat/ompi_series.h. */
mca_pml_base_module_t mca_pml_roce_module = {
    .pml_add_procs = mca_pml_roce_add_procs,
    .pml_del_procs = mca_pml_roce_del_procs,
    .pml_enable = mca_pml_roce_enable,
    .pml_progress = mca_pml_roce_progress,
    .pml_add_comm = mca_pml_roce_add_comm,
    .pml_del_comm = mca_pml_roce_del_comm,
    .pml_irecv_init = mca_pml_roce_irecv_init,
    .pml_irecv = mca_pml_roce_irecv,
    .pml_recv = mca_pml_roce_recv,
    .pml_isend_init = mca_pml_roce_isend_init,
    .pml_isend = mca_pml_roce_isend,
    .pml_send = mca_pml_roce_send,
    .pml_iprobe = mca_pml_roce_iprobe,
    .pml_probe = mca_pml_roce_probe,
    .pml_start = mca_pml_roce_start,
    .pml_improbe = mca_pml_roce_improbe,
    .pml_mprobe = mca_pml_roce_mprobe,
    .pml_imrecv = mca_pml_roce_imrecv,
    .pml_mrecv = mca_pml_roce_mrecv,
    .pml_dump = mca_pml_roce_dump,
    ROCE_PML_SERIES_ENTRIES /* ft_event (4.1); revoke_comm, get_transports (5.0) */
    .pml_max_contextid = ROCE_PML_MAX_CONTEXTID,
    .pml_max_tag = 2147483647,
    .pml_flags = ROCE_PML_FLAGS,
};

mca_pml_roce_component_t mca_pml_roce_component = {
    .super = {
        .pmlm_version = {
            ROCE_PML_BASE_VERSION,
            .mca_component_name = "roce",
            .mca_component_major_version = ROCE_VERSION_MAJOR,
            .mca_component_minor_version = ROCE_VERSION_MINOR,
            .mca_component_release_version = ROCE_VERSION_RELEASE,
            .mca_open_component = pml_roce_open,
            .mca_close_component = pml_roce_close,
            .mca_register_component_params = pml_roce_register,
        },
        .pmlm_data = {
            MCA_BASE_METADATA_PARAM_NONE
        },
        .pmlm_init = pml_roce_init,
        .pmlm_finalize = pml_roce_fini,
    },
    .output = -1,
};
