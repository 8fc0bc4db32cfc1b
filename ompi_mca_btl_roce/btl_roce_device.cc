// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_device.h"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/strings.h"
#include "proto/wire.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

namespace {
constexpr uint32_t kUdSendSlots = 16;
// Outstanding completions the module allows besides receives and send frags
// (RDMA/atomic operations and inline sends); the CQ is sized for them.
constexpr uint32_t kCqSlack = 512 + 64;
} // namespace

int mtu_bytes(int ibv_mtu) noexcept {
    switch (ibv_mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default: return 0;
    }
}

std::string memlock_limit_text() {
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        return "locked-memory limit unknown";
    }
    if (rl.rlim_cur == RLIM_INFINITY) {
        return "locked-memory limit (ulimit -l) is unlimited";
    }
    return util::format("locked-memory limit (ulimit -l) is %llu KiB",
                        static_cast<unsigned long long>(rl.rlim_cur / 1024));
}

Result<RegisteredSlab> register_slab(const verbs::VerbsApi &api, ibv_pd *pd, size_t bytes,
                                     int access, util::LogSink *log) {
    RegisteredSlab slab;
    void *p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        return Status(Code::kResourceExhausted,
                      util::format("cannot allocate %zu bytes for buffers", bytes), ENOMEM);
    }
    std::memset(p, 0, bytes);
    slab.mem.reset(static_cast<uint8_t *>(p));
    ibv_mr *mr = api.reg_mr(pd, p, bytes, access);
    if (mr == nullptr) {
        int err = errno;
        Status s = Status::from_errno(err, util::format("ibv_reg_mr(%zu KiB)", bytes / 1024));
        if (err == ENOMEM || err == EPERM || err == EAGAIN) {
            s.with_context(memlock_limit_text());
        }
        return s;
    }
    slab.mr = verbs::Mr(mr, verbs::MrDeleter{&api, log});
    slab.size = bytes;
    return slab;
}

Result<std::unique_ptr<Device>> Device::open(const verbs::VerbsApi &api,
                                             const select::Selection &sel,
                                             qp::SharedSnapshotSource fresh, bool privileged,
                                             const DeviceConfig &cfg, util::LogSink &log) {
    const std::string &device_name = sel.device;
    std::unique_ptr<Device> d(new Device());
    d->api_ = &api;
    d->log_ = &log;
    d->name_ = device_name;
    d->port_ = sel.port;
    d->cfg_ = cfg;

    int n = 0;
    verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
    ibv_device *dev = nullptr;
    for (int i = 0; list && i < n; ++i) {
        const char *nm = api.get_device_name(list[i]);
        if (nm != nullptr && device_name == nm) {
            dev = list[i];
        }
    }
    if (dev == nullptr) {
        return Status(Code::kNotFound, "RDMA device " + device_name + " is gone");
    }
    d->ctx_ = verbs::Context(api.open_device(dev), verbs::ContextDeleter{&api, &log});
    if (!d->ctx_) {
        return Status::from_errno(errno, "ibv_open_device(" + device_name + ")");
    }
    // Async events (Last WQE Reached while a QP is retired) are read from
    // progress(), which must never block.
    int fd = d->ctx_->async_fd;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        return Status::from_errno(errno,
                                  util::format("fcntl(O_NONBLOCK) on the async event fd %d of %s",
                                               fd, device_name.c_str()));
    }
    int rc = verbs::normalize_rc(api.query_device(d->ctx_.get(), &d->dattr_), errno);
    if (rc != 0) {
        return Status::from_errno(rc, "ibv_query_device(" + device_name + ")");
    }
    d->pd_ = verbs::Pd(api.alloc_pd(d->ctx_.get()), verbs::PdDeleter{&api, &log});
    if (!d->pd_) {
        return Status::from_errno(errno, "ibv_alloc_pd(" + device_name + ")");
    }
    Status s = d->create_slabs(log);
    if (!s) {
        return s;
    }
    s = d->create_queues(sel, std::move(fresh), privileged, log);
    if (!s) {
        return s;
    }
    return d;
}

Device::~Device() = default;

Status Device::create_slabs(util::LogSink &log) {
    // Receive buffers and send frags share one slot size. If the locked-memory
    // limit refuses the configured amount, halve until it fits (at least 16
    // each) and say so once: the job still runs, with smaller queues.
    uint32_t srq = cfg_.srq_size;
    uint32_t frags = cfg_.send_frags;
    const int local = IBV_ACCESS_LOCAL_WRITE;
    for (;;) {
        auto rs = register_slab(*api_, pd_.get(), static_cast<size_t>(srq) * cfg_.recv_slot, local,
                                log_);
        auto ss = rs ? register_slab(*api_, pd_.get(), static_cast<size_t>(frags) * cfg_.recv_slot,
                                     local, log_)
                     : Result<RegisteredSlab>(rs.status());
        if (rs && ss) {
            if (srq != cfg_.srq_size || frags != cfg_.send_frags) {
                log.write(util::LogLevel::kWarn,
                          util::format("%s:%d: registered %u receive buffers and %u send "
                                       "buffers instead of %u and %u (%s); raise the limit for "
                                       "full performance",
                                       name_.c_str(), port_, srq, frags, cfg_.srq_size,
                                       cfg_.send_frags, memlock_limit_text().c_str()));
            }
            srq_slab_ = std::move(rs.value());
            send_slab_ = std::move(ss.value());
            break;
        }
        Status err = rs ? ss.status() : rs.status();
        if (err.code() != Code::kResourceExhausted && err.code() != Code::kPermissionDenied) {
            return err.with_context(name_);
        }
        if (srq <= 16 && frags <= 16) {
            return err.with_context(name_ + ": cannot register even minimal buffers");
        }
        srq = srq > 16 ? srq / 2 : srq;
        frags = frags > 16 ? frags / 2 : frags;
    }
    srq_count_ = srq;
    cfg_.send_frags = frags;
    frags_.init(send_slab_.data(), send_slab_.lkey(), cfg_.recv_slot, frags);

    auto ud = register_slab(*api_, pd_.get(), (cfg_.ud_bufs + kUdSendSlots) * kUdSlot, local,
                            log_);
    if (!ud) {
        return ud.status().with_context(name_ + " UD buffers");
    }
    ud_slab_ = std::move(ud.value());
    ud_send_busy_.assign(kUdSendSlots, false);
    return Status::ok();
}

Status Device::create_queues(const select::Selection &sel, qp::SharedSnapshotSource fresh,
                             bool privileged, util::LogSink &log) {
    const verbs::VerbsApi &api = *api_;
    int cqe = static_cast<int>(srq_count_ + 2 * cfg_.ud_bufs + cfg_.send_frags + kCqSlack);
    if (dattr_.max_cqe > 0 && cqe > dattr_.max_cqe) {
        cqe = dattr_.max_cqe;
    }
    cq_ = verbs::Cq(api.create_cq(ctx_.get(), cqe, nullptr, nullptr, 0), verbs::CqDeleter{&api, log_});
    if (!cq_) {
        return Status::from_errno(errno, util::format("ibv_create_cq(%d) on %s", cqe,
                                                      name_.c_str()));
    }
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = srq_count_;
    sa.attr.max_sge = 1;
    srq_ = verbs::Srq(api.create_srq(pd_.get(), &sa), verbs::SrqDeleter{&api, log_});
    if (!srq_) {
        return Status::from_errno(errno, util::format("ibv_create_srq(%u) on %s", srq_count_,
                                                      name_.c_str()));
    }
    for (uint32_t i = 0; i < srq_count_; ++i) {
        Status s = post_srq_recv(i);
        if (!s) {
            return s;
        }
    }

    ibv_qp_init_attr ua{};
    ua.send_cq = cq_.get();
    ua.recv_cq = cq_.get();
    ua.qp_type = IBV_QPT_UD;
    ua.cap.max_send_wr = kUdSendSlots;
    ua.cap.max_recv_wr = cfg_.ud_bufs;
    ua.cap.max_send_sge = 1;
    ua.cap.max_recv_sge = 1;
    verbs::Qp ud(api.create_qp(pd_.get(), &ua), verbs::QpDeleter{&api, log_});
    if (!ud) {
        return Status::from_errno(errno, "ibv_create_qp(UD) on " + name_);
    }
    // The transition that fails in the reported logs. Its pkey index, port
    // and qkey come from the selection and are preflighted against a fresh
    // snapshot; a failure returns the one-paragraph diagnostic.
    ud_qp_ = std::make_unique<qp::QueuePair>(api, std::move(ud), qp::QpType::kUD, sel,
                                             std::move(fresh), privileged, &log);
    Status s = ud_qp_->to_init();
    if (!s) {
        return s;
    }
    for (uint32_t i = 0; i < cfg_.ud_bufs; ++i) {
        s = post_ud_recv(i);
        if (!s) {
            return s;
        }
    }
    s = ud_qp_->to_rtr(nullptr);
    if (!s) {
        return s;
    }
    s = ud_qp_->to_rts();
    if (!s) {
        return s;
    }

    // Learn the inline size RC QPs really get (the provider may lower it).
    auto probe = create_rc_qp();
    if (!probe) {
        return probe.status();
    }
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    if (api.query_qp(probe->get(), &qa, IBV_QP_CAP, &qi) == 0) {
        max_inline_ = qi.cap.max_inline_data;
    }
    (void)log;
    return Status::ok();
}

bool Device::next_async_event(ibv_async_event *out) {
    if (async_failed_) {
        return false;
    }
    ibv_async_event ev{};
    errno = 0;
    if (api_->get_async_event(ctx_.get(), &ev) != 0) {
        int err = errno;
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            async_failed_ = true;
            log_->write(util::LogLevel::kWarn,
                        util::format("%s:%d: ibv_get_async_event failed: %s (%d); async events "
                                     "of this device are no longer read (retired QPs then "
                                     "wait the bounded time for Last WQE Reached)",
                                     name_.c_str(), port_, std::strerror(err), err));
        }
        return false;
    }
    *out = ev;
    api_->ack_async_event(&ev);
    return true;
}

Status Device::recover_ud() {
    Status s = ud_qp_->reset();
    if (s) {
        s = ud_qp_->to_init();
    }
    for (uint32_t i = 0; s && i < cfg_.ud_bufs; ++i) {
        s = post_ud_recv(i);
    }
    if (s) {
        s = ud_qp_->to_rtr(nullptr);
    }
    if (s) {
        s = ud_qp_->to_rts();
    }
    if (!s) {
        return s.with_context(util::format("recovering the UD QP 0x%x of %s", ud_qp()->qp_num,
                                           name_.c_str()));
    }
    ud_send_busy_.assign(ud_send_busy_.size(), false);
    ++ud_recoveries_;
    return Status::ok();
}

Status Device::post_srq_recv(uint32_t index) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(srq_buffer(index));
    sge.length = cfg_.recv_slot;
    sge.lkey = srq_slab_.lkey();
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(index, WrKind::kSrqRecv);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    int rc = verbs::normalize_rc(api_->post_srq_recv(srq_.get(), &wr, &bad), errno);
    return rc == 0 ? Status::ok()
                   : Status::from_errno(rc, "ibv_post_srq_recv on " + name_);
}

Status Device::post_srq_recvs(const uint32_t *indices, size_t n) {
    ibv_sge sge[kSrqPostBatch];
    ibv_recv_wr wr[kSrqPostBatch];
    for (size_t done = 0; done < n;) {
        size_t k = std::min(n - done, kSrqPostBatch);
        for (size_t i = 0; i < k; ++i) {
            sge[i].addr = reinterpret_cast<uint64_t>(srq_buffer(indices[done + i]));
            sge[i].length = cfg_.recv_slot;
            sge[i].lkey = srq_slab_.lkey();
            wr[i].wr_id = make_wr_id(indices[done + i], WrKind::kSrqRecv);
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].next = i + 1 < k ? &wr[i + 1] : nullptr;
        }
        ibv_recv_wr *bad = nullptr;
        int rc = verbs::normalize_rc(api_->post_srq_recv(srq_.get(), wr, &bad), errno);
        if (rc != 0) {
            size_t posted = done + (bad != nullptr ? static_cast<size_t>(bad - wr) : 0);
            return Status::from_errno(rc, util::format("ibv_post_srq_recv on %s (%zu of %zu "
                                                       "buffers posted)",
                                                       name_.c_str(), posted, n));
        }
        done += k;
    }
    return Status::ok();
}

Status Device::post_ud_recv(uint32_t index) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(ud_buffer(index));
    sge.length = kUdSlot;
    sge.lkey = ud_slab_.lkey();
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(index, WrKind::kUdRecv);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    int rc = verbs::normalize_rc(api_->post_recv(ud_qp_->get(), &wr, &bad), errno);
    return rc == 0 ? Status::ok() : Status::from_errno(rc, "ibv_post_recv(UD) on " + name_);
}

Status Device::ud_send(ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey,
                       const uint8_t *data, size_t len) {
    if (len > kUdSlot - kGrhSize) {
        return Status(Code::kInternal, util::format("UD message of %zu bytes too large", len));
    }
    uint32_t slot = kUdSendSlots;
    for (uint32_t i = 0; i < kUdSendSlots; ++i) {
        uint32_t k = (ud_send_next_ + i) % kUdSendSlots;
        if (!ud_send_busy_[k]) {
            slot = k;
            break;
        }
    }
    if (slot == kUdSendSlots) {
        return Status(Code::kResourceExhausted, "all UD send slots busy");
    }
    ud_send_next_ = (slot + 1) % kUdSendSlots;
    uint8_t *buf = ud_buffer(cfg_.ud_bufs + slot);
    std::memcpy(buf, data, len);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(buf);
    sge.length = static_cast<uint32_t>(len);
    sge.lkey = ud_slab_.lkey();
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(slot, WrKind::kUdSend);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = remote_qkey;
    ibv_send_wr *bad = nullptr;
    int rc = verbs::normalize_rc(api_->post_send(ud_qp_->get(), &wr, &bad), errno);
    if (rc != 0) {
        return Status::from_errno(rc, "ibv_post_send(UD) on " + name_);
    }
    ud_send_busy_[slot] = true;
    return Status::ok();
}

Result<verbs::Qp> Device::create_rc_qp() {
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_.get();
    ia.recv_cq = cq_.get();
    ia.srq = srq_.get();
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = cfg_.sq_depth;
    ia.cap.max_send_sge = 2;
    ia.cap.max_recv_wr = 0;
    ia.cap.max_recv_sge = 0;
    ia.cap.max_inline_data = cfg_.max_inline;
    verbs::Qp qp(api_->create_qp(pd_.get(), &ia), verbs::QpDeleter{api_, log_});
    if (!qp) {
        int err = errno;
        // Some providers refuse the inline size: retry without inline data.
        if (err == EINVAL && ia.cap.max_inline_data > 0) {
            ia.cap.max_inline_data = 0;
            qp = verbs::Qp(api_->create_qp(pd_.get(), &ia), verbs::QpDeleter{api_, log_});
            if (qp) {
                return qp;
            }
            err = errno;
        }
        return Status::from_errno(err, util::format("ibv_create_qp(RC, sq %u) on %s",
                                                    cfg_.sq_depth, name_.c_str()));
    }
    return qp;
}

} // namespace roce::btl
