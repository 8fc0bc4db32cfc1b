// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "doctor.h"

#include "args.h"
#include "qp/check.h"
#include "render.h"
#include "select/selection.h"
#include "topo/capture.h"
#include "util/strings.h"

namespace roce::doctor {

namespace {

constexpr const char *kNoDevices =
    "no RDMA devices found: rdma-core lists none here (no RoCE NIC, or its kernel driver or "
    "rdma-core provider is not loaded; `ibv_devices` shows what rdma-core sees; soft-RoCE: "
    "`rdma link add rxe0 type rxe netdev IFACE`)";

int usage_error(std::ostream &err, const std::string &what) {
    err << "roce-doctor: " << what << "\nTry 'roce-doctor --help'.\n";
    return kExitUsage;
}

util::Result<topo::Snapshot> read_machine(const Args &a, const Env &env) {
    if (!a.from_dir.empty()) {
        return topo::read_capture(a.from_dir);
    }
    if (env.api == nullptr || !env.netdevs) {
        return util::Status(util::Code::kInternal, "no live machine to read");
    }
    return topo::read_live(*env.api, env.netdevs);
}

int capture(const Args &a, std::ostream &out, std::ostream &err, const Env &env) {
    topo::CaptureInputs in;
    in.sysfs_root = env.sysfs_root;
    auto addr = env.run({"ip", "-j", "addr", "show"});
    auto link = env.run({"ip", "-j", "-d", "link", "show"});
    if (!addr || !link) {
        err << "roce-doctor: cannot capture the netdevs: "
            << (!addr ? addr.status() : link.status()).message()
            << " (iproute2's `ip` is needed for --capture)\n";
        return kExitUsage;
    }
    in.ip_addr_json = *addr;
    in.ip_link_json = *link;
    in.note = std::string("written by roce-doctor ") + ROCE_VERSION;
    std::vector<std::string> warnings;
    util::Status st = topo::write_capture(a.capture_dir, in, &warnings);
    if (!st) {
        err << "roce-doctor: " << st.message() << "\n";
        return kExitUsage;
    }
    for (const auto &w : warnings) {
        err << "roce-doctor: warning: " << w << "\n";
    }
    auto back = topo::read_capture(a.capture_dir);
    if (!back) {
        err << "roce-doctor: the capture in " << a.capture_dir
            << " does not read back: " << back.status().message() << "\n";
        return kExitUsage;
    }
    out << util::format("roce-doctor: wrote a capture of this machine to %s (%zu RDMA device%s, "
                        "%zu netdevs); replay it with: roce-doctor --from %s\n",
                        a.capture_dir.c_str(), back->devices.size(),
                        back->devices.size() == 1 ? "" : "s", back->netdevs.size(),
                        a.capture_dir.c_str());
    if (back->devices.empty()) {
        out << "roce-doctor: note: " << kNoDevices << "\n";
    }
    return kExitOk;
}

std::vector<CheckRow> run_checks(const select::SelectionReport &rep, const Env &env) {
    std::vector<CheckRow> rows;
    qp::SnapshotSource fresh = [&env]() { return topo::read_live(*env.api, env.netdevs); };
    for (const auto &c : rep.ports) {
        if (!c.ok()) {
            continue;
        }
        for (auto &outcome :
             qp::check_transitions(*env.api, *c.selection, fresh, env.privileged, nullptr)) {
            rows.push_back({c.device, c.port, std::move(outcome)});
        }
        // mlx5 DC (DCT, DCI): tried where the device runs DC, else two SKIP
        // rows with the reason - what a site runs before btl_roce_transport
        // = dc (contrib/roce-dc-hwcheck).
        for (auto &outcome :
             qp::check_dc_transitions(*env.api, *c.selection, fresh, env.privileged, nullptr)) {
            rows.push_back({c.device, c.port, std::move(outcome)});
        }
    }
    return rows;
}

/// The job's view of the settings, and the RawOptions it gives; an error
/// names the value and where it came from.
util::Result<select::RawOptions> job_options(const Args &a, const Env &env, McaConfig &cfg) {
    McaInputs in;
    in.environment = env.environment;
    in.sysconfdir = env.ompi_sysconfdir;
    in.read_file = env.read_file;
    cfg = resolve_mca(in, a.settings);
    select::RawOptions raw;
    raw.prefix = "btl_roce_";
    for (const auto &[name, s] : cfg.settings) {
        std::string what = s.source.rfind("--", 0) == 0 ? s.source
                                                        : name + " (from " + s.source + ")";
        util::Status st = apply_setting(name, s.value, what, raw);
        if (!st) {
            return st;
        }
    }
    return raw;
}

int report(const Args &a, std::ostream &out, std::ostream &err, const Env &env) {
    McaConfig cfg;
    auto raw = job_options(a, env, cfg);
    if (!raw) {
        return usage_error(err, raw.status().message());
    }
    auto options = select::parse_options(*raw, env.privileged);
    if (!options) {
        return usage_error(err, options.status().message());
    }
    std::vector<select::Peer> peers;
    for (const auto &text : a.peers) {
        auto p = select::parse_peer(text);
        if (!p) {
            return usage_error(err, p.status().message());
        }
        peers.push_back(*p);
    }
    auto snap = read_machine(a, env);
    if (!snap) {
        err << "roce-doctor: " << snap.status().message() << "\n";
        return kExitUsage;
    }
    if (snap->devices.empty()) {
        if (a.json) {
            util::Json j = util::Json::object();
            j["tool"] = "roce-doctor";
            j["source"] = snap->source;
            j["ports"] = util::Json::array();
            j["error"] = kNoDevices;
            out << j.dump(2) << "\n";
        }
        err << "roce-doctor: " << kNoDevices << " [" << snap->source << "]\n";
        return kExitNoDevices;
    }
    select::SelectionReport sel = select::select_all(*snap, *options, peers, env.privileged);
    bool any_selected = false;
    for (const auto &c : sel.ports) {
        any_selected = any_selected || c.ok();
    }
    Report r;
    r.snapshot = &snap.value();
    r.selection = &sel;
    r.options = &options.value();
    r.config = &cfg;
    r.checked = a.check;
    bool checks_ok = true;
    if (a.check) {
        // The peer-less choice per port is what a QP check needs; with
        // --peer, select again without peers for the check.
        select::SelectionReport plain = peers.empty()
                                            ? sel
                                            : select::select_all(*snap, *options, {}, env.privileged);
        r.checks = run_checks(plain, env);
        for (const auto &c : r.checks) {
            // A skipped check (DC off mlx5) is neither a pass nor a failure.
            checks_ok = checks_ok && (c.outcome.passed || c.outcome.skipped);
        }
    }
    if (a.json) {
        out << render_json(r).dump(2) << "\n";
    } else {
        out << render_text(r);
    }
    return any_selected && checks_ok ? kExitOk : kExitNoSelection;
}

} // namespace

int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        const Env &env) noexcept {
    try {
        auto a = parse_args(args);
        if (!a) {
            return usage_error(err, a.status().message());
        }
        if (a->help) {
            out << usage();
            return kExitOk;
        }
        if (a->version) {
            out << "roce-doctor " << ROCE_VERSION << "\n";
            return kExitOk;
        }
        if (!a->capture_dir.empty()) {
            return capture(*a, out, err, env);
        }
        return report(*a, out, err, env);
    } catch (const std::exception &e) {
        err << "roce-doctor: internal error: " << e.what() << "\n";
        return kExitUsage;
    }
}

} // namespace roce::doctor
