// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// Endpoints: their construction. They are made (from the modex, or for an
// unknown requester of our job) and addressed by the Connector
// (connector/addressing.cc); their paths' QPs are in connector/path_qps.cc.
#include "btl_roce_endpoint.h"

#include "util/strings.h"

namespace roce::btl {

namespace {

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

} // namespace roce::btl
