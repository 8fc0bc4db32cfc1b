/* osc: MPI one-sided communication, verified: put, get, accumulate,
 * fetch_and_op and compare_and_swap under MPI_Win_lock_all (passive target,
 * with flushes), the same under MPI_Win_fence (active target), and large puts
 * and gets. The window is MPI_Win_allocate'd (osc sm can serve that on one node
 * and osc rdma anywhere). Prints which osc component served the window;
 * ROCE_TEST_EXPECT_OSC=rdma makes a different choice a failure (the runner's
 * --osc rdma sets it together with --mca osc rdma).
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 4M for the large transfers),
 * ROCE_TEST_SCALE, ROCE_TEST_EXPECT_OSC.
 */
#include "mt.h"
#include "osc_which.h"

static long long g_big;
static MPI_Win g_win;
static uint8_t *g_base;
/* window layout: [counters: 8 int64][slots: size * SLOT bytes][big region] */
enum { NCOUNTERS = 8, SLOT = 256 };
#define SLOTS_OFF (NCOUNTERS * 8)
/* the window's displacement unit is 1 byte: counter i is at byte 8*i */
#define CTR(i) ((MPI_Aint)(i)*8)
#define BIG_OFF(n) (SLOTS_OFF + (n)*SLOT)

static int64_t *counters(void) {
    return (int64_t *)g_base;
}

static void reset_window(void) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, g_win);
    memset(g_base, 0, (size_t)BIG_OFF(mt_size));
    memset(g_base + BIG_OFF(mt_size), 0xEE, (size_t)g_big);
    MPI_Win_unlock(mt_rank, g_win);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* lock_all: every rank puts a pattern into its slot on every target, flushes,
 * then gets it back from every target and compares. */
static void put_get_lock_all(long it) {
    int n = mt_size;
    uint8_t *src = (uint8_t *)mt_malloc(SLOT), *dst = (uint8_t *)mt_malloc(SLOT);
    MPI_Win_lock_all(0, g_win);
    for (int t = 0; t < n; t++) {
        int len = 1 + (int)((t * 37 + it * 11 + mt_rank) % SLOT);
        mt_fill(src, SLOT, mt_seed(mt_rank, t, 20, it));
        MPI_Put(src, len, MPI_BYTE, t, SLOTS_OFF + mt_rank * SLOT, len, MPI_BYTE, g_win);
        MPI_Win_flush(t, g_win);
    }
    MPI_Win_unlock_all(g_win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* my own window: slot p holds what p put */
    for (int p = 0; p < n; p++) {
        int len = 1 + (int)((mt_rank * 37 + it * 11 + p) % SLOT);
        char what[96];
        snprintf(what, sizeof what, "lock_all put from rank %d (%d B), seen in target memory", p,
                 len);
        mt_verify(g_base + SLOTS_OFF + p * SLOT, (size_t)len, mt_seed(p, mt_rank, 20, it), what);
    }
    MPI_Win_lock_all(0, g_win);
    for (int t = 0; t < n; t++) {
        int len = 1 + (int)((t * 37 + it * 11 + mt_rank) % SLOT);
        memset(dst, 0, SLOT);
        MPI_Get(dst, len, MPI_BYTE, t, SLOTS_OFF + mt_rank * SLOT, len, MPI_BYTE, g_win);
        MPI_Win_flush(t, g_win);
        char what[96];
        snprintf(what, sizeof what, "lock_all get back from rank %d (%d B)", t, len);
        mt_verify(dst, (size_t)len, mt_seed(mt_rank, t, 20, it), what);
    }
    MPI_Win_unlock_all(g_win);
    MPI_Barrier(MPI_COMM_WORLD);
    free(src);
    free(dst);
}

/* accumulate, fetch_and_op and compare_and_swap on counters of rank 0 and of
 * the last rank, concurrently from every rank */
static void atomics_lock_all(long it, long k) {
    int n = mt_size, tgts[2] = {0, mt_size - 1};
    int64_t one = 1, old = 0;
    int64_t *seen = (int64_t *)malloc(sizeof(int64_t) * (size_t)k);
    MPI_Win_lock_all(0, g_win);
    for (int ti = 0; ti < 2; ti++) {
        int t = tgts[ti];
        for (long i = 0; i < k; i++) {
            int64_t v = mt_rank + 1;
            MPI_Accumulate(&v, 1, MPI_INT64_T, t, CTR(0), 1, MPI_INT64_T, MPI_SUM, g_win);
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, t, CTR(1), MPI_SUM, g_win);
            MPI_Win_flush(t, g_win);
            if (ti == 0)
                seen[i] = old;
            /* compare_and_swap: increment counter 2 by CAS retry loop */
            int64_t cur = 0, res = -1;
            MPI_Fetch_and_op(NULL, &cur, MPI_INT64_T, t, CTR(2), MPI_NO_OP, g_win);
            MPI_Win_flush(t, g_win);
            for (int tries = 0;; tries++) {
                int64_t want = cur + 1;
                MPI_Compare_and_swap(&want, &cur, &res, MPI_INT64_T, t, CTR(2), g_win);
                MPI_Win_flush(t, g_win);
                if (res == cur)
                    break;
                cur = res;
                if (tries > 1000000) {
                    mt_fail("compare_and_swap on rank %d: no success in 1e6 tries", t);
                    break;
                }
            }
        }
    }
    MPI_Win_unlock_all(g_win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* with one rank both target loops hit the same counters */
    long times = tgts[0] == tgts[1] ? 2 : 1;
    int64_t acc_expect = (int64_t)k * n * (n + 1) / 2 * times;
    for (int ti = 0; ti < 2; ti++) {
        if (mt_rank != tgts[ti] || (ti == 1 && times == 2))
            continue;
        MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, g_win);
        MT_CHECK(counters()[0] == acc_expect, "accumulate SUM on rank %d: %lld, expected %lld",
                 mt_rank, (long long)counters()[0], (long long)acc_expect);
        MT_CHECK(counters()[1] == k * n * times, "fetch_and_op SUM on rank %d: %lld, expected %ld",
                 mt_rank, (long long)counters()[1], k * n * times);
        MT_CHECK(counters()[2] == k * n * times,
                 "compare_and_swap increments on rank %d: %lld, "
                 "expected %ld",
                 mt_rank, (long long)counters()[2], k * n * times);
        MPI_Win_unlock(mt_rank, g_win);
    }
    /* fetched old values of rank 0's counter 1 across all ranks are exactly 0..k*n-1 */
    int64_t *all = mt_rank == 0 ? (int64_t *)malloc(sizeof(int64_t) * (size_t)(k * n)) : NULL;
    MPI_Gather(seen, (int)k, MPI_INT64_T, all, (int)k, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        uint8_t *hit = (uint8_t *)calloc((size_t)(k * n), 1);
        long bad = 0;
        for (long i = 0; i < k * n; i++) {
            if (all[i] < 0 || all[i] >= k * n || hit[all[i]]++)
                bad++;
        }
        MT_CHECK(bad == 0,
                 "fetch_and_op returned %ld duplicate or impossible old values (atomicity "
                 "broken)",
                 bad);
        free(hit);
        free(all);
    }
    free(seen);
    (void)it;
}

/* fence epochs: put to the right neighbour, get from the left, accumulate into
 * everyone's counter 3 */
static void fence_ops(long it) {
    int n = mt_size, right = (mt_rank + 1) % n, left = (mt_rank + n - 1) % n;
    uint8_t *src = (uint8_t *)mt_malloc(SLOT), *dst = (uint8_t *)mt_malloc(SLOT);
    mt_fill(src, SLOT, mt_seed(mt_rank, right, 21, it));
    MPI_Win_fence(0, g_win);
    MPI_Put(src, SLOT, MPI_BYTE, right, SLOTS_OFF + mt_rank * SLOT, SLOT, MPI_BYTE, g_win);
    int64_t v = 10 + mt_rank;
    for (int t = 0; t < n; t++)
        MPI_Accumulate(&v, 1, MPI_INT64_T, t, CTR(3), 1, MPI_INT64_T, MPI_SUM, g_win);
    MPI_Win_fence(0, g_win);
    mt_verify(g_base + SLOTS_OFF + left * SLOT, SLOT, mt_seed(left, mt_rank, 21, it),
              "fence put from the left neighbour");
    int64_t e = 0;
    for (int r = 0; r < n; r++)
        e += 10 + r;
    MT_CHECK(counters()[3] == e * (it + 1), "fence accumulate: counter %lld, expected %lld",
             (long long)counters()[3], (long long)(e * (it + 1)));
    MPI_Get(dst, SLOT, MPI_BYTE, left, SLOTS_OFF + ((left + n - 1) % n) * SLOT, SLOT, MPI_BYTE,
            g_win);
    MPI_Win_fence(0, g_win);
    mt_verify(dst, SLOT, mt_seed((left + n - 1) % n, left, 21, it),
              "fence get of what the left neighbour received");
    free(src);
    free(dst);
}

/* large put and get (through the btl's RDMA or the pipeline) */
static void big_put_get(long long bytes, long it) {
    int n = mt_size, right = (mt_rank + 1) % n, left = (mt_rank + n - 1) % n;
    uint8_t *src = (uint8_t *)mt_malloc((size_t)bytes), *dst = (uint8_t *)mt_malloc((size_t)bytes);
    mt_fill(src, (size_t)bytes, mt_seed(mt_rank, right, 22, it + bytes));
    MPI_Win_lock_all(0, g_win);
    MPI_Put(src, (int)bytes, MPI_BYTE, right, BIG_OFF(n), (int)bytes, MPI_BYTE, g_win);
    MPI_Win_flush_all(g_win);
    MPI_Win_unlock_all(g_win);
    MPI_Barrier(MPI_COMM_WORLD);
    char what[96];
    snprintf(what, sizeof what, "lock_all put of %lld B from rank %d", bytes, left);
    mt_verify(g_base + BIG_OFF(n), (size_t)bytes, mt_seed(left, mt_rank, 22, it + bytes), what);
    mt_verify_fill(g_base + BIG_OFF(n) + bytes, (size_t)(g_big - bytes), 0xEE, what);
    MPI_Win_lock_all(0, g_win);
    MPI_Get(dst, (int)bytes, MPI_BYTE, right, BIG_OFF(n), (int)bytes, MPI_BYTE, g_win);
    MPI_Win_flush(right, g_win);
    MPI_Win_unlock_all(g_win);
    snprintf(what, sizeof what, "lock_all get of %lld B from rank %d", bytes, right);
    mt_verify(dst, (size_t)bytes, mt_seed(mt_rank, right, 22, it + bytes), what);
    MPI_Barrier(MPI_COMM_WORLD);
    free(src);
    free(dst);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "osc");
    g_big = mt_max_bytes(4 << 20);
    MPI_Aint winsize = BIG_OFF(mt_size) + g_big;
    mt_step("MPI_Win_allocate %ld B", (long)winsize);
    MPI_Win_allocate(winsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &g_base, &g_win);
    char comp[64];
    osc_component_name(g_win, comp, sizeof comp);
    if (mt_rank == 0)
        printf("osc: window served by osc component: %s\n", comp);
    const char *want = getenv("ROCE_TEST_EXPECT_OSC");
    if (want && *want)
        MT_CHECK(strcmp(want, comp) == 0,
                 "ROCE_TEST_EXPECT_OSC=%s but the window is served by osc %s", want, comp);
    reset_window();
    long iters = mt_iters(5, 1), k = mt_iters(50, 5);
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld put/get under lock_all", it);
        put_get_lock_all(it);
    }
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld atomics under lock_all", it);
        reset_window();
        atomics_lock_all(it, k);
    }
    reset_window();
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld fence epochs", it);
        fence_ops(it);
    }
    for (long long b = 1; b <= g_big; b = b * 8 + 5) {
        mt_step("big put/get %lld B", b);
        reset_window();
        big_put_get(b, 0);
    }
    reset_window();
    mt_step("big put/get %lld B", g_big);
    big_put_get(g_big, 1);
    mt_step("MPI_Win_free");
    MPI_Win_free(&g_win);
    return mt_finish();
}
