// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "verbs/handles.h"

namespace roce::verbs {

namespace {
thread_local int t_last_destroy_errno = 0;
} // namespace

int last_destroy_errno() noexcept { return t_last_destroy_errno; }
void note_destroy_failure(int err) noexcept { t_last_destroy_errno = err; }

} // namespace roce::verbs
