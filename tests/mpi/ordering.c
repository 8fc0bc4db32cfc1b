/* ordering: messages from one sender on one communicator and tag are received
 * in the order sent (MPI's non-overtaking rule), across eager and rendezvous
 * sizes mixed in one stream: receives posted first, receives posted after
 * everything arrived, MPI_ANY_SOURCE receives from several senders (each
 * sender's stream stays in order), and MPI_ANY_TAG receives over a stream
 * of changing tags. Each message carries its sequence number in its pattern.
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 2M for the rendezvous sizes), ROCE_TEST_SCALE.
 */
#include "mt.h"

static const long long kSizes[] = {8, 0, 4000, 1 << 20, 1, 65536, 100, 2 << 20, 12, 300000};
enum { NS = sizeof kSizes / sizeof kSizes[0] };
static long long g_max;
static long g_n;

static long long sz(long i) {
    long long s = kSizes[i % NS];
    return s > g_max ? g_max : s;
}

/* one sender -> one receiver, fixed tag; late: receives posted after a barrier */
static void stream(int snd, int rcv, int late, int step) {
    if (mt_rank == snd) {
        MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)g_n);
        uint8_t **b = (uint8_t **)malloc(sizeof *b * (size_t)g_n);
        for (long i = 0; i < g_n; i++) {
            b[i] = (uint8_t *)mt_malloc((size_t)sz(i));
            mt_fill(b[i], (size_t)sz(i), mt_seed(snd, rcv, step, i));
            MPI_Isend(b[i], (int)sz(i), MPI_BYTE, rcv, 5, MPI_COMM_WORLD, &rq[i]);
        }
        if (late)
            MPI_Barrier(MPI_COMM_WORLD);
        MPI_Waitall((int)g_n, rq, MPI_STATUSES_IGNORE);
        for (long i = 0; i < g_n; i++)
            free(b[i]);
        free(b), free(rq);
    } else if (mt_rank == rcv) {
        long long maxs = 0;
        for (int i = 0; i < NS; i++)
            maxs = sz(i) > maxs ? sz(i) : maxs;
        MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)g_n);
        MPI_Status *st = (MPI_Status *)malloc(sizeof *st * (size_t)g_n);
        uint8_t **b = (uint8_t **)malloc(sizeof *b * (size_t)g_n);
        if (late)
            MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < g_n; i++) {
            b[i] = (uint8_t *)mt_malloc((size_t)maxs);
            MPI_Irecv(b[i], (int)maxs, MPI_BYTE, snd, 5, MPI_COMM_WORLD, &rq[i]);
        }
        MPI_Waitall((int)g_n, rq, st);
        for (long i = 0; i < g_n; i++) {
            char what[128];
            snprintf(what, sizeof what,
                     "%s stream from %d: receive #%ld (expect the %lld B message #%ld)",
                     late ? "unexpected" : "posted", snd, i, sz(i), i);
            if (mt_check_status(&st[i], snd, 5, sz(i), what))
                mt_verify(b[i], (size_t)sz(i), mt_seed(snd, rcv, step, i), what);
            free(b[i]);
        }
        free(b), free(rq), free(st);
    } else if (late) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* every rank but 0 streams to rank 0; rank 0 receives with ANY_SOURCE (and
 * ANY_TAG; each sender uses tags i % 3) and checks per-sender order */
static void anysource(int step) {
    long long maxs = 0;
    for (int i = 0; i < NS; i++)
        maxs = sz(i) > maxs ? sz(i) : maxs;
    if (mt_rank != 0) {
        MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)g_n);
        uint8_t **b = (uint8_t **)malloc(sizeof *b * (size_t)g_n);
        for (long i = 0; i < g_n; i++) {
            b[i] = (uint8_t *)mt_malloc((size_t)sz(i + mt_rank));
            mt_fill(b[i], (size_t)sz(i + mt_rank), mt_seed(mt_rank, 0, step, i));
            MPI_Isend(b[i], (int)sz(i + mt_rank), MPI_BYTE, 0, (int)(i % 3), MPI_COMM_WORLD,
                      &rq[i]);
        }
        MPI_Waitall((int)g_n, rq, MPI_STATUSES_IGNORE);
        for (long i = 0; i < g_n; i++)
            free(b[i]);
        free(b), free(rq);
        return;
    }
    long total = g_n * (mt_size - 1);
    long *next = (long *)calloc((size_t)mt_size, sizeof(long));
    uint8_t *b = (uint8_t *)mt_malloc((size_t)maxs);
    for (long k = 0; k < total; k++) {
        MPI_Status st;
        MPI_Recv(b, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        int s = st.MPI_SOURCE;
        if (!MT_CHECK(s > 0 && s < mt_size, "ANY_SOURCE receive %ld: source %d", k, s))
            continue;
        long i = next[s]++;
        char what[128];
        snprintf(what, sizeof what, "ANY_SOURCE/ANY_TAG receive %ld: message #%ld of rank %d", k, i,
                 s);
        if (mt_check_status(&st, s, (int)(i % 3), sz(i + s), what))
            mt_verify(b, (size_t)sz(i + s), mt_seed(s, 0, step, i), what);
    }
    free(next);
    free(b);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "ordering");
    mt_require_ranks(2);
    g_max = mt_max_bytes(2 << 20);
    g_n = mt_iters(4 * NS, NS);
    long reps = mt_iters(3, 1);
    int step = 0;
    for (long r = 0; r < reps; r++) {
        int snd = (int)(r % mt_size), rcv = (int)((r + 1) % mt_size);
        mt_step("rep %ld stream %d->%d, receives posted", r, snd, rcv);
        stream(snd, rcv, 0, step++);
        mt_step("rep %ld stream %d->%d, receives late", r, snd, rcv);
        stream(snd, rcv, 1, step++);
        mt_step("rep %ld ANY_SOURCE from all", r);
        anysource(step++);
    }
    return mt_finish();
}
