// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module's progress: polls the one CQ of the port and, under the module
// lock, gives the data path its completions (data/completions.cc) and the
// Connector the UD QP's (datagrams for the connection manager), lets the
// Connector reap retired QPs and recover the UD QP, follows network events
// and runs the manager's timers; then - without the lock - looks up unknown
// requesters and runs the PML callbacks the data path deferred.
#include "btl_roce_module.h"

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

int Module::progress() {
    // One thread polls and handles at a time. Polled outside the lock, a
    // completion of a retired QP could be handled after another thread's
    // progress found the CQ empty and destroyed that QP: dropped as a
    // fragment on an unknown QP, though its sender already had the ACK.
    // Under MPI_THREAD_MULTIPLE a thread that finds the lock taken leaves
    // (the holder is progressing); without threads the lock costs nothing.
    if (OPAL_THREAD_TRYLOCK(&lock_) != 0) {
        return 0;
    }
    ++progress_calls_;
    constexpr int kBatch = Connector::kPollBatch;
    ibv_wc wc[kBatch];
    int n = dev_->api().poll_cq(dev_->cq(), kBatch, wc);
    ConnectionManager &cm = conn_->manager();
    // The idle path: one poll, a few reads, no clock.
    bool net = netq_ && netq_->changed();
    if (n <= 0 && !cm.busy() && dp_->nothing_deferred() && !conn_->needs_attention() && !net &&
        readdress_at_ == 0 && lost_.empty() && notify_down_.empty()) {
        OPAL_THREAD_UNLOCK(&lock_);
        return 0;
    }
    for (int i = 0; i < n; ++i) {
        WrKind kind = wr_kind(wc[i].wr_id);
        if (kind == WrKind::kUdRecv || kind == WrKind::kUdSend) {
            conn_->on_ud_completion(wc[i]);
        } else {
            dp_->on_completion(wc[i]); // sends, RDMA, SRQ receives
        }
    }
    if (conn_->needs_attention()) {
        conn_->after_poll(n);
    }
    if (net) {
        on_net_events();
    }
    if (readdress_at_ > 0 && clock() >= readdress_at_) {
        readdress_at_ = 0;
        conn_->readdress();
    }
    if (cm.busy() && (n > 0 || (progress_calls_ & 15) == 0)) {
        cm.run_timers(clock());
    }
    std::vector<DataPath::Deferred> todo;
    dp_->take_deferred(todo);
    std::vector<uint64_t> lookups = conn_->take_lookups();
    bool lost = !lost_.empty();
    std::vector<PortDownNotice> notices;
    if (!notify_down_.empty()) {
        notices.swap(notify_down_);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    if (!notices.empty()) {
        tell_port_down(notices); // before reroute: the peer moves its traffic too
    }
    if (lost) {
        reroute(); // sends of a lost rail to a sibling (btl_roce_rails.cc)
    }
    if (!lookups.empty()) {
        resolve_lookups(lookups);
    }
    if (!todo.empty()) {
        dp_->run_deferred(todo);
    }
    return n > 0 ? n : 0;
}

void Module::resolve_lookups(const std::vector<uint64_t> &names) {
    for (uint64_t name : names) {
        opal_proc_t *proc = env_.peers->proc_for(name);
        auto addr = proc ? env_.peers->address(proc)
                         : Result<wire::ModexAddress>(Status(Code::kNotFound, "no such process"));
        OPAL_THREAD_LOCK(&lock_);
        std::string why = addr ? "" : addr.status().message();
        mca_btl_base_endpoint_t *h = proc != nullptr ? known(proc->proc_name) : nullptr;
        if (h == nullptr && addr) {
            // A DC peer heard from: its Endpoint now, which delivers what
            // it sent before, in order.
            h = add_peer(proc, *addr, &why, true);
        }
        Endpoint *made = proc != nullptr ? find_endpoint(proc->proc_name) : nullptr;
        if (made != nullptr && !made->dc()) {
            // Reached over RC from here: what it sent us over DC is refused.
            dp_->drop_dc_held(name);
        }
        if (h == nullptr) {
            conn_->lookup_failed(name);
            dp_->drop_dc_held(name);
            opal_process_name_t pn;
            pn.jobid = static_cast<opal_jobid_t>(name >> 32);
            pn.vpid = static_cast<opal_vpid_t>(name & 0xffffffffu);
            log_.write(LogLevel::kWarn, util::format("connection request from %s refused: %s",
                                                     OPAL_NAME_PRINT(pn), why.c_str()));
        }
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

} // namespace roce::btl
