/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The component structure, in C because Open MPI's version macros are
 * designated initialisers. All behaviour is in the C++ thunks.
 */
#include "ompi_config.h"

#include "pml_roce.h"

static int pml_roce_register(void) { return mca_pml_roce_component_register_params(); }
static int pml_roce_open(void) { return mca_pml_roce_component_open_cxx(); }
static int pml_roce_close(void) { return mca_pml_roce_component_close_cxx(); }
static int pml_roce_fini(void) { return mca_pml_roce_component_fini_cxx(); }

static mca_pml_base_module_t *pml_roce_init(int *priority, bool enable_progress_threads,
                                            bool enable_mpi_threads)
{
    return mca_pml_roce_component_init_cxx(priority, enable_progress_threads, enable_mpi_threads);
}

mca_pml_roce_component_t mca_pml_roce_component = {
    .super = {
        .pmlm_version = {
            MCA_PML_BASE_VERSION_2_0_0,
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
