// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Monitor lifecycle, subscriptions and publishing. The thread's loop, the
// resynchronisation and the fallback are in monitor_loop.cc.
#include "netmon/monitor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "netmon/monitor_internal.h"
#include "util/strings.h"

namespace roce::netmon {

const char *to_string(MonitorMode m) noexcept {
    switch (m) {
    case MonitorMode::kStopped:
        return "stopped";
    case MonitorMode::kNetlink:
        return "netlink";
    case MonitorMode::kPolling:
        return "polling";
    case MonitorMode::kBlind:
        return "blind";
    }
    return "?";
}

// ----------------------------------------------------------- subscriptions --

Subscription &Subscription::operator=(Subscription &&o) noexcept {
    if (this != &o) {
        unsubscribe();
        slot_ = std::move(o.slot_);
        registry_ = std::move(o.registry_);
    }
    return *this;
}

void Subscription::unsubscribe() noexcept {
    if (!slot_) {
        return;
    }
    {
        // Waits for a callback running on the monitor thread; re-entrant
        // when called from inside the callback itself.
        std::lock_guard<std::recursive_mutex> g(slot_->mu);
        slot_->active = false;
    }
    if (auto reg = registry_.lock()) {
        std::lock_guard<std::mutex> g(reg->mu);
        auto &v = reg->slots;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (it->get() == slot_.get()) {
                v.erase(it);
                break;
            }
        }
    }
    slot_.reset();
    registry_.reset();
}

// ------------------------------------------------------------------ monitor --

Monitor::Monitor(MonitorOptions opt)
    : opt_(std::move(opt)), log_(opt_.log != nullptr ? opt_.log : &null_sink_),
      registry_(std::make_shared<Subscription::Registry>()),
      stats_(std::make_unique<AtomicStats>()) {}

void Monitor::log(util::LogLevel level, const std::string &line) const {
    if (log_->enabled(level)) {
        log_->write(level, "netmon: " + line);
    }
}

Subscription Monitor::subscribe(EventFilter filter, Callback cb) {
    auto slot = std::make_shared<Subscription::Slot>();
    slot->filter = filter;
    slot->cb = std::move(cb);
    {
        std::lock_guard<std::mutex> g(registry_->mu);
        registry_->slots.push_back(slot);
    }
    Subscription s;
    s.slot_ = std::move(slot);
    s.registry_ = registry_;
    return s;
}

void Monitor::publish(std::vector<Event> *batch) {
    if (batch->empty()) {
        return;
    }
    auto now = std::chrono::steady_clock::now();
    for (auto &e : *batch) {
        e.seq = next_seq_++;
        if (e.observed == std::chrono::steady_clock::time_point{}) {
            e.observed = now;
        }
    }
    std::vector<std::shared_ptr<Subscription::Slot>> slots;
    {
        std::lock_guard<std::mutex> g(registry_->mu);
        slots = registry_->slots;
    }
    for (const auto &e : *batch) {
        if (log_->enabled(util::LogLevel::kDebug)) {
            log(util::LogLevel::kDebug, to_string(e));
        }
        for (const auto &slot : slots) {
            std::lock_guard<std::recursive_mutex> g(slot->mu);
            if (!slot->active || !slot->filter.matches(e)) {
                continue;
            }
            try {
                slot->cb(e);
            } catch (const std::exception &ex) {
                log(util::LogLevel::kError,
                    util::format("a subscriber threw on %s: %s", to_string(e.kind), ex.what()));
            } catch (...) {
                log(util::LogLevel::kError,
                    util::format("a subscriber threw on %s", to_string(e.kind)));
            }
        }
    }
    stats_->events.fetch_add(batch->size(), std::memory_order_relaxed);
    batch->clear();
    generation_.fetch_add(1, std::memory_order_acq_rel);
}

topo::Snapshot Monitor::snapshot() const {
    topo::Snapshot s;
    {
        std::lock_guard<std::mutex> g(model_mu_);
        s.netdevs = model_.netdevs();
    }
    s.source = mode() == MonitorMode::kPolling ? "netmon:poll" : "netmon:netlink";
    return s;
}

std::vector<RdmaBinding> Monitor::rdma_bindings() const {
    std::lock_guard<std::mutex> g(model_mu_);
    return model_.rdma_bindings();
}

MonitorStats Monitor::stats() const {
    MonitorStats s;
    const AtomicStats &a = *stats_;
    auto ld = [](const std::atomic<uint64_t> &v) { return v.load(std::memory_order_relaxed); };
    s.wakeups = ld(a.wakeups);
    s.messages = ld(a.messages);
    s.parse_errors = ld(a.parse_errors);
    s.overflows = ld(a.overflows);
    s.resyncs = ld(a.resyncs);
    s.dump_retries = ld(a.dump_retries);
    s.events = ld(a.events);
    s.polls = ld(a.polls);
    s.rdma_refreshes = ld(a.rdma_refreshes);
    s.lacp_refreshes = ld(a.lacp_refreshes);
    s.rcvbuf = a.rcvbuf.load(std::memory_order_relaxed);
    return s;
}

void Monitor::request_rdma_refresh() noexcept {
    want_rdma_refresh_.store(true, std::memory_order_release);
    int fd = wake_fd_.load(std::memory_order_acquire);
    if (fd >= 0) {
        uint64_t one = 1;
        ssize_t rc = write(fd, &one, sizeof(one));
        (void)rc; // EAGAIN: a wakeup is already pending
    }
}

void Monitor::request_resync() noexcept {
    want_resync_.store(true, std::memory_order_release);
    request_rdma_refresh();
}

MonitorMode Monitor::start_netlink(std::vector<Event> *discard) {
    auto sock = NlSocket::open({true, opt_.rcvbuf_bytes});
    // Dumps go through a second, unsubscribed socket: its queue holds
    // nothing but the dump, so a dump never competes with a flood of
    // notifications for buffer space (and never stalls on ENOBUFS).
    util::Status failed = sock.status();
    if (sock) {
        auto dump = NlSocket::open({false, 1 << 20});
        if (dump) {
            sock_ = std::move(*sock);
            dump_sock_ = std::move(*dump);
        } else {
            failed = dump.status();
        }
    }
    if (!sock_) {
        log(util::LogLevel::kWarn, "rtnetlink is unavailable (" + failed.to_string() + ")");
        return MonitorMode::kBlind;
    }
    if (opt_.record) {
        sock_->set_datagram_hook(opt_.record);
        dump_sock_->set_datagram_hook(opt_.record);
    }
    rcvbuf_ = sock_->rcvbuf();
    stats_->rcvbuf.store(rcvbuf_, std::memory_order_relaxed);
    util::Status st = resync(discard, true);
    if (!st) {
        log(util::LogLevel::kWarn, "the initial rtnetlink dump failed (" + st.to_string() + ")");
        sock_.reset();
        dump_sock_.reset();
        return MonitorMode::kBlind;
    }
    return MonitorMode::kNetlink;
}

util::Status Monitor::start() {
    if (thread_.joinable() || mode() != MonitorMode::kStopped) {
        return util::Status(util::Code::kInvalidArgument, "netmon: monitor already started");
    }
    // The eventfds live as long as the Monitor, so request_*() from other
    // threads never write to a closed (or reused) descriptor.
    if (stop_fd_ < 0) {
        stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    if (wake_fd_.load() < 0) {
        wake_fd_.store(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    }
    if (stop_fd_ < 0 || wake_fd_.load() < 0) {
        return util::Status::from_errno(errno, "netmon: eventfd");
    }
    std::vector<Event> discard;
    MonitorMode mode = opt_.use_netlink ? start_netlink(&discard) : MonitorMode::kBlind;
    if (mode != MonitorMode::kNetlink) {
        if (opt_.fallback_poll) {
            mode = MonitorMode::kPolling;
            log(util::LogLevel::kWarn,
                util::format("polling the netdev snapshot every %lld ms (bond, address and MTU "
                             "changes are seen up to that late)",
                             static_cast<long long>(opt_.fallback_interval.count())));
            poll_fallback(&discard, true);
            next_poll_ = std::chrono::steady_clock::now() + opt_.fallback_interval;
        } else {
            log(util::LogLevel::kWarn,
                "no fallback poll function was given: netdev, bond and address changes will "
                "NOT be seen (only verbs async events)");
        }
    }
    if (opt_.verbs != nullptr) {
        util::Status st = verbs_.open(*opt_.verbs, opt_.verbs_devices, *log_);
        if (!st) {
            log(util::LogLevel::kWarn, "verbs async events unavailable: " + st.to_string());
        }
    }
    if (opt_.rdma_source) {
        watch_rdma_dir();
        refresh_rdma(&discard, true);
    }
    mode_.store(mode, std::memory_order_release);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::exception &ex) {
        mode_.store(MonitorMode::kStopped, std::memory_order_release);
        release();
        return util::Status(util::Code::kResourceExhausted,
                            std::string("netmon: cannot start the monitor thread: ") + ex.what());
    }
    return util::Status::ok();
}

void Monitor::stop() noexcept {
    if (!thread_.joinable()) {
        return;
    }
    if (std::this_thread::get_id() == thread_.get_id()) {
        log(util::LogLevel::kError, "stop() called from a monitor callback; ignored");
        return;
    }
    uint64_t one = 1;
    ssize_t rc = write(stop_fd_, &one, sizeof(one));
    (void)rc; // an eventfd write only fails when the counter would overflow
    thread_.join();
    uint64_t v = 0;
    rc = read(stop_fd_, &v, sizeof(v)); // consumed: a later start() must not stop at once
    release();
    mode_.store(MonitorMode::kStopped, std::memory_order_release);
}

void Monitor::release() noexcept {
    sock_.reset();
    dump_sock_.reset();
    verbs_.close();
    if (inotify_fd_ >= 0) {
        ::close(inotify_fd_);
        inotify_fd_ = -1;
    }
    inotify_wd_ = -1;
    watching_parent_ = false;
}

Monitor::~Monitor() {
    stop();
    release();
    for (int fd : {stop_fd_, wake_fd_.load()}) {
        if (fd >= 0) {
            ::close(fd);
        }
    }
}

} // namespace roce::netmon
