/* Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * Callgrind's client requests for the instruction-count benchmarks
 * (cg_self.c, btl_count_bench.cc; contrib/bench/count-instructions):
 * CALLGRIND_TOGGLE_COLLECT switches counting on and off around the measured
 * calls, RUNNING_ON_VALGRIND says whether anything is counted. Without
 * valgrind's headers both compile to nothing, so the programs still build
 * (and count nothing). C and C++. */
#ifndef ROCE_BENCH_CALLGRIND_TOGGLE_H
#define ROCE_BENCH_CALLGRIND_TOGGLE_H

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define CG_HAVE_VALGRIND 1
#endif
#endif
#ifndef CG_HAVE_VALGRIND
#define CALLGRIND_TOGGLE_COLLECT
#define RUNNING_ON_VALGRIND 0
#endif

#endif
