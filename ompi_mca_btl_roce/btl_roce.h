/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The roce BTL as Open MPI sees it: the component structure and the thunks
 * that the C component file wires into it. Everything behind the thunks is
 * C++ (btl_roce_*.cc) and never lets an exception reach Open MPI.
 */
#ifndef MCA_BTL_ROCE_H
#define MCA_BTL_ROCE_H

#include "opal_config.h"

#include <stdbool.h>

#include "opal/mca/btl/btl.h"
#include "ompi_series.h" /* OPAL_MODULE_DECLSPEC in 5.0 */

#ifdef __cplusplus
extern "C" {
#endif

/** Storage of the MCA parameters; Open MPI writes the user's values here
 *  during registration. Validated copies live in the C++ core. */
typedef struct mca_btl_roce_params_t {
    char *if_include;
    char *if_exclude;
    int gid_index;
    int roce_version;
    int address_family;
    unsigned int qkey;
    int verbose;
    /* transport tuning */
    int srq_size;
    int send_frags;
    int sq_depth;
    int max_inline;
    int credits;
    int ack_timeout;
    int retry_count;
    int connect_timeout;
    /* LAG */
    int lag_policy;
    int num_paths;
    /* large RDMA: chunk size, chunks in flight per path, striping threshold */
    int rdma_chunk;
    int rdma_chunks_per_path;
    int rdma_stripe_min;
    bool netmon;
    /* RC or DC (proto/transport.h) */
    int transport;
    int dc_peer_threshold;
    int dc_dcis;
} mca_btl_roce_params_t;

typedef struct mca_btl_roce_component_t {
    mca_btl_base_component_3_0_0_t super;
    mca_btl_roce_params_t params;
    /** opal_output stream of this component (-1 until opened). */
    int output;
} mca_btl_roce_component_t;

OPAL_MODULE_DECLSPEC extern mca_btl_roce_component_t mca_btl_roce_component;

/* Thunks implemented in C++ (btl_roce_component_cxx.cc). Each is noexcept
 * and maps internal errors to OPAL_ERR_* codes. */
int mca_btl_roce_component_register_params(void);
int mca_btl_roce_component_open_cxx(void);
int mca_btl_roce_component_close_cxx(void);
mca_btl_base_module_t **mca_btl_roce_component_init_cxx(int *num_btls,
                                                        bool enable_progress_threads,
                                                        bool enable_mpi_threads);
int mca_btl_roce_component_progress_cxx(void);
/* Called by a module's btl_finalize: forget and delete it. */
int mca_btl_roce_component_module_finalized(mca_btl_base_module_t *module);

#ifdef __cplusplus
}
#endif

#endif /* MCA_BTL_ROCE_H */
