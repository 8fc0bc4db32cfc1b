// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include "btl_roce_module.h"
#include "select/options.h"
#include "util/status.h"

namespace roce::btl {

/// Registers every btl_roce_* MCA parameter (with help text, info level and
/// enumerated values) into mca_btl_roce_component.params. Called from the
/// component's register hook (also by ompi_info). Returns an OPAL code.
int register_params() noexcept;

/// Validates the registered values. The error names the parameter, the value
/// and what is allowed. `privileged`: see util::may_use_controlled_qkey().
util::Result<select::Options> validated_options(bool privileged);

/// Validates the transport tunables (queue depths, credits, timeouts) and
/// builds the module configuration from them and from the generic btl
/// parameters (eager limit, max send size) registered into the template.
util::Result<ModuleConfig> validated_module_config();

} // namespace roce::btl
