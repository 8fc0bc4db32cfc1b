// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// The module's peers: add_procs, and the Endpoint behind each handle Open
// MPI holds. An RC peer's handle is its Endpoint, made at add_procs; a DC
// peer's is its proc's address, tagged (dc_handle_of), and its Endpoint is
// made on first use (issue 19: memory per process that stays flat as the
// job grows; docs/architecture.md, "DC").
#include "btl_roce_module.h"

#include "opal/class/opal_bitmap.h"

#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

Status Module::add_procs(size_t nprocs, opal_proc_t **procs, mca_btl_base_endpoint_t **endpoints,
                         opal_bitmap_t *reachable) {
    // The modex reads go first, without the lock: they may block on the PMIx
    // server, and progress (another thread's) must not wait for them.
    std::vector<Result<wire::ModexAddress>> addrs;
    addrs.reserve(nprocs);
    for (size_t i = 0; i < nprocs; ++i) {
        addrs.push_back(env_.peers->address(procs[i]));
    }
    OPAL_THREAD_LOCK(&lock_);
    for (size_t i = 0; i < nprocs; ++i) {
        opal_process_name_t pn = procs[i]->proc_name;
        std::string why = addrs[i] ? "" : addrs[i].status().message();
        mca_btl_base_endpoint_t *h = known(pn);
        if (h == nullptr && addrs[i]) {
            h = add_peer(procs[i], *addrs[i], &why, false);
        }
        if (h == nullptr) {
            log_.write(util::LogLevel::kInfo,
                       util::format("%s:%d cannot reach %s: %s", plan_.device.c_str(), plan_.port,
                                    OPAL_NAME_PRINT(pn), why.c_str()));
        }
        endpoints[i] = h;
        if (h != nullptr && reachable != nullptr) {
            opal_bitmap_set_bit(reachable, static_cast<int>(i));
        }
    }
    OPAL_THREAD_UNLOCK(&lock_);
    return Status::ok();
}

Endpoint *Module::find_endpoint(const opal_process_name_t &pn) {
    uint64_t name = (static_cast<uint64_t>(pn.jobid) << 32) | pn.vpid;
    auto it = endpoints_.by_name.find(name);
    return it != endpoints_.by_name.end() ? it->second : nullptr;
}

mca_btl_base_endpoint_t *Module::known(const opal_process_name_t &pn) {
    Endpoint *ep = find_endpoint(pn);
    return ep != nullptr ? ep->as_opal() : nullptr;
}

mca_btl_base_endpoint_t *Module::add_peer(opal_proc_t *proc, const wire::ModexAddress &addr,
                                          std::string *why, bool use) {
    auto pick = conn_->choose_port(addr, why);
    if (!pick) {
        return nullptr;
    }
    const wire::PortAdvert &pp = addr.ports[pick->port];
    if (dc_ && dc_with_peer(true, pp)) {
        // Over DC: the address handle of the peer's GID (made for the first
        // peer there, shared with the others), and nothing for the peer
        // itself until it is used.
        auto dest = conn_->dc_dest(pick->path);
        if (dest) {
            opal_process_name_t pn = proc->proc_name;
            uint64_t name = (static_cast<uint64_t>(pn.jobid) << 32) | pn.vpid;
            if (!use) {
                if (static_cast<uint32_t>(pn.jobid) != static_cast<uint32_t>(env_.who.name >> 32)) {
                    conn_->allow_lookup(name); // another job's: its fragments may name it
                }
                return dc_handle_of(proc);
            }
            Endpoint *ep = conn_->add_endpoint_at(proc, addr, *pick);
            ep->set_opal_handle(dc_handle_of(proc));
            dp_->add_dc_peer(*ep, conn_->dc_ah(*dest)); // delivers what it sent before
            return ep->as_opal();
        }
        // The peer sends to us over DC and we cannot answer: its fragments
        // are refused here (not a DC peer), ours go over RC.
        log_.write(util::LogLevel::kWarn,
                   util::format("DC to %s: %s; this peer is not reached over DC",
                                OPAL_NAME_PRINT(proc->proc_name), dest.status().message().c_str()));
    }
    return conn_->add_endpoint_at(proc, addr, *pick)->as_opal();
}

Endpoint *Module::dc_endpoint(mca_btl_base_endpoint_t *e) {
    opal_proc_t *proc = dc_handle_proc(e);
    // A hash look-up per call: the price of a DC peer costing nothing
    // until it is used (the lock is free without threads).
    OPAL_THREAD_LOCK(&lock_);
    Endpoint *found = find_endpoint(proc->proc_name);
    OPAL_THREAD_UNLOCK(&lock_);
    if (found != nullptr) {
        return found;
    }
    // The peer's first use: its modex again (without the lock: it may block
    // on PMIx; add_procs read it, so PMIx has it at hand), then its Endpoint.
    auto addr = env_.peers->address(proc);
    OPAL_THREAD_LOCK(&lock_);
    Endpoint *ep = find_endpoint(proc->proc_name); // the receive side may have made it
    std::string why = addr ? "" : addr.status().message();
    if (ep == nullptr && addr) {
        (void)add_peer(proc, *addr, &why, true);
        ep = find_endpoint(proc->proc_name);
    }
    OPAL_THREAD_UNLOCK(&lock_);
    if (ep == nullptr) {
        log_.write(util::LogLevel::kWarn,
                   util::format("%s: the endpoint of DC peer %s cannot be made: %s",
                                rail_name_.c_str(), OPAL_NAME_PRINT(proc->proc_name), why.c_str()));
    }
    return ep;
}

Status Module::del_procs(size_t, opal_proc_t **, mca_btl_base_endpoint_t **) {
    // Endpoints live until finalize: a peer that reconnects (or a late
    // fragment) must still find its state.
    return Status::ok();
}

} // namespace roce::btl
