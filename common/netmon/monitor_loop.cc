// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The monitor thread: one poll() over every fd it watches, no timeout while
// netlink works, so an unchanged system costs no wakeups at all.
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "netmon/monitor.h"
#include "netmon/monitor_internal.h"
#include "netmon/nl_parse.h"
#include "util/strings.h"

namespace roce::netmon {

namespace {

// Publish at least this often while a burst is being drained, so
// subscribers (and generation()) are not held back by a long burst.
constexpr size_t kPublishEvery = 256;

bool touches_rdma_bindings(EventKind k) {
    switch (k) {
    case EventKind::kNetdevAdded:
    case EventKind::kNetdevRemoved:
    case EventKind::kNetdevRenamed:
    case EventKind::kAddressAdded:
    case EventKind::kAddressRemoved:
        return true;
    default:
        return false;
    }
}

void drain_eventfd(int fd) {
    uint64_t v = 0;
    ssize_t rc = read(fd, &v, sizeof(v));
    (void)rc; // EAGAIN: someone else's wakeup was already consumed
}

} // namespace

void Monitor::run() noexcept {
    tid_.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
    try {
        loop();
    } catch (const std::exception &ex) {
        log(util::LogLevel::kError,
            std::string("the monitor thread stopped on an exception: ") + ex.what());
    } catch (...) {
        log(util::LogLevel::kError, "the monitor thread stopped on an unknown exception");
    }
    tid_.store(0, std::memory_order_release);
}

void Monitor::loop() {
    std::vector<pollfd> fds;
    std::vector<Event> batch;
    for (;;) {
        // Layout: [0] stop, [1] wake, [2] netlink, [3] inotify, [4..] verbs.
        fds.assign(4, pollfd{-1, POLLIN, 0});
        fds[0].fd = stop_fd_;
        fds[1].fd = wake_fd_.load(std::memory_order_relaxed);
        fds[2].fd = sock_ ? sock_->fd() : -1;
        fds[3].fd = inotify_fd_;
        for (size_t i = 0; i < verbs_.size(); ++i) {
            fds.push_back({verbs_.fd(i), POLLIN, 0});
        }
        int timeout = -1;
        bool polling = mode() == MonitorMode::kPolling;
        if (polling) {
            // Rounded up: a timeout rounded down would wake just before the
            // deadline and spin until it passes.
            auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                next_poll_ - std::chrono::steady_clock::now());
            int64_t ms = (left.count() + 999) / 1000;
            timeout = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, INT_MAX)));
        }
        int n = poll(fds.data(), fds.size(), timeout);
        stats_->wakeups.fetch_add(1, std::memory_order_relaxed);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            log(util::LogLevel::kError,
                util::format("poll failed: %s; the monitor stops", strerror(errno)));
            return;
        }
        if ((fds[0].revents & POLLIN) != 0) {
            return;
        }
        bool rdma_dirty = false;
        if ((fds[1].revents & POLLIN) != 0) {
            drain_eventfd(wake_fd_.load(std::memory_order_relaxed));
            rdma_dirty = want_rdma_refresh_.exchange(false, std::memory_order_acq_rel);
            if (want_resync_.exchange(false, std::memory_order_acq_rel) && sock_) {
                util::Status st = resync(&batch, false);
                if (!st) {
                    log(util::LogLevel::kError, "requested resync failed: " + st.to_string());
                }
            }
        }
        if (fds[2].fd >= 0 && (fds[2].revents & (POLLIN | POLLERR)) != 0) {
            drain_netlink(&batch, &rdma_dirty);
        }
        if (fds[3].fd >= 0 && (fds[3].revents & POLLIN) != 0) {
            drain_inotify();
            rdma_dirty = true;
        }
        for (size_t i = 0; i < verbs_.size(); ++i) {
            if ((fds[4 + i].revents & (POLLIN | POLLERR)) != 0) {
                verbs_.drain(i, &batch, &rdma_dirty, *log_);
            }
        }
        if (polling && std::chrono::steady_clock::now() >= next_poll_) {
            poll_fallback(&batch, false);
            // One poll per interval at most, never a burst to catch up.
            next_poll_ = std::chrono::steady_clock::now() + opt_.fallback_interval;
        }
        if (rdma_dirty && opt_.rdma_source) {
            refresh_rdma(&batch, false);
        }
        publish(&batch);
    }
}

void Monitor::apply_message(Model &m, const nlmsghdr *h, std::vector<Event> *out) {
    auto p = parse_message(h);
    if (!p) {
        stats_->parse_errors.fetch_add(1, std::memory_order_relaxed);
        log(util::LogLevel::kWarn,
            util::format("skipping a %s message: ", nl_type_name(h->nlmsg_type)) +
                p.status().to_string());
        return;
    }
    std::vector<Event> ev;
    switch (p->type) {
    case ParsedMessage::Type::kLink:
        ev = m.apply(p->link);
        break;
    case ParsedMessage::Type::kAddress:
        ev = m.apply(p->addr);
        break;
    case ParsedMessage::Type::kError:
        if (p->error != 0) {
            // Replies to our RTM_GETLINK refreshes (ENODEV: the bond went away).
            log(util::LogLevel::kDebug,
                util::format("request %u failed: %s", p->seq, strerror(p->error)));
        }
        return;
    default:
        return;
    }
    if (out != nullptr) {
        out->insert(out->end(), std::make_move_iterator(ev.begin()),
                    std::make_move_iterator(ev.end()));
    }
}

void Monitor::drain_netlink(std::vector<Event> *out, bool *rdma_dirty) {
    for (;;) {
        auto observed = std::chrono::steady_clock::now();
        size_t first = out->size();
        auto r = sock_->read([&](const nlmsghdr *h) {
            std::lock_guard<std::mutex> g(model_mu_);
            apply_message(model_, h, out);
            stats_->messages.fetch_add(1, std::memory_order_relaxed);
        });
        if (!r) {
            // Not an overrun: the socket itself is broken. Keep the model,
            // fall back to polling (or blindness) rather than spin on it.
            bool poll = static_cast<bool>(opt_.fallback_poll);
            log(util::LogLevel::kError, "reading rtnetlink failed: " + r.status().to_string() +
                                            (poll ? "; polling the netdev snapshot from now on"
                                                  : "; netdev changes are no longer seen"));
            sock_.reset();
            dump_sock_.reset();
            mode_.store(poll ? MonitorMode::kPolling : MonitorMode::kBlind,
                        std::memory_order_release);
            next_poll_ = std::chrono::steady_clock::now() + opt_.fallback_interval;
            return;
        }
        if (*r == NlSocket::Read::kAgain) {
            break;
        }
        if (*r == NlSocket::Read::kOverflow) {
            stats_->overflows.fetch_add(1, std::memory_order_relaxed);
            log(util::LogLevel::kInfo, util::format("rtnetlink overrun (ENOBUFS, rcvbuf %d bytes): "
                                                    "resynchronising from a fresh dump",
                                                    rcvbuf_));
            grow_rcvbuf();
            util::Status st = resync(out, false);
            if (!st) {
                log(util::LogLevel::kError, "resync failed: " + st.to_string());
            }
            *rdma_dirty = true;
            continue;
        }
        for (size_t i = first; i < out->size(); ++i) {
            (*out)[i].observed = observed;
            *rdma_dirty = *rdma_dirty || touches_rdma_bindings((*out)[i].kind);
        }
        if (out->size() >= kPublishEvery) {
            publish(out);
        }
    }
    std::vector<int> bonds;
    {
        std::lock_guard<std::mutex> g(model_mu_);
        bonds = model_.take_refresh_requests();
    }
    for (int ifindex : bonds) {
        auto seq = sock_->request_link(ifindex);
        stats_->lacp_refreshes.fetch_add(1, std::memory_order_relaxed);
        if (!seq) {
            log(util::LogLevel::kWarn,
                "re-reading 802.3ad bond state: " + seq.status().to_string());
        }
    }
}

util::Status Monitor::resync(std::vector<Event> *out, bool initial) {
    // 1. Dump into a fresh model through the dump socket. 2. Apply what
    // queued up on the notification socket meanwhile: each message carries
    // its object's full state and they are in order, so whatever an object's
    // last message says wins, whether it is older or newer than the dump.
    // 3. Another overrun during all that: some last word may be lost, redo.
    //
    // Before dumping, empty the notification queue (what it holds is older
    // than the dump). The kernel reports ENOBUFS once, when a socket becomes
    // congested, and then silently drops every notification until its queue
    // is empty again: only an emptied queue makes a later loss visible.
    Model fresh;
    for (uint64_t attempt = 1;; ++attempt) {
        for (;;) {
            auto r = sock_->read([](const nlmsghdr *) {});
            if (!r) {
                return r.status();
            }
            if (*r == NlSocket::Read::kAgain) {
                break;
            }
        }
        fresh = Model();
        {
            std::lock_guard<std::mutex> g(model_mu_);
            (void)fresh.set_rdma_bindings(model_.rdma_bindings());
        }
        auto end = run_dump(
            *dump_sock_, [&](const nlmsghdr *h) { apply_message(fresh, h, nullptr); }, stop_fd_,
            opt_.dump_timeout, nullptr);
        if (!end) {
            return end.status();
        }
        if (*end == DumpEnd::kStopped) {
            return util::Status::ok(); // the loop sees the stop request next
        }
        bool lost = *end != DumpEnd::kComplete;
        for (;;) {
            auto r = sock_->read([&](const nlmsghdr *h) {
                apply_message(fresh, h, nullptr);
                stats_->messages.fetch_add(1, std::memory_order_relaxed);
            });
            if (!r) {
                return r.status();
            }
            if (*r == NlSocket::Read::kAgain) {
                break;
            }
            if (*r == NlSocket::Read::kOverflow) {
                stats_->overflows.fetch_add(1, std::memory_order_relaxed);
                lost = true;
            }
        }
        if (!lost) {
            break;
        }
        stats_->dump_retries.fetch_add(1, std::memory_order_relaxed);
        grow_rcvbuf();
        log(util::LogLevel::kDebug,
            util::format("resync attempt %llu overlapped another overrun; dumping again",
                         static_cast<unsigned long long>(attempt)));
    }
    (void)fresh.take_refresh_requests(); // the dump already has the bonds' state
    std::vector<Event> ev;
    {
        std::lock_guard<std::mutex> g(model_mu_);
        ev = Model::diff(model_, fresh);
        model_ = std::move(fresh);
    }
    if (!initial) {
        uint64_t n = stats_->resyncs.fetch_add(1, std::memory_order_relaxed) + 1;
        Event e;
        e.kind = EventKind::kResync;
        e.old_value = static_cast<int>(n);
        ev.push_back(std::move(e));
        log(util::LogLevel::kInfo,
            util::format("resynchronised (%zu changes found)", ev.size() - 1));
    }
    out->insert(out->end(), std::make_move_iterator(ev.begin()), std::make_move_iterator(ev.end()));
    return util::Status::ok();
}

void Monitor::grow_rcvbuf() {
    if (!sock_ || rcvbuf_ <= 0 || rcvbuf_ / 2 >= opt_.max_rcvbuf_bytes) {
        return;
    }
    // SO_RCVBUF reads back doubled; ask for twice what we have now.
    int want = std::min(rcvbuf_, opt_.max_rcvbuf_bytes);
    if (setsockopt(sock_->fd(), SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) != 0 &&
        setsockopt(sock_->fd(), SOL_SOCKET, SO_RCVBUF, &want, sizeof(want)) != 0) {
        return;
    }
    rcvbuf_ = sock_->rcvbuf();
    stats_->rcvbuf.store(rcvbuf_, std::memory_order_relaxed);
}

void Monitor::poll_fallback(std::vector<Event> *out, bool initial) {
    stats_->polls.fetch_add(1, std::memory_order_relaxed);
    auto snap = opt_.fallback_poll();
    if (!snap) {
        log(util::LogLevel::kWarn, "fallback poll failed: " + snap.status().to_string());
        return;
    }
    Model fresh = Model::from_netdevs(snap->netdevs);
    std::vector<Event> ev;
    {
        std::lock_guard<std::mutex> g(model_mu_);
        (void)fresh.set_rdma_bindings(opt_.rdma_source ? model_.rdma_bindings()
                                                       : bindings_from_snapshot(*snap));
        ev = Model::diff(model_, fresh);
        model_ = std::move(fresh);
    }
    if (!initial) {
        out->insert(out->end(), std::make_move_iterator(ev.begin()),
                    std::make_move_iterator(ev.end()));
    }
}

void Monitor::refresh_rdma(std::vector<Event> *out, bool initial) {
    stats_->rdma_refreshes.fetch_add(1, std::memory_order_relaxed);
    auto b = opt_.rdma_source();
    if (!b) {
        log(util::LogLevel::kWarn, "reading the RDMA GID tables failed: " + b.status().to_string());
        return;
    }
    std::vector<Event> ev;
    {
        std::lock_guard<std::mutex> g(model_mu_);
        ev = model_.set_rdma_bindings(std::move(*b));
    }
    if (!initial) {
        out->insert(out->end(), std::make_move_iterator(ev.begin()),
                    std::make_move_iterator(ev.end()));
    }
}

void Monitor::watch_rdma_dir() {
    if (opt_.rdma_dev_dir.empty()) {
        return;
    }
    if (inotify_fd_ < 0) {
        inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (inotify_fd_ < 0) {
            log(util::LogLevel::kWarn, util::format("inotify_init1 failed: %s; RDMA devices that "
                                                    "appear later are noticed only on verbs or "
                                                    "netdev events",
                                                    strerror(errno)));
            return;
        }
    }
    if (inotify_wd_ >= 0) {
        inotify_rm_watch(inotify_fd_, inotify_wd_);
        inotify_wd_ = -1;
    }
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF;
    inotify_wd_ = inotify_add_watch(inotify_fd_, opt_.rdma_dev_dir.c_str(), mask | IN_ONLYDIR);
    watching_parent_ = false;
    if (inotify_wd_ < 0) {
        // No RDMA device yet: wait for the directory itself to appear.
        std::string parent = opt_.rdma_dev_dir;
        auto slash = parent.find_last_of('/');
        parent = slash == std::string::npos ? "." : slash == 0 ? "/" : parent.substr(0, slash);
        inotify_wd_ =
            inotify_add_watch(inotify_fd_, parent.c_str(), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
        watching_parent_ = inotify_wd_ >= 0;
    }
}

void Monitor::drain_inotify() {
    alignas(inotify_event) char buf[4096];
    bool rewatch = false;
    for (;;) {
        ssize_t n = read(inotify_fd_, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        for (char *p = buf; p < buf + n;) {
            auto *ev = reinterpret_cast<inotify_event *>(p);
            if ((ev->mask & (IN_DELETE_SELF | IN_IGNORED)) != 0 || watching_parent_) {
                rewatch = true;
            }
            p += sizeof(inotify_event) + ev->len;
        }
    }
    if (rewatch) {
        watch_rdma_dir();
    }
}

} // namespace roce::netmon
