// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor run in-process over a fake machine: shared by the doctor tests.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "doctor.h"
#include "fake_verbs.h"
#include "fixtures.h"
#include "topo/fs.h"

namespace roce::testing {

/// What one roce-doctor run printed and returned.
struct Run {
    int status = -1;
    std::string out;
    std::string err;
};

/// The "machine" behind live mode: FakeVerbs and the netdevs of a fixture
/// (or no devices and just a loopback).
struct Machine {
    explicit Machine(const char *fix = nullptr)
        : fake(fix ? fixture(fix) : topo::Snapshot{}), name(fix) {}
    doctor::Env env() {
        doctor::Env e;
        e.api = &fake.api();
        const char *n = name;
        e.netdevs = [n]() -> util::Result<std::vector<topo::NetdevInfo>> {
            if (n != nullptr) {
                return fixture(n).netdevs;
            }
            topo::NetdevInfo lo;
            lo.name = "lo";
            lo.ifindex = 1;
            return std::vector<topo::NetdevInfo>{lo};
        };
        e.sysfs_root = n ? fixture_dir(n) : "/nonexistent";
        e.run = [n](const std::vector<std::string> &argv) -> util::Result<std::string> {
            if (n == nullptr) {
                return util::Status(util::Code::kUnavailable, "`ip` not found");
            }
            bool link = argv.size() > 2 && argv[2] == "-d";
            return *topo::fs::read_text(fixture_dir(n) +
                                        (link ? "/ip-link.json" : "/ip-addr.json"));
        };
        return e;
    }
    FakeVerbs fake;
    const char *name;
};

/// roce-doctor ARGS against `env`, output captured.
inline Run doctor_run(const std::vector<std::string> &args, const doctor::Env &env) {
    std::ostringstream out, err;
    Run r;
    r.status = doctor::run(args, out, err, env);
    r.out = out.str();
    r.err = err.str();
    return r;
}

} // namespace roce::testing
