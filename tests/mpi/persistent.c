/* persistent: MPI_Send_init / Ssend_init / Bsend_init / Rsend_init and
 * MPI_Recv_init requests started many times (MPI_Start and MPI_Startall),
 * with the data changed before every start and verified after every
 * completion, eager and rendezvous sizes, in a ring; then freed.
 *
 * MPI_Bsend_init is restarted with eager sizes only by default: Open MPI
 * 4.1.4's ob1 (Debian 12) resends the first start's payload when a persistent
 * buffered send of rendezvous size is restarted (upstream fix: open-mpi/ompi
 * pull 12797, backported to v4.1.x later), which this program detects.
 * ROCE_TEST_STRICT=1 includes rendezvous sizes for Bsend_init too (pml roce
 * must pass with it).
 */
#include "mt.h"

static const long long kSizes[] = {0, 16, 2000, 8192, 300000};

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "persistent");
    long long cap = mt_max_bytes(300000);
    long iters = mt_iters(100, 5);
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    int bsize = (int)(cap + MPI_BSEND_OVERHEAD) * 2 + 1024;
    void *att = mt_malloc((size_t)bsize);
    MPI_Buffer_attach(att, bsize);
    for (int mode = 0; mode < 4; mode++) {
        static const char *names[] = {"send_init", "ssend_init", "bsend_init", "rsend_init"};
        for (unsigned si = 0; si < sizeof kSizes / sizeof kSizes[0]; si++) {
            long long n = kSizes[si] > cap ? cap : kSizes[si];
            if (mode == 2 && n > 2000 && !mt_strict()) {
                if (mt_rank == 0)
                    printf("persistent: known ob1 deviation: bsend_init %lld B not run (restarts "
                           "resend stale data on ob1 4.1.4; ROCE_TEST_STRICT=1 runs it)\n",
                           n);
                continue;
            }
            mt_step("%s %lld B", names[mode], n);
            uint8_t *s = (uint8_t *)mt_malloc((size_t)n), *r = (uint8_t *)mt_malloc((size_t)n);
            MPI_Request rq[2];
            MPI_Recv_init(r, (int)n, MPI_BYTE, from, mode, MPI_COMM_WORLD, &rq[0]);
            switch (mode) {
            case 0:
                MPI_Send_init(s, (int)n, MPI_BYTE, to, mode, MPI_COMM_WORLD, &rq[1]);
                break;
            case 1:
                MPI_Ssend_init(s, (int)n, MPI_BYTE, to, mode, MPI_COMM_WORLD, &rq[1]);
                break;
            case 2:
                MPI_Bsend_init(s, (int)n, MPI_BYTE, to, mode, MPI_COMM_WORLD, &rq[1]);
                break;
            default:
                MPI_Rsend_init(s, (int)n, MPI_BYTE, to, mode, MPI_COMM_WORLD, &rq[1]);
                break;
            }
            for (long it = 0; it < iters; it++) {
                mt_fill(s, (size_t)n, mt_seed(mt_rank, to, mode * 16 + (int)si, it));
                memset(r, 0, (size_t)n);
                MPI_Status st[2];
                if (mode == 3 || it % 3 == 2) {
                    /* ready send needs the receive posted: start it, sync, send */
                    MPI_Start(&rq[0]);
                    MPI_Barrier(MPI_COMM_WORLD);
                    MPI_Start(&rq[1]);
                    MPI_Waitall(2, rq, st);
                } else if (it % 3 == 0) {
                    MPI_Startall(2, rq);
                    MPI_Waitall(2, rq, st);
                } else {
                    MPI_Start(&rq[1]);
                    MPI_Start(&rq[0]);
                    int done = 0;
                    while (!done)
                        MPI_Testall(2, rq, &done, st);
                }
                char what[96];
                snprintf(what, sizeof what, "%s %lld B, start #%ld, from rank %d", names[mode], n,
                         it, from);
                if (mt_check_status(&st[0], from, mode, n, what))
                    mt_verify(r, (size_t)n, mt_seed(from, mt_rank, mode * 16 + (int)si, it), what);
                if (mode == 3)
                    MPI_Barrier(MPI_COMM_WORLD); /* next Rsend only after next receive */
            }
            MPI_Request_free(&rq[0]);
            MPI_Request_free(&rq[1]);
            MT_CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL,
                     "Request_free did not "
                     "set MPI_REQUEST_NULL");
            free(s), free(r);
        }
    }
    void *det;
    int dsz;
    MPI_Buffer_detach(&det, &dsz);
    free(att);
    return mt_finish();
}
