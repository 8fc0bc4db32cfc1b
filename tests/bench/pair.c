/* pair: one-way latency (Send/Recv ping-pong) and unidirectional bandwidth
 * (window of Isend/Irecv, then a zero-byte ack) in ONE MPI job, ranks 0 and 1.
 * For the emulated guests, where starting an MPI job costs half a minute:
 * the matrix runs this instead of latency + bandwidth there. The kernels are
 * those of latency.c and bandwidth.c; the CSV names are theirs too
 * (latency,SIZE,usec,V and bw_uni,SIZE,MB/s,V), so results compare directly.
 * Sizes: ROCE_BENCH_SIZES (latency, default 8) and ROCE_BENCH_BW_SIZES
 * (bandwidth, default 1M); window ROCE_BENCH_WINDOW (default 64). */
#include "bench.h"

enum { WIN = 64 };

static double pingpong(long long n, long it, uint8_t *sb, uint8_t *rb) {
    int peer = 1 - mt_rank;
    double t = 0;
    for (long i = -10; i < it; i++) {
        if (i == 0)
            t = MPI_Wtime();
        if (mt_rank == 0) {
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t) / (double)it / 2 * 1e6;
}

static double stream(long long n, long loops, int win, uint8_t *sb, uint8_t *rb) {
    MPI_Request rq[WIN];
    int peer = 1 - mt_rank;
    double t = 0;
    for (long l = -2; l < loops; l++) {
        if (l == 0)
            t = MPI_Wtime();
        for (int w = 0; w < win; w++) {
            if (mt_rank == 1)
                MPI_Irecv(rb + (size_t)w * (size_t)n, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                          &rq[w]);
            else
                MPI_Isend(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[w]);
        }
        MPI_Waitall(win, rq, MPI_STATUSES_IGNORE);
        if (mt_rank == 1)
            MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        else
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return (double)n * win * (double)loops / (MPI_Wtime() - t) / 1e6;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "pair");
    mt_require_ranks(2);
    long long maxb = mt_max_bytes(1 << 20);
    int reps = bench_reps(), win = bench_window(WIN);
    bench_header("pair (latency usec one way; bandwidth MB/s, unidirectional)");
    long long lat[64], bw[64];
    int nl = 1, nb = 1;
    lat[0] = 8;
    bw[0] = maxb;
    if (getenv("ROCE_BENCH_SIZES"))
        nl = bench_sizes(0, maxb, lat, 64);
    const char *b = getenv("ROCE_BENCH_BW_SIZES");
    if (b && *b) {
        nb = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", b);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && nb < 64;
             t = strtok_r(NULL, ",", &save)) {
            long long v = mt_parse_size(t, "ROCE_BENCH_BW_SIZES");
            if (v <= maxb)
                bw[nb++] = v;
        }
    }
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxb),
            *rb = (uint8_t *)mt_malloc((size_t)maxb * (size_t)win);
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    for (int si = 0; si < nl; si++) {
        long long n = lat[si];
        long it = mt_iters(n <= 4096 ? 20000 : n <= 65536 ? 4000 : 400, 10);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            v[r] = mt_rank < 2 ? pingpong(n, it, sb, rb) : 0;
        }
        if (mt_rank == 0)
            printf("latency,%lld,usec,%.3f\n# latency %lld B: %.3f usec\n", n,
                   bench_median(v, reps), n, v[0]);
    }
    for (int si = 0; si < nb; si++) {
        long long n = bw[si];
        /* at ROCE_TEST_SCALE 0.05 and window 4: about 3, 10 and 21 MB per
         * figure at 8 KiB, 64 KiB and 1 MiB, a second or so each in the
         * emulated guests */
        long loops = mt_iters(n <= 8192 ? 2000 : n <= 262144 ? 800 : 100, 2);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            v[r] = mt_rank < 2 ? stream(n, loops, win, sb, rb) : 0;
        }
        if (mt_rank == 0)
            printf("bw_uni,%lld,MB/s,%.1f\n# bandwidth %lld B: %.1f MB/s (window %d)\n", n,
                   bench_median(v, reps), n, v[0], win);
    }
    /* one verified message so the figures are not from a broken transport */
    if (mt_rank < 2) {
        int peer = 1 - mt_rank;
        mt_fill(sb, (size_t)maxb, mt_seed(mt_rank, peer, 1, 1));
        MPI_Sendrecv(sb, (int)maxb, MPI_BYTE, peer, 4, rb, (int)maxb, MPI_BYTE, peer, 4,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mt_verify(rb, (size_t)maxb, mt_seed(peer, mt_rank, 1, 1), "pair check message");
    }
    free(sb), free(rb), free(v);
    return mt_finish();
}
