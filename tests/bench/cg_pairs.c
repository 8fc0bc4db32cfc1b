/* cg_pairs: the measured loop for tests/bench/callgrind-pair.
 *
 * usage: cg_pairs N [self|pair]
 *   self (default, 1 rank): N times MPI_Irecv from self + MPI_Send to self +
 *        MPI_Wait, 8 bytes: one send+receive pair per iteration, all in one
 *        process, deterministic instruction counts.
 *   pair (2 ranks): N ping-pong round trips of 8 bytes between ranks 0 and 1;
 *        each rank does one send and one receive per iteration, but the
 *        counts include the time a rank spins waiting, so they vary from run
 *        to run.
 * N = 0 runs everything but the loop: callgrind-pair subtracts that run. */
#include "mt.h"

__attribute__((noinline)) void roce_bench_pairs(long n, int pair, int64_t *buf) {
    int64_t x = 42;
    for (long i = 0; i < n; i++) {
        if (!pair) {
            MPI_Request rq;
            MPI_Irecv(buf, 1, MPI_INT64_T, mt_rank, 1, MPI_COMM_WORLD, &rq);
            MPI_Send(&x, 1, MPI_INT64_T, mt_rank, 1, MPI_COMM_WORLD);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        } else if (mt_rank == 0) {
            MPI_Send(&x, 1, MPI_INT64_T, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 1, MPI_INT64_T, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (mt_rank == 1) {
            MPI_Recv(buf, 1, MPI_INT64_T, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&x, 1, MPI_INT64_T, 0, 1, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "cg_pairs");
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int pair = argc > 2 && !strcmp(argv[2], "pair");
    if (pair)
        mt_require_ranks(2);
    int64_t buf = 0;
    /* one untimed round first so lazy connection setup is in both runs */
    roce_bench_pairs(1, pair, &buf);
    MPI_Barrier(MPI_COMM_WORLD);
    roce_bench_pairs(n, pair, &buf);
    MT_CHECK(buf == 42, "cg_pairs: received %lld, expected 42", (long long)buf);
    MPI_Barrier(MPI_COMM_WORLD);
    return mt_finish();
}
