// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "catch.h"
#include "topo/port_probe.h"

using roce::topo::explain_unusable;
using roce::topo::PortProbe;

TEST_CASE("port probe: explains why no port is usable", "[topo][probe]") {
    CHECK(explain_unusable({}).find("no RDMA devices found") == 0);

    std::vector<PortProbe> ports = {
        {"mlx5_0", 1, false, true, {}},
        {"rxe0", 1, true, false, {}},
        {"mlx5_1", 0, false, false, "ibv_open_device failed: Permission denied (13)"},
    };
    CHECK(explain_unusable(ports) ==
          "3 RDMA port(s) but none is an active RoCE port: mlx5_0:1 (InfiniBand link layer, "
          "not RoCE), rxe0:1 (Ethernet, port not ACTIVE), mlx5_1 (ibv_open_device failed: "
          "Permission denied (13))");

    ports.push_back({"mlx5_bond_0", 1, true, true, {}});
    CHECK(roce::topo::usable(ports.back()));
    CHECK(explain_unusable(ports).empty());
}
