/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Open MPI 4.1 built without PERUSE (Debian 12) does not install
 * ompi/peruse/peruse.h, yet ompi/peruse/peruse-internal.h - reached from
 * pml_base_sendreq.h and pml_base_recvreq.h - includes it. This stands in
 * for the one type those headers need.
 */
#ifndef ROCE_COMPAT_PERUSE_H
#define ROCE_COMPAT_PERUSE_H

#include "mpi.h"

typedef void *peruse_event_h;

#endif
