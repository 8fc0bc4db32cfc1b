// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "netmon/event.h"
#include "netmon/model.h"
#include "netmon/nl_socket.h"
#include "netmon/rdma_binding.h"
#include "netmon/verbs_async.h"
#include "topo/snapshot.h"
#include "util/log.h"
#include "util/status.h"
#include "verbs/verbs_api.h"

namespace roce::netmon {

/// Configuration, fixed at construction (no environment reads inside).
struct MonitorOptions {
    /// Where warnings and debug lines go; must outlive the Monitor and be
    /// thread-safe (the monitor thread writes to it). nullptr: discard.
    util::LogSink *log = nullptr;

    /// false: do not try netlink at all (tests of the fallback).
    bool use_netlink = true;
    /// Initial SO_RCVBUF of the rtnetlink socket, and the cap it is doubled
    /// up to after each overrun.
    int rcvbuf_bytes = 4 << 20;
    int max_rcvbuf_bytes = 32 << 20;
    /// Longest the kernel may stay silent in the middle of a dump.
    std::chrono::milliseconds dump_timeout{5000};

    /// Used when netlink is unavailable: called every `fallback_interval` on
    /// the monitor thread; its netdevs (and, without an rdma_source, its GID
    /// tables) replace the model and the differences become events.
    /// Production wiring: the sysfs topo reader.
    std::function<util::Result<topo::Snapshot>()> fallback_poll;
    std::chrono::milliseconds fallback_interval{1000};

    /// Which RDMA port sits on which netdev (see rdma_binding.h). Optional.
    RdmaBindingSource rdma_source;
    /// Directory whose entries appear and vanish with RDMA devices
    /// (uverbs nodes); changes there trigger an rdma_source refresh.
    /// "" disables the watch. Only used with an rdma_source.
    std::string rdma_dev_dir = "/dev/infiniband";

    /// Verbs table for async events (GID_CHANGE, PORT_ERR, ...); nullptr: none.
    const verbs::VerbsApi *verbs = nullptr;
    /// Devices to watch; empty: every device get_device_list returns.
    std::vector<std::string> verbs_devices;

    /// Called with every datagram read from the rtnetlink socket (on the
    /// monitor thread, before parsing): contrib/netmon-watch --record.
    NlSocket::DatagramHook record;
};

/// Counters, each updated by the monitor thread only (read any time).
struct MonitorStats {
    uint64_t wakeups = 0;        ///< poll() returns on the monitor thread
    uint64_t messages = 0;       ///< netlink messages applied outside dumps
    uint64_t parse_errors = 0;   ///< malformed messages skipped
    uint64_t overflows = 0;      ///< ENOBUFS reported by the kernel
    uint64_t resyncs = 0;        ///< completed resynchronisations (not the initial dump)
    uint64_t dump_retries = 0;   ///< dumps redone after an overrun or NLM_F_DUMP_INTR
    uint64_t events = 0;         ///< events published
    uint64_t polls = 0;          ///< fallback snapshot polls
    uint64_t rdma_refreshes = 0; ///< rdma_source calls
    uint64_t lacp_refreshes = 0; ///< RTM_GETLINK requests for 802.3ad bonds
    int rcvbuf = 0;              ///< SO_RCVBUF granted by the kernel (0 without netlink)
};

enum class MonitorMode {
    kStopped,
    kNetlink, ///< live: rtnetlink notifications
    kPolling, ///< netlink unavailable: fallback_poll every fallback_interval
    kBlind,   ///< neither netlink nor a fallback: only verbs events (warned at start)
};
const char *to_string(MonitorMode m) noexcept;

class Monitor;

/// Keeps a subscription alive; destroying it (or unsubscribe()) removes it.
/// After unsubscribe() returns, the callback is not running and will not
/// run again - except when unsubscribe() is called from inside that same
/// callback, where it takes effect when the callback returns. May outlive
/// the Monitor. Movable, not copyable.
class Subscription {
public:
    Subscription() = default;
    ~Subscription() { unsubscribe(); }
    Subscription(Subscription &&o) noexcept = default;
    Subscription &operator=(Subscription &&o) noexcept;
    Subscription(const Subscription &) = delete;
    Subscription &operator=(const Subscription &) = delete;

    void unsubscribe() noexcept;
    bool active() const noexcept { return slot_ != nullptr; }

    struct Slot;
    struct Registry;

private:
    friend class Monitor;
    std::shared_ptr<Slot> slot_;
    std::weak_ptr<Registry> registry_;
};

/// The bond/netlink monitor: a live model of this network namespace's
/// netdevs (bonds, members, VLANs, macvlans, addresses, MTU, operstate) and
/// of which RDMA port sits on which netdev, kept current from rtnetlink
/// notifications on its own thread, and a stream of typed events about it.
///
/// Costs: between changes the thread sleeps in poll() on the netlink socket,
/// the verbs async fds, an inotify fd and two eventfds - no timer, no
/// wakeup. Readers pay nothing either: generation() is one atomic load.
///
/// Threading: start()/stop() from one owner thread; subscribe(),
/// snapshot(), generation(), stats() from any thread. Callbacks run on the
/// monitor thread, one event at a time in seq order; they must be quick,
/// must not call stop(), and may call snapshot() (which may already show
/// later changes than the event).
class Monitor {
public:
    using Callback = std::function<void(const Event &)>;

    explicit Monitor(MonitorOptions opt);
    /// Stops the thread if running and closes everything.
    ~Monitor();
    Monitor(const Monitor &) = delete;
    Monitor &operator=(const Monitor &) = delete;

    /// Takes the initial picture (a full dump, or a first fallback poll)
    /// synchronously, then starts the thread. Netlink being unavailable is
    /// not an error: a warning names the reason and the monitor polls (or
    /// runs blind when no fallback was given). Errors: already started; the
    /// thread or its eventfds cannot be created.
    util::Status start();
    /// Stops and joins the thread, closes the sockets, the device contexts
    /// and the inotify fd (its two eventfds stay until destruction, so
    /// request_*() stay safe). Idempotent; start() may be called again.
    /// Subscriptions stay registered and receive events after a restart.
    /// Must not be called from a callback (it is then ignored, with an error).
    void stop() noexcept;

    /// Registers `cb` for events matching `filter` (from now on).
    [[nodiscard]] Subscription subscribe(EventFilter filter, Callback cb);

    /// Increments after every published batch of events: a caller that saw
    /// the same value last time has nothing new. One acquire load.
    uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

    /// The netdevs as the model has them now (devices empty; source
    /// "netmon:netlink" or "netmon:poll").
    topo::Snapshot snapshot() const;
    std::vector<RdmaBinding> rdma_bindings() const;
    MonitorStats stats() const;
    MonitorMode mode() const noexcept { return mode_.load(std::memory_order_acquire); }
    /// Kernel thread id of the monitor thread (0 when not running), for
    /// measuring its wakeups in /proc.
    pid_t thread_tid() const noexcept { return tid_.load(std::memory_order_acquire); }

    /// Asks the thread to call rdma_source again / to resynchronise from a
    /// fresh dump; asynchronous, from any thread.
    void request_rdma_refresh() noexcept;
    void request_resync() noexcept;

private:
    void run() noexcept;
    void loop();
    util::Status resync(std::vector<Event> *out, bool initial);
    void drain_netlink(std::vector<Event> *out, bool *rdma_dirty);
    void apply_message(Model &m, const nlmsghdr *h, std::vector<Event> *out);
    void poll_fallback(std::vector<Event> *out, bool initial);
    void refresh_rdma(std::vector<Event> *out, bool initial);
    void drain_inotify();
    void watch_rdma_dir();
    void grow_rcvbuf();
    void publish(std::vector<Event> *batch);
    void log(util::LogLevel level, const std::string &line) const;
    MonitorMode start_netlink(std::vector<Event> *discard);
    void release() noexcept;

    MonitorOptions opt_;
    util::NullSink null_sink_;
    util::LogSink *log_;

    mutable std::mutex model_mu_;
    Model model_; // guarded by model_mu_
    std::shared_ptr<Subscription::Registry> registry_;

    std::unique_ptr<NlSocket> sock_;      // notifications; monitor thread only (after start)
    std::unique_ptr<NlSocket> dump_sock_; // dumps only, never subscribed
    VerbsAsyncWatcher verbs_;             // monitor thread only (after start)
    int stop_fd_ = -1;                    // created by the first start(), closed by ~Monitor
    std::atomic<int> wake_fd_{-1};        // idem; written to from any thread
    int inotify_fd_ = -1;
    int inotify_wd_ = -1;
    bool watching_parent_ = false;
    int rcvbuf_ = 0;
    std::chrono::steady_clock::time_point next_poll_{};
    std::thread thread_;

    std::atomic<MonitorMode> mode_{MonitorMode::kStopped};
    std::atomic<uint64_t> generation_{0};
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> want_rdma_refresh_{false};
    std::atomic<bool> want_resync_{false};
    uint64_t next_seq_ = 1; // monitor thread only

    struct AtomicStats;
    std::unique_ptr<AtomicStats> stats_;
};

} // namespace roce::netmon
