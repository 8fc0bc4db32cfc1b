/* Shared helpers for the benchmarks in tests/bench.
 *
 * Output contract: a header line "benchmark,size,metric,value", then one CSV
 * line per figure; human-readable lines start with "# " so that
 * `grep -v '^#'` leaves pure CSV. Figures are the median over
 * ROCE_BENCH_REPS repetitions (default 5); "_min" metrics give the best one.
 * Iteration counts scale with ROCE_TEST_SCALE like the tests'.
 */
#ifndef ROCE_BENCH_H
#define ROCE_BENCH_H

#include "mt.h"

static MT_UNUSED int bench_reps(void) {
    const char *s = getenv("ROCE_BENCH_REPS");
    int r = s && atoi(s) > 0 ? atoi(s) : 5;
    return r;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sorts v in place; returns the median */
static MT_UNUSED double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static MT_UNUSED void bench_header(const char *what) {
    if (mt_rank != 0)
        return;
    printf("# %s: %d ranks, %d repetitions per figure (median reported)\n", what, mt_size,
           bench_reps());
    printf("benchmark,size,metric,value\n");
}

#endif
