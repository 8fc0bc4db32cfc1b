/* manycomm: more live communicators than 16-bit communicator ids allow.
 *
 * Open MPI bounds the communicators a process holds at once by the pml's
 * pml_max_contextid (every live communicator has an index below it): ob1
 * announces 65535, pml roce under Open MPI 5.0 2^20 - 1. This program makes
 * NCOMM = 66,000 duplicates of MPI_COMM_WORLD and keeps them all alive, so
 * the last ones have indexes above 65,535 (pml roce carries those in an
 * EXT header by index), then one more from MPI_Comm_create_from_group (an
 * extended id and an index above 16 bits: the handshake, then EXT by
 * index). On a spread of them (the first, around 2^15 and 2^16, the last
 * ones) it exchanges messages in a ring at eager and rendezvous sizes,
 * posted and unexpected, receives from MPI_ANY_SOURCE, checks that the same
 * tag on two communicators never crosses, and runs an Allreduce; all data
 * is verified. It runs at up to 4 ranks (above, "SKIP": 66,000 duplicates
 * take minutes on an oversubscribed host).
 *
 * Open MPI 4.1's communicator ids are 16 bits everywhere (its pml interface,
 * and pml roce announces 65535 there, as ob1): rank 0 prints
 * "manycomm: SKIP: <reason>" and the program exits 0.
 */
#include "mt.h"

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5

enum { NCOMM = 66000, MAXRANKS = 4 };
static const long long sizes[] = {0, 8, 1000, 8192, 100000};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Ring exchange of n bytes on c: receive posted before the send when
 * `posted`, after a barrier otherwise (unexpected). `k` tells communicators
 * apart in the data. */
static void ring(MPI_Comm c, int k, long long n, int posted) {
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    uint8_t *s = mt_malloc((size_t)n + 1), *r = mt_malloc((size_t)n + 1);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, to, k, n + posted));
    MPI_Request rq[2];
    MPI_Status st[2];
    int src = posted ? MPI_ANY_SOURCE : from;
    if (posted) {
        MPI_Irecv(r, (int)n, MPI_BYTE, src, 5, c, &rq[0]);
        MPI_Barrier(c);
        MPI_Isend(s, (int)n, MPI_BYTE, to, 5, c, &rq[1]);
    } else {
        MPI_Isend(s, (int)n, MPI_BYTE, to, 5, c, &rq[1]);
        MPI_Barrier(c);
        MPI_Irecv(r, (int)n, MPI_BYTE, src, 5, c, &rq[0]);
    }
    MPI_Waitall(2, rq, st);
    mt_check_status(&st[0], from, 5, n, "ring receive");
    mt_verify(r, (size_t)n, mt_seed(from, mt_rank, k, n + posted), "ring receive");
    free(s);
    free(r);
}

/* The same tag on a and b, sent b first, received a first: no crossing. */
static void no_crossing(MPI_Comm a, MPI_Comm b, int ka, int kb) {
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    int sv[2] = {ka * 10 + mt_rank, kb * 10 + mt_rank}, rv[2] = {-1, -1};
    MPI_Request rq[4];
    MPI_Isend(&sv[1], 1, MPI_INT, to, 6, b, &rq[0]);
    MPI_Isend(&sv[0], 1, MPI_INT, to, 6, a, &rq[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Irecv(&rv[0], 1, MPI_INT, MPI_ANY_SOURCE, 6, a, &rq[2]);
    MPI_Irecv(&rv[1], 1, MPI_INT, from, 6, b, &rq[3]);
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
    MT_CHECK(rv[0] == ka * 10 + from && rv[1] == kb * 10 + from,
             "messages crossed communicators %d and %d: got %d/%d, expected %d/%d", ka, kb, rv[0],
             rv[1], ka * 10 + from, kb * 10 + from);
}

static void exercise(MPI_Comm c, int k) {
    for (int i = 0; i < NSIZES; i++)
        for (int posted = 0; posted < 2; posted++) {
            mt_step("communicator %d: ring %lld B %s", k, sizes[i], posted ? "posted" : "unexpected");
            ring(c, k, sizes[i], posted);
        }
    long mine = mt_rank + k, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c);
    long want = (long)mt_size * (mt_size - 1) / 2 + (long)mt_size * k;
    MT_CHECK(sum == want, "Allreduce on communicator %d: %ld, expected %ld", k, sum, want);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "manycomm");
    if (mt_size > MAXRANKS) {
        /* Every MPI_Comm_dup is a few allreduces: 66,000 of them took 30 s at
         * 2 and at 4 ranks on 2 cores, but 290 s at 8 oversubscribed ranks,
         * beyond run-suite's per-program budget. */
        if (mt_rank == 0)
            printf("manycomm: SKIP: runs at 1 to %d ranks (66,000 MPI_Comm_dup at %d ranks take "
                   "minutes on an oversubscribed host)\n",
                   MAXRANKS, mt_size);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm *c = mt_malloc(sizeof(MPI_Comm) * NCOMM);
    double t = MPI_Wtime();
    for (int i = 0; i < NCOMM; i++) {
        if (i % 10000 == 0)
            mt_step("MPI_Comm_dup %d of %d (%.1f s)", i, NCOMM, MPI_Wtime() - t);
        MT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c[i]));
    }
    if (mt_rank == 0 && mt_verbose)
        printf("manycomm: %d communicators in %.1f s\n", NCOMM, MPI_Wtime() - t);
    /* One more without a parent: an extended id, an index above 16 bits. */
    MPI_Group world;
    MPI_Comm x;
    MT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    mt_step("MPI_Comm_create_from_group after %d communicators", NCOMM);
    MT_MPI(MPI_Comm_create_from_group(world, "org.ompi-roce.test.manycomm", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &x));
    const int pick[] = {0, 32767, 32768, 65534, 65535, 65536, NCOMM - 2, NCOMM - 1};
    for (int i = 0; i < (int)(sizeof pick / sizeof pick[0]); i++)
        exercise(c[pick[i]], pick[i]);
    exercise(x, NCOMM);
    mt_step("no crossing");
    no_crossing(c[NCOMM - 1], c[NCOMM - 1 - 65536], NCOMM - 1, NCOMM - 1 - 65536);
    no_crossing(x, c[NCOMM - 1], NCOMM, NCOMM - 1);
    no_crossing(c[NCOMM - 1], MPI_COMM_WORLD, NCOMM - 1, -1);
    mt_step("MPI_Comm_free");
    MPI_Comm_free(&x);
    MPI_Group_free(&world);
    for (int i = NCOMM - 1; i >= 0; i--)
        MPI_Comm_free(&c[i]);
    free(c);
    return mt_finish();
}

#else

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "manycomm");
    if (mt_rank == 0)
        printf("manycomm: SKIP: Open MPI %d.%d keeps communicator ids within 16 bits "
               "(pml_max_contextid 65535 in its pml interface): at most 65,535 live "
               "communicators, fewer than this test needs (66,000)\n",
               OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION);
    MPI_Finalize();
    return 0;
}

#endif
