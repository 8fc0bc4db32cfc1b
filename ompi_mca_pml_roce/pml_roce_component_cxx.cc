// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The extern "C" thunks behind the component structure: noexcept, catch
// everything, answer Open MPI with OMPI_* codes.
#include "ompi_cxx_compat.h"

#include <exception>

#include "ompi/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "pml_roce.h"
#include "pml_roce_params.h"

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
            component(), "MPI point-to-point over the roce, vader and self BTLs (ompi-roce)");
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
        return OMPI_SUCCESS;
    } catch (...) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
}

int mca_pml_roce_component_open_cxx(void) {
    mca_pml_roce_component.output = opal_output_open(nullptr);
    opal_output_set_verbosity(mca_pml_roce_component.output,
                              mca_pml_roce_component.params.verbose);
    return OMPI_SUCCESS;
}

int mca_pml_roce_component_close_cxx(void) {
    if (mca_pml_roce_component.output >= 0) {
        opal_output_close(mca_pml_roce_component.output);
        mca_pml_roce_component.output = -1;
    }
    return OMPI_SUCCESS;
}

mca_pml_base_module_t *mca_pml_roce_component_init_cxx(int *priority, bool, bool) {
    try {
        const mca_pml_roce_params_t &p = mca_pml_roce_component.params;
        auto opts = roce::pml::validate_pml_options(static_cast<int64_t>(p.eager_limit),
                                                    p.priority, p.verbose);
        if (!opts) {
            opal_output(0, "pml roce [%s]: error: %s; pml roce cannot run with this value",
                        host(), opts.status().message().c_str());
            return nullptr;
        }
        *priority = opts->priority;
        opal_output(0,
                    "pml roce [%s]: error: this build has no MPI point-to-point engine yet; "
                    "run with --mca pml ob1 (the roce BTL works under it)",
                    host());
        return nullptr;
    } catch (const std::exception &e) {
        opal_output(0, "pml roce [%s]: internal error during init: %s", host(), e.what());
    } catch (...) {
        opal_output(0, "pml roce [%s]: internal error during init", host());
    }
    return nullptr;
}

int mca_pml_roce_component_fini_cxx(void) { return OMPI_SUCCESS; }

} // extern "C"
