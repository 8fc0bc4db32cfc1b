/* collectives: allreduce, reduce, bcast, alltoall, alltoallv, gather(v),
 * scatter(v), allgather, reduce_scatter_block and barrier, each checked
 * against values every rank can compute on its own (integers, so sums are
 * exact), at small and large counts (large ones go through the pml's
 * rendezvous path in coll tuned's algorithms).
 *
 * Knobs: ROCE_TEST_MAX_BYTES (default 4M per buffer), ROCE_TEST_SCALE.
 */
#include "mt.h"

static long g_max_ints;

static int64_t val(int rank, long i, long it) {
    return (int64_t)rank * 1000003 + i * 7 + it * 13;
}

static void allreduce_reduce(long n, long it) {
    int64_t *in = (int64_t *)mt_malloc(sizeof(int64_t) * (size_t)n);
    int64_t *out = (int64_t *)mt_malloc(sizeof(int64_t) * (size_t)n);
    for (long i = 0; i < n; i++)
        in[i] = val(mt_rank, i, it);
    MPI_Allreduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    long bad = 0, first = -1;
    for (long i = 0; i < n; i++) {
        int64_t e = 0;
        for (int r = 0; r < mt_size; r++)
            e += val(r, i, it);
        if (out[i] != e && bad++ == 0)
            first = i;
    }
    MT_CHECK(bad == 0, "allreduce SUM n=%ld: %ld elements wrong, first [%ld] = %lld", n, bad, first,
             first >= 0 ? (long long)out[first] : 0LL);
    /* MAX in place */
    for (long i = 0; i < n; i++)
        out[i] = val(mt_rank, i, it) * ((mt_rank + i) % 3 == 0 ? -1 : 1);
    MPI_Allreduce(MPI_IN_PLACE, out, (int)n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    bad = 0;
    for (long i = 0; i < n; i++) {
        int64_t e = INT64_MIN;
        for (int r = 0; r < mt_size; r++) {
            int64_t v = val(r, i, it) * ((r + i) % 3 == 0 ? -1 : 1);
            if (v > e)
                e = v;
        }
        if (out[i] != e && bad++ == 0)
            first = i;
    }
    MT_CHECK(bad == 0, "allreduce MAX in place n=%ld: %ld elements wrong, first at %ld", n, bad,
             first);
    /* reduce to each root in turn (fewer roots for big counts) */
    for (int root = 0; root < mt_size; root += (n > 4096 ? mt_size - 1 : 1)) {
        for (long i = 0; i < n; i++)
            out[i] = -1;
        MPI_Reduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD);
        if (mt_rank == root) {
            bad = 0;
            for (long i = 0; i < n; i++) {
                int64_t e = 0;
                for (int r = 0; r < mt_size; r++)
                    e += val(r, i, it);
                if (out[i] != e && bad++ == 0)
                    first = i;
            }
            MT_CHECK(bad == 0, "reduce SUM n=%ld root %d: %ld wrong, first at %ld", n, root, bad,
                     first);
        }
        if (mt_size == 1)
            break;
    }
    free(in);
    free(out);
}

static void bcast(long bytes, long it) {
    uint8_t *b = (uint8_t *)mt_malloc((size_t)bytes);
    for (int root = 0; root < mt_size;
         root += (bytes > 65536 ? (mt_size > 1 ? mt_size - 1 : 1) : 1)) {
        uint64_t seed = mt_seed(root, 99, 3, it * 64 + bytes);
        if (mt_rank == root)
            mt_fill(b, (size_t)bytes, seed);
        else
            memset(b, 0, (size_t)bytes);
        MPI_Bcast(b, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        char what[96];
        snprintf(what, sizeof what, "bcast %ld B from root %d", bytes, root);
        mt_verify(b, (size_t)bytes, seed, what);
    }
    free(b);
}

static void alltoall(long per, long it) {
    int n = mt_size;
    size_t tot = (size_t)per * (size_t)n;
    uint8_t *sb = (uint8_t *)mt_malloc(tot), *rb = (uint8_t *)mt_malloc(tot);
    for (int p = 0; p < n; p++)
        mt_fill(sb + (size_t)p * (size_t)per, (size_t)per, mt_seed(mt_rank, p, 4, it));
    memset(rb, 0, tot);
    MPI_Alltoall(sb, (int)per, MPI_BYTE, rb, (int)per, MPI_BYTE, MPI_COMM_WORLD);
    for (int p = 0; p < n; p++) {
        char what[96];
        snprintf(what, sizeof what, "alltoall %ld B per rank, block from rank %d", per, p);
        mt_verify(rb + (size_t)p * (size_t)per, (size_t)per, mt_seed(p, mt_rank, 4, it), what);
    }
    free(sb);
    free(rb);
}

static int vcount(int src, int dst, long it, long scale) {
    return (int)(((src * 5 + dst * 3 + it) % 7) * scale + (src == dst ? 0 : 1));
}

static void alltoallv(long scale, long it) {
    int n = mt_size;
    int *sc = (int *)malloc(sizeof(int) * (size_t)n), *sd = (int *)malloc(sizeof(int) * (size_t)n);
    int *rc = (int *)malloc(sizeof(int) * (size_t)n), *rd = (int *)malloc(sizeof(int) * (size_t)n);
    int st = 0, rt = 0;
    for (int p = 0; p < n; p++) {
        sc[p] = vcount(mt_rank, p, it, scale), sd[p] = st + 3 * p, st = sd[p] + sc[p];
        rc[p] = vcount(p, mt_rank, it, scale), rd[p] = rt + 5 * p, rt = rd[p] + rc[p];
    }
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)st), *rb = (uint8_t *)mt_malloc((size_t)rt);
    for (int p = 0; p < n; p++)
        mt_fill(sb + sd[p], (size_t)sc[p], mt_seed(mt_rank, p, 5, it));
    memset(rb, 0xEE, (size_t)rt);
    MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    for (int p = 0; p < n; p++) {
        char what[96];
        snprintf(what, sizeof what, "alltoallv scale %ld, %d B from rank %d", scale, rc[p], p);
        mt_verify(rb + rd[p], (size_t)rc[p], mt_seed(p, mt_rank, 5, it), what);
        /* the gaps between blocks stay untouched */
        int gap_end = p + 1 < n ? rd[p + 1] : rt;
        mt_verify_fill(rb + rd[p] + rc[p], (size_t)(gap_end - rd[p] - rc[p]), 0xEE, what);
    }
    free(sb), free(rb), free(sc), free(sd), free(rc), free(rd);
}

static void gather_scatter(long per, long it) {
    int n = mt_size;
    size_t tot = (size_t)per * (size_t)n;
    uint8_t *mine = (uint8_t *)mt_malloc((size_t)per), *all = (uint8_t *)mt_malloc(tot);
    for (int root = 0; root < n; root++) {
        mt_fill(mine, (size_t)per, mt_seed(mt_rank, root, 6, it));
        MPI_Gather(mine, (int)per, MPI_BYTE, all, (int)per, MPI_BYTE, root, MPI_COMM_WORLD);
        if (mt_rank == root)
            for (int p = 0; p < n; p++) {
                char what[96];
                snprintf(what, sizeof what, "gather %ld B to root %d, block of rank %d", per, root,
                         p);
                mt_verify(all + (size_t)p * (size_t)per, (size_t)per, mt_seed(p, root, 6, it),
                          what);
            }
        if (mt_rank == root)
            for (int p = 0; p < n; p++)
                mt_fill(all + (size_t)p * (size_t)per, (size_t)per, mt_seed(root, p, 7, it));
        memset(mine, 0, (size_t)per);
        MPI_Scatter(all, (int)per, MPI_BYTE, mine, (int)per, MPI_BYTE, root, MPI_COMM_WORLD);
        char what[96];
        snprintf(what, sizeof what, "scatter %ld B from root %d", per, root);
        mt_verify(mine, (size_t)per, mt_seed(root, mt_rank, 7, it), what);
        if (per > 65536)
            break; /* large blocks: one root is enough */
    }
    /* allgather */
    mt_fill(mine, (size_t)per, mt_seed(mt_rank, 0, 8, it));
    memset(all, 0, tot);
    MPI_Allgather(mine, (int)per, MPI_BYTE, all, (int)per, MPI_BYTE, MPI_COMM_WORLD);
    for (int p = 0; p < n; p++) {
        char what[96];
        snprintf(what, sizeof what, "allgather %ld B, block of rank %d", per, p);
        mt_verify(all + (size_t)p * (size_t)per, (size_t)per, mt_seed(p, 0, 8, it), what);
    }
    free(mine);
    free(all);
}

static void gatherv_scatterv(long it) {
    int n = mt_size, root = (int)(it % n);
    int *cnt = (int *)malloc(sizeof(int) * (size_t)n),
        *dsp = (int *)malloc(sizeof(int) * (size_t)n);
    int tot = 0;
    for (int p = 0; p < n; p++)
        cnt[p] = 17 * p + (int)it % 5, dsp[p] = tot + 2, tot = dsp[p] + cnt[p];
    uint8_t *mine = (uint8_t *)mt_malloc((size_t)cnt[mt_rank]),
            *all = (uint8_t *)mt_malloc((size_t)tot);
    mt_fill(mine, (size_t)cnt[mt_rank], mt_seed(mt_rank, root, 9, it));
    MPI_Gatherv(mine, cnt[mt_rank], MPI_BYTE, all, cnt, dsp, MPI_BYTE, root, MPI_COMM_WORLD);
    if (mt_rank == root)
        for (int p = 0; p < n; p++) {
            char what[64];
            snprintf(what, sizeof what, "gatherv block of rank %d", p);
            mt_verify(all + dsp[p], (size_t)cnt[p], mt_seed(p, root, 9, it), what);
            mt_fill(all + dsp[p], (size_t)cnt[p], mt_seed(root, p, 10, it));
        }
    memset(mine, 0, (size_t)cnt[mt_rank]);
    MPI_Scatterv(all, cnt, dsp, MPI_BYTE, mine, cnt[mt_rank], MPI_BYTE, root, MPI_COMM_WORLD);
    mt_verify(mine, (size_t)cnt[mt_rank], mt_seed(root, mt_rank, 10, it), "scatterv");
    free(mine), free(all), free(cnt), free(dsp);
}

static void reduce_scatter(long per, long it) {
    int n = mt_size;
    int64_t *in = (int64_t *)mt_malloc(sizeof(int64_t) * (size_t)per * (size_t)n);
    int64_t *out = (int64_t *)mt_malloc(sizeof(int64_t) * (size_t)per);
    for (long i = 0; i < per * n; i++)
        in[i] = val(mt_rank, i, it);
    MPI_Reduce_scatter_block(in, out, (int)per, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    long bad = 0;
    for (long i = 0; i < per; i++) {
        int64_t e = 0;
        for (int r = 0; r < n; r++)
            e += val(r, mt_rank * per + i, it);
        if (out[i] != e)
            bad++;
    }
    MT_CHECK(bad == 0, "reduce_scatter_block %ld per rank: %ld elements wrong", per, bad);
    free(in);
    free(out);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "collectives");
    g_max_ints = (long)(mt_max_bytes(4 << 20) / 8);
    long iters = mt_iters(3, 1);
    long counts[] = {1, 7, 64, 1000, 16384, 131072, 524288};
    for (long it = 0; it < iters; it++) {
        for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            long n = counts[c] > g_max_ints ? g_max_ints : counts[c];
            mt_step("it %ld allreduce/reduce %ld x int64", it, n);
            allreduce_reduce(n, it);
            mt_step("it %ld bcast %ld B", it, n * 8 + 3);
            bcast(n * 8 + 3, it);
            long per = (n * 8) / mt_size + 1;
            mt_step("it %ld alltoall %ld B per rank", it, per);
            alltoall(per, it);
            mt_step("it %ld gather/scatter/allgather %ld B", it, per);
            gather_scatter(per, it);
            mt_step("it %ld alltoallv", it);
            alltoallv(n / mt_size + 1, it);
            mt_step("it %ld reduce_scatter_block", it);
            reduce_scatter(n / mt_size + 1, it);
        }
        mt_step("it %ld gatherv/scatterv", it);
        gatherv_scatterv(it);
        mt_step("it %ld barrier", it);
        /* barrier: nobody's (i)barrier completes before the last rank has
         * entered it; the last rank enters only after everyone reported that
         * theirs was still incomplete */
        MPI_Request br;
        int last = mt_size - 1, flag = 0;
        if (mt_rank != last) {
            MPI_Ibarrier(MPI_COMM_WORLD, &br);
            for (int k = 0; k < 200 && !flag; k++) {
                MPI_Test(&br, &flag, MPI_STATUS_IGNORE);
                if (k % 50 == 0)
                    mt_sleep_ms(1);
            }
            MT_CHECK(!flag, "ibarrier completed on rank %d before rank %d entered it", mt_rank,
                     last);
            MPI_Send(&flag, 1, MPI_INT, last, 77, MPI_COMM_WORLD);
            if (!flag)
                MPI_Wait(&br, MPI_STATUS_IGNORE);
        } else {
            for (int p = 0; p < last; p++)
                MPI_Recv(&flag, 1, MPI_INT, p, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Ibarrier(MPI_COMM_WORLD, &br);
            MPI_Wait(&br, MPI_STATUS_IGNORE);
            MT_CHECK(1, "barrier");
        }
    }
    return mt_finish();
}
