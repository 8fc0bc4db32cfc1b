/* cancel: a receive nobody matches can be cancelled (MPI_Test_cancelled true,
 * the buffer untouched) and a message sent later with that envelope goes to the
 * next receive instead (not lost into the cancelled one); a cancelled
 * persistent receive can be started again; and for a receive that a message
 * may already have matched, exactly one of two outcomes is correct: not
 * cancelled with the data delivered, or cancelled with the message still
 * there for the next receive. Anything else (lost or duplicated) fails.
 */
#include "mt.h"

static void cancel_unmatched(long it) {
    int peer = mt_rank ^ 1;
    if (peer >= mt_size) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    int64_t v = -5, w = -6;
    MPI_Request rq;
    MPI_Status st;
    int src = it % 2 ? MPI_ANY_SOURCE : peer;
    MPI_Irecv(&v, 1, MPI_INT64_T, src, 11, MPI_COMM_WORLD, &rq);
    MPI_Cancel(&rq);
    MPI_Wait(&rq, &st);
    int c = 0;
    MPI_Test_cancelled(&st, &c);
    MT_CHECK(c && v == -5, "cancel of an unmatched receive (source %d): cancelled=%d, buffer %lld",
             src, c, (long long)v);
    MPI_Barrier(MPI_COMM_WORLD);
    /* the same envelope now really arrives: it must go to a new receive */
    int64_t x = 300 + mt_rank;
    MPI_Request sr;
    MPI_Isend(&x, 1, MPI_INT64_T, peer, 11, MPI_COMM_WORLD, &sr);
    MPI_Recv(&w, 1, MPI_INT64_T, src, 11, MPI_COMM_WORLD, &st);
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    MT_CHECK(w == 300 + peer && v == -5,
             "after cancel: new receive got %lld (expected %d), the "
             "cancelled buffer holds %lld",
             (long long)w, 300 + peer, (long long)v);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void cancel_persistent(long it) {
    int64_t v = -1;
    MPI_Request rq;
    MPI_Status st;
    int c = 0;
    MPI_Recv_init(&v, 1, MPI_INT64_T, MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &rq);
    for (int k = 0; k < 3; k++) {
        MPI_Start(&rq);
        MPI_Cancel(&rq);
        MPI_Wait(&rq, &st);
        MPI_Test_cancelled(&st, &c);
        MT_CHECK(c, "cancel of started persistent receive (round %d): not cancelled", k);
    }
    /* still usable: a self message through it */
    int64_t x = 77 + it;
    MPI_Start(&rq);
    MPI_Send(&x, 1, MPI_INT64_T, mt_rank, 12, MPI_COMM_WORLD);
    MPI_Wait(&rq, &st);
    MPI_Test_cancelled(&st, &c);
    MT_CHECK(!c && v == 77 + it && st.MPI_SOURCE == mt_rank,
             "persistent receive after cancels: "
             "cancelled=%d value %lld source %d",
             c, (long long)v, st.MPI_SOURCE);
    MPI_Request_free(&rq);
}

/* race: receive posted, the message sent, then cancel */
static void cancel_race(long it) {
    int peer = mt_rank ^ 1;
    if (peer >= mt_size) { /* the same four barriers as the others */
        for (int k = 0; k < 4; k++)
            MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    int64_t v = -1, w = -1, x = 500 + it * 10 + mt_rank;
    MPI_Request rq, sr;
    MPI_Status st;
    MPI_Irecv(&v, 1, MPI_INT64_T, peer, 13, MPI_COMM_WORLD, &rq);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Isend(&x, 1, MPI_INT64_T, peer, 13, MPI_COMM_WORLD, &sr);
    if (it % 2)
        MPI_Barrier(MPI_COMM_WORLD); /* odd rounds: the message surely arrived */
    MPI_Cancel(&rq);
    MPI_Wait(&rq, &st);
    int c = 0;
    MPI_Test_cancelled(&st, &c);
    int64_t expect = 500 + it * 10 + peer;
    if (c) {
        MT_CHECK(v == -1, "cancelled receive changed its buffer to %lld", (long long)v);
        MPI_Recv(&w, 1, MPI_INT64_T, peer, 13, MPI_COMM_WORLD, &st);
        MT_CHECK(w == expect, "receive was cancelled but the message then got %lld, expected %lld",
                 (long long)w, (long long)expect);
    } else {
        MT_CHECK(v == expect && st.MPI_SOURCE == peer && st.MPI_TAG == 13,
                 "receive not cancelled (it had matched) but holds %lld from %d tag %d, expected "
                 "%lld",
                 (long long)v, st.MPI_SOURCE, st.MPI_TAG, (long long)expect);
    }
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    if (!(it % 2))
        MPI_Barrier(MPI_COMM_WORLD);
    /* nothing left over: an Iprobe after a barrier finds no tag-13 message */
    MPI_Barrier(MPI_COMM_WORLD);
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, &flag, &st);
    MT_CHECK(!flag, "a tag-13 message is left over after the cancel race (duplicated)");
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "cancel");
    long iters = mt_iters(50, 4);
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld cancel unmatched", it);
        cancel_unmatched(it);
        mt_step("it %ld cancel persistent", it);
        cancel_persistent(it);
        mt_step("it %ld cancel race", it);
        cancel_race(it);
    }
    return mt_finish();
}
