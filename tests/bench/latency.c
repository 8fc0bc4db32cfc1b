/* latency: ping-pong between ranks 0 and 1 (MPI_Send/MPI_Recv), 0 B to 1 MiB;
 * one-way latency = round trip / 2. CSV: latency,SIZE,usec,MEDIAN and
 * latency,SIZE,usec_min,BEST. Other ranks idle. The final message of every
 * repetition is checked (this is a benchmark, the tests verify everything).
 * ROCE_BENCH_SIZES="8,1M" times only those sizes (bench.h). */
#include "bench.h"

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "latency");
    mt_require_ranks(2);
    long long maxb = mt_max_bytes(1 << 20);
    int reps = bench_reps();
    bench_header("latency (MPI_Send/MPI_Recv ping-pong, usec one way)");
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxb), *rb = (uint8_t *)mt_malloc((size_t)maxb);
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (mt_rank == 0)
        printf("# %10s %12s %12s\n", "bytes", "usec", "usec_min");
    long long sizes[64];
    int ns = bench_sizes(0, maxb, sizes, 64);
    for (int si = 0; si < ns; si++) {
        long long n = sizes[si];
        long it = mt_iters(n <= 4096 ? 20000 : n <= 65536 ? 4000 : 400, 10);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = 0;
            if (mt_rank < 2) {
                int peer = 1 - mt_rank;
                mt_fill(sb, (size_t)n, mt_seed(mt_rank, peer, r, n));
                for (long i = -10; i < it; i++) {
                    if (i == 0)
                        t = MPI_Wtime();
                    if (mt_rank == 0) {
                        MPI_Send(sb, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                        MPI_Recv(rb, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    } else {
                        MPI_Recv(rb, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        MPI_Send(sb, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                    }
                }
                t = (MPI_Wtime() - t) / (double)it / 2 * 1e6;
                mt_verify(rb, (size_t)n, mt_seed(peer, mt_rank, r, n), "last latency message");
            }
            v[r] = t;
        }
        if (mt_rank == 0) {
            double med = bench_median(v, reps);
            printf("latency,%lld,usec,%.3f\nlatency,%lld,usec_min,%.3f\n", n, med, n, v[0]);
            printf("# %10lld %12.3f %12.3f\n", n, med, v[0]);
        }
    }
    free(sb), free(rb), free(v);
    return mt_finish();
}
