/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * MPI hello world with one verified exchange: each rank sends its rank to
 * the next and checks what it receives from the previous one. Used by the
 * README's demo and the installation checks.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, len, got = -1;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);

    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 7, &got, 1, MPI_INT, prev, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (got != prev) {
        fprintf(stderr, "hello: rank %d received %d from rank %d, expected %d\n", rank, got,
                prev, prev);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("hello from rank %d of %d on %s (ring exchange ok)\n", rank, size, host);
    MPI_Finalize();
    return 0;
}
