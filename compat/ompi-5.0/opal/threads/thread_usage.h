/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Open MPI 5.0 moved opal/threads/ to opal/mca/threads/ (see mutex.h here).
 */
#include "opal/mca/threads/thread_usage.h"
