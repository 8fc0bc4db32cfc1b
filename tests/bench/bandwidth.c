/* bandwidth: unidirectional (rank 0 -> 1) and bidirectional (both at once)
 * streaming with a window of 64 outstanding MPI_Isend/MPI_Irecv, then a
 * zero-byte acknowledgement, OSU style; 1 B to 4 MiB. MB/s = 1e6 bytes/s;
 * bidirectional counts both directions (ROCE_BENCH_MIN_BYTES: start there
 * instead of 1 B, e.g. for a long large-message run). CSV: bw_uni,SIZE,MB/s,V and
 * bw_bi,SIZE,MB/s,V (medians) plus _min-free best values as MB/s_max. */
#include "bench.h"

enum { WIN = 64 };

static double run(int bidir, long long n, long loops, uint8_t *sb, uint8_t *rb) {
    MPI_Request rq[2 * WIN];
    int peer = 1 - mt_rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = 0;
    for (long l = -2; l < loops; l++) {
        if (l == 0)
            t = MPI_Wtime();
        int k = 0;
        if (mt_rank == 1 || bidir)
            for (int w = 0; w < WIN; w++)
                MPI_Irecv(rb + (size_t)w * (size_t)n, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                          &rq[k++]);
        if (mt_rank == 0 || bidir)
            for (int w = 0; w < WIN; w++)
                MPI_Isend(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[k++]);
        MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
        if (mt_rank == 1)
            MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        else
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    t = MPI_Wtime() - t;
    return (bidir ? 2.0 : 1.0) * (double)n * WIN * (double)loops / t / 1e6;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "bandwidth");
    mt_require_ranks(2);
    long long maxb = mt_max_bytes(4 << 20), minb = mt_env_size("ROCE_BENCH_MIN_BYTES", 1);
    int reps = bench_reps();
    bench_header("bandwidth (window of 64, MB/s)");
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxb),
            *rb = (uint8_t *)mt_malloc((size_t)maxb * WIN);
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (mt_rank == 0)
        printf("# %10s %12s %12s\n", "bytes", "uni MB/s", "bi MB/s");
    for (long long n = minb > 0 ? minb : 1; n <= maxb; n *= 2) {
        long loops = mt_iters(n <= 8192 ? 200 : n <= 262144 ? 40 : 6, 2);
        double res[2];
        for (int bi = 0; bi < 2; bi++) {
            for (int r = 0; r < reps; r++)
                v[r] = mt_rank < 2 ? run(bi, n, loops, sb, rb) : (MPI_Barrier(MPI_COMM_WORLD), 0);
            res[bi] = bench_median(v, reps);
            if (mt_rank == 0) {
                printf("%s,%lld,MB/s,%.1f\n%s,%lld,MB/s_max,%.1f\n", bi ? "bw_bi" : "bw_uni", n,
                       res[bi], bi ? "bw_bi" : "bw_uni", n, v[reps - 1]);
            }
        }
        if (mt_rank == 0)
            printf("# %10lld %12.1f %12.1f\n", n, res[0], res[1]);
    }
    /* one verified window so the figures are not from a broken transport */
    if (mt_rank < 2) {
        int peer = 1 - mt_rank;
        mt_fill(sb, (size_t)maxb, mt_seed(mt_rank, peer, 1, 1));
        MPI_Sendrecv(sb, (int)maxb, MPI_BYTE, peer, 4, rb, (int)maxb, MPI_BYTE, peer, 4,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mt_verify(rb, (size_t)maxb, mt_seed(peer, mt_rank, 1, 1), "bandwidth check message");
    }
    free(sb), free(rb), free(v);
    return mt_finish();
}
