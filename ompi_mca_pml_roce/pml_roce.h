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
#include "ompi_series.h" /* OMPI_MODULE_DECLSPEC in 5.0 */

#ifdef __cplusplus
extern "C" {
#endif

/** Storage of the MCA parameters (written by Open MPI during registration). */
typedef struct mca_pml_roce_params_t {
    int priority;
    int verbose;
    size_t eager_limit;
    bool use_rdma;             /* pml_roce_use_rdma */
    size_t rget_limit;         /* pml_roce_rget_limit */
    int pipeline_depth;        /* pml_roce_pipeline_depth */
    size_t stream_limit;       /* pml_roce_stream_limit */
    size_t split_min;          /* pml_roce_split_min */
    int test_fail_registration; /* pml_roce_test_fail_registration (tests only) */
    int test_fail_rdma;         /* pml_roce_test_fail_rdma (tests only) */
    int test_ext_delay;        /* pml_roce_test_ext_delay (tests only, Open MPI 5.0) */
} mca_pml_roce_params_t;

typedef struct mca_pml_roce_component_t {
    mca_pml_base_component_t super; /* 2.0.0 in Open MPI 4.1, 2.1.0 in 5.0 */
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
#define MCA_PML_ROCE_NOEXCEPT noexcept
#else
#define MCA_PML_ROCE_NOEXCEPT
#endif

/* The module: its table is defined in pml_roce_component.c, the functions in
 * C++ (pml_roce_module.cc, _send.cc, _recv.cc, _request.cc). */
extern mca_pml_base_module_t mca_pml_roce_module;

int mca_pml_roce_add_procs(struct ompi_proc_t **procs, size_t nprocs) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_del_procs(struct ompi_proc_t **procs, size_t nprocs) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_enable(bool enable) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_progress(void) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_add_comm(struct ompi_communicator_t *comm) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_del_comm(struct ompi_communicator_t *comm) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_irecv_init(void *buf, size_t count, struct ompi_datatype_t *dt, int src, int tag,
                            struct ompi_communicator_t *comm,
                            struct ompi_request_t **request) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_irecv(void *buf, size_t count, struct ompi_datatype_t *dt, int src, int tag,
                       struct ompi_communicator_t *comm,
                       struct ompi_request_t **request) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_recv(void *buf, size_t count, struct ompi_datatype_t *dt, int src, int tag,
                      struct ompi_communicator_t *comm,
                      ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_isend_init(const void *buf, size_t count, struct ompi_datatype_t *dt, int dst,
                            int tag, mca_pml_base_send_mode_t mode,
                            struct ompi_communicator_t *comm,
                            struct ompi_request_t **request) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_isend(const void *buf, size_t count, struct ompi_datatype_t *dt, int dst, int tag,
                       mca_pml_base_send_mode_t mode, struct ompi_communicator_t *comm,
                       struct ompi_request_t **request) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_send(const void *buf, size_t count, struct ompi_datatype_t *dt, int dst, int tag,
                      mca_pml_base_send_mode_t mode,
                      struct ompi_communicator_t *comm) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_iprobe(int src, int tag, struct ompi_communicator_t *comm, int *matched,
                        ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_probe(int src, int tag, struct ompi_communicator_t *comm,
                       ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_start(size_t count, struct ompi_request_t **requests) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_improbe(int src, int tag, struct ompi_communicator_t *comm, int *matched,
                         struct ompi_message_t **message,
                         ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_mprobe(int src, int tag, struct ompi_communicator_t *comm,
                        struct ompi_message_t **message,
                        ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_imrecv(void *buf, size_t count, struct ompi_datatype_t *dt,
                        struct ompi_message_t **message,
                        struct ompi_request_t **request) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_mrecv(void *buf, size_t count, struct ompi_datatype_t *dt,
                       struct ompi_message_t **message,
                       ompi_status_public_t *status) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_dump(struct ompi_communicator_t *comm, int verbose) MCA_PML_ROCE_NOEXCEPT;
/* 4.1's pml_ft_event (a no-op) and 5.0's pml_revoke_comm (not supported);
 * compat/ompi_series.h puts the one of the series into the module. */
int mca_pml_roce_ft_event(int state) MCA_PML_ROCE_NOEXCEPT;
int mca_pml_roce_revoke_comm(struct ompi_communicator_t *comm,
                             bool coll_only) MCA_PML_ROCE_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* MCA_PML_ROCE_H */
