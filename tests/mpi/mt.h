/* Shared helpers for the MPI test programs (tests/mpi) and benchmarks (tests/bench).
 *
 * Contract of every test program:
 *   - every received byte is compared with what the sender wrote (a pattern that
 *     depends on the message's identity and the byte's offset), and every status
 *     field that MPI defines is compared with what is expected;
 *   - a difference prints one line naming the rank, the step and exactly what
 *     differed (first and last differing offset, expected and actual value), on
 *     stderr;
 *   - the program ends with mt_finish(): rank 0 prints "<name>: PASS ..." or
 *     "<name>: FAIL ...", and any failure on any rank makes every rank exit 1.
 *
 * Environment knobs (all optional; the runner forwards them with mpirun -x):
 *   ROCE_TEST_MAX_BYTES  largest message size a program uses (suffix K, M, G).
 *   ROCE_TEST_SCALE      factor on iteration counts (0.05 for slow guests).
 *   ROCE_TEST_VERBOSE    1: print each step as it starts (rank 0).
 *   ROCE_TEST_WATCHDOG   seconds: a rank still running after this prints the
 *                        step it is in and exits 124, so a hang says where.
 *   ROCE_TEST_STRICT     1: also fail on the deviations that Debian's Open MPI
 *                        4.1.4 ob1 is known to have (README lists them);
 *                        without it they print a "known ob1 deviation" line
 *                        on stdout. Runs of pml roce use it (run-suite --strict).
 *   ROCE_TEST_INJECT_FAULT  N: rank 0 treats its N-th check as failed (the
 *                        runner's --self-test uses it to prove that every
 *                        program's checks are live and its failure is seen).
 *
 * Header-only (static functions) so each program is one translation unit.
 */
#ifndef ROCE_MPI_TEST_MT_H
#define ROCE_MPI_TEST_MT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#define MT_UNUSED __attribute__((unused))
#define MT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MT_UNUSED
#define MT_PRINTF(a, b)
#endif

static int mt_rank MT_UNUSED, mt_size MT_UNUSED;
static const char *mt_name MT_UNUSED = "test";
static long mt_failures MT_UNUSED;
static long mt_checks MT_UNUSED;
static char mt_step_buf[256] MT_UNUSED = "MPI_Init";
static double mt_t0 MT_UNUSED;
static int mt_verbose MT_UNUSED;
static long mt_inject_at MT_UNUSED = -1;

/* Every check goes through here: counts it and applies ROCE_TEST_INJECT_FAULT. */
static inline int mt_counted(int ok) {
    mt_checks++;
    if (mt_rank == 0 && mt_checks == mt_inject_at) {
        fprintf(stderr, "rank 0: injected fault: check %ld forced to fail\n", mt_checks);
        return 0;
    }
    return ok;
}

/* Failure lines per rank are capped so a broken transport does not flood the
 * log; the count in the summary stays exact. */
enum { MT_MAX_FAIL_LINES = 25 };

static MT_UNUSED MT_PRINTF(1, 2) void mt_fail(const char *fmt, ...) {
    va_list ap;
    mt_failures++;
    if (mt_failures > MT_MAX_FAIL_LINES) {
        if (mt_failures == MT_MAX_FAIL_LINES + 1)
            fprintf(stderr, "rank %d: FAIL %s: further failures on this rank not printed\n",
                    mt_rank, mt_name);
        return;
    }
    char line[1024];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d: FAIL %s [%s]: %s\n", mt_rank, mt_name, mt_step_buf, line);
    fflush(stderr);
}

/* Counts a check; on failure prints the message. Returns cond. */
#define MT_CHECK(cond, ...) (mt_counted(!!(cond)) ? 1 : (mt_fail(__VA_ARGS__), 0))

/* An MPI call that must succeed (used where the communicator's error handler is
 * MPI_ERRORS_RETURN; elsewhere errors are fatal anyway). */
#define MT_MPI(call)                                                                               \
    do {                                                                                           \
        int mt_rc_ = (call);                                                                       \
        if (mt_rc_ != MPI_SUCCESS) {                                                               \
            char mt_es_[MPI_MAX_ERROR_STRING];                                                     \
            int mt_el_ = 0;                                                                        \
            MPI_Error_string(mt_rc_, mt_es_, &mt_el_);                                             \
            mt_fail("%s:%d: %s returned %d (%s)", __FILE__, __LINE__, #call, mt_rc_, mt_es_);      \
        }                                                                                          \
    } while (0)

static MT_UNUSED void mt_watchdog_handler(int sig) {
    (void)sig;
    char msg[400];
    int n = snprintf(msg, sizeof msg,
                     "rank %d: FAIL %s: watchdog: still in step '%s' after ROCE_TEST_WATCHDOG "
                     "seconds (a hang)\n",
                     mt_rank, mt_name, mt_step_buf);
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    _exit(124);
}

/* Names the step now running (shown in failure lines and by the watchdog). */
static MT_UNUSED MT_PRINTF(1, 2) void mt_step(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mt_step_buf, sizeof mt_step_buf, fmt, ap);
    va_end(ap);
    if (mt_verbose && mt_rank == 0) {
        printf("  %8.3f s  %s\n", MPI_Wtime() - mt_t0, mt_step_buf);
        fflush(stdout);
    }
}

static MT_UNUSED int mt_strict(void) {
    const char *s = getenv("ROCE_TEST_STRICT");
    return s && *s && strcmp(s, "0") != 0;
}

/* "64M" -> 67108864. Unparsable values are a usage error. */
static MT_UNUSED long long mt_parse_size(const char *s, const char *what) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) {
        fprintf(stderr, "%s=%s is not a size (examples: 4096, 64K, 4M, 1G)\n", what, s);
        exit(2);
    }
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0') {
        fprintf(stderr, "%s=%s is not a size (examples: 4096, 64K, 4M, 1G)\n", what, s);
        exit(2);
    }
    return (long long)v;
}

static MT_UNUSED long long mt_env_size(const char *var, long long dflt) {
    const char *s = getenv(var);
    return (s && *s) ? mt_parse_size(s, var) : dflt;
}

/* Largest message size this run may use: min(dflt, ROCE_TEST_MAX_BYTES). */
static MT_UNUSED long long mt_max_bytes(long long dflt) {
    long long cap = mt_env_size("ROCE_TEST_MAX_BYTES", dflt);
    return cap < dflt ? cap : dflt;
}

static MT_UNUSED double mt_scale_factor(void) {
    const char *s = getenv("ROCE_TEST_SCALE");
    if (!s || !*s)
        return 1.0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end || v <= 0) {
        fprintf(stderr, "ROCE_TEST_SCALE=%s must be a positive number (e.g. 0.05)\n", s);
        exit(2);
    }
    return v;
}

/* n iterations scaled by ROCE_TEST_SCALE, at least lo. */
static MT_UNUSED long mt_iters(long n, long lo) {
    double v = (double)n * mt_scale_factor();
    long r = (long)(v + 0.5);
    return r < lo ? lo : r;
}

static MT_UNUSED void mt_common_init(const char *name) {
    mt_name = name;
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    mt_t0 = MPI_Wtime();
    const char *v = getenv("ROCE_TEST_VERBOSE");
    mt_verbose = v && *v && strcmp(v, "0") != 0;
    const char *inj = getenv("ROCE_TEST_INJECT_FAULT");
    if (inj && *inj)
        mt_inject_at = atol(inj);
    const char *w = getenv("ROCE_TEST_WATCHDOG");
    if (w && *w) {
        int secs = atoi(w);
        if (secs > 0) {
            signal(SIGALRM, mt_watchdog_handler);
            alarm((unsigned)secs);
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
}

static MT_UNUSED void mt_init(int *argc, char ***argv, const char *name) {
    MPI_Init(argc, argv);
    mt_common_init(name);
}

/* Requires at least n ranks; with fewer, every rank reports and exits 1 (a
 * program run with too few ranks proves nothing, so it must not pass). */
static MT_UNUSED void mt_require_ranks(int n) {
    if (mt_size < n) {
        if (mt_rank == 0)
            fprintf(stderr, "%s: FAIL: needs at least %d ranks, run with %d\n", mt_name, n,
                    mt_size);
        MPI_Finalize();
        exit(1);
    }
}

/* Ends the program: agrees on the failure count, prints the verdict on rank 0
 * and returns the exit status (0 only if no rank failed). */
static MT_UNUSED int mt_finish(void) {
    long fails = mt_failures, total_fails = 0, checks = mt_checks, total_checks = 0;
    mt_step("finish");
    MPI_Allreduce(&fails, &total_fails, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checks, &total_checks, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double wall = MPI_Wtime() - mt_t0;
    if (mt_rank == 0) {
        if (total_fails == 0 && total_checks == 0) {
            fprintf(stderr, "%s: FAIL: no check was made (a test that checks nothing)\n", mt_name);
            total_fails = 1;
        } else if (total_fails == 0) {
            printf("%s: PASS (%ld checks on %d ranks, %.2f s)\n", mt_name, total_checks, mt_size,
                   wall);
        } else {
            printf("%s: FAIL (%ld of %ld checks failed on %d ranks)\n", mt_name, total_fails,
                   total_checks, mt_size);
        }
    }
    fflush(stdout);
    alarm(0);
    MPI_Finalize();
    return total_fails == 0 ? 0 : 1;
}

/* ------------------------------------------------------------ patterns ---- */

/* The byte at offset i of the message identified by seed. Differs for
 * neighbouring offsets, for offsets 256 and 65536 apart (so shifted or
 * misplaced blocks are caught) and between messages. */
static inline uint8_t mt_pat(uint64_t seed, size_t i) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(i + (i >> 8) * 7 + (i >> 16) * 13 + (i >> 24) * 29 + (s >> 56) + (s >> 40) +
                     1);
}

/* A seed naming one message: who sent it, to whom, which step, which iteration. */
static inline uint64_t mt_seed(int src, int dst, int step, long iter) {
    return ((uint64_t)(unsigned)src << 48) ^ ((uint64_t)(unsigned)dst << 32) ^
           ((uint64_t)(unsigned)step << 20) ^ (uint64_t)iter ^ 0x5bd1e995u;
}

static MT_UNUSED void mt_fill(void *buf, size_t n, uint64_t seed) {
    uint8_t *p = (uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        p[i] = mt_pat(seed, i);
}

/* Compares buf[0..n) with the pattern of seed; on a difference prints where.
 * Returns 1 when equal. Counts one check. */
static MT_UNUSED int mt_verify(const void *buf, size_t n, uint64_t seed, const char *what) {
    const uint8_t *p = (const uint8_t *)buf;
    size_t first = (size_t)-1, last = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != mt_pat(seed, i)) {
            if (first == (size_t)-1)
                first = i;
            last = i;
            bad++;
        }
    }
    if (mt_counted(bad == 0))
        return 1;
    if (bad == 0)
        return mt_fail("%s: injected fault", what), 0;
    mt_fail("%s: %zu of %zu bytes differ (offsets %zu..%zu); at %zu expected 0x%02x got 0x%02x",
            what, bad, n, first, last, first, mt_pat(seed, first), p[first]);
    return 0;
}

/* Checks that n bytes equal the fill byte c (guard regions, untouched gaps). */
static MT_UNUSED int mt_verify_fill(const void *buf, size_t n, uint8_t c, const char *what) {
    const uint8_t *p = (const uint8_t *)buf;
    size_t first = (size_t)-1, last = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != c) {
            if (first == (size_t)-1)
                first = i;
            last = i;
            bad++;
        }
    }
    if (mt_counted(bad == 0))
        return 1;
    if (bad == 0)
        return mt_fail("%s: injected fault", what), 0;
    mt_fail("%s: %zu of %zu bytes overwritten (offsets %zu..%zu); at %zu expected 0x%02x got "
            "0x%02x",
            what, bad, n, first, last, first, c, p[first]);
    return 0;
}

/* Checks status source, tag and byte count; what names the message. */
static MT_UNUSED int mt_check_status(const MPI_Status *st, int src, int tag, long long bytes,
                                     const char *what) {
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    if (mt_counted(st->MPI_SOURCE == src && st->MPI_TAG == tag && count == bytes))
        return 1;
    mt_fail("%s: status source %d tag %d count %d, expected source %d tag %d count %lld", what,
            st->MPI_SOURCE, st->MPI_TAG, count, src, tag, bytes);
    return 0;
}

static MT_UNUSED void *mt_malloc(size_t n) {
    void *p = NULL;
    /* page-aligned like typical large application buffers; at least 1 byte so
     * zero-byte messages still have a valid pointer */
    if (posix_memalign(&p, 4096, n ? n : 1) != 0) {
        fprintf(stderr, "rank %d: %s: cannot allocate %zu bytes\n", mt_rank, mt_name, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static MT_UNUSED void mt_sleep_ms(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

#endif /* ROCE_MPI_TEST_MT_H */
