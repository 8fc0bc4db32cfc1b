/* all_to_all: every rank exchanges with every rank (itself included) at the
 * same time with Isend/Irecv, the size of each message depending on the pair
 * and the round (eager and rendezvous mixed), verified byte for byte; then the
 * same traffic with receives posted late (after a barrier) and with a
 * shifted MPI_Sendrecv schedule.
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 512K per message), ROCE_TEST_SCALE.
 */
#include "mt.h"

static long long g_max;

static long long pair_size(int src, int dst, long round) {
    static const long long s[] = {0, 1, 64, 1000, 4096, 16411, 65536, 131075, 524288};
    long long v = s[(src * 7 + dst * 3 + round) % (long)(sizeof s / sizeof s[0])];
    return v > g_max ? g_max : v;
}

static void round_nb(long round, int late) {
    int n = mt_size;
    uint8_t **sb = (uint8_t **)calloc((size_t)n, sizeof *sb),
            **rb = (uint8_t **)calloc((size_t)n, sizeof *rb);
    MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * 2 * (size_t)n);
    MPI_Status *st = (MPI_Status *)malloc(sizeof *st * 2 * (size_t)n);
    int tag = (int)(round % 1000);
    for (int p = 0; p < n; p++) {
        long long ss = pair_size(mt_rank, p, round), rs = pair_size(p, mt_rank, round);
        sb[p] = (uint8_t *)mt_malloc((size_t)ss);
        rb[p] = (uint8_t *)mt_malloc((size_t)rs);
        mt_fill(sb[p], (size_t)ss, mt_seed(mt_rank, p, 1, round));
    }
    if (!late)
        for (int p = 0; p < n; p++)
            MPI_Irecv(rb[p], (int)pair_size(p, mt_rank, round), MPI_BYTE, p, tag, MPI_COMM_WORLD,
                      &rq[p]);
    for (int i = 0; i < n; i++) {
        int p = (mt_rank + i) % n; /* everyone starts with a different peer */
        MPI_Isend(sb[p], (int)pair_size(mt_rank, p, round), MPI_BYTE, p, tag, MPI_COMM_WORLD,
                  &rq[n + p]);
    }
    if (late) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int p = n - 1; p >= 0; p--)
            MPI_Irecv(rb[p], (int)pair_size(p, mt_rank, round), MPI_BYTE, p, tag, MPI_COMM_WORLD,
                      &rq[p]);
    }
    MPI_Waitall(2 * n, rq, st);
    for (int p = 0; p < n; p++) {
        char what[128];
        snprintf(what, sizeof what, "round %ld (%s) from rank %d, %lld B", round,
                 late ? "receives late" : "receives first", p, pair_size(p, mt_rank, round));
        mt_check_status(&st[p], p, tag, pair_size(p, mt_rank, round), what);
        mt_verify(rb[p], (size_t)pair_size(p, mt_rank, round), mt_seed(p, mt_rank, 1, round), what);
        free(sb[p]);
        free(rb[p]);
    }
    free(sb);
    free(rb);
    free(rq);
    free(st);
}

static void round_sendrecv(long round) {
    long long maxs = g_max < 524288 ? g_max : 524288;
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxs), *rb = (uint8_t *)mt_malloc((size_t)maxs);
    for (int k = 1; k < mt_size; k++) {
        int to = (mt_rank + k) % mt_size, from = (mt_rank - k + mt_size) % mt_size;
        long long ss = pair_size(mt_rank, to, round), rs = pair_size(from, mt_rank, round);
        mt_fill(sb, (size_t)ss, mt_seed(mt_rank, to, 2, round));
        MPI_Status st;
        MPI_Sendrecv(sb, (int)ss, MPI_BYTE, to, k, rb, (int)rs, MPI_BYTE, from, k, MPI_COMM_WORLD,
                     &st);
        char what[128];
        snprintf(what, sizeof what, "sendrecv round %ld shift %d from rank %d", round, k, from);
        mt_check_status(&st, from, k, rs, what);
        mt_verify(rb, (size_t)rs, mt_seed(from, mt_rank, 2, round), what);
    }
    free(sb);
    free(rb);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "all_to_all");
    g_max = mt_max_bytes(512 << 10);
    long rounds = mt_iters(20, 3);
    for (long r = 0; r < rounds; r++) {
        mt_step("round %ld, receives first", r);
        round_nb(r, 0);
        mt_step("round %ld, receives late", r);
        round_nb(r, 1);
        mt_step("round %ld, sendrecv", r);
        round_sendrecv(r);
    }
    return mt_finish();
}
