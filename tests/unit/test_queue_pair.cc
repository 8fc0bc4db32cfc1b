// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// QueuePair on FakeVerbs: each bad transition is refused before
// ibv_modify_qp is called, with the diagnostic naming the attribute and the
// fix - and, with preflight switched off, the fake kernel really returns the
// errno preflight predicted.
#include <cerrno>
#include <cstring>
#include <functional>

#include "catch.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "qp/check.h"
#include "qp/lag_port.h"
#include "qp/queue_pair.h"
#include "topo/readers.h"
#include "util/log.h"
#include "util/strings.h"

using namespace roce;
using qp::QpType;
using qp::Transition;
using roce::testing::Call;
using roce::testing::fixture;

namespace {

select::Selection selection_for(const char *fix, int gid_index) {
    const topo::Snapshot &s = fixture(fix);
    select::Options o;
    o.gid_index = gid_index;
    auto pc = select::select_port(s, s.devices[0], s.devices[0].ports[0], o, nullptr, false);
    REQUIRE(pc.ok());
    return *pc.selection;
}

/// A device, PD and CQ on a FakeVerbs built from a fixture; fresh snapshots
/// are read live through the fake (so mutating the fake changes them).
struct Bench {
    explicit Bench(const char *fix) : fixture_name(fix), fake(fixture(fix)) {
        const verbs::VerbsApi &api = fake.api();
        int n = 0;
        verbs::DeviceList list(api.get_device_list(&n), verbs::DeviceListDeleter{&api});
        REQUIRE(n == 1);
        ctx = verbs::Context(api.open_device(list[0]), verbs::ContextDeleter{&api});
        pd = verbs::Pd(api.alloc_pd(ctx.get()), verbs::PdDeleter{&api});
        cq = verbs::Cq(api.create_cq(ctx.get(), 8, nullptr, nullptr, 0), verbs::CqDeleter{&api});
        REQUIRE(cq);
    }
    qp::SnapshotSource fresh() {
        return [this]() -> util::Result<topo::Snapshot> {
            const topo::Snapshot &cap = fixture(fixture_name);
            return topo::read_live(fake.api(), [&cap]() -> util::Result<std::vector<topo::NetdevInfo>> {
                return cap.netdevs;
            });
        };
    }
    qp::QueuePair make(QpType type, const select::Selection &sel, bool preflight = true) {
        ibv_qp_init_attr init{};
        init.send_cq = cq.get();
        init.recv_cq = cq.get();
        init.qp_type = type == QpType::kUD ? IBV_QPT_UD : IBV_QPT_RC;
        init.cap = {2, 2, 1, 1, 0};
        verbs::Qp raw(fake.api().create_qp(pd.get(), &init), verbs::QpDeleter{&fake.api()});
        REQUIRE(raw);
        qp::SnapshotSource src = preflight ? fresh() : qp::SnapshotSource{};
        return qp::QueuePair(fake.api(), std::move(raw), type, sel, src, false, &log);
    }
    const char *fixture_name;
    testing::FakeVerbs fake;
    util::CaptureSink log;
    verbs::Context ctx{nullptr, verbs::ContextDeleter{}};
    verbs::Pd pd{nullptr, verbs::PdDeleter{}};
    verbs::Cq cq{nullptr, verbs::CqDeleter{}};
};

} // namespace

TEST_CASE("QueuePair: UD and RC reach RTS with the selected attributes", "[qp][fsm]") {
    Bench b("mlx5_lag");
    select::Selection sel = selection_for("mlx5_lag", 5);
    qp::QueuePair ud = b.make(QpType::kUD, sel);
    REQUIRE(ud.to_init().is_ok());
    REQUIRE(ud.to_rtr(nullptr).is_ok());
    REQUIRE(ud.to_rts().is_ok());
    CHECK(ud.state() == IBV_QPS_RTS);
    CHECK(b.fake.qp_state(ud.get()) == IBV_QPS_RTS);
    CHECK(b.fake.qp_attr(ud.get()).qkey == select::kDefaultQkey);
    CHECK(b.fake.qp_attr(ud.get()).port_num == 1);

    qp::QueuePair rc = b.make(QpType::kRC, sel);
    qp::RemoteEnd peer{b.fake.device("mlx5_bond_0").ports[0].gids.at(5).gid, 0x123, 7};
    REQUIRE(rc.to_init().is_ok());
    REQUIRE(rc.to_rtr(&peer).is_ok());
    REQUIRE(rc.to_rts().is_ok());
    const ibv_qp_attr &a = b.fake.qp_attr(rc.get());
    CHECK(a.ah_attr.grh.sgid_index == 5);
    CHECK(a.path_mtu == IBV_MTU_1024); // bond0.3027 has MTU 1500
    CHECK(a.dest_qp_num == 0x123u);
    CHECK(a.rq_psn == 7u);
    CHECK(b.fake.calls(Call::kModifyQp) == 6);
    CHECK(b.log.contains("ibv_modify_qp(RC, INIT->RTR) on mlx5_bond_0:1 pkey_index 0 (0xffff) "
                         "gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027) mtu 1024: ok"));

    // Out of order: refused without a call.
    qp::QueuePair early = b.make(QpType::kRC, sel);
    util::Status st = early.to_rts();
    CHECK(st.code() == util::Code::kInvalidArgument);
    CHECK(early.last_diagnostic() == "RTR->RTS transition refused: the QP is in RESET, not RTR");
    CHECK(b.fake.calls(Call::kModifyQp) == 6);
}

TEST_CASE("QueuePair: each errno case is caught before the call, and the fake kernel agrees",
          "[qp][fsm][errno]") {
    struct Case {
        const char *what;
        QpType type;
        Transition t;
        std::function<void(qp::ModifyRequest &)> tamper;
        int kernel_errno;
        util::Code code;
        std::string diagnostic; ///< exact, for the refusal
        /// The selection comes from this fixture's table (a stale snapshot
        /// when it differs from the device's, mlx5_lag).
        const char *selected_from = "mlx5_lag";
        int selected_index = 3;
    };
    const std::vector<Case> cases = {
        {"EINVAL: port 2 on the one-port LAG device", QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.attr.port_num = 2; }, EINVAL, util::Code::kInvalidArgument,
         "ibv_modify_qp(UD, RESET->INIT) on mlx5_bond_0:2 pkey_index 0 (0xffff) qkey 0x1ee7a330 "
         "gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0) mtu 4096 refused before the call: port_num: "
         "port_num 2 does not exist: mlx5_bond_0 has 1 port (a LAG device exposes one port for "
         "all its members) (the kernel would fail with Invalid argument (22)); fix: use a port "
         "the device has (1..1), e.g. btl_roce_if_include mlx5_bond_0:1; an old configuration "
         "naming port 2 predates the bond"},
        {"EPERM: controlled qkey", QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.attr.qkey = 0x9e3779b9u; }, EPERM,
         util::Code::kPermissionDenied,
         "ibv_modify_qp(UD, RESET->INIT) on mlx5_bond_0:1 pkey_index 0 (0xffff) qkey 0x9e3779b9 "
         "gid[3] ::ffff:198.18.0.11 (RoCE v2, bond0) mtu 4096 refused before the call: qkey: "
         "qkey 0x9e3779b9 has bit 31 set (a controlled qkey) and this process has neither root "
         "nor CAP_NET_RAW (Linux >= 6.4 refuses it) (the kernel would fail with Operation not "
         "permitted (1)); fix: use a qkey below 0x80000000 (btl_roce_qkey, default 0x1ee7a330); "
         "or grant CAP_NET_RAW; or, on Linux >= 6.7, `rdma system set privileged-qkey on`"},
        {"ENODATA: sgid index of an empty slot (selected from another table)", QpType::kRC,
         Transition::kInitToRtr, [](qp::ModifyRequest &) {}, ENODATA, util::Code::kNotFound,
         "ibv_modify_qp(RC, INIT->RTR) on mlx5_bond_0:1 pkey_index 0 (0xffff) gid[9] (empty now; "
         "selected as ::ffff:198.18.0.21) mtu 4096 refused before the call: sgid_index: "
         "sgid_index 9 is an empty slot now; it was selected for ::ffff:198.18.0.21 (RoCE v2, "
         "bond0), which is no longer in the GID table of mlx5_bond_0:1; bond0 now has gid[3] "
         "::ffff:198.18.0.11 (the kernel would fail with No data available (61)); fix: a stale "
         "GID index after an address change: select the GID again (roce-doctor shows the "
         "current table) and reconnect, since the peer knows the old GID",
         "mlx5_lag_readdressed", 9},
        {"ENODATA: sgid index beyond the table", QpType::kRC, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.ah_attr.grh.sgid_index = 255; }, ENODATA,
         util::Code::kNotFound, "", "mlx5_lag_readdressed", 9},
        {"EINVAL: path MTU outside the enum", QpType::kRC, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.path_mtu = static_cast<ibv_mtu>(6); }, EINVAL,
         util::Code::kInvalidArgument, ""},
        {"EINVAL: a bad mask", QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.mask |= IBV_QP_ACCESS_FLAGS; }, EINVAL,
         util::Code::kInvalidArgument, ""},
    };
    for (const auto &c : cases) {
        INFO(c.what);
        select::Selection sel = selection_for(c.selected_from, c.selected_index);
        qp::RemoteEnd self{selection_for("mlx5_lag", 3).gid, 1, 0};
        auto request = [&](Transition t) {
            qp::ModifyRequest r = qp::build_request(c.type, t, sel, &self, qp::QpParams{});
            if (t == c.t) {
                c.tamper(r);
            }
            return r;
        };
        for (bool with_preflight : {true, false}) {
            INFO((with_preflight ? "with preflight" : "without preflight"));
            Bench b("mlx5_lag");
            qp::QueuePair q = b.make(c.type, sel, with_preflight);
            for (Transition t : {Transition::kResetToInit, Transition::kInitToRtr}) {
                int before = b.fake.calls(Call::kModifyQp);
                util::Status st = q.modify(t, request(t));
                if (t != c.t) {
                    REQUIRE(st.is_ok());
                    continue;
                }
                REQUIRE_FALSE(st.is_ok());
                CHECK(st.code() == c.code);
                CHECK(st.sys_errno() == c.kernel_errno);
                if (with_preflight) {
                    CHECK(b.fake.calls(Call::kModifyQp) == before); // caught before the call
                    CHECK_THAT(st.message(), contains_text("refused before the call"));
                    CHECK_THAT(st.message(), contains_text("; fix: "));
                    if (!c.diagnostic.empty()) {
                        CHECK(st.message() == c.diagnostic);
                    }
                    CHECK(b.log.contains(st.message()));
                } else {
                    // The fake kernel returns the errno preflight predicted.
                    CHECK(b.fake.calls(Call::kModifyQp) == before + 1);
                    CHECK(b.fake.last_modify_errno() == c.kernel_errno);
                    CHECK_THAT(st.message(), contains_text("failed: "));
                    CHECK_THAT(st.message(), contains_text("; likely cause: "));
                }
                break;
            }
        }
    }
}

TEST_CASE("QueuePair: the bond's address changed between selection and RTR", "[qp][fsm][lag]") {
    SECTION("the GID moved: corrected, the call made with the new index") {
        Bench b("mlx5_lag");
        select::Selection sel = selection_for("mlx5_lag", 3);
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        REQUIRE(rc.to_init().is_ok());
        auto &gids = b.fake.device("mlx5_bond_0").ports[0].gids;
        gids[12] = gids.at(3); // the address re-added after a VLAN flap
        gids.erase(3);
        qp::RemoteEnd peer{gids.at(5).gid, 0x77, 0};
        REQUIRE(rc.to_rtr(&peer).is_ok());
        CHECK(b.fake.qp_attr(rc.get()).ah_attr.grh.sgid_index == 12);
        CHECK(rc.selection().gid_index == 12);
        REQUIRE(rc.last_corrections().size() == 1);
        CHECK(b.log.contains("RC INIT->RTR on mlx5_bond_0: preflight corrected sgid_index 3 -> "
                             "12: the GID ::ffff:198.18.0.11 (RoCE v2, bond0) moved there"));
    }
    SECTION("the address is gone: refused with the stale index named") {
        Bench b("mlx5_lag");
        select::Selection sel = selection_for("mlx5_lag", 3);
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        REQUIRE(rc.to_init().is_ok());
        // Replace the device's table with the re-addressed one.
        b.fake.device("mlx5_bond_0").ports[0].gids =
            testing::FakeVerbs(fixture("mlx5_lag_readdressed")).device("mlx5_bond_0").ports[0].gids;
        qp::RemoteEnd peer{sel.gid, 0x77, 0};
        util::Status st = rc.to_rtr(&peer);
        REQUIRE_FALSE(st.is_ok());
        CHECK(st.sys_errno() == ENODATA);
        CHECK(b.fake.calls(Call::kModifyQp) == 1); // only the INIT
        CHECK(st.message() ==
              "ibv_modify_qp(RC, INIT->RTR) on mlx5_bond_0:1 pkey_index 0 (0xffff) gid[3] (empty "
              "now; selected as ::ffff:198.18.0.11) mtu 4096 refused before the call: "
              "sgid_index: sgid_index 3 is an empty slot now; it was selected for "
              "::ffff:198.18.0.11 (RoCE v2, bond0), which is no longer in the GID table of "
              "mlx5_bond_0:1; bond0 now has gid[9] ::ffff:198.18.0.21 (the kernel would fail "
              "with No data available (61)); fix: a stale GID index after an address change: "
              "select the GID again (roce-doctor shows the current table) and reconnect, since "
              "the peer knows the old GID");
    }
}

TEST_CASE("QueuePair: when the call still fails, one diagnostic paragraph", "[qp][fsm]") {
    Bench b("mlx5_lag");
    select::Selection sel = selection_for("mlx5_lag", 5);
    qp::QueuePair rc = b.make(QpType::kRC, sel);
    REQUIRE(rc.to_init().is_ok());
    auto dgid = util::IpAddress::parse("198.19.0.99")->to_gid();
    b.fake.set_unreachable(dgid);
    qp::RemoteEnd peer{dgid, 0x77, 0};
    util::Status st = rc.to_rtr(&peer);
    REQUIRE_FALSE(st.is_ok());
    CHECK(st.code() == util::Code::kTimeout);
    CHECK(st.message() ==
          "ibv_modify_qp(RC, INIT->RTR) on mlx5_bond_0:1 pkey_index 0 (0xffff) gid[5] "
          "::ffff:198.19.0.11 (RoCE v2, bond0.3027) mtu 1024 failed: Connection timed out (110); "
          "likely cause: resolving the peer's MAC address (ARP/ND for the destination GID over "
          "the source GID's netdev) timed out: the peer is not reachable in that subnet or VLAN, "
          "or its GID is wrong; fix: check that both sides chose GIDs in the same subnet "
          "(roce-doctor --peer ADDR) and that `ping -I NETDEV ADDR` reaches the peer");
    CHECK(b.log.lines().back().level == util::LogLevel::kError);

    // No snapshot: the transition goes ahead unchecked, with a warning.
    Bench c("mlx5_lag");
    qp::QueuePair blind = c.make(QpType::kUD, sel, false);
    REQUIRE(blind.to_init().is_ok());
    CHECK(c.log.contains("UD RESET->INIT on mlx5_bond_0: no fresh snapshot (no snapshot source); "
                         "transition not preflighted"));
}

TEST_CASE("check_transitions: what roce-doctor --check runs", "[qp][check]") {
    select::Selection sel = selection_for("mlx5_lag", 3);
    {
        Bench b("mlx5_lag");
        auto out = qp::check_transitions(b.fake.api(), sel, b.fresh(), false, nullptr);
        REQUIRE(out.size() == 2);
        CHECK(out[0].type == QpType::kUD);
        CHECK(out[0].passed);
        CHECK_THAT(out[0].detail, Catch::Matchers::StartsWith("RESET->INIT->RTR->RTS ok (qpn 0x"));
        CHECK_THAT(out[0].detail,
                   Catch::Matchers::EndsWith(", address handle to the selected GID ok)"));
        CHECK(out[1].type == QpType::kRC);
        CHECK(out[1].passed);
        CHECK(b.fake.calls(Call::kCreateAh) == 1);
        CHECK(b.fake.live_objects() == 3); // only the bench's own context, PD and CQ remain
    }
    {
        Bench b("mlx5_lag");
        b.fake.fail(Call::kModifyQp, EIO, 4); // UD's three pass, RC's INIT passes, RC RTR fails
        auto out = qp::check_transitions(b.fake.api(), sel, b.fresh(), false, nullptr);
        CHECK(out[0].passed);
        CHECK_FALSE(out[1].passed);
        CHECK_THAT(out[1].detail, contains_text("ibv_modify_qp(RC, INIT->RTR) on mlx5_bond_0:1 "
                                                "pkey_index 0 (0xffff) gid[3] ::ffff:198.18.0.11 "
                                                "(RoCE v2, bond0) mtu 4096 failed: Input/output "
                                                "error (5); likely cause: the device is in a fatal "
                                                "error state"));
    }
    {
        Bench b("mlx5_lag");
        select::Selection port2 = sel;
        port2.port = 2;
        auto out = qp::check_transitions(b.fake.api(), port2, b.fresh(), false, nullptr);
        CHECK_FALSE(out[0].passed);
        CHECK_THAT(out[0].detail, contains_text("refused before the call: port_num"));
        CHECK(b.fake.calls(Call::kModifyQp) == 0);
    }
    {
        testing::FakeVerbs none;
        auto out = qp::check_transitions(none.api(), sel, {}, false, nullptr);
        REQUIRE(out.size() == 2);
        CHECK(out[0].detail == "mlx5_bond_0 is not among the RDMA devices rdma-core lists now");
    }
}

TEST_CASE("set_lag_port: queue affinity is set after RTS, verified, and lost on a transition",
          "[qp][lag]") {
    Bench b("mlx5_lag");
    select::Selection sel = selection_for("mlx5_lag", 5);
    qp::RemoteEnd peer{b.fake.device("mlx5_bond_0").ports[0].gids.at(5).gid, 0x123, 7};

    SECTION("a device without queue-affinity LAG refuses with EOPNOTSUPP") {
        b.fake.device("mlx5_bond_0").num_lag_ports = 0;
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        REQUIRE(rc.to_init().is_ok());
        REQUIRE(rc.to_rtr(&peer).is_ok());
        REQUIRE(rc.to_rts().is_ok());
        auto r = qp::set_lag_port(b.fake.api(), rc.get(), 0x42, 2);
        REQUIRE_FALSE(r.is_ok());
        CHECK(r.status().code() == util::Code::kUnsupported);
        CHECK(r.status().to_string().find("mlx5dv_modify_qp_lag_port(qpn 0x42, port 2)") !=
              std::string::npos);
    }
    SECTION("on a two-port LAG each path gets its port, and a down port shows as inactive") {
        b.fake.device("mlx5_bond_0").num_lag_ports = 2;
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        // Not in RESET: the device refuses (EINVAL).
        CHECK_FALSE(qp::set_lag_port(b.fake.api(), rc.get(), 1, 1).is_ok());
        REQUIRE(rc.to_init().is_ok());
        REQUIRE(rc.to_rtr(&peer).is_ok());
        REQUIRE(rc.to_rts().is_ok());
        auto r = qp::set_lag_port(b.fake.api(), rc.get(), 1, 2);
        REQUIRE(r.is_ok());
        CHECK(r->port == 2);
        CHECK(r->active == 2);
        CHECK(b.fake.qp_lag_port(rc.get()) == 2);
        // Port 3 does not exist on a two-port LAG.
        CHECK(qp::set_lag_port(b.fake.api(), rc.get(), 1, 3).status().code() ==
              util::Code::kInvalidArgument);

        b.fake.device("mlx5_bond_0").lag_port_down = 2;
        auto down = qp::set_lag_port(b.fake.api(), rc.get(), 1, 2);
        REQUIRE(down.is_ok());
        CHECK(down->port == 2);
        CHECK(down->active == 1);
    }
    SECTION("a transition after RTS resets the affinity, so it must be applied again") {
        b.fake.device("mlx5_bond_0").num_lag_ports = 2;
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        REQUIRE(rc.to_init().is_ok());
        REQUIRE(rc.to_rtr(&peer).is_ok());
        REQUIRE(rc.to_rts().is_ok());
        REQUIRE(qp::set_lag_port(b.fake.api(), rc.get(), 1, 2).is_ok());
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        REQUIRE(b.fake.api().modify_qp(rc.get(), &err, IBV_QP_STATE) == 0);
        CHECK(b.fake.qp_lag_port(rc.get()) == 0);
    }
}

TEST_CASE("QueuePair: to_error flushes and destroy reports its failure", "[qp][teardown]") {
    Bench b("mlx5_lag");
    select::Selection sel = selection_for("mlx5_lag", 5);
    qp::RemoteEnd peer{b.fake.device("mlx5_bond_0").ports[0].gids.at(5).gid, 0x123, 7};

    SECTION("ERR from any state but RESET; the QP is then destroyed") {
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        util::Status reset_to_err = rc.to_error();
        CHECK(reset_to_err.sys_errno() == EINVAL); // RESET -> ERR is no transition
        CHECK(reset_to_err.message().find("ibv_modify_qp(RC, RESET->ERR) on mlx5_bond_0 qpn 0x") ==
              0);
        CHECK(rc.state() == IBV_QPS_RESET);
        REQUIRE(rc.to_init().is_ok());
        REQUIRE(rc.to_rtr(&peer).is_ok());
        REQUIRE(rc.to_rts().is_ok());
        REQUIRE(rc.to_error().is_ok());
        CHECK(rc.state() == IBV_QPS_ERR);
        CHECK(b.fake.qp_state(rc.get()) == IBV_QPS_ERR);
        CHECK(rc.to_error().is_ok()); // ERR -> ERR is allowed
        size_t live = b.fake.live_objects();
        REQUIRE(rc.destroy().is_ok());
        CHECK(rc.get() == nullptr);
        CHECK(b.fake.live_objects() == live - 1);
        CHECK(rc.destroy().is_ok()); // nothing left to destroy
    }
    SECTION("a failed destroy names the verb, the QP and the errno; the handle is let go") {
        verbs::note_destroy_failure(0);
        qp::QueuePair rc = b.make(QpType::kRC, sel);
        uint32_t qpn = rc.get()->qp_num;
        b.fake.fail(Call::kDestroyQp, EIO);
        util::Status s = rc.destroy();
        REQUIRE_FALSE(s.is_ok());
        CHECK(s.message() == util::format("ibv_destroy_qp(RC) on mlx5_bond_0 qpn 0x%x failed: "
                                          "Input/output error (5)",
                                          qpn));
        CHECK(s.sys_errno() == EIO);
        CHECK(verbs::last_destroy_errno() == EIO);
        CHECK(rc.get() == nullptr);
        verbs::note_destroy_failure(0);
    }
}
