/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * What differs between the Open MPI series ompi-roce builds against (4.1 and
 * 5.0, checked by configure). The version tests live in compat/ only; the
 * component code uses the names defined here and in the other compat
 * headers.
 *
 *                      4.1                              5.0                  handled in
 *   btl interface      3.1.0                            3.3.0                here
 *   pml interface      2.0.0: pml_ft_event              2.1.0: pml_revoke_comm,  here
 *                                                       pml_get_transports,
 *                                                       SUPPORTS_EXT_CID flag
 *   communicator id    c_contextid (uint32_t), the      c_index: global      ompi_cxx_compat.h,
 *                      same on every process; at most   (OMPI_COMM_GLOBAL_   here (max id,
 *                      65535 (pml_max_contextid)        INDEX) or chosen by  flag)
 *                                                       each process; the
 *                                                       128-bit extended id
 *                                                       in c_contextid; at
 *                                                       most 2^20 - 1 here
 *   recv callback      (btl, tag, des, cbdata)          (btl, receive desc.) opal_btl_compat.h
 *   modex              opal/mca/pmix/pmix.h, OPAL_*     pmix-internal.h,     opal_pmix_compat.h,
 *                                                       PMIX_*, libpmix      configure
 *   threads headers    opal/threads/                    opal/mca/threads/    ompi-5.0/
 *   proc host name     proc->proc_hostname              opal_get_proc_hostname  opal_cxx_compat.h
 *   *_MODULE_DECLSPEC  defined                          gone                 here
 *   C++ defects        request.h compare-exchange       event.h extern "C",  ompi_cxx_compat.h,
 *                                                       communicator.h cast  opal_cxx_compat.h
 *   shared memory btl  vader                            sm                   here (messages)
 *   RDMA remote        (no flag)                        MCA_BTL_FLAGS_RDMA_  here (the btl
 *   completion flag                                     REMOTE_COMPLETION:   sets it on 5.0)
 *                                                       osc/rdma's own RDMA
 *   Debian's devel     all that ours reach              no threads component configure
 *   headers                                             headers              (--with-ompi-headers)
 */
#ifndef ROCE_OMPI_SERIES_H
#define ROCE_OMPI_SERIES_H

#include "opal_config.h"

#if OPAL_MAJOR_VERSION == 4 && OPAL_MINOR_VERSION == 1
#define ROCE_OMPI_SERIES 41
#elif OPAL_MAJOR_VERSION == 5 && OPAL_MINOR_VERSION == 0
#define ROCE_OMPI_SERIES 50
#else
#error                                                                                             \
    "ompi-roce knows the component interfaces of Open MPI 4.1 and 5.0 only (configure checks this)"
#endif

/* The visibility of the component structure, the one symbol a component
 * exports: 4.1's opal_config_bottom.h / ompi_config.h define these, 5.0's
 * do not. */
#ifndef OPAL_MODULE_DECLSPEC
#define OPAL_MODULE_DECLSPEC __attribute__((visibility("default")))
#endif
#ifndef OMPI_MODULE_DECLSPEC
#define OMPI_MODULE_DECLSPEC __attribute__((visibility("default")))
#endif

/* The btl component's interface version. */
#if ROCE_OMPI_SERIES == 41
#define ROCE_BTL_BASE_VERSION MCA_BTL_BASE_VERSION_3_1_0
#else
#define ROCE_BTL_BASE_VERSION MCA_BTL_BASE_VERSION_3_3_0
#endif

/* Remote completion of RDMA: 5.0's btl.h has MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION
 * ("when a put or atomic completes at the initiator it has completed at the
 * target"), 4.1's does not. An RC write completes at the initiator when the
 * responder's ACK arrives, after the responder placed the data, and an atomic
 * when its response arrives: the btl has that semantics on both series. 5.0's
 * osc/rdma uses a btl's own RDMA only when the btl says so; without the flag it
 * emulates put/get/atomics with active messages over the btls' sends. The
 * module adds it to the registered btl_roce_flags (btl::module_flags): 5.0.7's
 * flag enumerator has no name for it, so ompi_info could not print a value
 * holding it. */
#if ROCE_OMPI_SERIES == 41
#define ROCE_BTL_FLAGS_REMOTE_COMPLETION 0
#else
#define ROCE_BTL_FLAGS_REMOTE_COMPLETION MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION
#endif

/* Open MPI's shared-memory btl, for messages that name it. */
#if ROCE_OMPI_SERIES == 41
#define ROCE_SM_BTL_NAME "vader"
#else
#define ROCE_SM_BTL_NAME "sm"
#endif

/*
 * The pml: its interface version, and the module entries that exist in only
 * one series, as designated initialisers for pml_roce_component.c.
 *
 * 5.0: pml_revoke_comm is mca_pml_roce_revoke_comm, which answers
 * OMPI_ERR_NOT_SUPPORTED (pml roce does not implement ULFM's revoke; Open MPI
 * calls the entry unconditionally, so it must not be NULL). pml_get_transports
 * is NULL, as ob1 has it (the callers treat NULL as "no report").
 *
 * Communicator ids. 4.1: c_contextid, the same on every process, bounded by
 * pml_max_contextid = 65535, carried in the 16 bits of a MATCH header.
 * 5.0: MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID is set (without it Open MPI
 * refuses MPI_Comm_create_from_group and sessions). A communicator made
 * from a parent still has an index (c_index) that Open MPI agrees on
 * everywhere; one made without (create_from_group, sessions) has a 128-bit
 * extended id (c_contextid) and an index each process picks itself. Open
 * MPI keeps every index below pml_max_contextid, which bounds how many
 * communicators a process holds at once; pml roce announces 2^20 - 1
 * (wire::kMaxContext; ob1 announces 65535, pml ucx 2^20 - 1). Indexes up to
 * 65535 travel in MATCH headers as before; the rest, and every message to a
 * peer whose index the sender has not learnt yet, in an EXT header
 * (pml_roce_wire.h, pml_roce_ext.cc: ob1's handshake, in our format).
 */
#if ROCE_OMPI_SERIES == 41
#define ROCE_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_0_0
#define ROCE_PML_SERIES_ENTRIES .pml_ft_event = mca_pml_roce_ft_event,
#define ROCE_PML_FLAGS 0
#define ROCE_PML_MAX_CONTEXTID 65535
#else
#define ROCE_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_1_0
#define ROCE_PML_SERIES_ENTRIES                                                                    \
    .pml_revoke_comm = mca_pml_roce_revoke_comm, .pml_get_transports = NULL,
#define ROCE_PML_FLAGS MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID
#define ROCE_PML_MAX_CONTEXTID 1048575 /* 2^20 - 1 = wire::kMaxContext */
#endif

#endif
