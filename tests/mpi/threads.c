/* threads: MPI_THREAD_MULTIPLE. Each rank runs several threads; thread t of
 * every rank exchanges with thread t of the other ranks, at the same time as
 * the other threads, (a) on MPI_COMM_WORLD with tag t, (b) on its own
 * duplicated communicator, with ANY_SOURCE receives, mixed eager and rendezvous
 * sizes, blocking and nonblocking calls, every payload verified. A thread
 * that receives another thread's message (wrong tag or communicator) fails.
 *
 * Knobs: ROCE_TEST_THREADS (default 4), ROCE_TEST_MAX_BYTES (default 256K),
 * ROCE_TEST_SCALE.
 */
#include "mt.h"

#include <pthread.h>

static int g_nthreads;
static long g_iters;
static long long g_max;
static MPI_Comm *g_comms;
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_thread_fails, g_thread_checks;

static long long tsize(int t, long i) {
    static const long long s[] = {8, 0, 1500, 70000, 262144, 33};
    long long v = s[(t + i) % 6];
    return v > g_max ? g_max : v;
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    long fails = 0, checks = 0;
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)g_max), *rb = (uint8_t *)mt_malloc((size_t)g_max);
    char msg[256] = "";
    for (long i = 0; i < g_iters; i++) {
        for (int phase = 0; phase < 2; phase++) {
            MPI_Comm c = phase == 0 ? MPI_COMM_WORLD : g_comms[t];
            int tag = phase == 0 ? t : 5;
            long long n = tsize(t, i);
            uint64_t seed = mt_seed(mt_rank, t, phase, i);
            mt_fill(sb, (size_t)n, seed);
            MPI_Status st;
            if (i % 2) {
                MPI_Request rq[2];
                MPI_Irecv(rb, (int)g_max, MPI_BYTE, MPI_ANY_SOURCE, tag, c, &rq[0]);
                MPI_Isend(sb, (int)n, MPI_BYTE, to, tag, c, &rq[1]);
                MPI_Status sts[2];
                MPI_Waitall(2, rq, sts);
                st = sts[0];
            } else {
                MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, tag, rb, (int)g_max, MPI_BYTE,
                             MPI_ANY_SOURCE, tag, c, &st);
            }
            int cnt = -1;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            uint64_t rseed = mt_seed(from, t, phase, i);
            size_t bad = 0, first = 0;
            if (cnt == n)
                for (long long k = 0; k < n; k++)
                    if (rb[k] != mt_pat(rseed, (size_t)k) && bad++ == 0)
                        first = (size_t)k;
            checks++;
            if (st.MPI_SOURCE != from || st.MPI_TAG != tag || cnt != n || bad) {
                if (fails++ == 0)
                    snprintf(msg, sizeof msg,
                             "thread %d iteration %ld %s: source %d tag %d count %d "
                             "(expected %d %d %lld), %zu bytes differ from offset %zu",
                             t, i, phase ? "own communicator" : "world", st.MPI_SOURCE, st.MPI_TAG,
                             cnt, from, tag, n, bad, first);
            }
        }
    }
    free(sb), free(rb);
    pthread_mutex_lock(&g_fail_lock);
    g_thread_fails += fails;
    g_thread_checks += checks;
    if (fails)
        mt_fail("%s (%ld failures in this thread)", msg, fails);
    pthread_mutex_unlock(&g_fail_lock);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_common_init("threads");
    MT_CHECK(provided == MPI_THREAD_MULTIPLE,
             "MPI_Init_thread provided level %d, not "
             "MPI_THREAD_MULTIPLE (%d)",
             provided, MPI_THREAD_MULTIPLE);
    if (provided != MPI_THREAD_MULTIPLE)
        return mt_finish();
    const char *nt = getenv("ROCE_TEST_THREADS");
    g_nthreads = nt && atoi(nt) > 0 ? atoi(nt) : 4;
    g_iters = mt_iters(60, 4);
    g_max = mt_max_bytes(256 << 10);
    if (g_max < 1)
        g_max = 1;
    g_comms = (MPI_Comm *)malloc(sizeof(MPI_Comm) * (size_t)g_nthreads);
    for (int t = 0; t < g_nthreads; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &g_comms[t]);
    mt_step("%d threads x %ld iterations", g_nthreads, g_iters);
    pthread_t *th = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)g_nthreads);
    for (int t = 0; t < g_nthreads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < g_nthreads; t++)
        pthread_join(th[t], NULL);
    mt_checks += g_thread_checks;
    MT_CHECK(g_thread_checks == 2L * g_nthreads * g_iters, "threads made %ld checks, expected %ld",
             g_thread_checks, 2L * g_nthreads * g_iters);
    for (int t = 0; t < g_nthreads; t++)
        MPI_Comm_free(&g_comms[t]);
    free(g_comms), free(th);
    return mt_finish();
}
