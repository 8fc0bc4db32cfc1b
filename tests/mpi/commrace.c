/* commrace: traffic on a communicator that some ranks have finished creating
 * while others have not. Over many rounds a new communicator is made with
 * MPI_Comm_dup, MPI_Comm_split (reversed keys), MPI_Comm_create_group and
 * MPI_Comm_idup (one rank delays its MPI_Wait, so its peers finish first
 * and send at once). Every member sends to every other member on the new
 * communicator right after its creation call returns, with the same tag that
 * concurrent traffic on the parent uses; every message must arrive on the
 * right communicator, from the right rank, with the right payload. A pml must
 * hold messages for a communicator it does not know yet (Open MPI 4.1
 * activates a new communicator with a barrier-like step, so the window is
 * narrow here; the idup case widens it).
 */
#include "mt.h"

enum { TAG = 17 };

static void exchange(MPI_Comm nc, long round, int kind) {
    int n, me;
    MPI_Comm_size(nc, &n);
    MPI_Comm_rank(nc, &me);
    int64_t *out = (int64_t *)malloc(sizeof(int64_t) * 4 * (size_t)n);
    int64_t *in = (int64_t *)malloc(sizeof(int64_t) * 4 * (size_t)n);
    MPI_Request *rq = (MPI_Request *)malloc(sizeof *rq * 2 * (size_t)n);
    MPI_Status *st = (MPI_Status *)malloc(sizeof *st * 2 * (size_t)n);
    int k = 0;
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        int64_t *o = out + 4 * p;
        o[0] = round, o[1] = kind, o[2] = me, o[3] = mt_rank;
        MPI_Isend(o, 4, MPI_INT64_T, p, TAG, nc, &rq[k++]);
    }
    int nsend = k;
    for (int p = 0; p < n - 1; p++)
        MPI_Irecv(in + 4 * p, 4, MPI_INT64_T, MPI_ANY_SOURCE, TAG, nc, &rq[k++]);
    MPI_Waitall(k, rq, st);
    uint8_t *seen = (uint8_t *)calloc((size_t)n, 1);
    for (int p = 0; p < n - 1; p++) {
        int64_t *i = in + 4 * p;
        int src = st[nsend + p].MPI_SOURCE;
        if (MT_CHECK(
                i[0] == round && i[1] == kind && i[2] == src && src >= 0 && src < n && !seen[src],
                "round %ld kind %d: message on the new communicator from %d carries round %lld "
                "kind %lld sender %lld (world %lld)%s",
                round, kind, src, (long long)i[0], (long long)i[1], (long long)i[2],
                (long long)i[3], src >= 0 && src < n && seen[src] ? ", duplicate" : ""))
            seen[src] = 1;
    }
    free(seen), free(out), free(in), free(rq), free(st);
}

/* parent traffic with the same tag, running across the creation */
static void parent_post(MPI_Request *rq, int64_t *sv, int64_t *rv, long round) {
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    sv[0] = -round - 1, sv[1] = mt_rank;
    MPI_Irecv(rv, 2, MPI_INT64_T, from, TAG, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(sv, 2, MPI_INT64_T, to, TAG, MPI_COMM_WORLD, &rq[1]);
}

static void parent_check(MPI_Request *rq, int64_t *rv, long round) {
    int from = (mt_rank + mt_size - 1) % mt_size;
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MT_CHECK(rv[0] == -round - 1 && rv[1] == from,
             "round %ld: parent message got %lld from %lld "
             "(a new communicator's message leaked into the parent?)",
             round, (long long)rv[0], (long long)rv[1]);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "commrace");
    mt_require_ranks(2);
    long rounds = mt_iters(60, 8);
    MPI_Group world_group, even_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int ranges[1][3] = {{0, mt_size - 1, 2}};
    MPI_Group_range_incl(world_group, 1, ranges, &even_group);
    for (long r = 0; r < rounds; r++) {
        int kind = (int)(r % 4);
        MPI_Request prq[2];
        int64_t sv[2], rv[2];
        parent_post(prq, sv, rv, r);
        MPI_Comm nc = MPI_COMM_NULL;
        /* a different rank arrives late each round */
        if (mt_rank == (int)(r % mt_size))
            mt_sleep_ms(2);
        mt_step("round %ld kind %d", r, kind);
        switch (kind) {
        case 0:
            MPI_Comm_dup(MPI_COMM_WORLD, &nc);
            break;
        case 1:
            MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &nc);
            break;
        case 2:
            if (mt_rank % 2 == 0)
                MPI_Comm_create_group(MPI_COMM_WORLD, even_group, (int)r, &nc);
            break;
        default: {
            MPI_Request rq;
            MPI_Comm_idup(MPI_COMM_WORLD, &nc, &rq);
            if (mt_rank == (int)((r / 4) % mt_size))
                mt_sleep_ms(5); /* no progress here for a while */
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        }
        if (nc != MPI_COMM_NULL) {
            if (kind == 1) {
                int me;
                MPI_Comm_rank(nc, &me);
                int n;
                MPI_Comm_size(nc, &n);
                /* keys were -world rank: order reversed */
                MT_CHECK(me == n - 1 - mt_rank / 2,
                         "split with reversed keys: rank %d in new comm "
                         "of %d, expected %d",
                         me, n, n - 1 - mt_rank / 2);
            }
            exchange(nc, r, kind);
            MPI_Comm_free(&nc);
        }
        parent_check(prq, rv, r);
    }
    MPI_Group_free(&even_group);
    MPI_Group_free(&world_group);
    return mt_finish();
}
