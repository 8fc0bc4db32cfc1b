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

/* The message sizes a size sweep uses: ROCE_BENCH_SIZES ("8,64K,1M") if set
 * (entries above maxb are dropped), else lo, then powers of two up to maxb
 * (lo = 0 gives 0, 1, 2, 4, ...). Writes at most cap sizes into out and
 * returns how many. Emulated guests use the list to time only what they need. */
static MT_UNUSED int bench_sizes(long long lo, long long maxb, long long *out, int cap) {
    const char *s = getenv("ROCE_BENCH_SIZES");
    int n = 0;
    if (s && *s) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", s);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < cap;
             t = strtok_r(NULL, ",", &save)) {
            long long v = mt_parse_size(t, "ROCE_BENCH_SIZES");
            if (v <= maxb)
                out[n++] = v;
        }
        return n;
    }
    for (long long v = lo; v <= maxb && n < cap; v = v ? v * 2 : 1)
        out[n++] = v;
    return n;
}

/* Messages in flight per window: ROCE_BENCH_WINDOW (1..dflt), else dflt. */
static MT_UNUSED int bench_window(int dflt) {
    const char *s = getenv("ROCE_BENCH_WINDOW");
    int w = s && atoi(s) > 0 ? atoi(s) : dflt;
    return w < dflt ? w : dflt;
}

#endif
