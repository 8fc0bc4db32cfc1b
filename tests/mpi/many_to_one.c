/* many_to_one: every rank sends to rank 0 at the same time (the issue asks for
 * 8 ranks), mixed eager and rendezvous sizes, verified byte for byte.
 *
 * Phases: (1) rank 0 posts every receive first (specific sources); (2) the
 * senders send first, so everything arrives unexpected; (3) rank 0 receives
 * with MPI_ANY_SOURCE/MPI_ANY_TAG and identifies each message from its status,
 * checking that every (source, tag) arrives exactly once and that, per sender,
 * the messages arrive in the order sent.
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 1M for the largest size), ROCE_TEST_SCALE.
 */
#include "mt.h"

static const long long kSizes[] = {0, 8, 100, 4096, 12289, 65536, 262147, 1 << 20};
enum { NSIZES = sizeof kSizes / sizeof kSizes[0] };

static long long g_max;
static long g_msgs; /* messages per sender per phase */

static long long msg_size(long i) {
    long long s = kSizes[i % NSIZES];
    return s > g_max ? g_max : s;
}

static void phase(int p) {
    int nsend = mt_size - 1;
    if (mt_rank != 0) {
        uint8_t **bufs = (uint8_t **)calloc((size_t)g_msgs, sizeof *bufs);
        MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)g_msgs);
        for (long i = 0; i < g_msgs; i++) {
            long long n = msg_size(i + mt_rank);
            bufs[i] = (uint8_t *)mt_malloc((size_t)n);
            mt_fill(bufs[i], (size_t)n, mt_seed(mt_rank, 0, p, i));
        }
        if (p == 0)
            MPI_Barrier(MPI_COMM_WORLD); /* rank 0 has posted everything */
        for (long i = 0; i < g_msgs; i++)
            MPI_Isend(bufs[i], (int)msg_size(i + mt_rank), MPI_BYTE, 0, (int)i, MPI_COMM_WORLD,
                      &rq[i]);
        if (p != 0)
            MPI_Barrier(MPI_COMM_WORLD); /* sent before rank 0 posts */
        MPI_Waitall((int)g_msgs, rq, MPI_STATUSES_IGNORE);
        for (long i = 0; i < g_msgs; i++)
            free(bufs[i]);
        free(bufs);
        free(rq);
        return;
    }
    long total = g_msgs * nsend;
    uint8_t **bufs = (uint8_t **)calloc((size_t)total, sizeof *bufs);
    MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)total);
    MPI_Status *st = (MPI_Status *)malloc(sizeof *st * (size_t)total);
    long long maxn = 0;
    for (int i = 0; i < NSIZES; i++)
        if (msg_size(i) > maxn)
            maxn = msg_size(i);
    if (p != 2) {
        if (p == 1)
            MPI_Barrier(MPI_COMM_WORLD);
        for (int s = 1; s < mt_size; s++)
            for (long i = 0; i < g_msgs; i++) {
                long k = (s - 1) * g_msgs + i;
                bufs[k] = (uint8_t *)mt_malloc((size_t)msg_size(i + s));
                MPI_Irecv(bufs[k], (int)msg_size(i + s), MPI_BYTE, s, (int)i, MPI_COMM_WORLD,
                          &rq[k]);
            }
        if (p == 0)
            MPI_Barrier(MPI_COMM_WORLD);
        MPI_Waitall((int)total, rq, st);
        for (int s = 1; s < mt_size; s++)
            for (long i = 0; i < g_msgs; i++) {
                long k = (s - 1) * g_msgs + i;
                char what[128];
                snprintf(what, sizeof what, "phase %d message %ld (%lld B) from rank %d", p, i,
                         msg_size(i + s), s);
                mt_check_status(&st[k], s, (int)i, msg_size(i + s), what);
                mt_verify(bufs[k], (size_t)msg_size(i + s), mt_seed(s, 0, p, i), what);
            }
    } else {
        /* wildcards: buffers big enough for any message; identify by status */
        long *next = (long *)calloc((size_t)mt_size, sizeof *next);
        MPI_Barrier(MPI_COMM_WORLD);
        for (long k = 0; k < total; k++) {
            bufs[k] = (uint8_t *)mt_malloc((size_t)maxn);
            MPI_Irecv(bufs[k], (int)maxn, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                      &rq[k]);
        }
        MPI_Waitall((int)total, rq, st);
        for (long k = 0; k < total; k++) {
            int s = st[k].MPI_SOURCE, tag = st[k].MPI_TAG, cnt = -1;
            MPI_Get_count(&st[k], MPI_BYTE, &cnt);
            if (!MT_CHECK(s >= 1 && s < mt_size && tag >= 0 && tag < g_msgs,
                          "wildcard receive %ld: impossible status source %d tag %d", k, s, tag))
                continue;
            /* receives complete in posting order for one sender: its tags
             * must come 0, 1, 2, ... */
            MT_CHECK(tag == next[s],
                     "wildcard receive %ld: from rank %d got tag %d, expected %ld "
                     "(per-sender order broken or a message duplicated/lost)",
                     k, s, tag, next[s]);
            next[s] = tag + 1;
            char what[128];
            snprintf(what, sizeof what, "wildcard receive %ld: message %d from rank %d", k, tag, s);
            MT_CHECK(cnt == msg_size(tag + s), "%s: count %d, expected %lld", what, cnt,
                     msg_size(tag + s));
            mt_verify(bufs[k], (size_t)msg_size(tag + s), mt_seed(s, 0, p, tag), what);
        }
        for (int s = 1; s < mt_size; s++)
            MT_CHECK(next[s] == g_msgs, "wildcards: got %ld messages from rank %d, expected %ld",
                     next[s], s, g_msgs);
        free(next);
    }
    for (long k = 0; k < total; k++)
        free(bufs[k]);
    free(bufs);
    free(rq);
    free(st);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "many_to_one");
    mt_require_ranks(2);
    g_max = mt_max_bytes(1 << 20);
    g_msgs = mt_iters(3 * NSIZES, NSIZES);
    long reps = mt_iters(3, 1);
    for (long r = 0; r < reps; r++)
        for (int p = 0; p < 3; p++) {
            mt_step("repeat %ld phase %d (%s)", r, p,
                    p == 0   ? "receives posted first"
                    : p == 1 ? "all unexpected"
                             : "wildcards");
            phase(p);
        }
    return mt_finish();
}
