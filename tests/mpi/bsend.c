/* bsend: buffered sends complete locally. With a buffer attached
 * (MPI_Buffer_attach, sized with MPI_Pack_size + MPI_BSEND_OVERHEAD), rank 0
 * MPI_Bsend's and MPI_Ibsend's a batch of messages, eager and rendezvous
 * sized, to rank 1, which posts nothing until rank 0 says (on another tag)
 * that all its Bsends returned -- a Bsend that waited for the receiver would
 * hang here (the watchdog names the step). The user buffer is overwritten right
 * after each Bsend; the receiver must still see the original data.
 * MPI_Buffer_detach returns the attached address and size.
 */
#include "mt.h"

static const long long kSizes[] = {0, 8, 3000, 70000, 400000};
enum { NS = sizeof kSizes / sizeof kSizes[0] };

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "bsend");
    mt_require_ranks(2);
    long long cap = mt_max_bytes(400000);
    long nmsg = mt_iters(3 * NS, NS), iters = mt_iters(5, 1);
    for (long it = 0; it < iters; it++) {
        mt_step("it %ld", it);
        if (mt_rank == 0) {
            int total = 0;
            for (long i = 0; i < nmsg; i++) {
                int ps = 0;
                long long n = kSizes[i % NS] > cap ? cap : kSizes[i % NS];
                MPI_Pack_size((int)n, MPI_BYTE, MPI_COMM_WORLD, &ps);
                total += ps + MPI_BSEND_OVERHEAD;
            }
            void *att = mt_malloc((size_t)total);
            MPI_Buffer_attach(att, total);
            uint8_t *b = (uint8_t *)mt_malloc((size_t)cap);
            MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * (size_t)nmsg);
            int nrq = 0;
            for (long i = 0; i < nmsg; i++) {
                long long n = kSizes[i % NS] > cap ? cap : kSizes[i % NS];
                mt_fill(b, (size_t)n, mt_seed(0, 1, (int)it, i));
                if (i % 2)
                    MPI_Ibsend(b, (int)n, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &rq[nrq++]);
                else
                    MPI_Bsend(b, (int)n, MPI_BYTE, 1, 6, MPI_COMM_WORLD);
                if (i % 2)
                    MPI_Wait(&rq[nrq - 1], MPI_STATUS_IGNORE); /* local completion */
                memset(b, 0xAB, (size_t)n);                    /* the buffer is ours again */
            }
            int done = 1;
            MPI_Send(&done, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
            void *det = NULL;
            int detsize = 0;
            MPI_Buffer_detach(&det, &detsize);
            MT_CHECK(det == att && detsize == total, "Buffer_detach gave %p/%d, attached %p/%d",
                     det, detsize, att, total);
            free(att), free(b), free(rq);
        } else if (mt_rank == 1) {
            int done = 0;
            MPI_Recv(&done, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            uint8_t *b = (uint8_t *)mt_malloc((size_t)cap);
            for (long i = 0; i < nmsg; i++) {
                long long n = kSizes[i % NS] > cap ? cap : kSizes[i % NS];
                MPI_Status st;
                MPI_Recv(b, (int)cap, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &st);
                char what[64];
                snprintf(what, sizeof what, "bsend message %ld (%lld B)", i, n);
                if (mt_check_status(&st, 0, 6, n, what))
                    mt_verify(b, (size_t)n, mt_seed(0, 1, (int)it, i), what);
            }
            free(b);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return mt_finish();
}
