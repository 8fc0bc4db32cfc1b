// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Endpoints: creation from the modex (or from an unknown peer's request),
// and the name table that finds them. The RC queue pairs of their paths are
// in btl_roce_path_qps.cc.
#include "btl_roce_module.h"

#include <algorithm>

#include "util/net.h"
#include "util/strings.h"

namespace roce::btl {

using util::Code;
using util::LogLevel;
using util::Result;
using util::Status;

namespace {

uint64_t name_of(const opal_process_name_t &pn) {
    return (static_cast<uint64_t>(pn.jobid) << 32) | pn.vpid;
}

opal_process_name_t name_from(uint64_t v) {
    opal_process_name_t pn;
    pn.jobid = static_cast<opal_jobid_t>(v >> 32);
    pn.vpid = static_cast<opal_vpid_t>(v & 0xffffffffu);
    return pn;
}

} // namespace

Endpoint::Endpoint(uint32_t seq_span, opal_proc_t *proc, uint64_t peer_name,
                   uint16_t peer_port_index, wire::PortAdvert peer_port, PathChoice path)
    : proc_(proc), peer_port_(std::move(peer_port)), path_(std::move(path)),
      completed_(seq_span), received_(seq_span) {
    name = peer_name;
    port_index = peer_port_index;
    opal_process_name_t pn = name_from(peer_name);
    label = util::format("rank %u (%s, %s)", pn.vpid, compat::proc_hostname(proc).c_str(),
                         OPAL_NAME_PRINT(pn));
}

Endpoint::~Endpoint() = default;

Endpoint *Module::add_endpoint(opal_proc_t *proc, const wire::ModexAddress &addr,
                               std::string *why) {
    std::vector<std::string> reasons;
    // New endpoints choose from the machine as it is now.
    std::shared_ptr<const topo::Snapshot> view = current_view();
    for (size_t i = 0; i < addr.ports.size(); ++i) {
        const wire::PortAdvert &pp = addr.ports[i];
        if (pp.qkey != plan_.qkey) {
            reasons.push_back(util::format("peer port %s:%u uses qkey %s, we use %s (set "
                                           "btl_roce_qkey the same everywhere)",
                                           util::printable(pp.device).c_str(), pp.port,
                                           util::hex32(pp.qkey).c_str(),
                                           util::hex32(plan_.qkey).c_str()));
            continue;
        }
        auto path = choose_path(plan_, *view, pp);
        if (!path) {
            reasons.push_back(path.status().message());
            continue;
        }
        uint64_t name = name_of(proc->proc_name);
        auto ep = std::make_unique<Endpoint>(cfg_.seq_span, proc, name,
                                             static_cast<uint16_t>(i), pp, path.value());
        ep->loopback = (name == env_.who.name);
        ep->token = addr.token;
        BondView bond = bond_view(*view, ep->path().selection.netdev);
        ep->spread_model_ = spread_model(bond.members, bond.hash_policy,
                                         util::IpAddress::from_gid(ep->path().sgid()),
                                         util::IpAddress::from_gid(ep->path().dgid));
        log_.write(LogLevel::kDebug,
                   util::format("%s:%d -> %s: %s", plan_.device.c_str(), plan_.port,
                                ep->label.c_str(), ep->path().why.c_str()));
        Endpoint *raw = ep.get();
        endpoints_.push_back(std::move(ep));
        by_name_[name] = raw;
        return raw;
    }
    *why = util::join(reasons, "; ");
    return nullptr;
}

// A REQ with our token came from a name we have no endpoint for: a process
// of our job that Open MPI has not added yet (remote procs are added
// lazily). Only names of our own job, within its size, are looked up, and
// not here: the lookup reads the modex (which may block on the PMIx server)
// and may allocate an opal_proc_t, so it runs in progress() without the
// module lock (resolve_lookups). The requester's next REQ finds the endpoint.
bool Module::unknown_requester(uint64_t name) {
    if (by_name_.count(name) != 0) {
        return true; // ourselves (no handshake with the loopback endpoint)
    }
    uint32_t jobid = static_cast<uint32_t>(name >> 32);
    uint32_t vpid = static_cast<uint32_t>(name & 0xffffffffu);
    if (jobid != static_cast<uint32_t>(env_.who.name >> 32) ||
        (env_.who.job_size != 0 && vpid >= env_.who.job_size) || lookup_failed_.count(name) != 0) {
        return false;
    }
    if (std::find(lookups_.begin(), lookups_.end(), name) == lookups_.end() &&
        lookups_.size() < kMaxLookups) {
        lookups_.push_back(name);
    }
    return true;
}

void Module::resolve_lookups(const std::vector<uint64_t> &names) {
    for (uint64_t name : names) {
        opal_proc_t *proc = env_.peers->proc_for(name);
        auto addr = proc ? env_.peers->address(proc)
                         : Result<wire::ModexAddress>(Status(Code::kNotFound, "no such process"));
        OPAL_THREAD_LOCK(&lock_);
        std::string why = addr ? "" : addr.status().message();
        if (by_name_.count(name) == 0 && (!addr || add_endpoint(proc, *addr, &why) == nullptr)) {
            lookup_failed_.insert(name);
            log_.write(LogLevel::kWarn,
                       util::format("connection request from %s refused: %s",
                                    OPAL_NAME_PRINT(name_from(name)), why.c_str()));
        }
        OPAL_THREAD_UNLOCK(&lock_);
    }
}

} // namespace roce::btl
