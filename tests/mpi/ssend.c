/* ssend: a synchronous send completes only after the receiver matched it.
 *
 * Proof without timing: rank 0 starts MPI_Issend to rank 1 and polls
 * MPI_Test for a while; rank 1 has not posted the receive and will not until
 * rank 0 tells it (on another tag) that the Issend was still incomplete. So an
 * Issend completing early is caught every time, for eager, rendezvous and
 * zero-byte sizes. Then with timing: rank 0 starts its clock and lets rank 1
 * go; rank 1 posts its receive 200 ms later, and rank 0's blocking MPI_Ssend
 * must not return sooner (causal, so load cannot make it fail falsely). And to self: an Issend to the own
 * rank stays incomplete until the own receive is posted.
 */
#include "mt.h"

static const long long kSizes[] = {0, 8, 1024, 65536, 1 << 20};

static void issend_flag(long long n, int step) {
    if (mt_rank == 0) {
        uint8_t *b = (uint8_t *)mt_malloc((size_t)n);
        mt_fill(b, (size_t)n, mt_seed(0, 1, step, n));
        MPI_Request rq;
        int flag = 0;
        MPI_Issend(b, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &rq);
        for (int k = 0; k < 2000 && !flag; k++) {
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
            if (k % 500 == 0)
                mt_sleep_ms(1);
        }
        MT_CHECK(!flag, "Issend of %lld B completed before the receiver posted its receive", n);
        MPI_Send(&flag, 1, MPI_INT, 1, 2, MPI_COMM_WORLD); /* "you may post now" */
        if (!flag)
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        free(b);
    } else if (mt_rank == 1) {
        int f;
        MPI_Recv(&f, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        uint8_t *b = (uint8_t *)mt_malloc((size_t)n);
        MPI_Status st;
        MPI_Recv(b, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
        char what[64];
        snprintf(what, sizeof what, "ssend %lld B", n);
        if (mt_check_status(&st, 0, 1, n, what))
            mt_verify(b, (size_t)n, mt_seed(0, 1, step, n), what);
        free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void ssend_timed(long long n, double delay_ms, int step) {
    uint8_t *b = (uint8_t *)mt_malloc((size_t)n);
    int z = 0;
    if (mt_rank == 0) {
        mt_fill(b, (size_t)n, mt_seed(0, 1, step, n));
        /* The clock starts before rank 1 can know it may start waiting: its
         * receive is posted at least delay_ms after this instant, whatever
         * the scheduler does to either rank, so a correct MPI_Ssend cannot
         * return sooner. (An early return can only be missed, never
         * invented, by rank 0 being descheduled.) */
        double t = MPI_Wtime();
        MPI_Send(&z, 1, MPI_INT, 1, 5, MPI_COMM_WORLD); /* "start waiting now" */
        MPI_Ssend(b, (int)n, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
        double el = (MPI_Wtime() - t) * 1e3;
        MT_CHECK(el >= delay_ms,
                 "MPI_Ssend of %lld B returned after %.1f ms though the "
                 "receive was posted only after %.0f ms",
                 n, el, delay_ms);
    } else if (mt_rank == 1) {
        MPI_Recv(&z, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mt_sleep_ms(delay_ms);
        MPI_Status st;
        MPI_Recv(b, (int)n, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &st);
        if (mt_check_status(&st, 0, 3, n, "timed ssend"))
            mt_verify(b, (size_t)n, mt_seed(0, 1, step, n), "timed ssend");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(b);
}

static void ssend_self(long long n, int step) {
    uint8_t *s = (uint8_t *)mt_malloc((size_t)n), *r = (uint8_t *)mt_malloc((size_t)n);
    mt_fill(s, (size_t)n, mt_seed(mt_rank, mt_rank, step, n));
    MPI_Request rq;
    int flag = 0;
    MPI_Issend(s, (int)n, MPI_BYTE, mt_rank, 4, MPI_COMM_WORLD, &rq);
    for (int k = 0; k < 1000 && !flag; k++)
        MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
    MT_CHECK(!flag, "Issend of %lld B to self completed with no receive posted", n);
    MPI_Status st;
    MPI_Recv(r, (int)n, MPI_BYTE, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &st);
    if (!flag)
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (mt_check_status(&st, mt_rank, 4, n, "ssend to self"))
        mt_verify(r, (size_t)n, mt_seed(mt_rank, mt_rank, step, n), "ssend to self");
    free(s), free(r);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "ssend");
    mt_require_ranks(2);
    long long cap = mt_max_bytes(1 << 20);
    long iters = mt_iters(5, 1);
    int step = 0;
    for (long it = 0; it < iters; it++)
        for (unsigned i = 0; i < sizeof kSizes / sizeof kSizes[0]; i++) {
            long long n = kSizes[i] > cap ? cap : kSizes[i];
            mt_step("it %ld issend %lld B, receiver waits for the flag", it, n);
            issend_flag(n, step++);
            mt_step("it %ld ssend to self %lld B", it, n);
            ssend_self(n, step++);
            if (it == 0) {
                mt_step("ssend %lld B against a receive posted after 200 ms", n);
                ssend_timed(n, 200, step++);
            }
        }
    return mt_finish();
}
