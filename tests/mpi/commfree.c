/* commfree: MPI_THREAD_MULTIPLE; communicators freed while messages for them
 * are still arriving and another thread is inside the pml's arrival path.
 *
 * Every rank runs a progress thread (MPI_Iprobe on a communicator of its own,
 * which never matches anything) next to the main thread. In every round the
 * main thread duplicates MPI_COMM_WORLD, exchanges one verified message with
 * its ring neighbours on the new communicator, then sends STRAYS small eager
 * messages to the next rank that nobody ever receives, and frees the
 * communicator at once. So the strays reach the receiver while its main
 * thread frees the communicator and its progress thread is handling the
 * strays of the same communicator: the same traffic as a duplicated or late
 * message from the fabric, or an erroneous peer. A pml must drop or keep them
 * without touching the freed communicator (pml roce before issue 14 could: a
 * lookup in another thread raced MPI_Comm_free). Strays that arrive after
 * the free are held as messages for a communicator not created yet, and the
 * next round's communicator (Open MPI reuses the context id) inherits them;
 * they carry their own tag, so they must never reach a receive of this
 * program. Pass: every round's exchange is right (source, tag, round, sender)
 * and no rank crashes or prints anything on stderr.
 *
 * Race windows like "look the communicator up, then lock it" are tens of
 * nanoseconds wide, so plain runs almost never hit them. This program
 * therefore perturbs the schedule: it defines pthread_mutex_lock itself
 * (exported, so the MPI libraries and components, which call it through
 * their PLT, reach it first), and about one lock in 32 first sleeps for
 * 20-50 us. A thread that looked something up and is about to lock it then
 * gives the other thread time to change what it looked up.
 *
 * Erroneous by the letter of MPI (messages left unreceived); robustness is
 * what it checks. Knobs: ROCE_TEST_SCALE (rounds).
 */
#include "mt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

enum { TAG_DATA = 21, TAG_STRAY = 22, TAG_NEVER = 23, STRAYS = 32 };

static int (*g_real_lock)(pthread_mutex_t *);
static volatile int g_jitter;

__attribute__((visibility("default"))) int pthread_mutex_lock(pthread_mutex_t *m) {
    int (*real)(pthread_mutex_t *) = __atomic_load_n(&g_real_lock, __ATOMIC_ACQUIRE);
    if (real == NULL) {
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_lock");
        if (real == NULL)
            abort(); /* cannot happen with glibc; never recurse into ourselves */
        __atomic_store_n(&g_real_lock, real, __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&g_jitter, __ATOMIC_RELAXED)) {
        static __thread uint64_t s;
        if (s == 0)
            s = ((uint64_t)(uintptr_t)&s * 0x9E3779B97F4A7C15ull) | 1;
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        if ((s & 31) == 0) {
            struct timespec ts = {0, 20000 + (long)((s >> 8) % 30000)};
            nanosleep(&ts, NULL);
        }
    }
    return real(m);
}

static MPI_Comm g_probe_comm;
static volatile int g_stop;
static long g_probes;

static void *progress_thread(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, g_probe_comm, &flag, MPI_STATUS_IGNORE);
        g_probes++;
        sched_yield(); /* 2 ranks x 2 threads on few cores: let the main threads run */
    }
    return NULL;
}

static void round_trip(long round) {
    MPI_Comm nc;
    MPI_Comm_dup(MPI_COMM_WORLD, &nc);
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    int64_t out[2] = {round, mt_rank}, in[2] = {-1, -1};
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Irecv(in, 2, MPI_INT64_T, from, TAG_DATA, nc, &rq[0]);
    MPI_Isend(out, 2, MPI_INT64_T, to, TAG_DATA, nc, &rq[1]);
    MPI_Waitall(2, rq, st);
    MT_CHECK(st[0].MPI_SOURCE == from && st[0].MPI_TAG == TAG_DATA && in[0] == round &&
                 in[1] == from,
             "round %ld: received source %d tag %d round %lld sender %lld, expected %d %d %ld %d",
             round, st[0].MPI_SOURCE, st[0].MPI_TAG, (long long)in[0], (long long)in[1], from,
             TAG_DATA, round, from);
    int64_t stray = -round - 1;
    for (int i = 0; i < STRAYS; i++)
        MPI_Send(&stray, 1, MPI_INT64_T, to, TAG_STRAY, nc); /* eager: completes locally */
    MPI_Comm_free(&nc);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_common_init("commfree");
    mt_require_ranks(2);
    MT_CHECK(provided == MPI_THREAD_MULTIPLE,
             "MPI_Init_thread provided level %d, not MPI_THREAD_MULTIPLE (%d)", provided,
             MPI_THREAD_MULTIPLE);
    if (provided != MPI_THREAD_MULTIPLE)
        return mt_finish();
    long rounds = mt_iters(3000, 300);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_probe_comm);
    pthread_t th;
    __atomic_store_n(&g_jitter, 1, __ATOMIC_RELAXED);
    pthread_create(&th, NULL, progress_thread, NULL);
    mt_step("%ld rounds of dup, exchange, %d strays, free", rounds, STRAYS);
    for (long r = 0; r < rounds; r++)
        round_trip(r);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    __atomic_store_n(&g_jitter, 0, __ATOMIC_RELAXED);
    MT_CHECK(g_probes > 0, "the progress thread never ran");
    MPI_Comm_free(&g_probe_comm);
    return mt_finish();
}
