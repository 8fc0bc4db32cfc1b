/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The component structure. It lives in C because Open MPI's version macros
 * are designated initialisers; all behaviour is in the C++ thunks.
 */
#include "opal_config.h"

#include "btl_roce.h"
#include "ompi_series.h"

static int btl_roce_register(void) { return mca_btl_roce_component_register_params(); }
static int btl_roce_open(void) { return mca_btl_roce_component_open_cxx(); }
static int btl_roce_close(void) { return mca_btl_roce_component_close_cxx(); }

static int btl_roce_progress(void) { return mca_btl_roce_component_progress_cxx(); }

static mca_btl_base_module_t **btl_roce_init(int *num_btls, bool enable_progress_threads,
                                             bool enable_mpi_threads)
{
    return mca_btl_roce_component_init_cxx(num_btls, enable_progress_threads, enable_mpi_threads);
}

mca_btl_roce_component_t mca_btl_roce_component = {
    .super = {
        .btl_version = {
            ROCE_BTL_BASE_VERSION,
            .mca_component_name = "roce",
            MCA_BASE_MAKE_VERSION(component, ROCE_VERSION_MAJOR, ROCE_VERSION_MINOR,
                                  ROCE_VERSION_RELEASE),
            .mca_open_component = btl_roce_open,
            .mca_close_component = btl_roce_close,
            .mca_register_component_params = btl_roce_register,
        },
        .btl_data = {
            .param_field = MCA_BASE_METADATA_PARAM_NONE,
        },
        .btl_init = btl_roce_init,
        .btl_progress = btl_roce_progress,
    },
    .output = -1,
};
