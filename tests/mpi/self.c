/* self: messages a rank sends to itself: Isend then Recv and Irecv then
 * Send, from 0 B to 16 MiB; wildcard receives (ANY_SOURCE/ANY_TAG) of own
 * messages in order; Issend to self (incomplete until the receive); probe and
 * mprobe of own messages; non-contiguous types to self; Sendrecv to self; a
 * blocking receive too small for its (already arrived) message: eager and
 * rendezvous sizes give MPI_ERR_TRUNCATE, the first bytes, nothing past the
 * buffer.
 */
#include "dtlayout.h"

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "self");
    long long cap = mt_max_bytes(16 << 20);
    long iters = mt_iters(3, 1);
    int me = mt_rank;
    uint8_t *s = (uint8_t *)mt_malloc((size_t)cap + 64),
            *r = (uint8_t *)mt_malloc((size_t)cap + 64);
    for (long it = 0; it < iters; it++) {
        int step = 0;
        for (long long n = 0; n <= cap; n = n < 2 ? n + 1 : n * 4 - 1) {
            char what[96];
            MPI_Request rq;
            MPI_Status st;
            mt_step("it %ld Isend+Recv %lld B", it, n);
            mt_fill(s, (size_t)n, mt_seed(me, me, step, it));
            memset(r, 0xEE, (size_t)n + 64);
            MPI_Isend(s, (int)n, MPI_BYTE, me, 1, MPI_COMM_WORLD, &rq);
            MPI_Recv(r, (int)n + 64, MPI_BYTE, me, 1, MPI_COMM_WORLD, &st);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
            snprintf(what, sizeof what, "self Isend+Recv %lld B", n);
            if (mt_check_status(&st, me, 1, n, what))
                mt_verify(r, (size_t)n, mt_seed(me, me, step, it), what);
            mt_verify_fill(r + n, 64, 0xEE, what);
            step++;
            mt_step("it %ld Irecv+Send %lld B", it, n);
            mt_fill(s, (size_t)n, mt_seed(me, me, step, it));
            MPI_Irecv(r, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq);
            MPI_Send(s, (int)n, MPI_BYTE, me, 2, MPI_COMM_WORLD);
            MPI_Wait(&rq, &st);
            snprintf(what, sizeof what, "self Irecv(ANY,ANY)+Send %lld B", n);
            if (mt_check_status(&st, me, 2, n, what))
                mt_verify(r, (size_t)n, mt_seed(me, me, step, it), what);
            step++;
        }
        /* a blocking receive too small for a message that is already here */
        MPI_Comm rc_comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &rc_comm);
        MPI_Comm_set_errhandler(rc_comm, MPI_ERRORS_RETURN);
        static const long long tsizes[] = {100, 1 << 20};
        for (int k = 0; k < 2; k++) {
            long long n = tsizes[k] > cap ? cap : tsizes[k], room = n / 2;
            char what[96];
            MPI_Request rq;
            MPI_Status st;
            mt_step("it %ld Isend+Recv %lld B into %lld B", it, n, room);
            snprintf(what, sizeof what, "self Isend %lld B + Recv into %lld B", n, room);
            mt_fill(s, (size_t)n, mt_seed(me, me, 90 + k, it));
            memset(r, 0xEE, (size_t)room + 64);
            MPI_Isend(s, (int)n, MPI_BYTE, me, 6, rc_comm, &rq);
            int rc = MPI_Recv(r, (int)room, MPI_BYTE, me, 6, rc_comm, &st), cls = rc;
            if (rc != MPI_SUCCESS)
                MPI_Error_class(rc, &cls);
            MT_CHECK(cls == MPI_ERR_TRUNCATE, "%s: error class %d, expected MPI_ERR_TRUNCATE",
                     what, cls);
            int cnt = -1;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            MT_CHECK(st.MPI_SOURCE == me && st.MPI_TAG == 6 && (cnt == room || cnt == n),
                     "%s: status source %d tag %d count %d", what, st.MPI_SOURCE, st.MPI_TAG, cnt);
            mt_verify(r, (size_t)room, mt_seed(me, me, 90 + k, it), what);
            if (mt_strict()) /* ob1 4.1.4 writes past the buffer (truncate.c) */
                mt_verify_fill(r + room, 64, 0xEE, what);
            MT_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s: the send", what);
        }
        MPI_Comm_free(&rc_comm);
        /* order of several own messages through wildcards */
        mt_step("it %ld ordering through wildcards", it);
        int64_t v[6];
        MPI_Request rq[6];
        for (int i = 0; i < 6; i++) {
            v[i] = 100 * it + i;
            MPI_Isend(&v[i], 1, MPI_INT64_T, me, i % 2 ? 7 : 3, MPI_COMM_WORLD, &rq[i]);
        }
        for (int i = 0; i < 6; i++) {
            int64_t x;
            MPI_Status st;
            MPI_Recv(&x, 1, MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MT_CHECK(x == 100 * it + i && st.MPI_TAG == (i % 2 ? 7 : 3) && st.MPI_SOURCE == me,
                     "self wildcard receive #%d got %lld tag %d", i, (long long)x, st.MPI_TAG);
        }
        MPI_Waitall(6, rq, MPI_STATUSES_IGNORE);
        /* Issend to self */
        mt_step("it %ld issend to self", it);
        int64_t y = 5, z = 0;
        MPI_Request sr;
        int flag = 0;
        MPI_Issend(&y, 1, MPI_INT64_T, me, 4, MPI_COMM_WORLD, &sr);
        for (int k = 0; k < 100; k++)
            MPI_Test(&sr, &flag, MPI_STATUS_IGNORE);
        MT_CHECK(!flag, "Issend to self completed before the receive was posted");
        /* probe and mprobe it */
        MPI_Status st;
        MPI_Probe(me, 4, MPI_COMM_WORLD, &st);
        mt_check_status(&st, me, 4, 8, "probe of own message");
        MPI_Message msg;
        MPI_Mprobe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &msg, &st);
        MPI_Mrecv(&z, 1, MPI_INT64_T, &msg, &st);
        if (!flag)
            MPI_Wait(&sr, MPI_STATUS_IGNORE);
        MT_CHECK(z == 5, "mrecv of own ssend got %lld", (long long)z);
        /* non-contiguous to self */
        mt_step("it %ld datatypes to self", it);
        for (int t = 0; t < DT_NLAYOUTS; t++) {
            dt_layout l;
            dt_make(t, &l);
            long count = 1000 + it;
            size_t span = dt_span(&l, count);
            uint8_t *a = (uint8_t *)mt_malloc(span), *b = (uint8_t *)mt_malloc(span);
            mt_fill(a, span, mt_seed(me, me, 50 + t, it));
            memset(b, 0xEE, span);
            MPI_Sendrecv(a, (int)count, l.type, me, 9, b, (int)count, l.type, me, 9, MPI_COMM_WORLD,
                         &st);
            char what[64];
            snprintf(what, sizeof what, "self Sendrecv of %ld %s", count, l.name);
            dt_verify(b, &l, count, &l, mt_seed(me, me, 50 + t, it), 0xEE, what);
            free(a), free(b);
            dt_free(&l);
        }
    }
    free(s), free(r);
    return mt_finish();
}
