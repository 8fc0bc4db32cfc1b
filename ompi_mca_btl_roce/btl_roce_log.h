// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include "opal_cxx_compat.h"

#include <string>

#include "util/log.h"
#include "util/status.h"

namespace roce::btl {

/// opal_output verbosity at which a common/ log level is shown:
/// errors and warnings always, info at 10, debug at 50, trace at 90.
int verbosity_for(util::LogLevel level) noexcept;

/// Forwards common/ diagnostics to the component's opal_output stream,
/// prefixed "btl roce:". Thread-safe (opal_output is).
class OpalSink final : public util::LogSink {
public:
    explicit OpalSink(int output) : output_(output) {}
    bool enabled(util::LogLevel level) const noexcept override;
    void write(util::LogLevel level, std::string_view line) noexcept override;

private:
    int output_;
};

/// Maps a Status to the closest OPAL_ERR_* code (OPAL_SUCCESS when ok).
int to_opal(const util::Status &status) noexcept;

/// Shows a user-facing error once per process, through opal_show_help when
/// our help file is installed (so mpirun aggregates the same message from
/// many ranks), else directly on stderr. `topic` is a section of
/// help-mpi-btl-roce.txt taking (hostname, message).
void show_error(const char *topic, const std::string &message) noexcept;

} // namespace roce::btl
