/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The roce PML as Open MPI sees it: the component structure and the thunks
 * the C component file wires into it. Behaviour lives in C++ behind them.
 */
#ifndef MCA_PML_ROCE_H
#define MCA_PML_ROCE_H

#include "ompi_config.h"

#include <stdbool.h>

#include "ompi/mca/pml/pml.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Storage of the MCA parameters (written by Open MPI during registration). */
typedef struct mca_pml_roce_params_t {
    int priority;
    int verbose;
    size_t eager_limit;
} mca_pml_roce_params_t;

typedef struct mca_pml_roce_component_t {
    mca_pml_base_component_2_0_0_t super;
    mca_pml_roce_params_t params;
    int output;
} mca_pml_roce_component_t;

OMPI_MODULE_DECLSPEC extern mca_pml_roce_component_t mca_pml_roce_component;

/* C++ thunks (pml_roce_component_cxx.cc): noexcept, OMPI_ERR_* codes. */
int mca_pml_roce_component_register_params(void);
int mca_pml_roce_component_open_cxx(void);
int mca_pml_roce_component_close_cxx(void);
mca_pml_base_module_t *mca_pml_roce_component_init_cxx(int *priority,
                                                       bool enable_progress_threads,
                                                       bool enable_mpi_threads);
int mca_pml_roce_component_fini_cxx(void);

#ifdef __cplusplus
}
#endif

#endif /* MCA_PML_ROCE_H */
