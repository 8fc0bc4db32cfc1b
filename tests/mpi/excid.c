/* excid: communicators with extended ids (MPI 4.0's MPI_Comm_create_from_group;
 * Open MPI 5.0 gives them an extended id and a local index that differs
 * between processes, and needs a pml that announces
 * MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID).
 *
 * Odd ranks first create communicators of their own (MPI_Comm_dup of
 * MPI_COMM_SELF), so their next local index is higher than the even ranks':
 * the two communicators made from the group of MPI_COMM_WORLD then have
 * different local indexes on neighbouring ranks, and a message only arrives
 * if its sender used the receiver's index. On both, with the same tags:
 * ring exchanges at eager and rendezvous sizes (posted and unexpected),
 * MPI_ANY_SOURCE, Ssend, a persistent send, Probe, and Allreduce; messages
 * must not cross between the two communicators or MPI_COMM_WORLD.
 *
 * Open MPI 5.0 has MPI_Comm_create_from_group although its MPI_VERSION is
 * still 3 (it does not claim all of MPI 4.0). Without it (Open MPI 4.1, or
 * another MPI before 4.0) rank 0 prints "excid: SKIP: <reason>" and the
 * program exits 0; run-suite lists it as SKIP.
 */
#include "mt.h"

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)

enum { NCOMM = 2, EXTRA = 3 };
static const long long sizes[] = {0, 8, 1000, 8192, 100000, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Ring exchange of one size on comm `c` (index k): the receive posted before
 * the send when `posted`, after a barrier otherwise (unexpected). */
static void ring(MPI_Comm c, int k, long long n, int posted, long it) {
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    uint8_t *s = mt_malloc((size_t)n + 1), *r = mt_malloc((size_t)n + 1);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, to, k * 100 + posted, it + n));
    MPI_Request rq[2];
    MPI_Status st[2];
    int tag = 7; /* the same tag on every communicator */
    if (posted) {
        MPI_Irecv(r, (int)n, MPI_BYTE, from, tag, c, &rq[0]);
        MPI_Barrier(c);
        MPI_Isend(s, (int)n, MPI_BYTE, to, tag, c, &rq[1]);
    } else {
        MPI_Isend(s, (int)n, MPI_BYTE, to, tag, c, &rq[1]);
        MPI_Barrier(c);
        MPI_Irecv(r, (int)n, MPI_BYTE, from, tag, c, &rq[0]);
    }
    MPI_Waitall(2, rq, st);
    mt_check_status(&st[0], from, tag, n, "ring receive");
    mt_verify(r, (size_t)n, mt_seed(from, mt_rank, k * 100 + posted, it + n), "ring receive");
    free(s);
    free(r);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "excid");
    mt_require_ranks(2);
    long iters = mt_iters(4, 1);
    MPI_Comm extra[EXTRA], c[NCOMM];
    int nextra = mt_rank % 2 ? EXTRA : 0;
    for (int i = 0; i < nextra; i++)
        MT_MPI(MPI_Comm_dup(MPI_COMM_SELF, &extra[i]));
    MPI_Group world;
    MT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    for (int k = 0; k < NCOMM; k++) {
        char tag[64];
        snprintf(tag, sizeof tag, "org.ompi-roce.test.excid.%d", k);
        mt_step("MPI_Comm_create_from_group %d", k);
        MT_MPI(MPI_Comm_create_from_group(world, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c[k]));
        int rk = -1, sz = -1;
        MPI_Comm_rank(c[k], &rk);
        MPI_Comm_size(c[k], &sz);
        MT_CHECK(rk == mt_rank && sz == mt_size, "communicator %d: rank %d of %d, expected %d of %d",
                 k, rk, sz, mt_rank, mt_size);
    }
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    for (long it = 0; it < iters; it++) {
        for (int k = 0; k < NCOMM; k++)
            for (int i = 0; i < NSIZES; i++)
                for (int posted = 0; posted < 2; posted++) {
                    mt_step("it %ld comm %d ring %lld B %s", it, k, sizes[i],
                            posted ? "posted" : "unexpected");
                    ring(c[k], k, sizes[i], posted, it);
                }
        /* The same tag on both new communicators and on MPI_COMM_WORLD, sent
         * in the order world, c1, c0 and received in the order c0, c1, world:
         * each receive must get its own communicator's message. */
        mt_step("it %ld no crossing", it);
        int sv[3] = {(int)(1000 + it), (int)(2000 + it), (int)(3000 + it)}, rv[3] = {-1, -1, -1};
        MPI_Request rq[6];
        MPI_Status st[6];
        MPI_Isend(&sv[0], 1, MPI_INT, to, 9, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&sv[1], 1, MPI_INT, to, 9, c[1], &rq[1]);
        MPI_Isend(&sv[2], 1, MPI_INT, to, 9, c[0], &rq[2]);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Irecv(&rv[2], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c[0], &rq[3]);
        MPI_Irecv(&rv[1], 1, MPI_INT, from, 9, c[1], &rq[4]);
        MPI_Irecv(&rv[0], 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &rq[5]);
        MPI_Waitall(6, rq, st);
        MT_CHECK(rv[0] == sv[0] && rv[1] == sv[1] && rv[2] == sv[2],
                 "messages crossed communicators: world/c1/c0 got %d/%d/%d, expected %d/%d/%d",
                 rv[0], rv[1], rv[2], sv[0], sv[1], sv[2]);
        mt_check_status(&st[3], from, 9, sizeof(int), "ANY_SOURCE receive on c0");
        /* Ssend, Probe and a persistent send on c[1]. */
        mt_step("it %ld ssend probe persistent", it);
        long long v = 5000 + it, got = -1;
        MPI_Request ps;
        MPI_Send_init(&v, 1, MPI_LONG_LONG, to, 11, c[1], &ps);
        MPI_Start(&ps);
        MPI_Status pst;
        MPI_Probe(from, 11, c[1], &pst);
        mt_check_status(&pst, from, 11, sizeof v, "Probe on c1");
        MPI_Recv(&got, 1, MPI_LONG_LONG, from, 11, c[1], MPI_STATUS_IGNORE);
        MPI_Wait(&ps, MPI_STATUS_IGNORE);
        MPI_Request_free(&ps);
        MT_CHECK(got == v, "persistent send on c1: got %lld, expected %lld", got, v);
        got = -1;
        MPI_Request sr;
        MPI_Irecv(&got, 1, MPI_LONG_LONG, from, 12, c[0], &sr);
        MPI_Ssend(&v, 1, MPI_LONG_LONG, to, 12, c[0]);
        MPI_Wait(&sr, MPI_STATUS_IGNORE);
        MT_CHECK(got == v, "Ssend on c0: got %lld, expected %lld", got, v);
        for (int k = 0; k < NCOMM; k++) {
            long mine = mt_rank + 1 + it, sum = 0;
            MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c[k]);
            long want = (long)mt_size * (mt_size + 1) / 2 + (long)mt_size * it;
            MT_CHECK(sum == want, "Allreduce on c%d: %ld, expected %ld", k, sum, want);
        }
    }
    for (int k = 0; k < NCOMM; k++)
        MPI_Comm_free(&c[k]);
    for (int i = 0; i < nextra; i++)
        MPI_Comm_free(&extra[i]);
    MPI_Group_free(&world);
    return mt_finish();
}

#else

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "excid");
    if (mt_rank == 0)
        printf("excid: SKIP: no MPI_Comm_create_from_group (MPI 4.0) in this MPI (%d.%d)\n",
               MPI_VERSION, MPI_SUBVERSION);
    MPI_Finalize();
    return 0;
}

#endif
