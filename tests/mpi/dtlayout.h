/* Non-contiguous datatypes with an independently known layout, for tests.
 *
 * Each layout is one element made of a few (offset, length) byte blocks with an
 * extent; `count` elements of it are the MPI datatype repeated count times.
 * The tests never ask MPI where the bytes go: they compute it from the block
 * table here, so a datatype engine error in the transport cannot hide itself.
 */
#ifndef ROCE_MPI_TEST_DTLAYOUT_H
#define ROCE_MPI_TEST_DTLAYOUT_H

#include "mt.h"

#include <stddef.h>

typedef struct {
    const char *name;
    MPI_Datatype type; /* committed, extent == extent below */
    MPI_Aint extent;
    int nblk;
    MPI_Aint off[8];
    int len[8];
    int payload; /* sum of len */
} dt_layout;

/* The struct element: a char, a double, three ints and a short (23 payload
 * bytes in 32 with alignment holes). */
typedef struct {
    char c;
    double d;
    int i[3];
    short s;
} dt_rec;

enum { DT_VECTOR, DT_INDEXED, DT_STRUCT, DT_HVECTOR_RESIZED, DT_NLAYOUTS };

static void dt_finish_layout(dt_layout *l, MPI_Datatype t, MPI_Aint extent) {
    MPI_Datatype r;
    MPI_Aint lb, ext;
    MPI_Type_create_resized(t, 0, extent, &r);
    MPI_Type_commit(&r);
    MPI_Type_free(&t);
    MPI_Type_get_extent(r, &lb, &ext);
    l->type = r;
    l->extent = ext;
    l->payload = 0;
    for (int b = 0; b < l->nblk; b++)
        l->payload += l->len[b];
    int sz = 0;
    MPI_Type_size(r, &sz);
    if (sz != l->payload || ext != extent || lb != 0) {
        fprintf(stderr, "dtlayout %s: MPI says size %d extent %ld lb %ld, table says %d %ld 0\n",
                l->name, sz, (long)ext, (long)lb, l->payload, (long)extent);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Builds layout `which`. Free with dt_free. */
static MT_UNUSED void dt_make(int which, dt_layout *l) {
    MPI_Datatype t;
    memset(l, 0, sizeof *l);
    switch (which) {
    case DT_VECTOR:
        /* 2 blocks of 3 ints, stride 5 ints; resized to 44 so elements start at
         * odd multiples of 4 */
        l->name = "vector";
        MPI_Type_vector(2, 3, 5, MPI_INT, &t);
        l->nblk = 2;
        l->off[0] = 0, l->len[0] = 12;
        l->off[1] = 20, l->len[1] = 12;
        dt_finish_layout(l, t, 44);
        break;
    case DT_INDEXED: {
        int bl[3] = {1, 3, 2}, disp[3] = {0, 2, 7};
        l->name = "indexed";
        MPI_Type_indexed(3, bl, disp, MPI_DOUBLE, &t);
        l->nblk = 3;
        l->off[0] = 0, l->len[0] = 8;
        l->off[1] = 16, l->len[1] = 24;
        l->off[2] = 56, l->len[2] = 16;
        dt_finish_layout(l, t, 80);
        break;
    }
    case DT_STRUCT: {
        int bl[4] = {1, 1, 3, 1};
        MPI_Aint disp[4] = {offsetof(dt_rec, c), offsetof(dt_rec, d), offsetof(dt_rec, i),
                            offsetof(dt_rec, s)};
        MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
        l->name = "struct";
        MPI_Type_create_struct(4, bl, disp, ty, &t);
        l->nblk = 4;
        l->off[0] = disp[0], l->len[0] = 1;
        l->off[1] = disp[1], l->len[1] = 8;
        l->off[2] = disp[2], l->len[2] = 12;
        l->off[3] = disp[3], l->len[3] = 2;
        dt_finish_layout(l, t, (MPI_Aint)sizeof(dt_rec));
        break;
    }
    case DT_HVECTOR_RESIZED: {
        /* 4 single bytes 3 apart: worst case for a pack engine (1-byte blocks) */
        l->name = "hvector-bytes";
        MPI_Type_create_hvector(4, 1, 3, MPI_BYTE, &t);
        l->nblk = 4;
        for (int b = 0; b < 4; b++)
            l->off[b] = 3 * b, l->len[b] = 1;
        dt_finish_layout(l, t, 13);
        break;
    }
    default:
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static MT_UNUSED void dt_free(dt_layout *l) {
    MPI_Type_free(&l->type);
}

/* Bytes of buffer needed for count elements (or count bytes if l == NULL). */
static MT_UNUSED size_t dt_span(const dt_layout *l, long count) {
    return l ? (size_t)(count * l->extent) : (size_t)count;
}

static MT_UNUSED size_t dt_payload(const dt_layout *l, long count) {
    return l ? (size_t)count * (size_t)l->payload : (size_t)count;
}

/* The receiver's check: buffer rbuf laid out by rl (count rcount) received the
 * payload that a sender laid out by sl filled with mt_fill(seed) over its whole
 * span; bytes of rbuf outside the payload must still be `gap`. At least one of
 * rl and sl is NULL (contiguous), or both are the same layout: then payload
 * byte positions coincide, so the check runs block by block. */
static MT_UNUSED int dt_verify(const uint8_t *rbuf, const dt_layout *rl, long rcount,
                               const dt_layout *sl, uint64_t seed, uint8_t gap, const char *what) {
    const dt_layout *l = rl ? rl : sl;
    size_t n = dt_payload(rl, rcount);
    size_t bad = 0, first = 0, first_pos = 0;
    uint8_t exp0 = 0, got0 = 0;
    if (rl && sl && rl != sl) {
        fprintf(stderr, "dt_verify: two different non-contiguous layouts are not supported\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (!l)
        return mt_verify(rbuf, n, seed, what); /* both contiguous */
    long elems = (long)(n / (size_t)l->payload);
    size_t j = 0; /* payload offset */
    for (long e = 0; e < elems; e++) {
        for (int b = 0; b < l->nblk; b++) {
            size_t blkpos = (size_t)(e * l->extent + l->off[b]);
            size_t rpos = rl ? blkpos : j, spos = sl ? blkpos : j;
            for (int k = 0; k < l->len[b]; k++) {
                uint8_t exp = mt_pat(seed, spos + (size_t)k), got = rbuf[rpos + (size_t)k];
                if (exp != got && bad++ == 0)
                    first = j + (size_t)k, first_pos = rpos + (size_t)k, exp0 = exp, got0 = got;
            }
            j += (size_t)l->len[b];
        }
    }
    int ok = 1;
    if (!mt_counted(bad == 0)) {
        mt_fail("%s: %zu of %zu payload bytes differ; first is payload byte %zu (buffer offset "
                "%zu): expected 0x%02x got 0x%02x",
                what, bad, n, first, first_pos, exp0, got0);
        ok = 0;
    }
    if (rl) {
        /* the holes: blocks are listed in increasing offset order */
        size_t gbad = 0, gfirst = 0;
        for (long e = 0; e < elems; e++) {
            size_t base = (size_t)(e * rl->extent), at = 0;
            for (int b = 0; b <= rl->nblk; b++) {
                size_t end = b < rl->nblk ? (size_t)rl->off[b] : (size_t)rl->extent;
                for (size_t i = at; i < end; i++)
                    if (rbuf[base + i] != gap && gbad++ == 0)
                        gfirst = base + i;
                if (b < rl->nblk)
                    at = (size_t)rl->off[b] + (size_t)rl->len[b];
            }
        }
        if (!mt_counted(gbad == 0)) {
            if (gbad == 0)
                gfirst = 0; /* injected fault */
            mt_fail("%s: %zu bytes in the datatype's holes were written (first at offset %zu: "
                    "0x%02x, expected untouched 0x%02x)",
                    what, gbad, gfirst, rbuf[gfirst], gap);
            ok = 0;
        }
    }
    return ok;
}

#endif /* ROCE_MPI_TEST_DTLAYOUT_H */
