// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module's part of surviving a lost rail (issue 16; docs/architecture.md,
// "Losing a rail"): which endpoints lost every path, the sibling rail that
// carries their sends meanwhile (Rails), the warning when a rail is lost and
// the line when it is back; and, on the receiving side, the kForward
// fragments a sibling got: checked, then handed to the module of the rail
// they were sent on. The puts and gets of a lost endpoint go to the sibling
// too (DataPath::carry_rdma), with the keys every registration has on every
// rail (register_mem mirrors it on each sibling's registry). Two module
// locks are never held together: a module calls a sibling only without its
// own lock.
#include "btl_roce_module.h"

#include <algorithm>

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Status;

namespace {

/// Sends taken off one endpoint's queue per reroute pass.
constexpr size_t kForwardBatch = 64;

/// A carried send is done on the carrying rail: tell its own module.
void forward_sent(mca_btl_base_module_t *, mca_btl_base_endpoint_t *,
                  mca_btl_base_descriptor_t *des, int status) {
    auto *origin = static_cast<Module *>(des->des_context);
    origin->forward_completed(static_cast<Frag *>(des->des_cbdata), status);
}

/// A port-down notice went out (or was given up: the peer's QPs will
/// tell it in time): nothing waits for it.
void notice_sent(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *,
                 int) {}

/// A carried put or get is done on the carrying rail (its proxy's
/// completion, run without its lock): tell the origin module.
void rdma_carried_cb(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *,
                     mca_btl_base_registration_handle_t *, void *context, void *cbdata,
                     int status) {
    static_cast<Module *>(context)->rdma_carried(static_cast<RdmaOp *>(cbdata), status);
}

} // namespace

bool Module::reached_elsewhere(const Endpoint &ep) const {
    return env_.rails && env_.rails->sibling(this, ep.name) != nullptr;
}

void Module::reach_changed(Endpoint &ep, bool reached) {
    if (env_.rails) {
        env_.rails->set_reach(this, ep.name, reached);
    }
    auto it = std::find_if(lost_.begin(), lost_.end(), [&](const Lost &l) { return l.ep == &ep; });
    if (reached || ep.state == EpState::kFailed) {
        if (it != lost_.end()) {
            if (reached && it->announced) {
                log_.write(LogLevel::kWarn,
                           util::format("%s reaches %s again: its traffic is back on this rail",
                                        rail_name_.c_str(), ep.label.c_str()));
            }
            lost_.erase(it);
        }
        return;
    }
    if (it != lost_.end() || !env_.rails || ep.is_self()) {
        return;
    }
    lost_.push_back(Lost{&ep, false});
    Module *b = env_.rails->sibling(this, ep.name);
    if (b != nullptr) {
        lost_.back().announced = true;
        log_.write(LogLevel::kWarn,
                   util::format("%s lost every path to %s; its traffic goes over %s until this "
                                "rail returns",
                                rail_name_.c_str(), ep.label.c_str(), b->rail_name().c_str()));
    }
}

void Module::reroute() {
    std::vector<Endpoint *> eps;
    OPAL_THREAD_LOCK(&lock_);
    for (const Lost &l : lost_) {
        eps.push_back(l.ep);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    for (Endpoint *ep : eps) {
        // name and port_index never change once the endpoint exists.
        Module *b = env_.rails ? env_.rails->sibling(this, ep->name) : nullptr;
        if (b == nullptr) {
            continue; // nothing reaches the peer: the connect timeout applies
        }
        std::vector<Frag *> frags;
        OPAL_THREAD_LOCK(&lock_);
        auto it = std::find_if(lost_.begin(), lost_.end(),
                               [&](const Lost &l) { return l.ep == ep; });
        if (it != lost_.end()) {
            if (!it->announced) {
                it->announced = true;
                log_.write(LogLevel::kWarn,
                           util::format("%s lost every path to %s; its traffic goes over %s "
                                        "until this rail returns",
                                        rail_name_.c_str(), ep->label.c_str(),
                                        b->rail_name().c_str()));
            }
            dp_->take_for_forwarding(*ep, kForwardBatch, frags);
        }
        OPAL_THREAD_UNLOCK(&lock_);
        size_t k = 0;
        for (; k < frags.size(); ++k) {
            wire::ForwardHeader h;
            h.kind = wire::ForwardKind::kSend;
            h.tag = frags[k]->tag;
            h.origin_src_port = port_index_;
            h.origin_dst_port = ep->port_index;
            h.seq = frags[k]->seq;
            Status s = b->carry(ep->name, h, *frags[k], *this);
            if (!s) {
                if (s.code() != Code::kResourceExhausted) {
                    log_.write(LogLevel::kDebug, "forwarding over " + b->rail_name() + ": " +
                                                     s.message());
                }
                break; // the rest waits for the next pass, in order
            }
        }
        if (k < frags.size()) {
            OPAL_THREAD_LOCK(&lock_);
            dp_->give_back(*ep, frags, k);
            OPAL_THREAD_UNLOCK(&lock_);
        }
        reroute_rdma(*ep, *b);
    }
}

void Module::reroute_rdma(Endpoint &ep, Module &b) {
    std::vector<RdmaOp *> ops;
    OPAL_THREAD_LOCK(&lock_);
    auto it = std::find_if(lost_.begin(), lost_.end(), [&](const Lost &l) { return l.ep == &ep; });
    if (it != lost_.end()) {
        dp_->take_for_carrying(ep, kForwardBatch, ops);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    if (ops.empty()) {
        return;
    }
    // Carried, or back on our queue: those b has no key for stay there
    // until our rail returns; after a "not now" the rest waits for the next
    // pass.
    std::vector<RdmaOp *> back;
    size_t k = 0;
    for (; k < ops.size(); ++k) {
        Status s = b.carry_rdma(ep.name, *ops[k], *this);
        if (s) {
            continue;
        }
        if (s.code() == Code::kNotFound) {
            ops[k]->stay = true;
            back.push_back(ops[k]);
            if (log_.enabled(LogLevel::kDebug)) {
                log_.write(LogLevel::kDebug, s.message() + "; it waits for " + rail_name_);
            }
            continue;
        }
        if (s.code() != Code::kResourceExhausted) {
            log_.write(LogLevel::kDebug,
                       "carrying RDMA over " + b.rail_name() + ": " + s.message());
        }
        break;
    }
    back.insert(back.end(), ops.begin() + static_cast<std::ptrdiff_t>(k), ops.end());
    if (!back.empty()) {
        OPAL_THREAD_LOCK(&lock_);
        dp_->give_back_rdma(ep, back, 0);
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

Status Module::carrier_endpoint(uint64_t peer, Endpoint **ep) {
    OPAL_THREAD_LOCK(&lock_);
    auto it = endpoints_.by_name.find(peer);
    *ep = it != endpoints_.by_name.end() ? it->second : nullptr;
    OPAL_THREAD_UNLOCK(&lock_);
    if (*ep == nullptr) {
        return Status(Code::kUnavailable,
                      util::format("%s has no endpoint for that peer", rail_name_.c_str()));
    }
    return Status();
}

Status Module::carry_rdma(uint64_t peer, const RdmaOp &origin, Module &from) {
    Endpoint *ep = nullptr;
    if (Status s = carrier_endpoint(peer, &ep); !s) {
        return s;
    }
    // port_index_ is set once at init, before any traffic.
    return dp_->carry_rdma(*ep, port_index_, origin, rdma_carried_cb, &from,
                           const_cast<RdmaOp *>(&origin));
}

void Module::rdma_carried(RdmaOp *op, int status) {
    OPAL_THREAD_LOCK(&lock_);
    dp_->carried_rdma_done(op, status);
    OPAL_THREAD_UNLOCK(&lock_);
}

bool Module::can_carry(const Endpoint &ep) {
    return env_.rails &&
           std::any_of(lost_.begin(), lost_.end(), [&](const Lost &l) { return l.ep == &ep; }) &&
           env_.rails->sibling(this, ep.name) != nullptr;
}

int Module::flush_progress() {
    int n = progress();
    if (env_.rails) {
        for (const auto &member : env_.rails->members()) {
            if (member.second != this) {
                n += member.second->progress(); // it may be carrying our RDMA
            }
        }
    }
    return n;
}

void Module::share_registration(mca_btl_base_registration_handle_t *h) {
    if (!env_.rails) {
        return; // one rail: nothing to carry over
    }
    std::lock_guard<std::mutex> g(reg_mu_);
    RailRegs &r = rail_regs_[h];
    if (r.refs++ > 0) {
        return; // the table is filled while the handle is held
    }
    h->rails = 0;
    if (port_index_ < kHandleRails) {
        h->rail_rkey[port_index_] = h->rkey;
        h->rail_lkey[port_index_] = h->lkey;
        h->rails |= 1u << port_index_;
    }
    // Whatever part of the registration a later user of the handle names,
    // the siblings' keys must cover it: register its whole extent.
    MemoryRegistry::Extent x = registry_->extent(h);
    for (const auto &[port, m] : env_.rails->members()) {
        if (m == this || port >= kHandleRails) {
            continue;
        }
        mca_btl_base_registration_handle_t *sh = m->register_for_rail(x.base, x.size, x.flags);
        if (sh == nullptr) {
            continue; // that rail cannot carry RDMA of this memory
        }
        r.sibling[port] = sh;
        h->rail_rkey[port] = sh->rkey;
        h->rail_lkey[port] = sh->lkey;
        h->rails |= 1u << port;
    }
}

void Module::unshare_registration(mca_btl_base_registration_handle_t *h) {
    RailRegs last;
    {
        std::lock_guard<std::mutex> g(reg_mu_);
        auto it = rail_regs_.find(h);
        if (it == rail_regs_.end() || --it->second.refs > 0) {
            return;
        }
        last = it->second;
        rail_regs_.erase(it);
        h->rails = 0; // a registry may cache it and hand it out again
    }
    for (unsigned p = 0; p < kHandleRails; ++p) {
        Module *m =
            last.sibling[p] && env_.rails ? env_.rails->at_port(static_cast<uint16_t>(p)) : nullptr;
        if (m != nullptr && m != this) {
            m->release_for_rail(last.sibling[p]); // gone: released with its registry
        }
    }
}

mca_btl_base_registration_handle_t *Module::register_for_rail(void *base, size_t size,
                                                              uint32_t flags) {
    return registry_->register_mem(base, size, flags);
}

void Module::release_for_rail(mca_btl_base_registration_handle_t *handle) {
    int rc = registry_->deregister_mem(handle);
    if (rc != OPAL_SUCCESS) {
        log_.write(LogLevel::kWarn,
                   util::format("%s: releasing a registration made for another rail failed "
                                "(OPAL code %d)",
                                rail_name_.c_str(), rc));
    }
}

Status Module::carry(uint64_t peer, const wire::ForwardHeader &hdr, const Frag &origin,
                     Module &from) {
    Endpoint *ep = nullptr;
    if (Status s = carrier_endpoint(peer, &ep); !s) {
        return s;
    }
    return dp_->send_forward(*ep, hdr, &origin, forward_sent, const_cast<Frag *>(&origin), &from);
}

Status Module::carry_notice(uint64_t peer, const wire::ForwardHeader &hdr) {
    Endpoint *ep = nullptr;
    if (Status s = carrier_endpoint(peer, &ep); !s) {
        return s;
    }
    return dp_->send_forward(*ep, hdr, nullptr, notice_sent, nullptr, this);
}

void Module::tell_port_down(const std::vector<PortDownNotice> &peers) {
    std::vector<PortDownNotice> later;
    for (const PortDownNotice &n : peers) {
        Module *b = env_.rails ? env_.rails->sibling(this, n.peer) : nullptr;
        if (b == nullptr) {
            continue; // nothing else reaches it: its QPs' retries tell it
        }
        wire::ForwardHeader h;
        h.kind = wire::ForwardKind::kPortDown;
        h.origin_src_port = port_index_;
        h.origin_dst_port = n.peer_port;
        Status s = b->carry_notice(n.peer, h);
        if (!s && s.code() == Code::kResourceExhausted) {
            later.push_back(n); // no free slot now: the next pass
        } else if (!s) {
            log_.write(LogLevel::kDebug, "telling a peer over " + b->rail_name() +
                                             " that our port went down: " + s.message());
        }
    }
    if (!later.empty()) {
        OPAL_THREAD_LOCK(&lock_);
        notify_down_.insert(notify_down_.end(), later.begin(), later.end());
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

void Module::forward_completed(Frag *f, int status) {
    OPAL_THREAD_LOCK(&lock_);
    dp_->forward_done(f, status);
    OPAL_THREAD_UNLOCK(&lock_);
}

void Module::refuse_forwarded(const std::string &via, const std::string &why) {
    ++dp_->rail_stats().forwarded_refused;
    uint64_t n = forward_warn_.hit("forwarded from " + via, clock());
    if (n > 0) {
        log_.write(LogLevel::kError,
                   util::format("%s: refused a forwarded fragment from %s: %s%s",
                                rail_name_.c_str(), via.c_str(), why.c_str(),
                                n > 1 ? util::format(" (%llu such since the last report)",
                                                     static_cast<unsigned long long>(n))
                                            .c_str()
                                      : ""));
    }
}

void Module::forwarded(Endpoint &via, const uint8_t *data, size_t len) {
    auto h = wire::parse_forward(data, len);
    Module *origin = h && env_.rails ? env_.rails->at_port(h->origin_dst_port) : nullptr;
    if (!h || origin == nullptr || origin == this) {
        std::string why = !h ? h.status().message()
                         : origin == nullptr
                             ? util::format("it names our port %u, which is no rail of ours",
                                            h->origin_dst_port)
                             : "it names the rail it came on";
        OPAL_THREAD_LOCK(&lock_);
        refuse_forwarded(via.label, why);
        OPAL_THREAD_UNLOCK(&lock_);
        return;
    }
    origin->receive_forwarded(via.name, via.label, *h, data + wire::kForwardHeaderSize);
}

void Module::receive_forwarded(uint64_t sender, const std::string &via,
                               const wire::ForwardHeader &hdr, const uint8_t *payload) {
    OPAL_THREAD_LOCK(&lock_);
    auto it = endpoints_.by_name.find(sender);
    Endpoint *ep = it != endpoints_.by_name.end() ? it->second : nullptr;
    if (ep == nullptr || ep->is_self() || ep->port_index != hdr.origin_src_port) {
        refuse_forwarded(via, ep == nullptr || ep->is_self()
                                  ? util::format("%s has no endpoint for the sender",
                                                 rail_name_.c_str())
                                  : util::format("it names the sender's port %u; on %s the "
                                                 "sender is port %u",
                                                 hdr.origin_src_port, rail_name_.c_str(),
                                                 ep->port_index));
        OPAL_THREAD_UNLOCK(&lock_);
        return;
    }
    if (hdr.kind == wire::ForwardKind::kPortDown) {
        // Only a process of the job, over its own connection, can say this
        // of itself; the worst a false one does is a reconnection.
        size_t n = conn_->peer_port_down(
            *ep, util::format("%s said over another rail that its port of this rail went down",
                              ep->label.c_str()));
        ++dp_->rail_stats().port_down_notices;
        log_.write(LogLevel::kInfo,
                   util::format("%s: %s said over another rail that its port went down: %zu "
                                "path(s) to it failed at once",
                                rail_name_.c_str(), ep->label.c_str(), n));
        OPAL_THREAD_UNLOCK(&lock_);
        return;
    }
    SeqWindow::Verdict v = dp_->accept_forwarded(*ep, hdr.seq);
    OPAL_THREAD_UNLOCK(&lock_);
    if (v != SeqWindow::Verdict::kNew) {
        return; // the original arrived before its path failed (or a forgery)
    }
    if (!dp_->deliver(*ep, hdr.tag, payload, hdr.length)) {
        OPAL_THREAD_LOCK(&lock_);
        refuse_forwarded(via, util::format("nobody registered its tag %u", hdr.tag));
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

} // namespace roce::btl
