/* osc_bench: one-sided latency and bandwidth between ranks 0 and 1 on an
 * MPI_Win_allocate'd window under MPI_Win_lock_all:
 *   put_lat / get_lat  one MPI_Put or MPI_Get + MPI_Win_flush, usec per op
 *   put_bw / get_bw    a window of 64 operations then one flush, MB/s
 * 8 B to 1 MiB. Prints which osc component served the window.
 * CSV: osc_put_lat,SIZE,usec,V  osc_get_lat,SIZE,usec,V  osc_put_bw,SIZE,MB/s,V
 * osc_get_bw,SIZE,MB/s,V. */
#include "bench.h"
#include "osc_which.h"

enum { WIN = 64 };

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "osc_bench");
    mt_require_ranks(2);
    long long maxb = mt_max_bytes(1 << 20);
    int reps = bench_reps();
    uint8_t *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)maxb * WIN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    char comp[64];
    osc_component_name(win, comp, sizeof comp);
    bench_header("one-sided put/get under lock_all");
    if (mt_rank == 0)
        printf("# window served by osc component: %s\n# %10s %10s %10s %12s %12s\n", comp, "bytes",
               "put usec", "get usec", "put MB/s", "get MB/s");
    uint8_t *lb = (uint8_t *)mt_malloc((size_t)maxb * WIN);
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    for (long long n = 8; n <= maxb; n *= 2) {
        long it = mt_iters(n <= 65536 ? 2000 : 200, 5), loops = mt_iters(n <= 65536 ? 100 : 10, 2);
        double res[4];
        for (int kind = 0; kind < 4; kind++) {
            for (int r = 0; r < reps; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t = 0;
                if (mt_rank == 0) {
                    MPI_Win_lock_all(0, win);
                    t = MPI_Wtime();
                    if (kind < 2) {
                        for (long i = 0; i < it; i++) {
                            if (kind == 0)
                                MPI_Put(lb, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win);
                            else
                                MPI_Get(lb, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win);
                            MPI_Win_flush(1, win);
                        }
                        t = (MPI_Wtime() - t) / (double)it * 1e6;
                    } else {
                        for (long l = 0; l < loops; l++) {
                            for (int w = 0; w < WIN; w++) {
                                MPI_Aint d = (MPI_Aint)w * (MPI_Aint)n;
                                if (kind == 2)
                                    MPI_Put(lb + d, (int)n, MPI_BYTE, 1, d, (int)n, MPI_BYTE, win);
                                else
                                    MPI_Get(lb + d, (int)n, MPI_BYTE, 1, d, (int)n, MPI_BYTE, win);
                            }
                            MPI_Win_flush(1, win);
                        }
                        t = (double)n * WIN * (double)loops / (MPI_Wtime() - t) / 1e6;
                    }
                    MPI_Win_unlock_all(win);
                }
                MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                v[r] = t;
            }
            res[kind] = bench_median(v, reps);
        }
        if (mt_rank == 0) {
            printf("osc_put_lat,%lld,usec,%.3f\nosc_get_lat,%lld,usec,%.3f\n", n, res[0], n,
                   res[1]);
            printf("osc_put_bw,%lld,MB/s,%.1f\nosc_get_bw,%lld,MB/s,%.1f\n", n, res[2], n, res[3]);
            printf("# %10lld %10.3f %10.3f %12.1f %12.1f\n", n, res[0], res[1], res[2], res[3]);
        }
    }
    /* verify one put and one get */
    MPI_Win_lock_all(0, win);
    if (mt_rank == 0) {
        mt_fill(lb, (size_t)maxb, mt_seed(0, 1, 9, 9));
        MPI_Put(lb, (int)maxb, MPI_BYTE, 1, 0, (int)maxb, MPI_BYTE, win);
        MPI_Win_flush(1, win);
        memset(lb, 0, (size_t)maxb);
        MPI_Get(lb, (int)maxb, MPI_BYTE, 1, 0, (int)maxb, MPI_BYTE, win);
        MPI_Win_flush(1, win);
        mt_verify(lb, (size_t)maxb, mt_seed(0, 1, 9, 9), "osc put then get back");
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(lb), free(v);
    return mt_finish();
}
