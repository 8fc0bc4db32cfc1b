/* probe: MPI_Probe/MPI_Iprobe report an unexpected message's source, tag and
 * size without receiving it (the receive afterwards gets it intact);
 * MPI_Iprobe says no when nothing matches; MPI_Mprobe/MPI_Improbe remove the
 * message from matching (a normal receive with the same envelope gets the
 * *next* message; MPI_Mrecv/MPI_Imrecv get the probed one); MPI_PROC_NULL
 * gives MPI_MESSAGE_NO_PROC. Eager, rendezvous and zero-byte sizes.
 */
#include "mt.h"

static const long long kSizes[] = {0, 8, 4096, 20000, 65536, 1 << 20};

static void probe_then_recv(long long n, int step) {
    if (mt_rank == 0) {
        uint8_t *b = (uint8_t *)mt_malloc((size_t)n);
        mt_fill(b, (size_t)n, mt_seed(0, 1, step, n));
        MPI_Send(b, (int)n, MPI_BYTE, 1, 9, MPI_COMM_WORLD);
        free(b);
    } else if (mt_rank == 1) {
        MPI_Status st;
        int flag = 0;
        /* a tag nobody sends: never matches */
        MPI_Iprobe(0, 10, MPI_COMM_WORLD, &flag, &st);
        MT_CHECK(!flag, "Iprobe for tag 10 (never sent) said a message is there");
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        char what[96];
        snprintf(what, sizeof what, "Probe of a %lld B message", n);
        mt_check_status(&st, 0, 9, n, what);
        /* probing again sees the same message */
        do
            MPI_Iprobe(0, 9, MPI_COMM_WORLD, &flag, &st);
        while (!flag);
        snprintf(what, sizeof what, "second Iprobe of the %lld B message", n);
        mt_check_status(&st, 0, 9, n, what);
        int cnt = 0;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        uint8_t *b = (uint8_t *)mt_malloc((size_t)cnt);
        MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
        snprintf(what, sizeof what, "receive after probe, %lld B", n);
        mt_check_status(&st, 0, 9, n, what);
        mt_verify(b, (size_t)n, mt_seed(0, 1, step, n), what);
        free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* two messages A then B with the same envelope; mprobe A; a plain recv must
 * get B; mrecv gets A */
static void mprobe_removes(long long n, int step, int nonblocking) {
    if (mt_rank == 0) {
        uint8_t *a = (uint8_t *)mt_malloc((size_t)n), *b = (uint8_t *)mt_malloc((size_t)n + 1);
        mt_fill(a, (size_t)n, mt_seed(0, 1, step, 1));
        mt_fill(b, (size_t)n + 1, mt_seed(0, 1, step, 2));
        MPI_Request rq[2];
        MPI_Isend(a, (int)n, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(b, (int)n + 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        free(a), free(b);
    } else if (mt_rank == 1) {
        MPI_Message msg;
        MPI_Status st;
        if (nonblocking) {
            int flag = 0;
            while (!flag)
                MPI_Improbe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &flag, &msg, &st);
        } else {
            MPI_Mprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
        }
        char what[128];
        snprintf(what, sizeof what, "%s of the first (%lld B) message",
                 nonblocking ? "Improbe" : "Mprobe", n);
        mt_check_status(&st, 0, 4, n, what);
        uint8_t *a = (uint8_t *)mt_malloc((size_t)n), *b = (uint8_t *)mt_malloc((size_t)n + 1);
        MPI_Recv(b, (int)n + 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &st);
        snprintf(what, sizeof what, "plain receive after %s: must get the second message (%lld B)",
                 nonblocking ? "Improbe" : "Mprobe", n + 1);
        if (mt_check_status(&st, 0, 4, n + 1, what))
            mt_verify(b, (size_t)n + 1, mt_seed(0, 1, step, 2), what);
        if (nonblocking) {
            MPI_Request rq;
            MPI_Imrecv(a, (int)n, MPI_BYTE, &msg, &rq);
            MPI_Wait(&rq, &st);
        } else {
            MPI_Mrecv(a, (int)n, MPI_BYTE, &msg, &st);
        }
        MT_CHECK(msg == MPI_MESSAGE_NULL, "message handle not MPI_MESSAGE_NULL after (I)mrecv");
        snprintf(what, sizeof what, "%s of the probed first message (%lld B)",
                 nonblocking ? "Imrecv" : "Mrecv", n);
        if (mt_check_status(&st, 0, 4, n, what))
            mt_verify(a, (size_t)n, mt_seed(0, 1, step, 1), what);
        free(a), free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void proc_null(void) {
    MPI_Message msg;
    MPI_Status st;
    MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &msg, &st);
    MT_CHECK(msg == MPI_MESSAGE_NO_PROC, "Mprobe(MPI_PROC_NULL) did not give MPI_MESSAGE_NO_PROC");
    int x = 7, cnt = -1;
    MPI_Mrecv(&x, 1, MPI_INT, &msg, &st);
    MPI_Get_count(&st, MPI_INT, &cnt);
    MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0 && x == 7,
             "Mrecv of MPI_MESSAGE_NO_PROC: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
             cnt);
    int flag = 0;
    MPI_Iprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &st);
    MT_CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe(MPI_PROC_NULL) flag %d source %d",
             flag, st.MPI_SOURCE);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "probe");
    mt_require_ranks(2);
    long long cap = mt_max_bytes(1 << 20);
    long iters = mt_iters(10, 1);
    int step = 0;
    for (long it = 0; it < iters; it++)
        for (unsigned i = 0; i < sizeof kSizes / sizeof kSizes[0]; i++) {
            long long n = kSizes[i] > cap ? cap : kSizes[i];
            mt_step("it %ld probe %lld B", it, n);
            probe_then_recv(n, step++);
            mt_step("it %ld mprobe %lld B", it, n);
            mprobe_removes(n, step++, 0);
            mt_step("it %ld improbe %lld B", it, n);
            mprobe_removes(n, step++, 1);
        }
    mt_step("MPI_PROC_NULL");
    proc_null();
    return mt_finish();
}
