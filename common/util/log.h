// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace roce::util {

/// Severity of a log line. Components map these onto their verbosity scale
/// (Open MPI: error/warn always shown, info at verbose >= 10, debug >= 50,
/// trace >= 90).
enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

/// "error", "warning", "info", "debug", "trace".
const char *level_name(LogLevel level) noexcept;

/// Where common/ writes its diagnostics. common/ never prints on its own: the
/// btl passes a sink that forwards to opal_output, the tools one that writes
/// to stderr, tests one that captures. Implementations must be thread-safe:
/// the netlink monitor logs from its own thread.
class LogSink {
public:
    virtual ~LogSink() = default;
    /// Cheap check so callers can skip formatting lines nobody will see.
    virtual bool enabled(LogLevel level) const noexcept = 0;
    /// Writes one line (no trailing newline in `line`). Must not throw.
    virtual void write(LogLevel level, std::string_view line) noexcept = 0;
};

/// Discards everything. Useful as a default so code never checks for null.
class NullSink final : public LogSink {
public:
    bool enabled(LogLevel) const noexcept override { return false; }
    void write(LogLevel, std::string_view) noexcept override {}
};

/// Writes "<prefix><level>: <line>" to stderr for levels up to `max_level`.
class StderrSink final : public LogSink {
public:
    explicit StderrSink(LogLevel max_level, std::string prefix = {})
        : max_level_(max_level), prefix_(std::move(prefix)) {}
    bool enabled(LogLevel level) const noexcept override { return level <= max_level_; }
    void write(LogLevel level, std::string_view line) noexcept override;

private:
    LogLevel max_level_;
    std::string prefix_;
};

/// Keeps every line in memory; for tests. Not thread-safe.
class CaptureSink final : public LogSink {
public:
    struct Line {
        LogLevel level;
        std::string text;
    };
    bool enabled(LogLevel) const noexcept override { return true; }
    void write(LogLevel level, std::string_view line) noexcept override;
    const std::vector<Line> &lines() const { return lines_; }
    /// True when some captured line contains `needle`.
    bool contains(std::string_view needle) const;

private:
    std::vector<Line> lines_;
};

} // namespace roce::util
