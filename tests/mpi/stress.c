/* stress: a long, data-verified mix of all-to-all and pairwise ping-pong, for
 * runs during which the fabric misbehaves (a cable pulled, an address replaced).
 *
 * Each iteration is
 *   1. an all-to-all: every rank exchanges with every rank (itself included)
 *      at once with Irecv/Isend, the size depending on the pair and the
 *      iteration (0 B .. 256 KiB: inline, eager and rendezvous mixed);
 *   2. a pairwise ping-pong: partners r ^ m (m a power of two that changes
 *      every iteration) exchange 4 round trips of 8 B .. 256 KiB; the reply
 *      carries a different pattern than the request;
 *   3. an allreduce that agrees on the error count and on whether to stop
 *      (rank 0 decides from its clock, so every rank runs the same iterations).
 * Every byte of every message is compared with a pattern that names its
 * sender, receiver, phase and iteration, and every status is checked.
 *
 * Rank 0 prints a progress line about every 2 s:
 *   stress: progress t=12.0 s utc=19:40:01.123 iter 57 (+6) errors 0 verified 123.4 MB
 * so a stall (no line, or few iterations) and the time to recover from it are
 * visible; at the end it prints the slowest iteration (when it started and how
 * long it took against the median), the bytes verified and the error count, then
 * the usual "stress: PASS/FAIL" verdict (exit status 0 only without errors).
 *
 * Knobs: ROCE_TEST_SECONDS (run time, default 60 x ROCE_TEST_SCALE, at least
 * 2 s), ROCE_TEST_MAX_BYTES (largest message, default 256K), ROCE_TEST_SCALE,
 * ROCE_TEST_RUN_WHILE (a file: while rank 0 sees it, the run goes on past
 * ROCE_TEST_SECONDS; a fault test removes it once it has seen what it waits
 * for, so that a slow fault injection on a loaded host cannot outlast the job).
 */
#include "mt.h"

#include <sys/time.h>
#include <unistd.h>

static long long g_max;
static double g_bytes; /* verified on this rank */

static long long cap(long long v) {
    return v > g_max ? g_max : v;
}

static long long a2a_size(int src, int dst, long it) {
    static const long long s[] = {0, 8, 100, 1024, 4096, 12289, 65536, 100003, 262144};
    return cap(s[(src * 7 + dst * 3 + it) % (long)(sizeof s / sizeof s[0])]);
}

static long long pp_size(long it, int k) {
    static const long long s[] = {8, 4096, 65536, 262144, 1000, 131075};
    return cap(s[(it + k) % (long)(sizeof s / sizeof s[0])]);
}

static void utc_now(char *buf, size_t n) {
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(buf, n, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000));
}

static void all_to_all(long it) {
    int n = mt_size, tag = (int)(it % 30000);
    uint8_t **sb = (uint8_t **)calloc((size_t)n, sizeof *sb),
            **rb = (uint8_t **)calloc((size_t)n, sizeof *rb);
    MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * 2 * (size_t)n);
    MPI_Status *st = (MPI_Status *)malloc(sizeof *st * 2 * (size_t)n);
    mt_step("iteration %ld all-to-all", it);
    for (int p = 0; p < n; p++) {
        long long ss = a2a_size(mt_rank, p, it), rs = a2a_size(p, mt_rank, it);
        sb[p] = (uint8_t *)mt_malloc((size_t)ss);
        rb[p] = (uint8_t *)mt_malloc((size_t)rs);
        mt_fill(sb[p], (size_t)ss, mt_seed(mt_rank, p, 1, it));
        memset(rb[p], 0xa5, (size_t)rs);
        MPI_Irecv(rb[p], (int)rs, MPI_BYTE, p, tag, MPI_COMM_WORLD, &rq[p]);
    }
    for (int i = 0; i < n; i++) {
        int p = (mt_rank + i) % n; /* everyone starts with a different peer */
        MPI_Isend(sb[p], (int)a2a_size(mt_rank, p, it), MPI_BYTE, p, tag, MPI_COMM_WORLD,
                  &rq[n + p]);
    }
    MPI_Waitall(2 * n, rq, st);
    for (int p = 0; p < n; p++) {
        char what[128];
        long long rs = a2a_size(p, mt_rank, it);
        snprintf(what, sizeof what, "iteration %ld all-to-all from rank %d, %lld B", it, p, rs);
        mt_check_status(&st[p], p, tag, rs, what);
        mt_verify(rb[p], (size_t)rs, mt_seed(p, mt_rank, 1, it), what);
        g_bytes += (double)rs;
        free(sb[p]);
        free(rb[p]);
    }
    free(sb);
    free(rb);
    free(rq);
    free(st);
}

static void ping_pong(long it, uint8_t *buf) {
    int bits = 0;
    while ((1 << bits) < mt_size)
        bits++;
    if (bits == 0)
        return; /* one rank: nobody to play with */
    int partner = mt_rank ^ (1 << (it % bits));
    if (partner >= mt_size)
        return; /* no partner at this distance this time */
    int lead = mt_rank < partner;
    for (int k = 0; k < 4; k++) {
        long long sz = pp_size(it, k);
        int tag = 30000 + k;
        char what[128];
        MPI_Status st;
        mt_step("iteration %ld ping-pong %d with rank %d, %lld B", it, k, partner, sz);
        /* request: phase 2, reply: phase 3, so a reply never passes for a request */
        if (lead) {
            mt_fill(buf, (size_t)sz, mt_seed(mt_rank, partner, 2, it * 4 + k));
            MPI_Send(buf, (int)sz, MPI_BYTE, partner, tag, MPI_COMM_WORLD);
            memset(buf, 0x5a, (size_t)sz);
            MPI_Recv(buf, (int)sz, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st);
            snprintf(what, sizeof what, "iteration %ld pong %d from rank %d, %lld B", it, k,
                     partner, sz);
            mt_check_status(&st, partner, tag, sz, what);
            mt_verify(buf, (size_t)sz, mt_seed(partner, mt_rank, 3, it * 4 + k), what);
        } else {
            memset(buf, 0x5a, (size_t)sz);
            MPI_Recv(buf, (int)sz, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st);
            snprintf(what, sizeof what, "iteration %ld ping %d from rank %d, %lld B", it, k,
                     partner, sz);
            mt_check_status(&st, partner, tag, sz, what);
            mt_verify(buf, (size_t)sz, mt_seed(partner, mt_rank, 2, it * 4 + k), what);
            mt_fill(buf, (size_t)sz, mt_seed(mt_rank, partner, 3, it * 4 + k));
            MPI_Send(buf, (int)sz, MPI_BYTE, partner, tag, MPI_COMM_WORLD);
        }
        g_bytes += (double)sz;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "stress");
    g_max = mt_max_bytes(262144);
    const char *s = getenv("ROCE_TEST_SECONDS");
    double seconds = 60.0 * mt_scale_factor();
    if (s && *s) {
        char *end = NULL;
        seconds = strtod(s, &end);
        if (end == s || *end || seconds <= 0) {
            fprintf(stderr, "ROCE_TEST_SECONDS=%s must be a positive number\n", s);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (seconds < 2)
        seconds = 2;
    const char *run_while = getenv("ROCE_TEST_RUN_WHILE");
    if (run_while && !*run_while)
        run_while = NULL;
    uint8_t *buf = (uint8_t *)mt_malloc((size_t)g_max);
    size_t cap_iters = 1024, n_iters = 0;
    double *dur = (double *)malloc(sizeof *dur * cap_iters);
    double t_start = MPI_Wtime(), t_last = t_start, slow_at = 0, slow = 0;
    long it = 0, last_it = 0, slow_it = -1, errors = 0;
    char utc[32];
    if (mt_rank == 0) {
        utc_now(utc, sizeof utc);
        printf("stress: %d ranks, %.0f s, messages up to %lld B, start utc=%s\n", mt_size, seconds,
               g_max, utc);
        if (run_while)
            printf("stress: runs on while %s exists (%s now)\n", run_while,
                   access(run_while, F_OK) == 0 ? "it does" : "it does not");
    }
    for (;;) {
        double t0 = MPI_Wtime();
        all_to_all(it);
        ping_pong(it, buf);
        mt_step("iteration %ld agreement", it);
        long mine[2] = {mt_failures, 0}, all[2];
        if (mt_rank == 0)
            mine[1] =
                MPI_Wtime() - t_start >= seconds && !(run_while && access(run_while, F_OK) == 0);
        MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        errors = all[0];
        it++;
        double t1 = MPI_Wtime();
        if (n_iters == cap_iters) {
            cap_iters *= 2;
            dur = (double *)realloc(dur, sizeof *dur * cap_iters);
        }
        dur[n_iters++] = t1 - t0;
        if (t1 - t0 > slow) {
            slow = t1 - t0;
            slow_at = t0 - t_start;
            slow_it = it - 1;
        }
        if (mt_rank == 0 && (t1 - t_last >= 2.0 || all[1])) {
            utc_now(utc, sizeof utc);
            printf("stress: progress t=%.1f s utc=%s iter %ld (+%ld) errors %ld verified %.1f MB "
                   "(rank 0)\n",
                   t1 - t_start, utc, it, it - last_it, errors, g_bytes / 1e6);
            t_last = t1;
            last_it = it;
        }
        if (all[1])
            break;
    }
    double wall = MPI_Wtime() - t_start, total = 0;
    MPI_Allreduce(&g_bytes, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        qsort(dur, n_iters, sizeof *dur, cmp_double);
        printf("stress: %ld iterations in %.1f s, %.1f MB verified on all ranks, %ld errors\n", it,
               wall, total / 1e6, errors);
        printf("stress: iteration time median %.3f s, slowest %.3f s (iteration %ld at t=%.1f s)\n",
               dur[n_iters / 2], slow, slow_it, slow_at);
    }
    MT_CHECK(it > 0, "no iteration completed");
    free(dur);
    free(buf);
    return mt_finish();
}
