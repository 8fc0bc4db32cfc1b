// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "netmon/event.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/handles.h"
#include "verbs/verbs_api.h"

namespace roce::netmon {

/// "GID_CHANGE", "PORT_ERR", ... for an enum ibv_event_type value.
const char *verbs_event_name(int event_type) noexcept;

/// Watches the asynchronous event channel of RDMA devices through a
/// VerbsApi: opens its own context per device (the kernel delivers port,
/// GID and device events to every open context, so the btl's contexts keep
/// theirs), makes each context's async fd non-blocking, and turns what
/// get_async_event returns into kVerbsAsync events, acknowledging each one.
///
/// Used by the Monitor on its thread; not thread-safe itself.
class VerbsAsyncWatcher {
public:
    VerbsAsyncWatcher() = default;
    ~VerbsAsyncWatcher() { close(); }
    VerbsAsyncWatcher(const VerbsAsyncWatcher &) = delete;
    VerbsAsyncWatcher &operator=(const VerbsAsyncWatcher &) = delete;

    /// Opens the devices named in `only` (all devices when empty). A device
    /// that cannot be opened is logged as a warning and skipped; no devices
    /// at all is not an error (size() is then 0).
    util::Status open(const verbs::VerbsApi &api, const std::vector<std::string> &only,
                      util::LogSink &log);
    void close() noexcept;

    size_t size() const noexcept { return devs_.size(); }
    const std::string &device(size_t i) const { return devs_[i].name; }
    /// The async fd to poll for device `i`; -1 once the device reported
    /// DEVICE_FATAL (it delivers nothing more).
    int fd(size_t i) const noexcept;

    /// Reads every pending event of device `i` (until EAGAIN), appends one
    /// kVerbsAsync event per kernel event and sets *rdma_changed when the
    /// event can change a GID table or port state (GID/port/pkey/LID
    /// changes, port active/error, device fatal).
    void drain(size_t i, std::vector<Event> *out, bool *rdma_changed, util::LogSink &log);

private:
    struct Dev {
        std::string name;
        verbs::Context ctx;
        bool fatal = false;
    };
    const verbs::VerbsApi *api_ = nullptr;
    std::vector<Dev> devs_;
};

} // namespace roce::netmon
