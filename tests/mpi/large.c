/* large: large messages between ranks 0 and 1 (the others idle): several
 * 16 MiB messages in flight in both directions at once, completed out of
 * order with MPI_Waitany and verified as each completes; one 128 MiB message
 * each way; a large non-contiguous (vector) message received as bytes; and
 * a buffer reused (freed and reallocated) between large transfers, which a
 * registration cache must notice.
 *
 * Knobs: ROCE_TEST_MAX_BYTES (caps every size; default 128M), ROCE_TEST_SCALE.
 */
#include "dtlayout.h"

static void concurrent(long long each, int k, long it) {
    int peer = 1 - mt_rank;
    uint8_t **sb = (uint8_t **)malloc(sizeof *sb * (size_t)k),
            **rb = (uint8_t **)malloc(sizeof *rb * (size_t)k);
    MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * 2 * (size_t)k);
    for (int i = 0; i < k; i++) {
        long long n = each - i * 4093; /* all different, odd lengths */
        sb[i] = (uint8_t *)mt_malloc((size_t)each), rb[i] = (uint8_t *)mt_malloc((size_t)each);
        mt_fill(sb[i], (size_t)n, mt_seed(mt_rank, peer, 60 + i, it));
        MPI_Irecv(rb[i], (int)each, MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD, &rq[i]);
    }
    for (int i = k - 1; i >= 0; i--)
        MPI_Isend(sb[i], (int)(each - i * 4093), MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD,
                  &rq[k + i]);
    for (int done = 0; done < 2 * k; done++) {
        int idx;
        MPI_Status st;
        MPI_Waitany(2 * k, rq, &idx, &st);
        if (idx < k) {
            long long n = each - idx * 4093;
            char what[96];
            snprintf(what, sizeof what, "concurrent large message %d (%lld B) from rank %d", idx, n,
                     peer);
            if (mt_check_status(&st, peer, 100 + idx, n, what))
                mt_verify(rb[idx], (size_t)n, mt_seed(peer, mt_rank, 60 + idx, it), what);
        }
    }
    for (int i = 0; i < k; i++)
        free(sb[i]), free(rb[i]);
    free(sb), free(rb), free(rq);
}

static void single(long long n, long it) {
    int peer = 1 - mt_rank;
    uint8_t *s = (uint8_t *)mt_malloc((size_t)n), *r = (uint8_t *)mt_malloc((size_t)n);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, peer, 70, it));
    MPI_Status st;
    MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, 7, r, (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &st);
    char what[64];
    snprintf(what, sizeof what, "single %lld B message", n);
    if (mt_check_status(&st, peer, 7, n, what))
        mt_verify(r, (size_t)n, mt_seed(peer, mt_rank, 70, it), what);
    free(s);
    /* reuse: a new allocation (likely the same addresses) with new contents */
    s = (uint8_t *)mt_malloc((size_t)n);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, peer, 71, it));
    MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, 8, r, (int)n, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &st);
    snprintf(what, sizeof what, "%lld B message from a reallocated buffer", n);
    if (mt_check_status(&st, peer, 8, n, what))
        mt_verify(r, (size_t)n, mt_seed(peer, mt_rank, 71, it), what);
    free(s), free(r);
}

static void vector_large(long long payload, long it) {
    int peer = 1 - mt_rank;
    dt_layout l;
    dt_make(DT_VECTOR, &l);
    long count = (long)(payload / l.payload);
    size_t span = dt_span(&l, count), bytes = dt_payload(&l, count);
    uint8_t *s = (uint8_t *)mt_malloc(span), *r = (uint8_t *)mt_malloc(bytes);
    mt_fill(s, span, mt_seed(mt_rank, peer, 72, it));
    MPI_Status st;
    MPI_Sendrecv(s, (int)count, l.type, peer, 9, r, (int)bytes, MPI_BYTE, peer, 9, MPI_COMM_WORLD,
                 &st);
    char what[64];
    snprintf(what, sizeof what, "vector of %ld elements as %zu bytes", count, bytes);
    if (mt_check_status(&st, peer, 9, (long long)bytes, what))
        dt_verify(r, NULL, (long)bytes, &l, mt_seed(peer, mt_rank, 72, it), 0xEE, what);
    free(s), free(r);
    dt_free(&l);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "large");
    mt_require_ranks(2);
    long long cap = mt_max_bytes(128LL << 20);
    long iters = mt_iters(1, 1);
    if (mt_rank < 2)
        for (long it = 0; it < iters; it++) {
            long long each = cap < (16 << 20) ? cap : (16 << 20);
            if (each > 4 * 4093 * 2) {
                mt_step("it %ld 4 concurrent messages of ~%lld B each way", it, each);
                concurrent(each, 4, it);
            }
            mt_step("it %ld single %lld B each way", it, cap);
            single(cap, it);
            mt_step("it %ld vector %lld B", it, cap / 2);
            vector_large(cap / 2, it);
        }
    return mt_finish();
}
