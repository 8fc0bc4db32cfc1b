// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The extern "C" thunks behind the component structure. Each one is noexcept,
// catches everything and answers Open MPI with an OPAL code: no exception
// ever crosses into Open MPI.
#include "opal_cxx_compat.h"

#include <cstdlib>
#include <memory>

#include "opal/constants.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/output.h"

#include "btl_roce.h"
#include "btl_roce_log.h"
#include "btl_roce_mca.h"
#include "topo/port_probe.h"
#include "util/privilege.h"
#include "verbs/verbs_api.h"

namespace roce::btl {
namespace {

/// Process-wide state of the component between open and close.
struct ComponentState {
    explicit ComponentState(int output) : log(output) {}
    OpalSink log;
};

std::unique_ptr<ComponentState> g_state;

int open_output() {
    int out = opal_output_open(nullptr);
    int verbose = mca_btl_roce_component.params.verbose;
    if (opal_btl_base_framework.framework_verbose > verbose) {
        verbose = opal_btl_base_framework.framework_verbose;
    }
    opal_output_set_verbosity(out, verbose);
    return out;
}

// Decides whether this process gets roce modules. Must stay cheap and quiet
// when there is no RoCE hardware: Debian's default configuration makes every
// ob1 job initialise every installed btl.
mca_btl_base_module_t **init(int *num_btls) {
    *num_btls = 0;
    util::LogSink &log = g_state->log;

    auto options = validated_options(util::may_use_controlled_qkey());
    if (!options) {
        show_error("invalid parameter", options.status().message() +
                                            "\nThe roce BTL is disabled for this job.");
        return nullptr;
    }

    std::vector<topo::PortProbe> ports = topo::probe_ports(verbs::real_verbs());
    std::string why = topo::explain_unusable(ports);
    if (!why.empty()) {
        log.write(util::LogLevel::kInfo, "not used: " + why);
        return nullptr;
    }
    log.write(util::LogLevel::kInfo,
              "not used: RoCE port(s) present, but this build of the roce BTL has no data path "
              "yet; use btl tcp or ucx for now");
    return nullptr;
}

} // namespace
} // namespace roce::btl

using roce::btl::g_state;

extern "C" {

int mca_btl_roce_component_register_params(void) { return roce::btl::register_params(); }

int mca_btl_roce_component_open_cxx(void) {
    try {
        mca_btl_roce_component.output = roce::btl::open_output();
        g_state = std::make_unique<roce::btl::ComponentState>(mca_btl_roce_component.output);
        return OPAL_SUCCESS;
    } catch (...) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
}

int mca_btl_roce_component_close_cxx(void) {
    try {
        g_state.reset();
        if (mca_btl_roce_component.output >= 0) {
            opal_output_close(mca_btl_roce_component.output);
            mca_btl_roce_component.output = -1;
        }
    } catch (...) {
        // Nothing useful to do at close; never let it reach Open MPI.
    }
    return OPAL_SUCCESS;
}

mca_btl_base_module_t **mca_btl_roce_component_init_cxx(int *num_btls, bool, bool) {
    try {
        if (!g_state) {
            *num_btls = 0;
            return nullptr;
        }
        return roce::btl::init(num_btls);
    } catch (const std::exception &e) {
        opal_output(0, "btl roce: internal error during init: %s; the roce BTL is disabled",
                    e.what());
    } catch (...) {
        opal_output(0, "btl roce: internal error during init; the roce BTL is disabled");
    }
    *num_btls = 0;
    return nullptr;
}

int mca_btl_roce_component_progress_cxx(void) { return 0; }

} // extern "C"
