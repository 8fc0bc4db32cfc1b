// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/verbs_async.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/strings.h"

namespace roce::netmon {

const char *verbs_event_name(int event_type) noexcept {
    switch (event_type) {
    case IBV_EVENT_CQ_ERR:
        return "CQ_ERR";
    case IBV_EVENT_QP_FATAL:
        return "QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR:
        return "QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR:
        return "QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST:
        return "COMM_EST";
    case IBV_EVENT_SQ_DRAINED:
        return "SQ_DRAINED";
    case IBV_EVENT_PATH_MIG:
        return "PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR:
        return "PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL:
        return "DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE:
        return "PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR:
        return "PORT_ERR";
    case IBV_EVENT_LID_CHANGE:
        return "LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE:
        return "PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE:
        return "SM_CHANGE";
    case IBV_EVENT_SRQ_ERR:
        return "SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        return "SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        return "QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER:
        return "CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE:
        return "GID_CHANGE";
    case IBV_EVENT_WQ_FATAL:
        return "WQ_FATAL";
    default:
        return "UNKNOWN";
    }
}

namespace {

bool is_port_event(int t) {
    switch (t) {
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
        return true;
    default:
        return false;
    }
}

} // namespace

util::Status VerbsAsyncWatcher::open(const verbs::VerbsApi &api,
                                     const std::vector<std::string> &only, util::LogSink &log) {
    close();
    api_ = &api;
    int n = 0;
    errno = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    if (!list) {
        int err = errno;
        if (err == ENOSYS || err == 0) {
            return util::Status::ok(); // no RDMA stack: nothing to watch
        }
        return util::Status::from_errno(err, "ibv_get_device_list");
    }
    for (int i = 0; i < n; ++i) {
        ibv_device *d = list.get()[i];
        std::string name = api.get_device_name(d);
        if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) {
            continue;
        }
        errno = 0;
        verbs::Context ctx(api.open_device(d), verbs::ContextDeleter{&api});
        if (!ctx) {
            log.write(util::LogLevel::kWarn,
                      util::format("netmon: ibv_open_device(%s) failed: %s (%d); its async "
                                   "events (GID_CHANGE, PORT_ERR) will not be seen",
                                   name.c_str(), strerror(errno), errno));
            continue;
        }
        int fd = ctx->async_fd;
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
            log.write(util::LogLevel::kWarn,
                      util::format("netmon: cannot make the async fd of %s non-blocking: %s; "
                                   "not watching it",
                                   name.c_str(), strerror(errno)));
            continue;
        }
        devs_.push_back({name, std::move(ctx), false});
    }
    return util::Status::ok();
}

void VerbsAsyncWatcher::close() noexcept {
    devs_.clear();
}

int VerbsAsyncWatcher::fd(size_t i) const noexcept {
    return devs_[i].fatal ? -1 : devs_[i].ctx->async_fd;
}

void VerbsAsyncWatcher::drain(size_t i, std::vector<Event> *out, bool *rdma_changed,
                              util::LogSink &log) {
    Dev &d = devs_[i];
    while (!d.fatal) {
        ibv_async_event ev{};
        errno = 0;
        if (api_->get_async_event(d.ctx.get(), &ev) != 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                log.write(util::LogLevel::kWarn,
                          util::format("netmon: ibv_get_async_event(%s) failed: %s (%d); no "
                                       "longer watching it",
                                       d.name.c_str(), strerror(errno), errno));
                d.fatal = true;
            }
            return;
        }
        Event e;
        e.kind = EventKind::kVerbsAsync;
        e.rdma_device = d.name;
        e.verbs_event = ev.event_type;
        e.verbs_event_name = verbs_event_name(ev.event_type);
        if (is_port_event(ev.event_type)) {
            e.rdma_port = ev.element.port_num;
            *rdma_changed = true;
        }
        if (ev.event_type == IBV_EVENT_DEVICE_FATAL) {
            *rdma_changed = true;
            d.fatal = true;
        }
        api_->ack_async_event(&ev);
        out->push_back(std::move(e));
    }
}

} // namespace roce::netmon
