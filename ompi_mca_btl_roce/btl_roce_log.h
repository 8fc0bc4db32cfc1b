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

/// Shows a user-facing error through opal_show_help when our help file is
/// installed (so mpirun prints each topic once and counts the processes
/// that sent it too), else as one "error:" line on stderr. For errors at
/// init, the same on every rank. `topic` is a section of
/// help-mpi-btl-roce.txt taking (hostname, message). Thread-safe.
void show_error(const char *topic, const std::string &message) noexcept;

/// Only the help-file half of show_error: the explanation of `topic`
/// through opal_show_help when our help file is installed, nothing
/// otherwise. For errors of a running job, whose line the module prints
/// itself (Module::report): Open MPI 4.1's mpirun loses some help messages
/// of the ranks on its own node, the line on stderr always arrives.
/// Thread-safe.
void show_explanation(const char *topic, const std::string &message) noexcept;

/// The help topic for a port whose setup failed with `status`: "qp
/// transition failed" when a queue-pair transition was refused (the
/// message is the qp/ diagnostic paragraph), else "port setup failed".
const char *setup_failure_topic(const util::Status &status) noexcept;

} // namespace roce::btl
