/* matching: the cost of MPI matching with long queues, between ranks 0 and 1.
 *
 * posted      rank 1 posts N receives (source 0, tags 0..N-1), then rank 0
 *             sends N 8-byte messages with tags N-1..0: each arriving message
 *             matches the receive posted last among those left (the worst case
 *             for a list searched from the head).
 * posted_any  the same with the receives posted with MPI_ANY_SOURCE.
 * posted_mixed  receives alternate between source 0 and MPI_ANY_SOURCE
 *             (two long queues whose posting order must be kept).
 * unexpected  rank 0 sends N messages (tags 0..N-1) first; after they have all
 *             arrived, rank 1 posts receives with tags N-1..0, each searching
 *             the unexpected queue.
 * Time per message = time from the go signal to the last completion / N
 * (includes the transfer; the N = 1 line gives that baseline).
 * CSV: match_<variant>,N,usec/msg,MEDIAN. usage: matching [N ...]
 * (default 1 100 1000 10000). */
#include "bench.h"

static double one(int variant, int n, int64_t *bufs, MPI_Request *rq) {
    int64_t v = 0;
    double t = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (variant < 3) {
        if (mt_rank == 1) {
            for (int i = 0; i < n; i++) {
                int src = variant == 0   ? 0
                          : variant == 1 ? MPI_ANY_SOURCE
                                         : (i % 2 ? MPI_ANY_SOURCE : 0);
                MPI_Irecv(&bufs[i], 1, MPI_INT64_T, src, i, MPI_COMM_WORLD, &rq[i]);
            }
            t = MPI_Wtime();
            MPI_Send(&v, 0, MPI_BYTE, 0, 999999, MPI_COMM_WORLD); /* go */
            MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
            t = MPI_Wtime() - t;
        } else if (mt_rank == 0) {
            MPI_Recv(&v, 0, MPI_BYTE, 1, 999999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = n - 1; i >= 0; i--) {
                int64_t x = i;
                MPI_Send(&x, 1, MPI_INT64_T, 1, i, MPI_COMM_WORLD);
            }
        }
    } else {
        if (mt_rank == 0) {
            for (int i = 0; i < n; i++) {
                int64_t x = i;
                MPI_Send(&x, 1, MPI_INT64_T, 1, i, MPI_COMM_WORLD);
            }
            MPI_Send(&v, 0, MPI_BYTE, 1, 999999,
                     MPI_COMM_WORLD); /* all sent (and, in order, before this) */
        } else if (mt_rank == 1) {
            MPI_Recv(&v, 0, MPI_BYTE, 0, 999999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t = MPI_Wtime();
            for (int i = n - 1; i >= 0; i--)
                MPI_Irecv(&bufs[i], 1, MPI_INT64_T, 0, i, MPI_COMM_WORLD, &rq[i]);
            MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
            t = MPI_Wtime() - t;
        }
    }
    if (mt_rank == 1) {
        long bad = 0;
        for (int i = 0; i < n; i++)
            bad += bufs[i] != i;
        MT_CHECK(bad == 0, "matching variant %d N=%d: %ld receives got the wrong message", variant,
                 n, bad);
    }
    MPI_Bcast(&t, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    return t / n * 1e6;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "matching");
    mt_require_ranks(2);
    int reps = bench_reps();
    bench_header("matching cost (usec per message, includes the 8 B transfer)");
    int ns[16] = {1, 100, 1000, 10000}, nn = 4;
    if (argc > 1) {
        nn = 0;
        for (int a = 1; a < argc && nn < 16; a++)
            ns[nn++] = atoi(argv[a]);
    }
    static const char *names[] = {"match_posted", "match_posted_any", "match_posted_mixed",
                                  "match_unexpected"};
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (mt_rank == 0)
        printf("# %8s %14s %14s %14s %14s\n", "N", "posted", "posted_any", "posted_mixed",
               "unexpected");
    for (int k = 0; k < nn; k++) {
        int n = ns[k];
        int64_t *bufs = (int64_t *)malloc(sizeof(int64_t) * (size_t)n);
        MPI_Request *rq = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)n);
        double res[4];
        for (int var = 0; var < 4; var++) {
            for (int r = 0; r < reps; r++)
                v[r] = one(var, n, bufs, rq);
            res[var] = bench_median(v, reps);
            if (mt_rank == 0)
                printf("%s,%d,usec/msg,%.3f\n", names[var], n, res[var]);
        }
        if (mt_rank == 0)
            printf("# %8d %14.3f %14.3f %14.3f %14.3f\n", n, res[0], res[1], res[2], res[3]);
        free(bufs), free(rq);
    }
    free(v);
    return mt_finish();
}
