/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Open MPI 5.0 moved opal/threads/ to opal/mca/threads/. This directory is on
 * the include path only when building against 5.0 (configure), so the code
 * keeps 4.1's include names.
 */
#include "opal/mca/threads/mutex.h"
