/* mpi-pingpong: the reported program's pattern, as a demo and a test.
 *
 * Ranks 0 and 1 exchange messages of 8 B to 1 MiB (powers of two) in three
 * phases:
 *   sync   MPI_Ssend + MPI_Recv ping-pong    (time per one-way trip)
 *   async  MPI_Isend + MPI_Irecv + MPI_Waitall ping-pong
 *   bidir  both ranks MPI_Isend + MPI_Irecv at once, MPI_Waitall
 *          (time per exchange; MB/s counts both directions)
 * and print microseconds and MB/s per size. Every size first runs a
 * verification pass (whole payload checked, each message different), and
 * every timed message carries its iteration number at both ends, checked on
 * receipt. Any difference fails the run (exit 1) with what differed.
 *
 * usage: mpi-pingpong [--min BYTES] [--max BYTES] [--iters N] [--csv]
 *   --csv also prints "benchmark,size,metric,value" lines.
 * Knobs: ROCE_TEST_MAX_BYTES caps --max, ROCE_TEST_SCALE scales iterations.
 */
#include "mt.h"

static int g_csv;
static long g_iters_override;

static long iters_for(long long n) {
    if (g_iters_override > 0)
        return g_iters_override;
    return mt_iters(n <= 8192 ? 2000 : n <= 131072 ? 400 : 60, 5);
}

static void stamp(uint8_t *b, long long n, uint64_t v) {
    if (n >= 8)
        memcpy(b, &v, 8);
    if (n >= 16)
        memcpy(b + n - 8, &v, 8);
}

static int stamp_ok(const uint8_t *b, long long n, uint64_t v) {
    uint64_t x = v, y = v;
    if (n >= 8)
        memcpy(&x, b, 8);
    if (n >= 16)
        memcpy(&y, b + n - 8, 8);
    return x == v && y == v;
}

/* one exchange of phase p at iteration i; full: whole-payload pattern check */
static void exchange(int p, long long n, uint8_t *sb, uint8_t *rb, long i, int full) {
    int peer = 1 - mt_rank;
    uint64_t myseed = mt_seed(mt_rank, peer, p, i), peerseed = mt_seed(peer, mt_rank, p, i);
    if (full)
        mt_fill(sb, (size_t)n, myseed);
    else
        stamp(sb, n, (uint64_t)i * 2 + (uint64_t)mt_rank);
    MPI_Status st;
    MPI_Request rq[2];
    MPI_Status sts[2];
    int first = mt_rank == 0;
    switch (p) {
    case 0:
        if (first) {
            MPI_Ssend(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
        } else {
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
            MPI_Ssend(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
        break;
    case 1:
        if (first) {
            MPI_Irecv(rb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
            MPI_Isend(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(2, rq, sts);
        } else {
            MPI_Irecv(rb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
            MPI_Wait(&rq[0], &sts[0]);
            if (!full)
                stamp(sb, n, (uint64_t)i * 2 + (uint64_t)mt_rank);
            MPI_Isend(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(1, &rq[1], &sts[1]);
        }
        st = sts[0];
        break;
    default:
        MPI_Irecv(rb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(sb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, sts);
        st = sts[0];
        break;
    }
    static const char *names[] = {"sync", "async", "bidir"};
    char what[96];
    if (full) {
        snprintf(what, sizeof what, "%s phase, %lld B, verification message %ld", names[p], n, i);
        if (mt_check_status(&st, peer, p + 1, n, what))
            mt_verify(rb, (size_t)n, peerseed, what);
    } else if (!stamp_ok(rb, n, (uint64_t)i * 2 + (uint64_t)peer)) {
        mt_fail("%s phase, %lld B, timed message %ld: its iteration stamp is wrong (stale or "
                "misdelivered data)",
                names[p], n, i);
    }
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "mpi-pingpong");
    mt_require_ranks(2);
    long long minb = 8, maxb = 1 << 20;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--csv"))
            g_csv = 1;
        else if (!strcmp(argv[a], "--min") && a + 1 < argc)
            minb = mt_parse_size(argv[++a], "--min");
        else if (!strcmp(argv[a], "--max") && a + 1 < argc)
            maxb = mt_parse_size(argv[++a], "--max");
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            g_iters_override = atol(argv[++a]);
        else {
            if (mt_rank == 0)
                fprintf(stderr,
                        "usage: mpi-pingpong [--min BYTES] [--max BYTES] [--iters N] [--csv]\n");
            MPI_Finalize();
            return 2;
        }
    }
    maxb = mt_max_bytes(maxb);
    if (minb < 1)
        minb = 1;
    if (mt_rank == 0) {
        printf("mpi-pingpong: %d ranks (ranks 0 and 1 exchange), %lld B .. %lld B\n", mt_size, minb,
               maxb);
        printf("%-6s %10s %8s %12s %12s\n", "phase", "bytes", "iters", "usec", "MB/s");
        if (g_csv)
            printf("benchmark,size,metric,value\n");
    }
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxb), *rb = (uint8_t *)mt_malloc((size_t)maxb);
    static const char *names[] = {"sync", "async", "bidir"};
    for (int p = 0; p < 3; p++) {
        for (long long n = minb; n <= maxb; n *= 2) {
            long it = iters_for(n);
            if (mt_rank < 2) {
                mt_step("%s %lld B: verification", names[p], n);
                for (long i = 0; i < 5; i++)
                    exchange(p, n, sb, rb, i, 1);
                mt_step("%s %lld B: timed, %ld iterations", names[p], n, it);
                for (long i = 0; i < 3; i++)
                    exchange(p, n, sb, rb, 1000000 + i, 0); /* warm-up */
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                for (long i = 0; i < it; i++)
                    exchange(p, n, sb, rb, i, 0);
                double el = MPI_Wtime() - t;
                /* sync and async: a round trip is 2 iterations' worth of one-way trips */
                double usec = p == 2 ? el / (double)it * 1e6 : el / (double)it / 2 * 1e6;
                double mbs = (p == 2 ? 2.0 : 1.0) * (double)n / usec; /* bytes/usec == MB/s */
                if (mt_rank == 0) {
                    printf("%-6s %10lld %8ld %12.2f %12.1f\n", names[p], n, it, usec, mbs);
                    if (g_csv) {
                        printf("pingpong-%s,%lld,usec,%.3f\n", names[p], n, usec);
                        printf("pingpong-%s,%lld,MB/s,%.1f\n", names[p], n, mbs);
                    }
                }
            } else {
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
    }
    free(sb), free(rb);
    return mt_finish();
}
