/* truncate: a message longer than the receive buffer gives MPI_ERR_TRUNCATE
 * (with MPI_ERRORS_RETURN on the communicator), with the status naming the
 * right source and tag and a count of either the bytes delivered or the full
 * message length (Open MPI's ob1 reports the latter); the bytes that fit are
 * the message's first bytes and nothing is written past the buffer.
 * Blocking MPI_Recv, MPI_Irecv+MPI_Wait, and MPI_Waitall (MPI_ERR_IN_STATUS
 * with per-request MPI_ERROR), eager and rendezvous sizes, a zero-byte
 * receive; the sender's side completes normally, and the next message on
 * the same envelope is received intact.
 *
 * Known ob1 deviation: Debian's Open MPI 4.1.4 ob1 writes up to a fragment's
 * worth of bytes past the receive buffer when it truncates (seen: 64 of 64
 * guard bytes for 64 KiB into 1000 B, over vader and tcp; 1 byte for 4096
 * into 4095 over vader). Without ROCE_TEST_STRICT that prints a "known ob1
 * deviation" line instead of failing.
 */
#include "mt.h"

enum { GUARD = 64, GAP = 0xEE };
static long g_dev; /* truncations that wrote past the buffer (non-strict) */
static char g_dev_first[200];

static int err_class(int rc) {
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

static void one(MPI_Comm c, long long sent, long long room, int how, int step) {
    int peer = mt_rank == 0 ? 1 : 0;
    if (mt_rank > 1)
        return;
    uint8_t *b = (uint8_t *)mt_malloc((size_t)(sent > room ? sent : room) + GUARD);
    if (mt_rank == 0) {
        mt_fill(b, (size_t)sent, mt_seed(0, 1, step, sent));
        int rc = MPI_Send(b, (int)sent, MPI_BYTE, 1, 8, c);
        MT_CHECK(rc == MPI_SUCCESS, "sender of a message the receiver truncates: rc %d", rc);
        /* then an intact one */
        mt_fill(b, (size_t)room, mt_seed(0, 1, step + 1000, room));
        rc = MPI_Send(b, (int)room, MPI_BYTE, 1, 8, c);
        MT_CHECK(rc == MPI_SUCCESS, "sender of the follow-up message: rc %d", rc);
    } else {
        memset(b, GAP, (size_t)room + GUARD);
        MPI_Status st;
        int rc, cls;
        static const char *hows[] = {"Recv", "Irecv+Wait", "Irecv+Waitall"};
        char what[128];
        snprintf(what, sizeof what, "%s of %lld B into %lld B", hows[how], sent, room);
        if (how == 0) {
            rc = MPI_Recv(b, (int)room, MPI_BYTE, peer, 8, c, &st);
            cls = err_class(rc);
        } else if (how == 1) {
            MPI_Request rq;
            MPI_Irecv(b, (int)room, MPI_BYTE, MPI_ANY_SOURCE, 8, c, &rq);
            rc = MPI_Wait(&rq, &st);
            cls = err_class(rc);
        } else {
            MPI_Request rq[2];
            MPI_Status sts[2];
            int64_t dummy = 0, val = 41;
            MPI_Irecv(b, (int)room, MPI_BYTE, peer, 8, c, &rq[0]);
            MPI_Isend(&val, 1, MPI_INT64_T, mt_rank, 99, c,
                      &rq[1]); /* a healthy request beside it */
            MPI_Recv(&dummy, 1, MPI_INT64_T, mt_rank, 99, c, MPI_STATUS_IGNORE);
            rc = MPI_Waitall(2, rq, sts);
            MT_CHECK(err_class(rc) == MPI_ERR_IN_STATUS,
                     "%s: Waitall returned class %d, expected "
                     "MPI_ERR_IN_STATUS",
                     what, err_class(rc));
            cls = err_class(sts[0].MPI_ERROR);
            MT_CHECK(sts[1].MPI_ERROR == MPI_SUCCESS, "%s: the healthy request's MPI_ERROR is %d",
                     what, sts[1].MPI_ERROR);
            st = sts[0];
        }
        MT_CHECK(cls == MPI_ERR_TRUNCATE, "%s: error class %d, expected MPI_ERR_TRUNCATE (%d)",
                 what, cls, MPI_ERR_TRUNCATE);
        int cnt = -1;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        MT_CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 8 && (cnt == room || cnt == sent),
                 "%s: status source %d tag %d count %d, expected source %d tag 8 count %lld "
                 "(delivered) or %lld (message length)",
                 what, st.MPI_SOURCE, st.MPI_TAG, cnt, peer, room, sent);
        if (room > 0)
            mt_verify(b, (size_t)room, mt_seed(0, 1, step, sent), what);
        if (mt_strict()) {
            mt_verify_fill(b + room, GUARD, GAP, what);
        } else {
            size_t over = 0;
            for (int i = 0; i < GUARD; i++)
                over += b[room + i] != GAP;
            if (over && g_dev++ == 0)
                snprintf(g_dev_first, sizeof g_dev_first,
                         "%s wrote %zu of %d guard bytes past "
                         "the receive buffer",
                         what, over, GUARD);
        }
        /* the next message with the same envelope arrives intact */
        rc = MPI_Recv(b, (int)room, MPI_BYTE, peer, 8, c, &st);
        MT_CHECK(rc == MPI_SUCCESS, "%s: follow-up receive rc %d", what, rc);
        snprintf(what, sizeof what, "follow-up %lld B message after a truncation", room);
        if (mt_check_status(&st, peer, 8, room, what))
            mt_verify(b, (size_t)room, mt_seed(0, 1, step + 1000, room), what);
    }
    free(b);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "truncate");
    mt_require_ranks(2);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    long long cap = mt_max_bytes(1 << 20);
    long long cases[][2] = {{100, 50},          {8, 0},          {4096, 4095}, {65536, 1000},
                            {1 << 20, 1 << 19}, {300000, 299999}, {20000, 12000}};
    long iters = mt_iters(5, 1);
    int step = 0;
    for (long it = 0; it < iters; it++)
        for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++)
            for (int how = 0; how < 3; how++) {
                long long sent = cases[k][0] > cap ? cap : cases[k][0];
                long long room = cases[k][1] >= sent ? sent - 1 : cases[k][1];
                if (room < 0)
                    continue;
                mt_step("it %ld truncate %lld into %lld (%d)", it, sent, room, how);
                one(c, sent, room, how, step++);
                MPI_Barrier(c);
            }
    MPI_Comm_free(&c);
    if (g_dev)
        printf("truncate: known ob1 deviation on rank %d: %ld truncated receives wrote past the "
               "buffer; first: %s (ROCE_TEST_STRICT=1 makes this a failure)\n",
               mt_rank, g_dev, g_dev_first);
    return mt_finish();
}
