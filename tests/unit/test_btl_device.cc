// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl Device over FakeVerbs: teardown in reverse creation order.
#include <fcntl.h>
#include <unistd.h>

#include "btl_device_bench.h"
#include "data/rdma_op_pool.h"
#include "verbs/handles.h"

using namespace roce;
using roce::testing::DeviceBench;

TEST_CASE("Device: teardown is the reverse of creation, so no buffer goes under a posted receive",
          "[btl][device][teardown]") {
    for (const char *fixture_name : {"mlx5_lag", "rxe_bond"}) {
        CAPTURE(fixture_name);
        verbs::note_destroy_failure(0);
        DeviceBench b(fixture_name);
        REQUIRE(b.fake.live_objects() > 0);
        b.dev.reset();
        // The SRQ and the UD QP hold posted receives in the slabs: they must be
        // destroyed before the MRs are deregistered and the memory freed.
        CHECK(b.fake.busy_deregs() == 0);
        CHECK(b.fake.live_objects() == 0);
        CHECK(verbs::last_destroy_errno() == 0);
    }
}

namespace {
int g_acks = 0;
ibv_context *(*g_open)(ibv_device *) = nullptr;
} // namespace

TEST_CASE("Device: async events are read without blocking and acknowledged",
          "[btl][device][async]") {
    g_acks = 0;
    DeviceBench b("mlx5_lag", [](verbs::VerbsApi &t) {
        t.ack_async_event = [](ibv_async_event *) { ++g_acks; };
    });
    const int fd = b.dev->async_fd();
    REQUIRE(fd == b.dev->context()->async_fd);
    int flags = fcntl(fd, F_GETFL);
    REQUIRE(flags >= 0);
    CHECK((flags & O_NONBLOCK) != 0); // open() made it so: progress() never blocks

    const size_t lines_at_open = b.log.lines().size();
    ibv_async_event ev{};
    CHECK_FALSE(b.dev->next_async_event(&ev)); // none pending
    ibv_async_event port_err{};
    port_err.event_type = IBV_EVENT_PORT_ERR;
    port_err.element.port_num = 1;
    b.fake.push_async_event(b.dev->context(), port_err);
    ibv_async_event gid{};
    gid.event_type = IBV_EVENT_GID_CHANGE;
    b.fake.push_async_event(b.dev->context(), gid);
    REQUIRE(b.dev->next_async_event(&ev));
    CHECK(ev.event_type == IBV_EVENT_PORT_ERR);
    CHECK(ev.element.port_num == 1);
    REQUIRE(b.dev->next_async_event(&ev));
    CHECK(ev.event_type == IBV_EVENT_GID_CHANGE);
    CHECK_FALSE(b.dev->next_async_event(&ev));
    CHECK(g_acks == 2);
    CHECK(b.fake.calls(testing::Call::kGetAsyncEvent) == 4);
    CHECK(b.log.lines().size() == lines_at_open);

    // A real failure is said once; the Device stops reading.
    b.fake.fail(testing::Call::kGetAsyncEvent, EIO, 0, -1);
    CHECK_FALSE(b.dev->next_async_event(&ev));
    CHECK_FALSE(b.dev->next_async_event(&ev));
    CHECK(b.fake.calls(testing::Call::kGetAsyncEvent) == 5); // the second call reads nothing
    REQUIRE(b.log.lines().size() == lines_at_open + 1);
    CHECK(b.log.lines().back().level == util::LogLevel::kWarn);
    CHECK(b.log.contains("mlx5_bond_0:1: ibv_get_async_event failed: Input/output error (5)"));
}

TEST_CASE("Device: open fails clearly when the async fd cannot be made non-blocking",
          "[btl][device][async]") {
    testing::FakeVerbs fake(testing::fixture("rxe_bond"));
    verbs::VerbsApi table = fake.api();
    // A context whose async fd is not an open file.
    g_open = table.open_device;
    table.open_device = [](ibv_device *dev) -> ibv_context * {
        ibv_context *ctx = g_open(dev);
        if (ctx != nullptr) {
            ::close(ctx->async_fd);
            ctx->async_fd = -1;
        }
        return ctx;
    };
    util::CaptureSink log;
    auto sel = testing::first_port_selection("rxe_bond");
    auto d = btl::Device::open(table, sel, {}, false, testing::small_device_config(), log);
    REQUIRE_FALSE(d);
    CHECK(
        d.status().message() ==
        "fcntl(O_NONBLOCK) on the async event fd -1 of rxe_bond0 failed: Bad file descriptor (9)");
}

TEST_CASE("RdmaOpPool: a fixed pool of operations in a registered slab", "[btl][device][rdma]") {
    DeviceBench b("mlx5_lag");
    const size_t objects = b.fake.live_objects();
    btl::RdmaOpPool pool;
    REQUIRE(pool.init(b.dev->api(), b.dev->pd(), 3, &b.log).is_ok());
    CHECK(b.fake.live_objects() == objects + 1); // its MR
    CHECK(pool.lkey() != 0);
    btl::RdmaOp *ops[3];
    for (auto &op : ops) {
        op = pool.get();
        REQUIRE(op != nullptr);
        CHECK(op->parent == nullptr); // value-initialized
        op->chunks_left = 7;
    }
    CHECK(ops[0] != ops[1]);
    CHECK(ops[1] != ops[2]);
    CHECK(pool.get() == nullptr); // all in use
    pool.put(ops[1]);
    btl::RdmaOp *again = pool.get();
    CHECK(again == ops[1]);
    CHECK(again->chunks_left == 0); // reset on the way out
    for (auto *op : ops) {
        pool.put(op);
    }
    pool.reset();
    CHECK(b.fake.live_objects() == objects);
    CHECK(b.fake.busy_deregs() == 0);

    b.fake.fail(testing::Call::kRegMr, ENOMEM);
    util::Status s = pool.init(b.dev->api(), b.dev->pd(), 3, &b.log);
    CHECK_FALSE(s.is_ok());
    CHECK(s.message().find("RDMA operation pool") != std::string::npos);
}
