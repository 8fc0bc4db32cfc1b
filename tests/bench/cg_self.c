/* cg_self: instructions per 8-byte message on the host's self path, for
 * contrib/bench/count-instructions (docs/perf/instructions.md).
 *
 * usage: cg_self N      (1 rank: mpirun -np 1 --mca btl self --mca pml P)
 *
 * One message per iteration, all in one process:
 *     MPI_Isend(8 B to self) + MPI_Recv(from self) + MPI_Wait(the send)
 * so the message travels the pml's eager path over btl self and meets the
 * receive as an unexpected message. Only these three calls are counted:
 * run under `valgrind --tool=callgrind --collect-atstart=no`, the program
 * switches collection on just before MPI_Isend and off just after MPI_Wait
 * (callgrind client requests, a handful of instructions each), so
 * MPI_Init, MPI_Finalize, the loop and the check count nothing. One
 * iteration first, outside the counted region, sets up whatever is lazy
 * (the self endpoint, free lists). The driver runs N and 2N and takes
 * (I(2N) - I(N)) / N: whatever is counted once (a free list growing) cancels.
 * The program is plain MPI with no ompi-roce header, so the driver can
 * compile it anywhere and run it against any build's components.
 * Without valgrind the client requests do nothing. */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "callgrind_toggle.h"

static void one(int self, int64_t *out, int64_t *in, int count) {
    MPI_Request rq;
    if (count) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    MPI_Isend(out, 1, MPI_INT64_T, self, 7, MPI_COMM_WORLD, &rq);
    MPI_Recv(in, 1, MPI_INT64_T, self, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (count) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t out = 0, in = -1;
    one(rank, &out, &in, 0);
    long bad = 0;
    for (long i = 0; i < n; i++) {
        out = 1000 + i;
        one(rank, &out, &in, 1);
        bad += in != out;
    }
    if (bad != 0) {
        fprintf(stderr, "cg_self: %ld of %ld messages arrived wrong\n", bad, n);
    }
    if (rank == 0) {
        printf("# cg_self: %ld messages of 8 B to self%s\n", n,
               RUNNING_ON_VALGRIND ? "" : " (not under valgrind: nothing counted)");
    }
    MPI_Finalize();
    return bad != 0;
}
