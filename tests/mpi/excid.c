/* excid: communicators with extended ids (MPI 4.0's MPI_Comm_create_from_group;
 * Open MPI 5.0 gives them an extended id and a local index that differs
 * between processes, and needs a pml that announces
 * MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID).
 *
 * Odd ranks first create communicators of their own (MPI_Comm_dup of
 * MPI_COMM_SELF), so their next local index is higher than the even ranks':
 * the communicators made from the group of MPI_COMM_WORLD then have
 * different local indexes on neighbouring ranks, and a message only arrives
 * if its sender used the receiver's index. On two of them, with the same
 * tags: ring exchanges in both directions at eager and rendezvous sizes
 * (posted and unexpected), MPI_ANY_SOURCE, Ssend, a persistent send,
 * Probe, and Allreduce; messages must not cross between the two
 * communicators or MPI_COMM_WORLD.
 *
 * The first messages on a fresh communicator: on a third one, before
 * anything else is sent on it, every rank sends three messages (eager,
 * rendezvous, eager, same tag) to every rank, itself included, at once:
 * the first go by extended id while the peers' answers are in flight (pml
 * roce's handshake in both directions at the same time), later ones with
 * the index learnt; each source's three must arrive complete and in order.
 * A message sent by the application cannot precede the receiver's
 * communicator (creation ends with a barrier over the new communicator);
 * the barrier's own messages can: the program sets pml_roce_test_ext_delay
 * (unless the environment does), so that under pml roce even ranks add
 * each new communicator 100 ms late and their children's barrier messages
 * wait for it by extended id; it then checks that pml roce counted such
 * messages (pvar pml_roce_ext_early_arrivals, summed over ranks, shown with
 * ROCE_TEST_VERBOSE=1), and that the handshake ends: each rank sends at most
 * 3 x ranks x (FIRST + 2) messages behind an EXT header
 * (pml_roce_ext_headers_sent), the rest with the index learnt.
 *
 * Open MPI 5.0 has MPI_Comm_create_from_group although its MPI_VERSION is
 * still 3 (it does not claim all of MPI 4.0). Without it (Open MPI 4.1, or
 * another MPI before 4.0) rank 0 prints "excid: SKIP: <reason>" and the
 * program exits 0; run-suite lists it as SKIP.
 */
#include "mt.h"

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)

enum { NCOMM = 2, EXTRA = 3, FIRST = 3 };
static const long long sizes[] = {0, 8, 1000, 8192, 100000, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Ring exchange of one size on comm `c` (index k) to the next rank (dir 1)
 * or the previous one (dir -1): the receive posted before the send when
 * `posted`, after a barrier otherwise (unexpected). */
static void ring(MPI_Comm c, int k, long long n, int posted, int dir, long it) {
    int to = (mt_rank + mt_size + dir) % mt_size, from = (mt_rank + mt_size - dir) % mt_size;
    uint8_t *s = mt_malloc((size_t)n + 1), *r = mt_malloc((size_t)n + 1);
    int step = k * 100 + posted * 10 + (dir > 0);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, to, step, it + n));
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
    mt_verify(r, (size_t)n, mt_seed(from, mt_rank, step, it + n), "ring receive");
    free(s);
    free(r);
}

/* The first messages on a fresh communicator f: FIRST messages of the sizes
 * below to every rank at once, then received per source in order. */
static void first_messages(MPI_Comm f) {
    static const long long fsz[FIRST] = {64, 200000, 8};
    int n = mt_size * FIRST;
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * n);
    uint8_t **sb = mt_malloc(sizeof(uint8_t *) * n), **rb = mt_malloc(sizeof(uint8_t *) * n);
    for (int p = 0; p < mt_size; p++)
        for (int j = 0; j < FIRST; j++) {
            int i = p * FIRST + j;
            sb[i] = mt_malloc((size_t)fsz[j]);
            rb[i] = mt_malloc((size_t)fsz[j]);
            mt_fill(sb[i], (size_t)fsz[j], mt_seed(mt_rank, p, 900 + j, 0));
            MPI_Isend(sb[i], (int)fsz[j], MPI_BYTE, p, 3, f, &rq[i]);
        }
    /* Sources in reverse order, each one's messages in the order sent. */
    for (int p = mt_size - 1; p >= 0; p--)
        for (int j = 0; j < FIRST; j++) {
            int i = p * FIRST + j;
            MPI_Status st;
            MPI_Recv(rb[i], (int)fsz[j], MPI_BYTE, p, 3, f, &st);
            mt_check_status(&st, p, 3, fsz[j], "first messages (out of order?)");
            mt_verify(rb[i], (size_t)fsz[j], mt_seed(p, mt_rank, 900 + j, 0), "first messages");
        }
    MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(rq);
}

/* Two of pml roce's counters (MPI_T; a counter counts from the opening of
 * its handle): messages by extended id that arrived before their
 * communicator, and messages sent behind an EXT header. pv_open() before
 * the communicators are made, pv_read() at the end (-1: no such variable,
 * another pml). */
static MPI_T_pvar_session pv_ses;
static MPI_T_pvar_handle pv_h[2] = {MPI_T_PVAR_HANDLE_NULL, MPI_T_PVAR_HANDLE_NULL};
static const char *const pv_name[2] = {"pml_roce_ext_early_arrivals", "pml_roce_ext_headers_sent"};

static void pv_open(void) {
    int provided, index, count;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    MPI_T_pvar_session_create(&pv_ses);
    for (int i = 0; i < 2; i++)
        if (MPI_T_pvar_get_index(pv_name[i], MPI_T_PVAR_CLASS_COUNTER, &index) == MPI_SUCCESS)
            MPI_T_pvar_handle_alloc(pv_ses, index, NULL, &pv_h[i], &count);
}

static void pv_read(long long v[2]) {
    for (int i = 0; i < 2; i++) {
        unsigned long long val = 0;
        v[i] = -1;
        if (pv_h[i] != MPI_T_PVAR_HANDLE_NULL && MPI_T_pvar_read(pv_ses, pv_h[i], &val) == MPI_SUCCESS)
            v[i] = (long long)val;
        if (pv_h[i] != MPI_T_PVAR_HANDLE_NULL)
            MPI_T_pvar_handle_free(pv_ses, &pv_h[i]);
    }
    MPI_T_pvar_session_free(&pv_ses);
    MPI_T_finalize();
}

int main(int argc, char **argv) {
    /* pml roce: even ranks of MPI_COMM_WORLD add each new communicator 100 ms
     * late, so their children in the creation's barrier send to them before
     * it exists (other pmls ignore the variable). */
    setenv("OMPI_MCA_pml_roce_test_ext_delay", "100", 0);
    mt_init(&argc, &argv, "excid");
    mt_require_ranks(2);
    pv_open();
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
    mt_step("first messages on a fresh communicator");
    MPI_Comm fresh;
    MT_MPI(MPI_Comm_create_from_group(world, "org.ompi-roce.test.excid.fresh", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &fresh));
    first_messages(fresh);
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    for (long it = 0; it < iters; it++) {
        for (int k = 0; k < NCOMM; k++)
            for (int i = 0; i < NSIZES; i++)
                for (int posted = 0; posted < 2; posted++)
                    for (int dir = 1; dir >= -1; dir -= 2) {
                        mt_step("it %ld comm %d ring %s %lld B %s", it, k, dir > 0 ? "up" : "down",
                                sizes[i], posted ? "posted" : "unexpected");
                        ring(c[k], k, sizes[i], posted, dir, it);
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
    MPI_Comm_free(&fresh);
    for (int k = 0; k < NCOMM; k++)
        MPI_Comm_free(&c[k]);
    /* Under pml roce (the variables exist): with the delay above, some
     * messages must have waited for their communicator and been delivered;
     * and the handshake must end: once a peer answered, messages to it go
     * with plain headers. Only the first messages to each peer on each of
     * the 3 communicators may go behind an EXT header (FIRST at once on the
     * fresh one, a few more while an answer is in flight), against the
     * hundreds each rank sends on them. */
    long long pv[2], sum = 0;
    pv_read(pv);
    int have = pv[0] >= 0 && pv[1] >= 0, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) {
        MPI_Reduce(&pv[0], &sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (mt_verbose)
            printf("excid: rank %d sent %lld messages behind an EXT header\n", mt_rank, pv[1]);
        if (mt_rank == 0 && mt_verbose)
            printf("excid: %lld messages by extended id arrived before their communicator "
                   "(pml_roce_ext_early_arrivals, all ranks)\n", sum);
        const char *delay = getenv("OMPI_MCA_pml_roce_test_ext_delay");
        if (mt_rank == 0 && delay != NULL && atoi(delay) > 0)
            MT_CHECK(sum > 0, "no message waited for its communicator although even ranks "
                              "added theirs %s ms late", delay);
        long long most = 3LL * mt_size * (FIRST + 2);
        MT_CHECK(pv[1] <= most, "%lld messages sent behind an EXT header, more than %lld: the "
                                "handshake does not end (peers' indexes never learnt?)", pv[1], most);
    }
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
