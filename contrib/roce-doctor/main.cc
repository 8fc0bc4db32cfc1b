// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor: shows and checks the RoCE addressing ompi-roce would use.
#include <unistd.h>

#include <iostream>

#include "doctor.h"
#include "topo/capture.h"
#include "topo/fs.h"
#include "util/privilege.h"

int main(int argc, char **argv) {
    roce::doctor::Env env;
    env.api = &roce::verbs::real_verbs();
    env.netdevs = roce::topo::live_netdev_reader("/");
    env.privileged = roce::util::may_use_controlled_qkey();
    env.run = roce::topo::run_command;
    // The one place the doctor looks at its environment: the job's
    // OMPI_MCA_* settings, HOME and OPAL_SYSCONFDIR (mca_config.h).
    for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
        std::string kv(*e);
        size_t eq = kv.find('=');
        if (eq != std::string::npos) {
            env.environment.emplace(kv.substr(0, eq), kv.substr(eq + 1));
        }
    }
    env.ompi_sysconfdir = ROCE_OMPI_SYSCONFDIR;
    env.read_file = [](const std::string &path) { return roce::topo::fs::read_text(path); };
    std::vector<std::string> args(argv + 1, argv + argc);
    return roce::doctor::run(args, std::cout, std::cerr, env);
}
