// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The extern "C" thunks behind the component structure: noexcept, catch
// everything, answer Open MPI with OMPI_* codes.
#include "ompi_cxx_compat.h"

#include <algorithm>
#include <exception>

#include "ompi/constants.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "util/params.h"

#include "pml_roce.h"
#include "pml_roce_internal.h"
#include "pml_roce_params.h"
#include "pml_roce_pvars.h"

namespace roce::pml {
void pml_teardown() noexcept; // pml_roce_module.cc
}

namespace {

mca_base_component_t *component() { return &mca_pml_roce_component.super.pmlm_version; }

void reg(const char *name, const char *help, mca_base_var_type_t type,
         mca_base_var_info_lvl_t level, void *storage) {
    (void)mca_base_component_var_register(component(), name, help, type, nullptr, 0,
                                          static_cast<mca_base_var_flag_t>(0), level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

const char *host() {
    return opal_process_info.nodename ? opal_process_info.nodename : "?";
}

} // namespace

extern "C" {

int mca_pml_roce_component_register_params(void) {
    try {
        mca_pml_roce_params_t &p = mca_pml_roce_component.params;
        (void)mca_base_var_group_component_register(
            component(),
            "MPI point-to-point over the roce, " ROCE_SM_BTL_NAME " and self BTLs (ompi-roce)");
        p.priority = roce::pml::kDefaultPriority;
        reg("priority",
            "Selection priority (0..100). Open MPI considers pml roce only when asked for "
            "(--mca pml roce), so this matters only among explicitly listed PMLs.",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_9, &p.priority);
        p.eager_limit = static_cast<size_t>(roce::pml::kDefaultEagerLimit);
        reg("eager_limit",
            "Largest message (bytes, 64..4194304) sent eagerly, i.e. copied into the first "
            "fragment without waiting for the receiver; larger messages use rendezvous with "
            "RDMA. The BTL's own eager limit caps it.",
            MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_4, &p.eager_limit);
        p.verbose = 0;
        reg("verbose",
            "Verbosity of the roce PML (0..100): 0 errors only, 10 protocol decisions, "
            "50 per-message events, 90 tracing.",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_3, &p.verbose);
        p.use_rdma = true;
        reg("use_rdma",
            "Use RDMA get for large contiguous messages when the BTL offers it (true); false "
            "sends every large message through the send pipeline (RNDV, ACK, fragments).",
            MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, &p.use_rdma);
        p.rget_limit = 0;
        reg("rget_limit",
            "Contiguous rendezvous messages of at least this many bytes are fetched by the "
            "receiver with RDMA get when the BTL offers it; smaller ones (and everything when "
            "pml_roce_use_rdma is false) go through the send pipeline (RNDV, ACK, fragments).",
            MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p.rget_limit);
        p.stream_limit = static_cast<size_t>(roce::pml::kDefaultStreamLimit);
        reg("stream_limit",
            "Rendezvous messages of at most this many bytes (0..1048576) over a network BTL "
            "are streamed: the header with the first bytes, then the rest in fragments at once, "
            "without waiting for the receiver (one trip instead of three; the receiver keeps "
            "what arrives before the receive is posted). 0 disables it. Synchronous sends, "
            "shared-memory BTLs (self, vader: their single-copy RDMA is cheaper) and Open MPI "
            "5.0 messages by extended communicator id never stream.",
            MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p.stream_limit);
        p.split_min = static_cast<size_t>(roce::pml::kDefaultSplitMin);
        reg("split_min",
            "RDMA-get rendezvous messages of at least this many bytes (0 off, else "
            "128..2^62) over a shared-memory BTL that offers both get and put (vader with "
            "CMA or XPMEM) are split: the receiver gets the first half while the sender puts "
            "the second, so both cores copy. Contiguous receives only.",
            MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p.split_min);
        p.pipeline_depth = static_cast<int>(roce::pml::kDefaultPipelineDepth);
        reg("pipeline_depth",
            "Fragments in flight per message in the send pipeline (1..1024); each is at most "
            "the BTL's max_send_size.",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &p.pipeline_depth);
        p.test_fail_registration = 0;
        reg("test_fail_registration",
            "Testing only: pretend that memory registration fails, as under a low memlock "
            "limit (0 never, 1 the sender's, 2 the receiver's, 3 both); the data must still "
            "arrive, through the send pipeline.",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_9, &p.test_fail_registration);
        p.test_fail_rdma = 0;
        reg("test_fail_rdma",
            "Testing only: make RDMA fail (0 never, 1 a split RGET's sender cannot put, 2 "
            "every get fails to start, 3 both); the data must still arrive, in fragments.",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_9, &p.test_fail_rdma);
        p.test_ext_delay = 0;
        reg("test_ext_delay",
            "Testing only (Open MPI 5.0): processes with an even rank in MPI_COMM_WORLD progress "
            "for this many milliseconds (0..1000) before they add a communicator that has no "
            "global index (MPI_Comm_create_from_group), as another thread could, so that their "
            "peers' first messages on it arrive by extended id before it exists here (0: never).",
            MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_9, &p.test_ext_delay);
        roce::pml::register_pvars();
        return OMPI_SUCCESS;
    } catch (...) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
}

int mca_pml_roce_component_open_cxx(void) {
    mca_pml_roce_component.output = opal_output_open(nullptr);
    // pml_base_verbose raises it, as it does for Open MPI's own pmls.
    opal_output_set_verbosity(mca_pml_roce_component.output,
                              std::max(mca_pml_roce_component.params.verbose,
                                       ompi_pml_base_framework.framework_verbose));
    // The btls are driven through the bml (r2), as ob1 does; opening the
    // framework is reference counted.
    return mca_base_framework_open(&ompi_bml_base_framework, static_cast<mca_base_open_flag_t>(0));
}

int mca_pml_roce_component_close_cxx(void) {
    int rc = mca_base_framework_close(&ompi_bml_base_framework);
    if (mca_pml_roce_component.output >= 0) {
        opal_output_close(mca_pml_roce_component.output);
        mca_pml_roce_component.output = -1;
    }
    return rc;
}

mca_pml_base_module_t *mca_pml_roce_component_init_cxx(int *priority, bool progress_threads,
                                                       bool mpi_threads) {
    try {
        const mca_pml_roce_params_t &p = mca_pml_roce_component.params;
        auto opts = roce::pml::validate_pml_options(static_cast<int64_t>(p.eager_limit),
                                                    p.priority, p.verbose);
        if (!opts) {
            roce::pml::report_before_exit("error: %s; pml roce cannot run with this value",
                                          opts.status().message().c_str());
            return nullptr;
        }
        roce::util::Status ds =
            roce::util::check_range("pml_roce_test_ext_delay", p.test_ext_delay, 0, 1000,
                                    "0..1000 (milliseconds)");
        if (!ds) {
            roce::pml::report_before_exit("error: %s; pml roce cannot run with this value",
                                          ds.message().c_str());
            return nullptr;
        }
        roce::util::Status rs = roce::pml::check_rendezvous_options(
            p.pipeline_depth, static_cast<int64_t>(p.rget_limit > static_cast<size_t>(INT64_MAX)
                                                       ? INT64_MAX
                                                       : p.rget_limit));
        if (!rs) {
            roce::pml::report_before_exit("error: %s; pml roce cannot run with this value",
                                          rs.message().c_str());
            return nullptr;
        }
        roce::util::Status ss = roce::pml::check_stream_limit(static_cast<int64_t>(
            p.stream_limit > static_cast<size_t>(INT64_MAX) ? INT64_MAX : p.stream_limit));
        if (!ss) {
            roce::pml::report_before_exit("error: %s; pml roce cannot run with this value",
                                          ss.message().c_str());
            return nullptr;
        }
        roce::util::Status sps = roce::pml::check_split_min(static_cast<int64_t>(
            p.split_min > static_cast<size_t>(INT64_MAX) ? INT64_MAX : p.split_min));
        if (!sps) {
            roce::pml::report_before_exit("error: %s; pml roce cannot run with this value",
                                          sps.message().c_str());
            return nullptr;
        }
        *priority = opts->priority;
        roce::pml::g.split_min = p.split_min;
        roce::pml::g.stream_limit = p.stream_limit;
        roce::pml::g.rget_limit = p.rget_limit;
        roce::pml::g.pipeline_depth = p.pipeline_depth;
        roce::pml::g.eager_limit = opts->eager_limit;
        roce::pml::g.use_rdma = p.use_rdma ? 1 : 0;
        roce::pml::g.fail_registration = p.test_fail_registration & 3;
        roce::pml::g.fail_rdma = p.test_fail_rdma & 3;
        roce::pml::g.ext_delay_ms = p.test_ext_delay;
        if (mca_bml_base_init(progress_threads, mpi_threads) != OMPI_SUCCESS) {
            roce::pml::report("no btl", "error: the bml (r2) could not be initialised; no BTL "
                                        "is available to pml roce");
            return nullptr;
        }
        // The series' flags (5.0: extended communicator ids, ompi_series.h),
        // then what the selected btls require.
        mca_pml_roce_module.pml_flags = ROCE_PML_FLAGS;
        mca_btl_base_selected_module_t *sm;
        OPAL_LIST_FOREACH (sm, &mca_btl_base_modules_initialized, mca_btl_base_selected_module_t) {
            uint32_t f = sm->btl_module->btl_flags;
            if (f & MCA_BTL_FLAGS_BTL_PROGRESS_THREAD_ENABLED) {
                roce::pml::g_btl_threads = true;
            }
            if (f & MCA_BTL_FLAGS_SINGLE_ADD_PROCS) {
                mca_pml_roce_module.pml_flags |= MCA_PML_BASE_FLAG_REQUIRE_WORLD;
            }
        }
        opal_output_verbose(10, mca_pml_roce_component.output,
                            "pml roce [%s]: selected with priority %d, eager limit %zu, rdma %s",
                            host(), *priority, opts->eager_limit, p.use_rdma ? "on" : "off");
        return &mca_pml_roce_module;
    } catch (const std::exception &e) {
        roce::pml::report("internal error", "error: internal error during init: %s", e.what());
    } catch (...) {
        roce::pml::report("internal error", "error: internal error during init");
    }
    return nullptr;
}

int mca_pml_roce_component_fini_cxx(void) {
    if (!roce::pml::g.enabled) {
        return OMPI_SUCCESS; // never selected and enabled: the bml is not ours to close
    }
    int rc = mca_bml.bml_finalize();
    roce::pml::pml_teardown();
    return rc;
}

} // extern "C"
