// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace roce::util {

/// Broad error classes. Callers branch on these; the message carries the detail.
enum class Code {
    kOk = 0,
    kInvalidArgument,  ///< a caller or user supplied a value that is not allowed
    kNotFound,         ///< a named device, port, GID, file or peer does not exist
    kUnavailable,      ///< exists but is not usable now (port down, no RoCE link layer)
    kPermissionDenied, ///< the kernel refused for lack of privilege (EPERM/EACCES)
    kResourceExhausted,
    kTimeout,
    kProtocol,         ///< a peer sent something malformed or unexpected
    kUnsupported,      ///< the device or kernel does not implement it (EOPNOTSUPP)
    kInternal,         ///< a bug: an invariant of ours did not hold
};

/// Short stable name of a code ("invalid argument", ...), for messages.
const char *code_name(Code code) noexcept;

/// Maps an errno value to the closest Code (EPERM -> kPermissionDenied, ...).
Code code_from_errno(int err) noexcept;

/// Outcome of an operation: ok, or an error with a code, the errno when one
/// was involved, and a human message that already carries the context
/// (verb, device, port, QPN, GID index, stage).
///
/// Cheap when ok, and for an error without message or errno (flow control):
/// a code and a null pointer, no string built, moved or destroyed - the hot
/// paths return these. The message and errno live behind the pointer.
/// Copyable, movable, not thread-safe to mutate concurrently (like
/// std::string). Never throws except std::bad_alloc.
class [[nodiscard]] Status {
public:
    /// An ok status.
    Status() = default;

    /// An error. `code` must not be Code::kOk; `sys_errno` is 0 when no
    /// system call was involved.
    Status(Code code, std::string message, int sys_errno = 0) : code_(code) {
        assert(code != Code::kOk);
        if (!message.empty() || sys_errno != 0) {
            rep_.reset(new Rep{std::move(message), sys_errno});
        }
    }
    Status(const Status &other)
        : code_(other.code_), rep_(other.rep_ ? new Rep(*other.rep_) : nullptr) {}
    Status &operator=(const Status &other) {
        if (this != &other) {
            code_ = other.code_;
            rep_.reset(other.rep_ ? new Rep(*other.rep_) : nullptr);
        }
        return *this;
    }
    Status(Status &&) noexcept = default;
    Status &operator=(Status &&) noexcept = default;
    ~Status() = default;

    static Status ok() { return Status(); }

    /// An error built from a failed system or verbs call: the message becomes
    /// "<what> failed: <strerror> (<errno>)" and the code follows the errno.
    static Status from_errno(int err, std::string_view what);

    bool is_ok() const noexcept { return code_ == Code::kOk; }
    explicit operator bool() const noexcept { return is_ok(); }
    Code code() const noexcept { return code_; }
    int sys_errno() const noexcept { return rep_ ? rep_->sys_errno : 0; }
    const std::string &message() const noexcept { return rep_ ? rep_->message : empty(); }
    /// message() is not empty (without reaching for the shared empty string).
    bool has_message() const noexcept { return rep_ && !rep_->message.empty(); }

    /// Prepends "<context>: " to the message of an error; no-op when ok.
    /// Returns *this so it can be chained in a return statement.
    Status &with_context(std::string_view context) &;
    Status &&with_context(std::string_view context) &&;

    /// "ok", or "<message> [<code name>]".
    std::string to_string() const;

private:
    struct Rep {
        std::string message;
        int sys_errno = 0;
    };
    static const std::string &empty() noexcept;

    Code code_ = Code::kOk;
    std::unique_ptr<Rep> rep_; ///< null: no message, errno 0
};

/// A value or the Status explaining why there is none.
/// `value()` may only be called when `is_ok()`; `status()` is ok in that case.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
    Result(Status status) : v_(std::move(status)) {       // NOLINT: implicit by design
        assert(!std::get<Status>(v_).is_ok() && "Result needs a value or an error");
    }

    bool is_ok() const noexcept { return std::holds_alternative<T>(v_); }
    explicit operator bool() const noexcept { return is_ok(); }

    const T &value() const & { return std::get<T>(v_); }
    T &value() & { return std::get<T>(v_); }
    T &&value() && { return std::get<T>(std::move(v_)); }
    const T &operator*() const & { return value(); }
    T &operator*() & { return value(); }
    const T *operator->() const { return &value(); }
    T *operator->() { return &value(); }

    /// The error; an ok Status when a value is held.
    Status status() const {
        return is_ok() ? Status() : std::get<Status>(v_);
    }

private:
    std::variant<T, Status> v_;
};

} // namespace roce::util
