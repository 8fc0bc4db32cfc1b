// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "ompi_cxx_compat.h"

#include "pml_roce_help.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <string>

#include "opal/constants.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#ifndef ROCE_HELP_DIR
#error "ROCE_HELP_DIR must be defined by the build (the installed help file directory)"
#endif

namespace roce::pml {

namespace {

enum class Via { kHelpOrLine, kLine, kLineAndHelp };

// kHelpOrLine: the help topic when installed, else the line; kLine: only
// the line; kLineAndHelp: the line, and the help topic when installed.
void vreport(const char *topic, Via via, const char *detail, va_list ap) noexcept {
    char msg[1024];
    std::vsnprintf(msg, sizeof msg, detail, ap);
    const char *host = opal_process_info.nodename != nullptr ? opal_process_info.nodename : "?";
    static const char kHelpFile[] = "help-mpi-pml-roce.txt";
    // Checked each time (cheap next to an error): the file's absence is
    // what tells a build-tree run from an installed one.
    std::string path = std::string(ROCE_HELP_DIR) + "/" + kHelpFile;
    bool help = via != Via::kLine && access(path.c_str(), R_OK) == 0;
    if (!help || via == Via::kLineAndHelp) {
        opal_output(0, "pml roce [%s]: %s", host, msg);
    }
    if (help) {
        // Open MPI appends to its search list on every call: add ours once.
        static const bool added = opal_show_help_add_dir(ROCE_HELP_DIR) == OPAL_SUCCESS;
        (void)added;
        opal_show_help(kHelpFile, topic, true, host, msg);
    }
}

} // namespace

void report(const char *topic, const char *detail, ...) noexcept {
    va_list ap;
    va_start(ap, detail);
    vreport(topic, Via::kHelpOrLine, detail, ap);
    va_end(ap);
}

void report_before_exit(const char *detail, ...) noexcept {
    va_list ap;
    va_start(ap, detail);
    vreport(nullptr, Via::kLine, detail, ap);
    va_end(ap);
}

void report_fatal(const char *detail, ...) noexcept {
    va_list ap;
    va_start(ap, detail);
    vreport("fatal", Via::kLineAndHelp, detail, ap);
    va_end(ap);
}

} // namespace roce::pml
