// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// roce-doctor: shows and checks the RoCE addressing ompi-roce would use.
#include <iostream>

#include "doctor.h"
#include "topo/capture.h"
#include "util/privilege.h"

int main(int argc, char **argv) {
    roce::doctor::Env env;
    env.api = &roce::verbs::real_verbs();
    env.netdevs = roce::topo::live_netdev_reader("/");
    env.privileged = roce::util::may_use_controlled_qkey();
    env.run = roce::topo::run_command;
    std::vector<std::string> args(argv + 1, argv + argc);
    return roce::doctor::run(args, std::cout, std::cerr, env);
}
