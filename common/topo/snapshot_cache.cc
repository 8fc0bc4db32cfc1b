// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/snapshot_cache.h"

#include <algorithm>
#include <chrono>

#include "topo/live_reader.h"

namespace roce::topo {

using util::Code;
using util::Result;
using util::Status;

namespace {

/// Warnings kept in a snapshot across refreshes (the newest).
constexpr size_t kMaxWarnings = 64;

void put_device(std::vector<DeviceInfo> &devices, DeviceInfo dev) {
    auto it = std::lower_bound(
        devices.begin(), devices.end(), dev.name,
        [](const DeviceInfo &d, const std::string &name) { return d.name < name; });
    if (it != devices.end() && it->name == dev.name) {
        *it = std::move(dev);
    } else {
        devices.insert(it, std::move(dev));
    }
}

void drop_device(std::vector<DeviceInfo> &devices, const std::string &name) {
    devices.erase(std::remove_if(devices.begin(), devices.end(),
                                 [&](const DeviceInfo &d) { return d.name == name; }),
                  devices.end());
}

/// New netdevs may have renamed an ifindex: names come from the ifindex again.
void relink_all(Snapshot &s) {
    for (auto &d : s.devices) {
        for (auto &p : d.ports) {
            for (auto &g : p.gids) {
                if (g.netdev_ifindex > 0) {
                    g.netdev.clear();
                }
            }
        }
    }
    link_gid_netdevs(s);
}

} // namespace

void SnapshotCache::Marks::merge(const Marks &o) {
    all = all || o.all;
    netdevs = netdevs || o.netdevs;
    devices.insert(o.devices.begin(), o.devices.end());
}

SnapshotCache::SnapshotCache(CacheSources sources, CacheOptions options)
    : src_(std::move(sources)), opt_(options) {}

double SnapshotCache::now() const {
    if (src_.clock) {
        return src_.clock();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void SnapshotCache::invalidate_device(const std::string &device) {
    std::lock_guard<std::mutex> g(mu_);
    marks_.devices.insert(device);
}

void SnapshotCache::invalidate_netdevs() {
    std::lock_guard<std::mutex> g(mu_);
    marks_.netdevs = true;
}

void SnapshotCache::invalidate_all() {
    std::lock_guard<std::mutex> g(mu_);
    marks_.all = true;
}

void SnapshotCache::set_monitored(bool monitored) {
    std::lock_guard<std::mutex> g(mu_);
    monitored_ = monitored;
}

CacheStats SnapshotCache::stats() const {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
}

Result<SnapshotView> SnapshotCache::view_for(const std::string &device) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (!monitored_ && opt_.max_age_seconds >= 0 && snap_) {
            double t = now();
            auto it = device_read_at_.find(device);
            if (it == device_read_at_.end() || t - it->second >= opt_.max_age_seconds) {
                marks_.devices.insert(device);
            }
            if (src_.netdevs && t - netdevs_read_at_ >= opt_.max_age_seconds) {
                marks_.netdevs = true;
            }
        }
    }
    return current();
}

Result<SnapshotView> SnapshotCache::current() {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (snap_ && !marks_.any()) {
            return SnapshotView{snap_, generation()};
        }
    }
    return refresh();
}

Result<SnapshotView> SnapshotCache::refresh() {
    std::lock_guard<std::mutex> serial(refresh_mu_);
    Marks marks;
    std::shared_ptr<const Snapshot> old;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (snap_ && !marks_.any()) {
            return SnapshotView{snap_, generation()}; // another caller refreshed meanwhile
        }
        std::swap(marks, marks_);
        old = snap_;
    }
    // Without the partial readers, or before the first picture, only a full
    // read will do.
    bool full = !old || marks.all || (!marks.devices.empty() && !src_.device) ||
                (marks.netdevs && !src_.netdevs);
    // Ages count from before the read: a change made while it ran is not
    // taken for seen.
    double t = now();
    CacheStats reads;
    Result<Snapshot> built = Status(Code::kInternal, "no reader ran");
    if (full) {
        ++reads.machine_reads;
        built = src_.machine
                    ? src_.machine()
                    : Result<Snapshot>(Status(Code::kInvalidArgument, "no machine reader"));
    } else {
        built = rebuild(*old, marks, &reads);
    }
    std::lock_guard<std::mutex> g(mu_);
    stats_.machine_reads += reads.machine_reads;
    stats_.device_reads += reads.device_reads;
    stats_.netdev_reads += reads.netdev_reads;
    if (!built) {
        ++stats_.read_errors;
        marks_.merge(marks);
        return built.status().with_context("snapshot cache");
    }
    snap_ = std::make_shared<const Snapshot>(std::move(built.value()));
    if (full) {
        netdevs_read_at_ = t;
        device_read_at_.clear();
        for (const auto &d : snap_->devices) {
            device_read_at_[d.name] = t;
        }
    } else {
        if (marks.netdevs) {
            netdevs_read_at_ = t;
        }
        for (const auto &d : marks.devices) {
            device_read_at_[d] = t;
        }
    }
    stats_.generation = generation_.load(std::memory_order_relaxed) + 1;
    generation_.store(stats_.generation, std::memory_order_release);
    return SnapshotView{snap_, stats_.generation};
}

Result<Snapshot> SnapshotCache::rebuild(const Snapshot &old, const Marks &marks,
                                        CacheStats *reads) {
    Snapshot s = old;
    if (marks.netdevs) {
        ++reads->netdev_reads;
        auto nd = src_.netdevs();
        if (!nd) {
            return nd.status().with_context("reading the netdevs");
        }
        s.netdevs = std::move(nd.value());
    }
    std::vector<std::string> warnings;
    for (const auto &name : marks.devices) {
        ++reads->device_reads;
        auto dev = src_.device(name, &warnings);
        if (!dev) {
            if (dev.status().code() == Code::kNotFound) {
                drop_device(s.devices, name); // gone: preflight says so
                continue;
            }
            return dev.status().with_context("re-reading " + name);
        }
        put_device(s.devices, std::move(dev.value()));
    }
    if (marks.netdevs) {
        relink_all(s);
    } else {
        link_gid_netdevs(s);
    }
    s.warnings.insert(s.warnings.end(), warnings.begin(), warnings.end());
    if (s.warnings.size() > kMaxWarnings) {
        s.warnings.erase(s.warnings.begin(),
                         s.warnings.end() - static_cast<std::ptrdiff_t>(kMaxWarnings));
    }
    return s;
}

DeviceReader verbs_device_reader(const verbs::VerbsApi &api) {
    return [&api](const std::string &name, std::vector<std::string> *warnings) {
        return read_rdma_device(api, name, warnings);
    };
}

} // namespace roce::topo
