// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Preflight: every attribute checked against a fresh snapshot before
// ibv_modify_qp; safe corrections applied, everything else refused with the
// attribute, the errno the kernel would return and the fix.
#include <algorithm>
#include <cerrno>
#include <functional>
#include <set>

#include "catch.h"
#include "fixtures.h"
#include "qp/diagnostic.h"
#include "qp/preflight.h"
#include "select/selection.h"

using namespace roce;
using qp::QpType;
using qp::Transition;
using roce::testing::fixture;
using roce::testing::lag_selection;

namespace {

struct Outcome {
    qp::PreflightResult result;
    qp::ModifyRequest req;
};

Outcome run(const topo::Snapshot &fresh, QpType type, Transition t, const select::Selection &sel,
            const std::function<void(qp::ModifyRequest &)> &tamper = {}, bool privileged = false) {
    qp::RemoteEnd remote{sel.gid, 0x99, 0};
    Outcome o;
    o.req = qp::build_request(type, t, sel, &remote, qp::QpParams{});
    if (tamper) {
        tamper(o.req);
    }
    qp::PreflightContext ctx{type, t, sel, privileged};
    o.result = qp::preflight(fresh, ctx, o.req);
    return o;
}

topo::Snapshot moved_gid_snapshot(int from, int to) {
    topo::Snapshot s = fixture("mlx5_lag");
    auto &gids = s.devices[0].ports[0].gids;
    for (auto &g : gids) {
        if (g.index == from) {
            g.index = to;
        }
    }
    std::sort(gids.begin(), gids.end(),
              [](const topo::GidEntry &a, const topo::GidEntry &b) { return a.index < b.index; });
    return s;
}

} // namespace

TEST_CASE("preflight: a correct request passes untouched for UD, RC, DCI and DCT",
          "[qp][preflight]") {
    const topo::Snapshot &s = fixture("mlx5_lag");
    select::Selection sel = lag_selection();
    for (QpType type : {QpType::kUD, QpType::kRC, QpType::kDCI, QpType::kDCT}) {
        for (Transition t : {Transition::kResetToInit, Transition::kInitToRtr, Transition::kRtrToRts}) {
            if (type == QpType::kDCT && t == Transition::kRtrToRts) {
                continue;
            }
            INFO(qp::to_string(type) << " " << qp::to_string(t));
            Outcome o = run(s, type, t, sel);
            CHECK(o.result.ok());
            CHECK(o.result.corrections.empty());
        }
    }
}

TEST_CASE("preflight: each bad attribute is caught with the kernel's errno and the fix",
          "[qp][preflight]") {
    const topo::Snapshot &lag = fixture("mlx5_lag");
    const topo::Snapshot &readdressed = fixture("mlx5_lag_readdressed");
    select::Selection sel = lag_selection();
    struct Case {
        const char *what;
        const topo::Snapshot *fresh;
        QpType type;
        Transition t;
        std::function<void(qp::ModifyRequest &)> tamper;
        std::string attribute;
        int kernel_errno;
        std::string message;
        std::string fix; ///< a substring
    };
    topo::Snapshot no_default_pkey = lag;
    no_default_pkey.devices[0].ports[0].pkeys = {0x8001};
    topo::Snapshot device_gone = lag;
    device_gone.devices.clear();
    topo::Snapshot slot_reused = readdressed;
    for (auto &g : slot_reused.devices[0].ports[0].gids) {
        if (g.index == 8) {
            g.index = 3; // the freed slot got a different GID
        }
    }
    const std::vector<Case> cases = {
        {"port 2 on the one-port LAG device", &lag, QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.attr.port_num = 2; }, "port_num", EINVAL,
         "port_num 2 does not exist: mlx5_bond_0 has 1 port (a LAG device exposes one port for "
         "all its members)",
         "use a port the device has (1..1), e.g. btl_roce_if_include mlx5_bond_0:1"},
        {"controlled qkey, unprivileged", &lag, QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.attr.qkey = 0x80000001u; }, "qkey", EPERM,
         "qkey 0x80000001 has bit 31 set (a controlled qkey) and this process has neither root "
         "nor CAP_NET_RAW (Linux >= 6.4 refuses it)",
         "use a qkey below 0x80000000 (btl_roce_qkey, default 0x1ee7a330)"},
        {"pkey index beyond a table without the default pkey", &no_default_pkey, QpType::kUD,
         Transition::kResetToInit, [](qp::ModifyRequest &r) { r.attr.pkey_index = 1; },
         "pkey_index", EINVAL,
         "pkey_index 1 is beyond the pkey table of mlx5_bond_0:1 (1 entry), and no slot holds "
         "0xffff",
         "use pkey_index 0, which holds 0xffff on every RoCE port"},
        {"sgid index of the bond's old address, after the change", &readdressed, QpType::kRC,
         Transition::kInitToRtr, {}, "sgid_index", ENODATA,
         "sgid_index 3 is an empty slot now; it was selected for ::ffff:198.18.0.11 (RoCE v2, "
         "bond0), which is no longer in the GID table of mlx5_bond_0:1; bond0 now has gid[9] "
         "::ffff:198.18.0.21",
         "a stale GID index after an address change: select the GID again"},
        {"sgid index beyond the table", &readdressed, QpType::kRC, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.ah_attr.grh.sgid_index = 255; }, "sgid_index",
         ENODATA,
         "sgid_index 255 is beyond the GID table of mlx5_bond_0:1 (255 slots); it was selected "
         "for ::ffff:198.18.0.11 (RoCE v2, bond0), which is no longer in the GID table of "
         "mlx5_bond_0:1; bond0 now has gid[9] ::ffff:198.18.0.21",
         "select the GID again"},
        {"a reused slot holding another GID: the kernel would accept it", &slot_reused,
         QpType::kRC, Transition::kInitToRtr, {}, "sgid_index", 0,
         "sgid_index 3 now holds ::ffff:198.18.0.21 (RoCE v1, bond0); it was selected for "
         "::ffff:198.18.0.11 (RoCE v2, bond0), which is no longer in the GID table of "
         "mlx5_bond_0:1; bond0 now has gid[9] ::ffff:198.18.0.21",
         "reconnect, since the peer knows the old GID"},
        {"the DC target's AV port", &lag, QpType::kDCT, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.ah_attr.port_num = 2; }, "ah_attr.port_num", EINVAL,
         "ah_attr.port_num 2 does not exist: mlx5_bond_0 has 1 port (a LAG device exposes one "
         "port for all its members)",
         "use a port the device has"},
        {"no GRH on RoCE", &lag, QpType::kRC, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.ah_attr.is_global = 0; }, "ah_attr.is_global", EINVAL,
         "the address vector has no GRH, which RoCE requires", "set is_global"},
        {"path MTU outside the enum", &lag, QpType::kRC, Transition::kInitToRtr,
         [](qp::ModifyRequest &r) { r.attr.path_mtu = static_cast<ibv_mtu>(7); }, "path_mtu",
         EINVAL, "path_mtu 7 is not an IB MTU (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5)",
         "use the selection's path MTU"},
        {"missing qkey bit in the UD INIT mask", &lag, QpType::kUD, Transition::kResetToInit,
         [](qp::ModifyRequest &r) { r.mask &= ~IBV_QP_QKEY; }, "attr_mask", EINVAL,
         "attribute mask IBV_QP_STATE|IBV_QP_PKEY_INDEX|IBV_QP_PORT for UD RESET->INIT: missing "
         "IBV_QP_QKEY",
         "UD RESET->INIT requires IBV_QP_STATE|IBV_QP_PKEY_INDEX|IBV_QP_PORT|IBV_QP_QKEY"},
        {"an address vector where UD INIT->RTR takes none", &lag, QpType::kUD,
         Transition::kInitToRtr,
         [&](qp::ModifyRequest &r) {
             r.mask |= IBV_QP_AV;
             r.attr.ah_attr = qp::build_ah_attr(sel, sel.gid, qp::QpParams{});
         },
         "attr_mask",
         EINVAL, "attribute mask IBV_QP_STATE|IBV_QP_AV for UD INIT->RTR: not allowed IBV_QP_AV",
         "allows IBV_QP_PKEY_INDEX|IBV_QP_QKEY"},
        {"a DC target has no RTS", &lag, QpType::kDCT, Transition::kRtrToRts, {}, "attr_mask",
         EINVAL, "a DCT QP has no RTR->RTS transition", "DC targets stop at RTR"},
        {"the device went away (LAG re-created)", &device_gone, QpType::kUD,
         Transition::kResetToInit, {}, "device", ENODEV,
         "mlx5_bond_0 is no longer present (a LAG being created or destroyed re-registers the "
         "RDMA device)",
         "open the device again and recreate the QP"},
    };
    for (const auto &c : cases) {
        INFO(c.what);
        Outcome o = run(*c.fresh, c.type, c.t, sel, c.tamper);
        REQUIRE(o.result.problems.size() == 1);
        const qp::Problem &p = o.result.problems[0];
        CHECK(p.attribute == c.attribute);
        CHECK(p.kernel_errno == c.kernel_errno);
        CHECK(p.message == c.message);
        CHECK_THAT(p.fix, contains_text(c.fix));
    }
}

TEST_CASE("preflight: MTU above what the link carries is refused", "[qp][preflight]") {
    // Selected for the bond (MTU 9000 -> 4096), but the request is for the
    // VLAN's GID, whose netdev has MTU 1500.
    select::Selection sel = lag_selection(5);
    sel.path_mtu = IBV_MTU_4096;
    Outcome o = run(fixture("mlx5_lag"), QpType::kRC, Transition::kInitToRtr, sel);
    REQUIRE(o.result.problems.size() == 1);
    CHECK(o.result.problems[0].attribute == "path_mtu");
    CHECK(o.result.problems[0].kernel_errno == 0);
    CHECK(o.result.problems[0].message ==
          "path_mtu 4096 exceeds what bond0.3027's MTU 1500 carries (1024 after 96 bytes of RoCE "
          "headers)");

    topo::Snapshot with_active = fixture("mlx5_lag");
    with_active.devices[0].ports[0].active_mtu = 1024;
    Outcome a = run(with_active, QpType::kRC, Transition::kInitToRtr, lag_selection(3));
    REQUIRE(a.result.problems.size() == 1);
    CHECK(a.result.problems[0].message ==
          "path_mtu 4096 exceeds the active MTU 1024 of mlx5_bond_0:1: larger packets would be "
          "dropped");
}

TEST_CASE("preflight: safe corrections - a moved GID, a moved pkey", "[qp][preflight]") {
    select::Selection sel = lag_selection(3);
    topo::Snapshot moved = moved_gid_snapshot(3, 12);
    Outcome o = run(moved, QpType::kRC, Transition::kInitToRtr, sel);
    CHECK(o.result.ok());
    CHECK(o.req.attr.ah_attr.grh.sgid_index == 12);
    REQUIRE(o.result.corrections.size() == 1);
    CHECK(o.result.corrections[0] ==
          "sgid_index 3 -> 12: the GID ::ffff:198.18.0.11 (RoCE v2, bond0) moved there "
          "(sgid_index 3 is an empty slot now; the bond's GID table was rewritten by an address "
          "or VLAN change)");

    // The same link-local value on bond0 and on the VLAN: the netdev decides.
    select::Selection ll = lag_selection(7); // fe80:: on bond0.3027
    topo::Snapshot swapped = moved_gid_snapshot(7, 20);
    Outcome l = run(swapped, QpType::kRC, Transition::kInitToRtr, ll);
    CHECK(l.result.ok());
    CHECK(l.req.attr.ah_attr.grh.sgid_index == 20); // not gid[1], which is on bond0

    topo::Snapshot pkey_moved = fixture("mlx5_lag");
    pkey_moved.devices[0].ports[0].pkeys = {0x8001, 0xffff};
    Outcome p = run(pkey_moved, QpType::kUD, Transition::kResetToInit, sel);
    CHECK(p.result.ok());
    CHECK(p.req.attr.pkey_index == 1);
    REQUIRE(p.result.corrections.size() == 1);
    CHECK(p.result.corrections[0] ==
          "pkey_index 0 -> 1: slot 1 holds the pkey 0xffff (the requested slot does not)");
}

TEST_CASE("diagnostic: the errno table covers the failures users see", "[qp][diagnostic]") {
    qp::ModifyRequest req;
    req.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    req.attr.qkey = 0x9e3779b9u;
    req.attr.port_num = 2;
    auto eperm = qp::likely_cause(EPERM, QpType::kUD, Transition::kResetToInit, req);
    CHECK_THAT(eperm.cause, contains_text("qkey 0x9e3779b9 has bit 31 set"));
    CHECK_THAT(eperm.fix, contains_text("use a qkey below 0x80000000"));
    auto einval = qp::likely_cause(EINVAL, QpType::kUD, Transition::kResetToInit, req);
    CHECK_THAT(einval.cause, contains_text("a port_num beyond its ports (a LAG device "
                                           "such as mlx5_bond_0 has only port 1)"));
    CHECK_THAT(einval.cause, contains_text("a pkey_index beyond its pkey table"));
    std::set<std::string> causes;
    for (int err : {EPERM, EINVAL, ENODATA, ETIMEDOUT, ENETUNREACH, ENODEV, EOPNOTSUPP, ENOMEM,
                    EBUSY, EIO, EFAULT, E2BIG}) {
        auto lc = qp::likely_cause(err, QpType::kRC, Transition::kInitToRtr, req);
        INFO("errno " << err);
        CHECK_FALSE(lc.cause.empty());
        CHECK_FALSE(lc.fix.empty());
        causes.insert(lc.cause);
    }
    CHECK(causes.size() == 12); // one distinct explanation per errno
    CHECK_THAT(qp::likely_cause(ENODATA, QpType::kRC, Transition::kInitToRtr, req).cause,
               contains_text("went stale when the bond's or a VLAN's addresses "
                             "changed"));
    CHECK_THAT(qp::likely_cause(ETIMEDOUT, QpType::kRC, Transition::kInitToRtr, req).cause,
               contains_text("resolving the peer's MAC address"));
}

TEST_CASE("diagnostic: the house format", "[qp][diagnostic]") {
    select::Selection sel = lag_selection(5);
    qp::ModifyRequest req = qp::build_request(QpType::kUD, Transition::kResetToInit, sel, nullptr,
                                              qp::QpParams{});
    qp::DiagnosticInput d;
    d.type = QpType::kUD;
    d.transition = Transition::kResetToInit;
    d.sel = &sel;
    d.req = &req;
    d.fresh = &fixture("mlx5_lag");
    d.err = EINVAL;
    CHECK(qp::format_diagnostic(d) ==
          "ibv_modify_qp(UD, RESET->INIT) on mlx5_bond_0:1 pkey_index 0 (0xffff) qkey 0x1ee7a330 "
          "gid[5] ::ffff:198.19.0.11 (RoCE v2, bond0.3027) mtu 1024 failed: Invalid argument "
          "(22); likely cause: an attribute is out of range for this device: a port_num beyond "
          "its ports (a LAG device such as mlx5_bond_0 has only port 1) or a pkey_index beyond "
          "its pkey table (mlx5 checks; RoCE tables have one entry), or the attribute mask does "
          "not fit this transition; fix: use port 1 and pkey_index 0 on a LAG device; "
          "roce-doctor shows the device's ports and tables");
    // With the culprit visible in the fresh snapshot, the post-mortem names it.
    req.attr.port_num = 2;
    CHECK_THAT(qp::format_diagnostic(d),
               Catch::Matchers::EndsWith(
                   "failed: Invalid argument (22); likely cause: port_num: port_num 2 does not "
                   "exist: mlx5_bond_0 has 1 port (a LAG device exposes one port for all its "
                   "members); fix: use a port the device has (1..1), e.g. btl_roce_if_include "
                   "mlx5_bond_0:1; an old configuration naming port 2 predates the bond"));
    // What the slot holds now wins over the selection.
    d.fresh = &fixture("mlx5_lag_readdressed");
    sel = lag_selection(3);
    req = qp::build_request(QpType::kRC, Transition::kInitToRtr, sel, nullptr, qp::QpParams{});
    d.type = QpType::kRC;
    d.transition = Transition::kInitToRtr;
    d.err = ENODATA;
    CHECK_THAT(qp::describe_attributes(d),
               Catch::Matchers::Equals("on mlx5_bond_0:1 pkey_index 0 (0xffff) gid[3] (empty "
                                       "now; selected as ::ffff:198.18.0.11) mtu 4096"));
}
