/* zerobyte: zero-byte messages (count 0, NULL and non-NULL buffers, several
 * datatypes) are delivered with status count 0 and the right source and
 * tag, write nothing, keep their place in the message order between non-empty
 * messages, and work with Ssend, Probe, ANY_SOURCE/ANY_TAG and Sendrecv.
 */
#include "mt.h"

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "zerobyte");
    mt_require_ranks(2);
    long iters = mt_iters(50, 3);
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    MPI_Datatype types[3] = {MPI_BYTE, MPI_DOUBLE, MPI_INT};
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld", it);
        /* stream: 0 B, 8 B, 0 B (NULL), 8 B, 0 B ssend */
        int64_t s1 = 1000 + it, s2 = 2000 + it;
        MPI_Request rq[10];
        MPI_Status st[10];
        uint8_t r0[16], r2[16], r4[16];
        int64_t r1 = -1, r3 = -1;
        memset(r0, 0xEE, 16), memset(r2, 0xEE, 16), memset(r4, 0xEE, 16);
        MPI_Datatype t = types[it % 3];
        MPI_Irecv(r0, 2, t, from, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&r1, 1, MPI_INT64_T, from, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Irecv(r2, 2, t, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[2]);
        MPI_Irecv(&r3, 1, MPI_INT64_T, from, 1, MPI_COMM_WORLD, &rq[3]);
        MPI_Irecv(r4, 1, t, from, 1, MPI_COMM_WORLD, &rq[4]);
        MPI_Isend(r0 /* any pointer */, 0, t, to, 1, MPI_COMM_WORLD, &rq[5]);
        MPI_Isend(&s1, 1, MPI_INT64_T, to, 1, MPI_COMM_WORLD, &rq[6]);
        MPI_Isend(NULL, 0, t, to, 1, MPI_COMM_WORLD, &rq[7]);
        MPI_Isend(&s2, 1, MPI_INT64_T, to, 1, MPI_COMM_WORLD, &rq[8]);
        MPI_Issend(NULL, 0, t, to, 1, MPI_COMM_WORLD, &rq[9]);
        MPI_Waitall(10, rq, st);
        int cnts[5];
        for (int i = 0; i < 5; i++)
            MPI_Get_count(&st[i], i % 2 ? MPI_INT64_T : t, &cnts[i]);
        for (int i = 0; i < 5; i += 2) {
            int el = -1;
            MPI_Get_elements(&st[i], t, &el);
            MT_CHECK(cnts[i] == 0 && el == 0 && st[i].MPI_SOURCE == from && st[i].MPI_TAG == 1,
                     "zero-byte message #%d: count %d elements %d source %d tag %d", i, cnts[i], el,
                     st[i].MPI_SOURCE, st[i].MPI_TAG);
        }
        mt_verify_fill(r0, 16, 0xEE, "zero-byte receive #0 buffer");
        mt_verify_fill(r2, 16, 0xEE, "zero-byte receive #2 buffer");
        mt_verify_fill(r4, 16, 0xEE, "zero-byte receive #4 buffer");
        MT_CHECK(r1 == 1000 + it && r3 == 2000 + it && cnts[1] == 1 && cnts[3] == 1,
                 "8-byte messages between zero-byte ones: got %lld, %lld, expected %ld, %ld "
                 "(order broken?)",
                 (long long)r1, (long long)r3, 1000 + it, 2000 + it);
        /* probe a zero-byte message */
        MPI_Send(NULL, 0, MPI_BYTE, to, 2, MPI_COMM_WORLD);
        MPI_Status ps;
        MPI_Probe(from, 2, MPI_COMM_WORLD, &ps);
        mt_check_status(&ps, from, 2, 0, "Probe of a zero-byte message");
        MPI_Recv(NULL, 0, MPI_BYTE, from, 2, MPI_COMM_WORLD, &ps);
        mt_check_status(&ps, from, 2, 0, "receive of the probed zero-byte message");
        /* sendrecv of nothing */
        MPI_Sendrecv(NULL, 0, MPI_INT, to, 3, NULL, 0, MPI_INT, from, 3, MPI_COMM_WORLD, &ps);
        mt_check_status(&ps, from, 3, 0, "zero-byte Sendrecv");
    }
    return mt_finish();
}
