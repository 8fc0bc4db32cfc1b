/* Reads the MPI_T performance variables of pml roce and btl roce while
 * traffic flows, and checks that they move (tests/mpi/README.md).
 *
 *   pvars                  check mode (2+ ranks; ranks 0 and 1 talk): the pml's
 *                          queue lengths, match attempts and protocol counters
 *                          must follow the traffic; prints every roce pvar.
 *   pvars --require-btl    also require the btl's byte/message counters to move
 *                          (ranks 0 and 1 on different hosts, over btl roce).
 *   pvars --watch SECONDS  ping-pong 1 MiB between rank pairs for SECONDS and
 *                          print each rank's per-path bytes, states and
 *                          failovers once a second (for a cable pull).
 *
 * Exit status 0 when every check passed. Counters are read through
 * continuous MPI_T handles, so they count from the handle's allocation. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 64

static int g_rank, g_size, g_failed, g_passed;
static MPI_T_pvar_session g_session;

typedef struct {
    const char *name;
    int index;
    MPI_T_pvar_handle handle;
    int count;
    MPI_Datatype type;
} pvar_t;

static void check(int ok, const char *what) {
    if (ok) {
        ++g_passed;
        printf("rank %d: PASS: %s\n", g_rank, what);
    } else {
        ++g_failed;
        printf("rank %d: FAIL: %s\n", g_rank, what);
    }
    fflush(stdout);
}

/* Opens a handle on `name`; 0 when no such variable exists. */
static int pvar_open(pvar_t *v, const char *name) {
    int var_class;
    memset(v, 0, sizeof *v);
    v->name = name;
    v->handle = MPI_T_PVAR_HANDLE_NULL;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &v->index) != MPI_SUCCESS) {
        int cls[] = {MPI_T_PVAR_CLASS_LEVEL, MPI_T_PVAR_CLASS_STATE};
        int found = 0;
        for (size_t i = 0; i < sizeof cls / sizeof cls[0] && !found; ++i) {
            found = MPI_T_pvar_get_index(name, cls[i], &v->index) == MPI_SUCCESS;
        }
        if (!found) {
            return 0;
        }
    }
    char vname[256], desc[1024];
    int nlen = sizeof vname, dlen = sizeof desc, verb, bind, ro, cont, atomic;
    MPI_T_enum et;
    if (MPI_T_pvar_get_info(v->index, vname, &nlen, &verb, &var_class, &v->type, &et, desc, &dlen,
                            &bind, &ro, &cont, &atomic) != MPI_SUCCESS) {
        return 0;
    }
    if (MPI_T_pvar_handle_alloc(g_session, v->index, NULL, &v->handle, &v->count) != MPI_SUCCESS ||
        v->count < 1 || v->count > MAX_SLOTS) {
        return 0;
    }
    return 1;
}

/* Reads element `i` of a variable as an unsigned value (int variables:
 * their value, -1 as ULLONG_MAX). */
static unsigned long long pvar_get(pvar_t *v, int i) {
    unsigned long long u[MAX_SLOTS];
    int s[MAX_SLOTS];
    if (v->handle == MPI_T_PVAR_HANDLE_NULL) {
        return 0;
    }
    if (v->type == MPI_INT) {
        MPI_T_pvar_read(g_session, v->handle, s);
        return (unsigned long long)(long long)s[i];
    }
    MPI_T_pvar_read(g_session, v->handle, u);
    return u[i];
}

static unsigned long long get(pvar_t *v) { return pvar_get(v, 0); }

/* Every performance variable whose name starts with pml_roce_ or btl_roce_,
 * with a handle opened by open_all() (so counters count from then on). */
static pvar_t g_all[128];
static int g_nall;

static void open_all(void) {
    int n;
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n && g_nall < (int)(sizeof g_all / sizeof g_all[0]); ++i) {
        char name[256], desc[1024];
        int nlen = sizeof name, dlen = sizeof desc, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype t;
        MPI_T_enum et;
        if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &t, &et, desc, &dlen, &bind, &ro,
                                &cont, &atomic) != MPI_SUCCESS ||
            (strncmp(name, "pml_roce_", 9) != 0 && strncmp(name, "btl_roce_", 9) != 0)) {
            continue;
        }
        char *copy = strdup(name);
        if (copy != NULL && pvar_open(&g_all[g_nall], copy)) {
            ++g_nall;
        } else {
            free(copy);
        }
    }
}

/* Prints the variables open_all() found: levels as they are now, counters
 * as their increase since open_all(), arrays as their first element. */
static void print_all(void) {
    printf("rank %d: %d roce performance variables (counters: increase during this run)\n", g_rank,
           g_nall);
    for (int i = 0; i < g_nall; ++i) {
        printf("rank %d:   %-32s %llu%s\n", g_rank, g_all[i].name, get(&g_all[i]),
               g_all[i].count > 1 ? " (first element of an array)" : "");
        free((char *)g_all[i].name);
    }
    fflush(stdout);
}

static int check_mode(int require_btl) {
    pvar_t posted, unexpected, attempts, eager, rndv, rget, pipe, bsent, brecv, bmsg;
    int have_pml = pvar_open(&posted, "pml_roce_posted_recvq_length");
    pvar_open(&unexpected, "pml_roce_unexpected_msgq_length");
    pvar_open(&attempts, "pml_roce_match_attempts");
    pvar_open(&eager, "pml_roce_sends_eager");
    pvar_open(&rndv, "pml_roce_sends_rndv");
    pvar_open(&rget, "pml_roce_sends_rget");
    pvar_open(&pipe, "pml_roce_sends_pipeline");
    int have_btl = pvar_open(&bsent, "btl_roce_bytes_sent");
    pvar_open(&brecv, "btl_roce_bytes_received");
    pvar_open(&bmsg, "btl_roce_messages_sent");
    check(have_pml, "the pml_roce_* performance variables exist (run with --mca pml roce)");
    if (require_btl) {
        check(have_btl, "the btl_roce_* performance variables exist");
    }
    /* Ranks 0 and 1 talk; the others only take part in the collectives. */
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &pair);
    if (!have_pml || g_size < 2 || pair == MPI_COMM_NULL) {
        check(g_size >= 2, "the job has at least 2 ranks (ranks 0 and 1 talk, the others wait)");
        return g_failed == 0;
    }
    const int peer = 1 - g_rank;
    enum { kPosted = 3, kUnexpected = 5, kLarge = 4 << 20 };
    char small[64] = {0};
    char *large = calloc(1, kLarge);
    if (large == NULL) {
        check(0, "allocating 4 MiB");
        return 0;
    }

    /* Posted receives wait in the posted queue until their messages come. */
    unsigned long long a0 = get(&attempts);
    MPI_Request req[kPosted];
    unsigned long long p0 = get(&posted);
    if (g_rank == 1) {
        for (int i = 0; i < kPosted; ++i) {
            MPI_Irecv(small, sizeof small, MPI_CHAR, peer, 7, pair, &req[i]);
        }
        char line[160];
        snprintf(line, sizeof line, "posted_recvq_length grew by %d with %d receives posted (%llu -> %llu)",
                 kPosted, kPosted, p0, get(&posted));
        check(get(&posted) >= p0 + kPosted, line);
    }
    MPI_Barrier(pair);
    if (g_rank == 0) {
        for (int i = 0; i < kPosted; ++i) {
            MPI_Send(small, sizeof small, MPI_CHAR, peer, 7, pair);
        }
    } else {
        MPI_Waitall(kPosted, req, MPI_STATUSES_IGNORE);
        check(get(&posted) == p0, "posted_recvq_length back where it was once they matched");
    }

    /* Messages sent before their receives wait in the unexpected queue.
     * Point-to-point handshakes only (a collective's own messages would be
     * unexpected too): rank 0 sends nothing else between "go" (tag 97) and
     * "release" (tag 98), and its "sync" (tag 99) arrives after the five,
     * into a receive posted in advance (so never unexpected itself). */
    unsigned long long e0 = get(&eager);
    if (g_rank == 0) {
        MPI_Recv(NULL, 0, MPI_CHAR, peer, 97, pair, MPI_STATUS_IGNORE);
        for (int i = 0; i < kUnexpected; ++i) {
            MPI_Send(small, sizeof small, MPI_CHAR, peer, 9, pair);
        }
        MPI_Send(NULL, 0, MPI_CHAR, peer, 99, pair);
        char line[160];
        snprintf(line, sizeof line, "sends_eager counted %d eager sends (+%llu)", kUnexpected + 1,
                 get(&eager) - e0);
        check(get(&eager) >= e0 + kUnexpected + 1, line);
        MPI_Recv(NULL, 0, MPI_CHAR, peer, 98, pair, MPI_STATUS_IGNORE);
    } else {
        MPI_Request sync;
        MPI_Irecv(NULL, 0, MPI_CHAR, peer, 99, pair, &sync);
        unsigned long long u0 = get(&unexpected);
        MPI_Send(NULL, 0, MPI_CHAR, peer, 97, pair);
        MPI_Wait(&sync, MPI_STATUS_IGNORE);
        char line[160];
        snprintf(line, sizeof line, "unexpected_msgq_length grew by %d (%llu -> %llu)", kUnexpected,
                 u0, get(&unexpected));
        check(get(&unexpected) == u0 + kUnexpected, line);
        for (int i = 0; i < kUnexpected; ++i) {
            MPI_Recv(small, sizeof small, MPI_CHAR, peer, 9, pair, MPI_STATUS_IGNORE);
        }
        snprintf(line, sizeof line, "unexpected_msgq_length back to %llu once they were received (%llu)",
                 u0, get(&unexpected));
        check(get(&unexpected) == u0, line);
        MPI_Send(NULL, 0, MPI_CHAR, peer, 98, pair);
    }

    /* A large message takes a rendezvous protocol. */
    unsigned long long r0 = get(&rndv) + get(&rget) + get(&pipe);
    unsigned long long s0 = get(&bsent), m0 = get(&bmsg), rb0 = get(&brecv);
    if (g_rank == 0) {
        MPI_Send(large, kLarge, MPI_CHAR, peer, 11, pair);
        MPI_Recv(large, kLarge, MPI_CHAR, peer, 12, pair, MPI_STATUS_IGNORE);
        check(get(&rndv) + get(&rget) + get(&pipe) > r0,
              "a 4 MiB send counted in sends_rndv, sends_rget or sends_pipeline");
    } else {
        MPI_Recv(large, kLarge, MPI_CHAR, peer, 11, pair, MPI_STATUS_IGNORE);
        MPI_Send(large, kLarge, MPI_CHAR, peer, 12, pair);
    }
    char line[200];
    snprintf(line, sizeof line, "match_attempts moved with the traffic (+%llu)", get(&attempts) - a0);
    check(get(&attempts) > a0, line);
    if (require_btl) {
        snprintf(line, sizeof line,
                 "btl_roce_bytes_sent +%llu, bytes_received +%llu, messages_sent +%llu over the "
                 "exchange (at least 4 MiB sent)",
                 get(&bsent) - s0, get(&brecv) - rb0, get(&bmsg) - m0);
        check(get(&bsent) - s0 >= (unsigned long long)kLarge && get(&bmsg) > m0, line);
    }
    free(large);
    MPI_Comm_free(&pair);
    return g_failed == 0;
}

/* Ping-pong in pairs (0-1, 2-3, ...) and print the btl's per-path view. */
static int watch_mode(int seconds) {
    pvar_t count, bytes, state, peer, fail, recon, retx, tfail;
    int have = pvar_open(&count, "btl_roce_path_count") && pvar_open(&bytes, "btl_roce_path_bytes_sent") &&
               pvar_open(&state, "btl_roce_path_state") && pvar_open(&peer, "btl_roce_path_peer") &&
               pvar_open(&fail, "btl_roce_path_failovers") &&
               pvar_open(&recon, "btl_roce_reconnects") && pvar_open(&retx, "btl_roce_retransmits") &&
               pvar_open(&tfail, "btl_roce_failovers");
    check(have, "the btl_roce_path_* performance variables exist");
    if (!have) {
        return 0;
    }
    enum { kSize = 1 << 20 };
    char *buf = calloc(1, kSize);
    int other = g_rank ^ 1;
    if (other >= g_size) {
        other = MPI_PROC_NULL;
    }
    static const char *names[] = {"idle", "connecting", "await_rtu", "up"};
    double start = MPI_Wtime(), next = start + 1;
    while (MPI_Wtime() - start < seconds) {
        if (g_rank % 2 == 0) {
            MPI_Send(buf, kSize, MPI_CHAR, other, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, kSize, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, kSize, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, kSize, MPI_CHAR, other, 1, MPI_COMM_WORLD);
        }
        if (MPI_Wtime() < next) {
            continue;
        }
        next += 1;
        char out[4096];
        int n = snprintf(out, sizeof out, "t=%3.0fs rank %d: failovers %llu reconnects %llu retransmits %llu |",
                         MPI_Wtime() - start, g_rank, get(&tfail), get(&recon), get(&retx));
        unsigned long long paths = get(&count);
        for (unsigned long long i = 0; i < paths && i < MAX_SLOTS && n < (int)sizeof out - 80; ++i) {
            long long st = (long long)pvar_get(&state, (int)i);
            n += snprintf(out + n, sizeof out - n, " path%llu->%llu %s %llu MB f%llu",
                          i, pvar_get(&peer, (int)i), st >= 0 && st <= 3 ? names[st] : "none",
                          pvar_get(&bytes, (int)i) >> 20, pvar_get(&fail, (int)i));
        }
        printf("%s\n", out);
        fflush(stdout);
    }
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    int provided, watch = 0, require_btl = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--watch") == 0 && i + 1 < argc) {
            watch = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--require-btl") == 0) {
            require_btl = 1;
        } else {
            fprintf(stderr, "usage: %s [--require-btl | --watch SECONDS]\n", argv[0]);
            return 2;
        }
    }
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_T_pvar_session_create(&g_session);
    open_all();
    int ok = watch > 0 ? watch_mode(watch) : check_mode(require_btl);
    if (g_rank == 0 && watch == 0) {
        print_all();
    }
    MPI_T_pvar_session_free(&g_session);
    /* Before MPI_Finalize: Open MPI 4.1.4 crashes in an MPI_T_finalize
     * that follows MPI_Finalize (with any pml). */
    MPI_T_finalize();
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("pvars: %s (%d checks passed on rank 0, %d failed)\n", all_ok ? "ok" : "FAILED",
               g_passed, g_failed);
    }
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
