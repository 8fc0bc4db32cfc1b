/* wildcards: MPI_ANY_SOURCE and MPI_ANY_TAG match in posting order, across
 * specific and wildcard receives mixed (an implementation that keeps them in
 * separate queues must still honour the posting order); unexpected messages
 * are taken by wildcard receives in arrival order; and a receive with
 * MPI_ANY_TAG posted on a communicator must not match the collectives' own
 * traffic on that communicator (they use negative tags).
 */
#include "mt.h"

static void send_tagged(int to, int tag, int64_t v, MPI_Comm c) {
    MPI_Send(&v, 1, MPI_INT64_T, to, tag, c);
}

/* receives posted in a given order on rank 1; rank 0 sends afterwards */
static void posting_order(int variant) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    if (mt_rank == 1) {
        int64_t v[4] = {-1, -1, -1, -1};
        MPI_Request rq[4];
        MPI_Status st[4];
        /* variant 0: ANY/ANY, then specific (0,5), then (ANY,5), then (0,ANY)
         * variant 1: specific first, then wildcards */
        int srcs[2][4] = {{MPI_ANY_SOURCE, 0, MPI_ANY_SOURCE, 0},
                          {0, MPI_ANY_SOURCE, 0, MPI_ANY_SOURCE}};
        int tags[2][4] = {{MPI_ANY_TAG, 5, 5, MPI_ANY_TAG}, {5, 5, MPI_ANY_TAG, MPI_ANY_TAG}};
        for (int i = 0; i < 4; i++)
            MPI_Irecv(&v[i], 1, MPI_INT64_T, srcs[variant][i], tags[variant][i], c, &rq[i]);
        MPI_Barrier(c);
        MPI_Waitall(4, rq, st);
        /* rank 0 sent values 100..103 with tag 5 each: posting order is the
         * only thing that decides which receive gets which */
        for (int i = 0; i < 4; i++)
            MT_CHECK(v[i] == 100 + i && st[i].MPI_SOURCE == 0 && st[i].MPI_TAG == 5,
                     "posting order variant %d: receive #%d (source %d tag %d) got value %lld "
                     "from source %d tag %d, expected message #%d",
                     variant, i, srcs[variant][i], tags[variant][i], (long long)v[i],
                     st[i].MPI_SOURCE, st[i].MPI_TAG, i);
    } else if (mt_rank == 0) {
        MPI_Barrier(c);
        for (int i = 0; i < 4; i++)
            send_tagged(1, 5, 100 + i, c);
    } else {
        MPI_Barrier(c);
    }
    MPI_Comm_free(&c);
}

/* unexpected messages with tags 3,1,2,0 are taken by ANY_TAG receives in
 * arrival order, and by specific-tag receives out of arrival order */
static void unexpected_order(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int tags[8] = {3, 1, 2, 0, 7, 6, 5, 4};
    if (mt_rank == 0)
        for (int i = 0; i < 8; i++)
            send_tagged(1, tags[i], 200 + i, c);
    MPI_Barrier(c);
    if (mt_rank == 1) {
        MPI_Status st;
        int64_t v;
        for (int i = 0; i < 4; i++) {
            MPI_Recv(&v, 1, MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st);
            MT_CHECK(v == 200 + i && st.MPI_TAG == tags[i],
                     "unexpected ANY_TAG receive #%d got value %lld tag %d, expected %d tag %d", i,
                     (long long)v, st.MPI_TAG, 200 + i, tags[i]);
        }
        for (int t = 4; t < 8; t++) { /* tags 4..7 arrived as 7,6,5,4 */
            MPI_Recv(&v, 1, MPI_INT64_T, 0, t, c, &st);
            MT_CHECK(v == 200 + (11 - t) && st.MPI_TAG == t,
                     "unexpected receive of tag %d got value %lld tag %d, expected %d", t,
                     (long long)v, st.MPI_TAG, 200 + (11 - t));
        }
    }
    MPI_Comm_free(&c);
}

/* ANY_TAG receives pending while collectives run on the same communicator */
static void anytag_vs_collectives(long it) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int64_t got = -1;
    MPI_Request rq;
    int from = (mt_rank + mt_size - 1) % mt_size, to = (mt_rank + 1) % mt_size;
    MPI_Irecv(&got, 1, MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &rq);
    /* collective traffic of all shapes on c */
    int64_t x = mt_rank, sum = 0;
    uint8_t big[70000];
    for (int k = 0; k < 5; k++) {
        MPI_Barrier(c);
        MPI_Allreduce(&x, &sum, 1, MPI_INT64_T, MPI_SUM, c);
        MT_CHECK(sum == (int64_t)mt_size * (mt_size - 1) / 2,
                 "allreduce under pending ANY_TAG "
                 "receive: %lld",
                 (long long)sum);
        if (mt_rank == k % mt_size)
            mt_fill(big, sizeof big, mt_seed(k, 0, 30, it));
        MPI_Bcast(big, sizeof big, MPI_BYTE, k % mt_size, c);
        mt_verify(big, sizeof big, mt_seed(k, 0, 30, it), "bcast under pending ANY_TAG receive");
    }
    int flag = 0;
    MPI_Status st;
    MPI_Test(&rq, &flag, &st);
    MT_CHECK(!flag,
             "the pending ANY_SOURCE/ANY_TAG receive completed during collectives (source "
             "%d tag %d value %lld): it matched collective traffic",
             st.MPI_SOURCE, st.MPI_TAG, (long long)got);
    MPI_Barrier(c); /* every rank tested before anyone sends */
    if (!flag) {
        send_tagged(to, 42, 1000 + mt_rank, c);
        MPI_Wait(&rq, &st);
    }
    MT_CHECK(
        got == 1000 + from && st.MPI_SOURCE == from && st.MPI_TAG == 42,
        "ANY_TAG receive after collectives got %lld from %d tag %d, expected %d from %d tag 42",
        (long long)got, st.MPI_SOURCE, st.MPI_TAG, 1000 + from, from);
    MPI_Comm_free(&c);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "wildcards");
    mt_require_ranks(2);
    long iters = mt_iters(20, 2);
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld posting order, wildcard first", it);
        posting_order(0);
        mt_step("it %ld posting order, specific first", it);
        posting_order(1);
        mt_step("it %ld unexpected order", it);
        unexpected_order();
        mt_step("it %ld ANY_TAG vs collectives", it);
        anytag_vs_collectives(it);
    }
    return mt_finish();
}
