// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The RC/DC memory model (common/qp/memory_model.h) with the sizes the btl
// allocates today: its RC QP capacities (DeviceConfig, Device::create_rc_qp),
// its per-path and per-endpoint objects (sizeof), and DC's DCI capacities
// (qp::DciCaps) - so that issue 19's benchmark prints these numbers.
#include "opal_cxx_compat.h"

#include "btl_roce_device.h"
#include "btl_roce_endpoint.h"
#include "catch.h"
#include "qp/dc.h"
#include "qp/memory_model.h"

using namespace roce;

namespace {

/// The btl's RC paths and endpoints as they are (object sizes only: what
/// their members allocate on the heap comes on top, as btl_conn_bench
/// measures), with DC's DCI defaults and `pool` DCIs per port.
qp::MemoryInputs btl_inputs(uint32_t pool) {
    btl::DeviceConfig dev;
    qp::DciCaps dci;
    qp::MemoryInputs in;
    in.ports = 1;
    in.paths_per_peer = 2; // a two-member LAG: one path per member
    in.rc_sq_depth = dev.sq_depth;
    in.rc_max_sge = 2; // Device::create_rc_qp
    in.rc_max_inline = dev.max_inline;
    in.rc_path_bytes = sizeof(btl::Path) + sizeof(qp::QueuePair);
    in.dci_pool = pool;
    in.dci_sq_depth = dci.max_send_wr;
    in.dci_max_sge = dci.max_send_sge;
    in.dci_max_inline = dci.max_inline_data;
    in.dc_port_bytes = sizeof(qp::DcTarget) + pool * sizeof(qp::DcInitiator);
    in.dc_peer_bytes = qp::mlx5_ah_bytes();
    in.peer_bytes = sizeof(btl::Endpoint);
    return in;
}

} // namespace

TEST_CASE("memory model: mlx5 send-queue sizes as rdma-core computes them", "[memory]") {
    // RC as the btl creates it (ibv_create_qp: memory windows allowed):
    // overhead max(ctrl 16, +raddr 32, +atomic 48, UMR 16+48+64+64 = 192);
    // 2 data segments: 224; 128 inline bytes: 192 + align(4 + 128, 16) =
    // 336; rounded to 64-byte blocks: 384.
    CHECK(qp::mlx5_send_wqe_bytes(false, true, 2, 128) == 384u);
    CHECK(qp::mlx5_sq_bytes(false, true, 128, 2, 128) == 65536u); // 128 x 384 -> 2^16
    // A DCI with kDciSendOps (no memory windows): atomic overhead 48 + the
    // address vector 48 = 96; one data segment: 112 -> 128.
    CHECK(qp::mlx5_send_wqe_bytes(true, false, 1, 0) == 128u);
    CHECK(qp::mlx5_sq_bytes(true, false, 64, 1, 0) == 8192u);
    CHECK(qp::mlx5_sq_bytes(true, false, 0, 1, 0) == 0u);
    CHECK(qp::mlx5_ah_bytes() == sizeof(ibv_ah) + 48u);
}

TEST_CASE("memory model: RC grows with the peers, DC's queues do not", "[memory]") {
    qp::MemoryInputs in = btl_inputs(8);
    const uint64_t peers[] = {64, 1024, 16384, 65536};
    for (uint64_t n : peers) {
        INFO(n << " peers");
        qp::MemoryEstimate rc = qp::rc_memory(in, n);
        qp::MemoryEstimate dc = qp::dc_memory(in, n);
        CHECK(rc.qps == 2 * n);
        CHECK(rc.send_wqes == 2 * n * 128);
        CHECK(rc.queue_bytes == 2 * n * 65536);
        CHECK(rc.state_bytes ==
              n * (sizeof(btl::Endpoint) + 2 * (sizeof(btl::Path) + sizeof(qp::QueuePair))));
        CHECK(dc.qps == 1 + 8);
        CHECK(dc.send_wqes == 8 * 64);
        CHECK(dc.queue_bytes == 8 * 8192);
        CHECK(dc.state_bytes == sizeof(qp::DcTarget) + 8 * sizeof(qp::DcInitiator) +
                                    n * (sizeof(btl::Endpoint) + qp::mlx5_ah_bytes()));
        CHECK(dc.total() < rc.total());
    }
    // What DC saves is the queues: flat in the peers. What it keeps is an
    // endpoint and an address handle per peer, so its total still grows.
    CHECK(qp::dc_memory(in, 65536).queue_bytes == qp::dc_memory(in, 1024).queue_bytes);
    CHECK(qp::rc_memory(in, 65536).queue_bytes == 64 * qp::rc_memory(in, 1024).queue_bytes);
    // Two ports: RC doubles everything, DC doubles its pool and the endpoints.
    qp::MemoryInputs two = in;
    two.ports = 2;
    CHECK(qp::rc_memory(two, 1024).total() == 2 * qp::rc_memory(in, 1024).total());
    CHECK(qp::dc_memory(two, 1024).total() == 2 * qp::dc_memory(in, 1024).total());
}
