// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/status.h"

#include <cerrno>
#include <cstring>

namespace roce::util {

const char *code_name(Code code) noexcept {
    switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kUnavailable: return "unavailable";
    case Code::kPermissionDenied: return "permission denied";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kTimeout: return "timeout";
    case Code::kProtocol: return "protocol error";
    case Code::kUnsupported: return "unsupported";
    case Code::kInternal: return "internal error";
    }
    return "unknown";
}

Code code_from_errno(int err) noexcept {
    switch (err) {
    case 0: return Code::kOk;
    case EINVAL: case ERANGE: case EDOM: return Code::kInvalidArgument;
    // A path that names the wrong kind of thing (a file where a directory
    // belongs, a link loop, a name too long): bad input, not our bug.
    case ENOTDIR: case EISDIR: case ELOOP: case ENAMETOOLONG: return Code::kInvalidArgument;
    case ENOENT: case ENODEV: case ENXIO: case ENODATA: return Code::kNotFound;
    case EPERM: case EACCES: return Code::kPermissionDenied;
    case ENOMEM: case ENOSPC: case EAGAIN: case EMFILE: case ENFILE: case ENOBUFS:
        return Code::kResourceExhausted;
    case ETIMEDOUT: return Code::kTimeout;
    case EOPNOTSUPP: case ENOSYS: case EPROTONOSUPPORT: return Code::kUnsupported;
    case ENETDOWN: case ENETUNREACH: case EHOSTUNREACH: case EBUSY: case ECONNREFUSED:
    case ECONNRESET: case EIO:
        return Code::kUnavailable;
    case EPROTO: case EBADMSG: return Code::kProtocol;
    default: return Code::kInternal;
    }
}

Status Status::from_errno(int err, std::string_view what) {
    std::string msg(what);
    msg += " failed: ";
    msg += std::strerror(err);
    msg += " (";
    msg += std::to_string(err);
    msg += ")";
    Code code = code_from_errno(err);
    // errno 0 would make an ok status out of a failure: keep it an error.
    return Status(code == Code::kOk ? Code::kInternal : code, std::move(msg), err);
}

Status &Status::with_context(std::string_view context) & {
    if (!is_ok() && !context.empty()) {
        if (!rep_) {
            rep_.reset(new Rep{});
        }
        rep_->message.insert(0, ": ");
        rep_->message.insert(0, context);
    }
    return *this;
}

Status &&Status::with_context(std::string_view context) && {
    static_cast<Status &>(*this).with_context(context);
    return std::move(*this);
}

std::string Status::to_string() const {
    if (is_ok()) {
        return "ok";
    }
    return message() + " [" + code_name(code_) + "]";
}

const std::string &Status::empty() noexcept {
    static const std::string kEmpty;
    return kEmpty;
}

} // namespace roce::util
