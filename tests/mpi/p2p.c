/* p2p: point-to-point data integrity from 0 B to 64 MiB.
 *
 * Contiguous messages at every power of two and at odd sizes around them,
 * blocking (paired Send/Recv) and nonblocking (ring Isend/Irecv, with the
 * receive posted before and after the send so both the posted and the
 * unexpected path are taken, eager and rendezvous). Receive buffers are larger
 * than the message and guarded: the status count must be the message size and
 * nothing past it may be written. Then non-contiguous datatypes (vector,
 * indexed, struct, 1-byte hvector) sent as type -> same type, type -> bytes and
 * bytes -> type, verified against a layout table computed independently of MPI.
 *
 * Messages above 4 MiB are exchanged by ranks 0 and 1 only (the others wait at
 * a barrier), so the run time does not grow with the number of ranks; every
 * rank takes part below that.
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 64M), ROCE_TEST_SCALE (>= 2 repeats the
 * contiguous sweep).
 */
#include "dtlayout.h"

enum { GUARD = 64, GAP = 0xEE };
#define BIG_BYTES (4LL << 20)

/* How many ranks (0..n-1) take part in a message of this payload size. */
static int participants(long long bytes) {
    return bytes > BIG_BYTES && mt_size > 2 ? 2 : mt_size;
}

static long long g_max;

static int build_sizes(long long *sz, int cap) {
    int n = 0;
    sz[n++] = 0;
    for (int k = 0; k <= 26; k++) {
        long long p = 1LL << k;
        if (p - 1 > 0 && p - 1 != 1 && p - 1 <= g_max)
            sz[n++] = p - 1;
        if (p <= g_max)
            sz[n++] = p;
        if (k <= 16 && k >= 2 && p + 1 <= g_max)
            sz[n++] = p + 1;
        if (n >= cap - 4)
            break;
    }
    long long odd[] = {12345, 1000003, (64LL << 20) - 3};
    for (unsigned i = 0; i < sizeof odd / sizeof odd[0]; i++)
        if (odd[i] <= g_max)
            sz[n++] = odd[i];
    return n;
}

/* Blocking exchange with the partner rank^1 (or self through Sendrecv). */
static void contig_blocking(long long size, int step, uint8_t *sbuf, uint8_t *rbuf) {
    int np = participants(size);
    if (mt_rank >= np)
        return;
    int partner = mt_rank ^ 1;
    if (partner >= np)
        partner = mt_rank;
    uint64_t sseed = mt_seed(mt_rank, partner, step, size);
    uint64_t rseed = mt_seed(partner, mt_rank, step, size);
    mt_fill(sbuf, (size_t)size, sseed);
    memset(rbuf, GAP, (size_t)size + GUARD);
    MPI_Status st;
    int tag = step % 32768;
    if (partner == mt_rank) {
        MPI_Sendrecv(sbuf, (int)size, MPI_BYTE, partner, tag, rbuf, (int)size + GUARD, MPI_BYTE,
                     partner, tag, MPI_COMM_WORLD, &st);
    } else if (mt_rank < partner) {
        MPI_Send(sbuf, (int)size, MPI_BYTE, partner, tag, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)size + GUARD, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(rbuf, (int)size + GUARD, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st);
        MPI_Send(sbuf, (int)size, MPI_BYTE, partner, tag, MPI_COMM_WORLD);
    }
    char what[160];
    snprintf(what, sizeof what, "blocking contiguous %lld B from rank %d", size, partner);
    mt_check_status(&st, partner, tag, size, what);
    mt_verify(rbuf, (size_t)size, rseed, what);
    mt_verify_fill(rbuf + size, GUARD, GAP, what);
}

/* Ring: send to rank+1, receive from rank-1; recv_first chooses whether the
 * receive is posted before the send. */
static void contig_ring(long long size, int step, int recv_first, uint8_t *sbuf, uint8_t *rbuf) {
    int np = participants(size);
    if (mt_rank >= np) {
        if (!recv_first)
            MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    int to = (mt_rank + 1) % np, from = (mt_rank + np - 1) % np;
    uint64_t sseed = mt_seed(mt_rank, to, step, size);
    uint64_t rseed = mt_seed(from, mt_rank, step, size);
    mt_fill(sbuf, (size_t)size, sseed);
    memset(rbuf, GAP, (size_t)size + GUARD);
    MPI_Request rq[2];
    MPI_Status st[2];
    int tag = step % 32768;
    if (recv_first) {
        MPI_Irecv(rbuf, (int)size + GUARD, MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(sbuf, (int)size, MPI_BYTE, to, tag, MPI_COMM_WORLD, &rq[1]);
    } else {
        MPI_Isend(sbuf, (int)size, MPI_BYTE, to, tag, MPI_COMM_WORLD, &rq[1]);
        /* let the message arrive before the receive exists */
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Irecv(rbuf, (int)size + GUARD, MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq[0]);
    }
    MPI_Waitall(2, rq, st);
    char what[160];
    snprintf(what, sizeof what, "nonblocking contiguous %lld B from rank %d (%s)", size, from,
             recv_first ? "receive posted first" : "send first");
    mt_check_status(&st[0], from, tag, size, what);
    mt_verify(rbuf, (size_t)size, rseed, what);
    mt_verify_fill(rbuf + size, GUARD, GAP, what);
}

/* Non-contiguous: kind 0 = type->type (blocking pairs), 1 = type->bytes,
 * 2 = bytes->type (both nonblocking ring). */
static void noncontig(const dt_layout *l, long count, int kind, int step) {
    int np = participants((long long)dt_payload(l, count));
    if (mt_rank >= np)
        return;
    const dt_layout *sl = kind == 2 ? NULL : l;
    const dt_layout *rl = kind == 1 ? NULL : l;
    long scount = sl ? count : (long)dt_payload(l, count);
    long rcount = rl ? count : (long)dt_payload(l, count);
    MPI_Datatype stype = sl ? sl->type : MPI_BYTE, rtype = rl ? rl->type : MPI_BYTE;
    size_t sspan = dt_span(sl, scount), rspan = dt_span(rl, rcount);
    uint8_t *sbuf = (uint8_t *)mt_malloc(sspan), *rbuf = (uint8_t *)mt_malloc(rspan);
    int to, from;
    if (kind == 0) {
        to = from = mt_rank ^ 1;
        if (to >= np)
            to = from = mt_rank;
    } else {
        to = (mt_rank + 1) % np;
        from = (mt_rank + np - 1) % np;
    }
    uint64_t sseed = mt_seed(mt_rank, to, step, count);
    uint64_t rseed = mt_seed(from, mt_rank, step, count);
    mt_fill(sbuf, sspan, sseed);
    memset(rbuf, GAP, rspan);
    int tag = step % 32768;
    MPI_Status st;
    if (kind == 0 && to != mt_rank) {
        if (mt_rank < to) {
            MPI_Send(sbuf, (int)scount, stype, to, tag, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)rcount, rtype, from, tag, MPI_COMM_WORLD, &st);
        } else {
            MPI_Recv(rbuf, (int)rcount, rtype, from, tag, MPI_COMM_WORLD, &st);
            MPI_Send(sbuf, (int)scount, stype, to, tag, MPI_COMM_WORLD);
        }
    } else {
        MPI_Request rq[2];
        MPI_Status sts[2];
        MPI_Irecv(rbuf, (int)rcount, rtype, from, tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(sbuf, (int)scount, stype, to, tag, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, sts);
        st = sts[0];
    }
    static const char *kinds[] = {"type->type", "type->bytes", "bytes->type"};
    char what[200];
    snprintf(what, sizeof what, "%s %s, %ld elements (%zu payload bytes) from rank %d", l->name,
             kinds[kind], count, dt_payload(l, count), from);
    int got = -1;
    MPI_Get_count(&st, rtype, &got);
    MT_CHECK(st.MPI_SOURCE == from && st.MPI_TAG == tag && got == (int)rcount,
             "%s: status source %d tag %d count %d, expected %d %d %ld", what, st.MPI_SOURCE,
             st.MPI_TAG, got, from, tag, rcount);
    dt_verify(rbuf, rl, rcount, sl, rseed, GAP, what);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "p2p");
    g_max = mt_max_bytes(64LL << 20);
    long long sizes[128];
    int nsizes = build_sizes(sizes, 128);
    long long biggest = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > biggest)
            biggest = sizes[i];
    uint8_t *sbuf = (uint8_t *)mt_malloc((size_t)biggest + GUARD);
    uint8_t *rbuf = (uint8_t *)mt_malloc((size_t)biggest + GUARD);
    int step = 0;
    long reps = mt_iters(1, 1);

    for (long rep = 0; rep < reps; rep++) {
        for (int i = 0; i < nsizes; i++) {
            mt_step("blocking contiguous %lld B", sizes[i]);
            contig_blocking(sizes[i], step++, sbuf, rbuf);
        }
        for (int i = 0; i < nsizes; i++) {
            mt_step("nonblocking contiguous %lld B, receive first", sizes[i]);
            contig_ring(sizes[i], step++, 1, sbuf, rbuf);
            mt_step("nonblocking contiguous %lld B, send first", sizes[i]);
            contig_ring(sizes[i], step++, 0, sbuf, rbuf);
        }
    }
    free(sbuf);
    free(rbuf);

    for (int t = 0; t < DT_NLAYOUTS; t++) {
        dt_layout l;
        dt_make(t, &l);
        /* payload from one element up to the cap, by factors of 4 plus odd
         * counts, then the largest count that fits the cap */
        /* the vector goes up to the full cap; the others (slow to pack: many
         * small blocks) to 8 MiB, the 1-byte-block hvector to 1 MiB */
        long long cap = t == DT_VECTOR            ? g_max
                        : t == DT_HVECTOR_RESIZED ? (1LL << 20)
                                                  : (8LL << 20);
        if (cap > g_max)
            cap = g_max;
        long counts[32], nc = 0;
        for (long count = 1; (long long)dt_payload(&l, count) <= cap && nc < 30;
             count = count < 4 ? count + 1 : count * 4 + 1)
            counts[nc++] = count;
        long top = (long)(cap / l.payload);
        if (nc > 0 && top > counts[nc - 1])
            counts[nc++] = top;
        for (long c = 0; c < nc; c++) {
            for (int kind = 0; kind < 3; kind++) {
                mt_step("%s kind %d count %ld", l.name, kind, counts[c]);
                noncontig(&l, counts[c], kind, step++);
            }
        }
        mt_step("%s count 0", l.name);
        noncontig(&l, 0, 0, step++);
        dt_free(&l);
    }
    return mt_finish();
}
