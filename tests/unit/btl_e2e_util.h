// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// What the btl's end-to-end tests share: numbered messages and the checks
// every scenario ends with.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "btl_fabric.h"

namespace roce::testing::e2e {

/// Message n from process i to j: "p<i>->p<j>#<n>".
std::string msg(size_t i, size_t j, int n);
/// Messages [from, to) from i to j, in order.
std::vector<std::string> expected(size_t i, size_t j, int from, int to);
/// What process `r` received from `s`, sorted (compared as a set with its
/// multiplicity).
std::vector<std::string> from(BtlFabric &f, size_t r, size_t s);
/// Each path up on i towards j is connected to the QP of j's path with the
/// same index, and that one back to it (Catch checks).
void check_pairing(BtlFabric &f, size_t i, size_t j);
/// The first send brings both ends up: message 0 from process 0 to 1
/// (msg(0, 1, 0)), the fabric run until both endpoints have every path up,
/// then 5 more rounds, so that the message is delivered (Catch REQUIREs).
void connect_by_first_send(BtlFabric &f);
/// Finalizes every process (retired QPs get time to finish) and checks that
/// nothing of the fake is left, in the right order (Catch checks).
void teardown(BtlFabric &f);

/// What an RDMA completion callback (rdma_done) saw.
struct RdmaResult {
    int calls = 0;
    int status = 1; ///< the last status (1: none yet)
};
/// An RDMA completion callback counting into the RdmaResult of its context.
void rdma_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, void *,
               mca_btl_base_registration_handle_t *, void *context, void *, int status);

/// Rail r of process i (FabricOptions::all_rails): its first module, or
/// more_rails[r - 1].
btl::Module &rail(BtlFabric &f, size_t i, size_t r);
/// add_procs of every process on rail r of process i, as the bml calls it:
/// the endpoints (in `eps`) and which peers the module reaches; checks that
/// there is an endpoint exactly where the bit is set.
std::vector<bool> add_on_rail(BtlFabric &f, size_t i, size_t r,
                              std::vector<mca_btl_base_endpoint_t *> &eps);

} // namespace roce::testing::e2e
