// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cerrno>
#include <memory>
#include <string>

#include "util/log.h"
#include "verbs/verbs_api.h"

namespace roce::verbs {

/// Deleters for rdma-core objects. Each holds the VerbsApi that created the
/// object, never throws and never skips work: a failed destroy is recorded in
/// last_destroy_errno() (for tests and diagnostics) and teardown goes on.
/// Declare owning members in creation order (context, pd, cq, srq, qp, mr,
/// ah) so that destruction runs in reverse.

/// errno of the most recent failed destroy in this thread (0 if none).
int last_destroy_errno() noexcept;
void note_destroy_failure(int err) noexcept;

/// The verb and the object of a destroy, for the failure message:
/// "ibv_destroy_qp" and "QP 0x1a2", "ibv_dereg_mr" and "MR lkey 0x... (65536 bytes)".
const char *destroy_verb(const ibv_context *) noexcept;
const char *destroy_verb(const ibv_pd *) noexcept;
const char *destroy_verb(const ibv_mr *) noexcept;
const char *destroy_verb(const ibv_comp_channel *) noexcept;
const char *destroy_verb(const ibv_cq *) noexcept;
const char *destroy_verb(const ibv_srq *) noexcept;
const char *destroy_verb(const ibv_qp *) noexcept;
const char *destroy_verb(const ibv_ah *) noexcept;
std::string describe(const ibv_context *obj);
std::string describe(const ibv_pd *obj);
std::string describe(const ibv_mr *obj);
std::string describe(const ibv_comp_channel *obj);
std::string describe(const ibv_cq *obj);
std::string describe(const ibv_srq *obj);
std::string describe(const ibv_qp *obj);
std::string describe(const ibv_ah *obj);

/// Writes "<verb>(<object>) failed: <strerror> (<errno>); <what is leaked>"
/// at warning level. Never throws.
void log_destroy_failure(util::LogSink &log, const char *verb, const std::string &object,
                         int err) noexcept;

/// Destroys a T through the VerbsApi member `Destroy` (e.g. &VerbsApi::destroy_qp).
/// A failure is recorded (last_destroy_errno) and, when `log` is set,
/// logged with the verb, the errno and the object.
template <typename T, auto Destroy>
struct ApiDeleter {
    const VerbsApi *api = nullptr;
    util::LogSink *log = nullptr;
    void operator()(T *obj) const noexcept {
        if (obj == nullptr || api == nullptr) {
            return;
        }
        std::string what;
        if (log != nullptr) {
            try {
                what = describe(obj); // before: the object is gone after the call
            } catch (...) {
            }
        }
        int rc = (api->*Destroy)(obj);
        if (rc != 0) {
            int err = normalize_rc(rc, errno);
            note_destroy_failure(err);
            if (log != nullptr) {
                log_destroy_failure(*log, destroy_verb(obj), what, err);
            }
        }
    }
};

using ContextDeleter = ApiDeleter<ibv_context, &VerbsApi::close_device>;
using PdDeleter = ApiDeleter<ibv_pd, &VerbsApi::dealloc_pd>;
using MrDeleter = ApiDeleter<ibv_mr, &VerbsApi::dereg_mr>;
using CompChannelDeleter = ApiDeleter<ibv_comp_channel, &VerbsApi::destroy_comp_channel>;
using CqDeleter = ApiDeleter<ibv_cq, &VerbsApi::destroy_cq>;
using SrqDeleter = ApiDeleter<ibv_srq, &VerbsApi::destroy_srq>;
using QpDeleter = ApiDeleter<ibv_qp, &VerbsApi::destroy_qp>;
using AhDeleter = ApiDeleter<ibv_ah, &VerbsApi::destroy_ah>;

/// Frees the array from get_device_list (the devices themselves stay valid
/// for contexts already opened from them).
struct DeviceListDeleter {
    const VerbsApi *api = nullptr;
    void operator()(ibv_device **list) const noexcept {
        if (list != nullptr && api != nullptr) {
            api->free_device_list(list);
        }
    }
};

using Context = std::unique_ptr<ibv_context, ContextDeleter>;
using Pd = std::unique_ptr<ibv_pd, PdDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;
using CompChannel = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Srq = std::unique_ptr<ibv_srq, SrqDeleter>;
using Qp = std::unique_ptr<ibv_qp, QpDeleter>;
using Ah = std::unique_ptr<ibv_ah, AhDeleter>;
using DeviceList = std::unique_ptr<ibv_device *[], DeviceListDeleter>;

} // namespace roce::verbs
