// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_log.h"

#include <unistd.h>

#include "opal/constants.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_roce.h"

#ifndef ROCE_HELP_DIR
#error "ROCE_HELP_DIR must be defined by the build (the installed help file directory)"
#endif

namespace roce::btl {

int verbosity_for(util::LogLevel level) noexcept {
    switch (level) {
    case util::LogLevel::kError:
    case util::LogLevel::kWarn: return 0;
    case util::LogLevel::kInfo: return 10;
    case util::LogLevel::kDebug: return 50;
    case util::LogLevel::kTrace: return 90;
    }
    return 100;
}

bool OpalSink::enabled(util::LogLevel level) const noexcept {
    return level <= util::LogLevel::kWarn || opal_output_get_verbosity(output_) >= verbosity_for(level);
}

void OpalSink::write(util::LogLevel level, std::string_view line) noexcept {
    int stream = level <= util::LogLevel::kWarn ? 0 : output_;
    if (level <= util::LogLevel::kWarn) {
        opal_output(stream, "btl roce [%s]: %s: %.*s", opal_process_info.nodename,
                    util::level_name(level), static_cast<int>(line.size()), line.data());
    } else {
        opal_output_verbose(verbosity_for(level), stream, "btl roce: %.*s",
                            static_cast<int>(line.size()), line.data());
    }
}

int to_opal(const util::Status &status) noexcept {
    switch (status.code()) {
    case util::Code::kOk: return OPAL_SUCCESS;
    case util::Code::kInvalidArgument: return OPAL_ERR_BAD_PARAM;
    case util::Code::kNotFound: return OPAL_ERR_NOT_FOUND;
    case util::Code::kUnavailable: return OPAL_ERR_UNREACH;
    case util::Code::kPermissionDenied: return OPAL_ERR_PERM;
    case util::Code::kResourceExhausted: return OPAL_ERR_OUT_OF_RESOURCE;
    case util::Code::kTimeout: return OPAL_ERR_TIMEOUT;
    case util::Code::kProtocol: return OPAL_ERR_UNPACK_FAILURE;
    case util::Code::kUnsupported: return OPAL_ERR_NOT_SUPPORTED;
    case util::Code::kInternal: return OPAL_ERROR;
    }
    return OPAL_ERROR;
}

namespace {

const char *const kHelpFile = "help-mpi-btl-roce.txt";

// Whether our help file is installed (checked each time, cheap next to an
// error: its absence tells a build-tree run from an installed one).
bool help_installed() {
    std::string path = std::string(ROCE_HELP_DIR) + "/" + kHelpFile;
    return access(path.c_str(), R_OK) == 0;
}

const char *host_name() {
    return opal_process_info.nodename ? opal_process_info.nodename : "?";
}

void show_help_box(const char *topic, const std::string &message) {
    // Open MPI appends to its search list on every call: add ours once.
    static const bool added = opal_show_help_add_dir(ROCE_HELP_DIR) == OPAL_SUCCESS;
    (void)added;
    opal_show_help(kHelpFile, topic, true, host_name(), message.c_str());
}

} // namespace

void show_error(const char *topic, const std::string &message) noexcept {
    if (help_installed()) {
        show_help_box(topic, message);
        return;
    }
    // Not installed (running from the build tree): the same text, unaggregated.
    opal_output(0, "btl roce [%s]: error: %s", host_name(), message.c_str());
}

void show_explanation(const char *topic, const std::string &message) noexcept {
    if (help_installed()) {
        show_help_box(topic, message);
    }
}

const char *setup_failure_topic(const util::Status &status) noexcept {
    // qp/ formats every refused transition as "ibv_modify_qp(TYPE, A->B) ...".
    return status.message().find("ibv_modify_qp(") != std::string::npos ? "qp transition failed"
                                                                        : "port setup failed";
}

} // namespace roce::btl
