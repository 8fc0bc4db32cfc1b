/* msgrate: message rate for small messages (default 8 B) with a window of 64,
 * OSU mbw_mr style: the ranks form pairs (r, r + np/2); each sender issues 64
 * MPI_Isend, the receiver has 64 MPI_Irecv posted, then a zero-byte ack.
 * Reports the aggregate messages per second over all pairs.
 * CSV: msgrate,SIZE,msg/s,MEDIAN and msgrate,SIZE,msg/s_max,BEST.
 * usage: msgrate [SIZE ...]  (default 8) */
#include "bench.h"

enum { WIN = 64 };

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "msgrate");
    mt_require_ranks(2);
    int reps = bench_reps();
    bench_header("message rate (window of 64, aggregate over rank pairs)");
    int pairs = mt_size / 2;
    int sender = mt_rank < pairs, active = mt_rank < 2 * pairs;
    int peer = sender ? mt_rank + pairs : mt_rank - pairs;
    long long sizes[16] = {8};
    int ns = 1;
    if (argc > 1) {
        ns = 0;
        for (int a = 1; a < argc && ns < 16; a++)
            sizes[ns++] = mt_parse_size(argv[a], "size");
    }
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    for (int si = 0; si < ns; si++) {
        long long n = sizes[si];
        uint8_t *sb = (uint8_t *)mt_malloc((size_t)n), *rb = (uint8_t *)mt_malloc((size_t)n * WIN);
        long loops = mt_iters(n <= 1024 ? 4000 : 400, 10);
        for (int r = 0; r < reps; r++) {
            MPI_Request rq[WIN];
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            for (long l = 0; active && l < loops; l++) {
                if (sender) {
                    for (int w = 0; w < WIN; w++)
                        MPI_Isend(sb, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq[w]);
                    MPI_Waitall(WIN, rq, MPI_STATUSES_IGNORE);
                    MPI_Recv(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int w = 0; w < WIN; w++)
                        MPI_Irecv(rb + (size_t)w * (size_t)n, (int)n, MPI_BYTE, peer, 5,
                                  MPI_COMM_WORLD, &rq[w]);
                    MPI_Waitall(WIN, rq, MPI_STATUSES_IGNORE);
                    MPI_Send(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD);
                }
            }
            double el = MPI_Wtime() - t, mx = 0;
            MPI_Allreduce(&el, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            v[r] = (double)pairs * WIN * (double)loops / mx;
        }
        if (mt_rank == 0) {
            double med = bench_median(v, reps);
            printf("msgrate,%lld,msg/s,%.0f\nmsgrate,%lld,msg/s_max,%.0f\n", n, med, n,
                   v[reps - 1]);
            printf("# %lld B: %.3f M msg/s (best %.3f) over %d pair(s)\n", n, med / 1e6,
                   v[reps - 1] / 1e6, pairs);
        }
        /* verified exchange */
        if (active) {
            mt_fill(sb, (size_t)n, mt_seed(mt_rank, peer, 7, n));
            MPI_Sendrecv(sb, (int)n, MPI_BYTE, peer, 7, rb, (int)n, MPI_BYTE, peer, 7,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            mt_verify(rb, (size_t)n, mt_seed(peer, mt_rank, 7, n), "msgrate check message");
        }
        free(sb), free(rb);
    }
    free(v);
    return mt_finish();
}
