// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "verbs/handles.h"

#include <cstring>

#include "util/strings.h"

namespace roce::verbs {

namespace {
thread_local int t_last_destroy_errno = 0;
} // namespace

int last_destroy_errno() noexcept { return t_last_destroy_errno; }
void note_destroy_failure(int err) noexcept { t_last_destroy_errno = err; }

const char *destroy_verb(const ibv_context *) noexcept { return "ibv_close_device"; }
const char *destroy_verb(const ibv_pd *) noexcept { return "ibv_dealloc_pd"; }
const char *destroy_verb(const ibv_mr *) noexcept { return "ibv_dereg_mr"; }
const char *destroy_verb(const ibv_comp_channel *) noexcept { return "ibv_destroy_comp_channel"; }
const char *destroy_verb(const ibv_cq *) noexcept { return "ibv_destroy_cq"; }
const char *destroy_verb(const ibv_srq *) noexcept { return "ibv_destroy_srq"; }
const char *destroy_verb(const ibv_qp *) noexcept { return "ibv_destroy_qp"; }
const char *destroy_verb(const ibv_ah *) noexcept { return "ibv_destroy_ah"; }

std::string describe(const ibv_context *obj) { return util::format("context %p", obj); }
std::string describe(const ibv_pd *obj) { return util::format("PD %p", obj); }
std::string describe(const ibv_mr *obj) {
    return util::format("MR lkey 0x%x, %zu bytes at %p", obj->lkey, obj->length, obj->addr);
}
std::string describe(const ibv_comp_channel *obj) {
    return util::format("completion channel fd %d", obj->fd);
}
std::string describe(const ibv_cq *obj) { return util::format("CQ of %d entries", obj->cqe); }
std::string describe(const ibv_srq *obj) { return util::format("SRQ %p", obj); }
std::string describe(const ibv_qp *obj) {
    return util::format("%s QP 0x%x", obj->qp_type == IBV_QPT_UD ? "UD" : "RC", obj->qp_num);
}
std::string describe(const ibv_ah *obj) { return util::format("AH %p", obj); }

void log_destroy_failure(util::LogSink &log, const char *verb, const std::string &object,
                         int err) noexcept {
    try {
        log.write(util::LogLevel::kWarn,
                  util::format("%s(%s) failed: %s (%d); the object stays until the process "
                               "exits",
                               verb, object.c_str(), std::strerror(err), err));
    } catch (...) {
        // Nothing more to do in a destructor.
    }
}

} // namespace roce::verbs
