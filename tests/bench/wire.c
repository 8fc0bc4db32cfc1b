/* wire: ping-pong phases whose traffic is counted on the wire, ranks 0 and 1
 * on two hosts (contrib/bench/wire-counts runs it in the two vmtest guests).
 *
 * For each size (ROCE_BENCH_SIZES, default 8,4K,64K,1M): W warm-up round
 * trips, then a phase of N round trips, then one of 2N (N: ROCE_WIRE_N, else
 * 100 up to 4 KiB, 40 up to 64 KiB, 10 above). Around each phase every rank
 * reads its own counters while the link is quiet:
 *   rank 0: sleep 0.3 s (the peer's last packets and ACKs land), read,
 *           send a marker, sleep 1 s, read again, start the phase;
 *   rank 1: after its last send, sleep 0.5 s, read (before rank 0's next
 *           ping, which comes at least 1.3 s after rank 0's last receive).
 * So a phase's counters hold the phase's traffic only: no wire-up, no
 * warm-up, no marker, no barrier. The marker is one UDP broadcast on the
 * netdev (port 9, payload "ompi-roce-wire SIZE K", K = 0 after the warm-up,
 * 1 after the N phase, 2 after the 2N phase), sent between the two reads: a
 * packet capture on the fabric splits at the markers, so the capture's phases
 * are exactly the counters' phases. Counters: the RDMA device's
 * ports/1/hw_counters/{sent_pkts,rcvd_pkts} (ROCE_WIRE_DEV, default
 * rxe_bond0) and the netdev's statistics/{tx_bytes,rx_bytes}
 * (ROCE_WIRE_NETDEV, default bond0). At the end rank 1's figures go to rank
 * 0, which prints CSV lines "wire_n,SIZE,RANK_COUNTER,DELTA" (the N phase),
 * "wire_2n,..." (the 2N phase) and "wire_iters,SIZE,n,N". The caller forms
 * (C(2N) - C(N)) / N per round trip. Packets are counted, not timed. */
#include "bench.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

enum { NCOUNTERS = 4, MAXSIZES = 16, WARMUP = 5, MARKER_PORT = 9 };

static const char *const counter_names[NCOUNTERS] = {"sent_pkts", "rcvd_pkts", "tx_bytes",
                                                     "rx_bytes"};

/* One counter file: a decimal number. Any failure aborts (a wrong figure is worse). */
static long long read_counter(const char *path) {
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (!f || fscanf(f, "%lld", &v) != 1 || v < 0) {
        fprintf(stderr, "wire: rank %d: cannot read %s: %s\n", mt_rank, path,
                f ? "not a number" : strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(f);
    return v;
}

static void read_counters(const char *dev, const char *netdev, long long *out) {
    char p[512];
    for (int i = 0; i < NCOUNTERS; i++) {
        if (i < 2)
            snprintf(p, sizeof p, "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev,
                     counter_names[i]);
        else
            snprintf(p, sizeof p, "/sys/class/net/%s/statistics/%s", netdev, counter_names[i]);
        out[i] = read_counter(p);
    }
}

/* The marker: a UDP broadcast on netdev's subnet (address | ~netmask: the
 * guests' addresses carry no brd). A broadcast gets no ICMP reply and needs no
 * ARP, so the marker is the only frame it puts on the wire. */
static void send_marker(const char *netdev, long long size, int k) {
    struct ifaddrs *ifs = NULL, *i;
    struct sockaddr_in dst;
    int found = 0;
    if (getifaddrs(&ifs) == 0) {
        for (i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && i->ifa_netmask &&
                strcmp(i->ifa_name, netdev) == 0) {
                memcpy(&dst, i->ifa_addr, sizeof dst);
                dst.sin_addr.s_addr |= ~((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
                found = 1;
                break;
            }
        freeifaddrs(ifs);
    }
    if (!found) {
        fprintf(stderr, "wire: no IPv4 address on %s\n", netdev);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    dst.sin_port = htons(MARKER_PORT);
    int s = socket(AF_INET, SOCK_DGRAM, 0), on = 1;
    char msg[64];
    int len = snprintf(msg, sizeof msg, "ompi-roce-wire %lld %d", size, k);
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_BROADCAST, &on, sizeof on) != 0 ||
        setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, netdev, (socklen_t)strlen(netdev)) != 0 ||
        sendto(s, msg, (size_t)len, 0, (struct sockaddr *)&dst, sizeof dst) != len) {
        fprintf(stderr, "wire: marker on %s: %s\n", netdev, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    close(s);
}

/* it round trips of n bytes; the last message received is checked against
 * the peer's pattern (each rank sends the pattern of (its rank, n)). */
static void pingpong(long long n, long it, uint8_t *sb, uint8_t *rb, const char *what) {
    int peer = 1 - mt_rank;
    MPI_Status st;
    mt_fill(sb, (size_t)n, (uint64_t)mt_rank << 40 | (uint64_t)n);
    memset(rb, 0, (size_t)n);
    for (long i = 0; i < it; i++) {
        if (mt_rank == 0) {
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
        } else {
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    mt_check_status(&st, peer, 1, n, what);
    mt_verify(rb, (size_t)n, (uint64_t)peer << 40 | (uint64_t)n, what);
}

/* The quiet point between phases; out gets this rank's counters at the start
 * of the next phase, prev_end (rank 0: before its marker) those at the end of
 * the last one. Rank 1 has one read for both. */
static void boundary(const char *dev, const char *netdev, long long size, int k,
                     long long *prev_end, long long *next_start) {
    if (mt_rank == 0) {
        mt_sleep_ms(300);
        read_counters(dev, netdev, prev_end);
        send_marker(netdev, size, k);
        mt_sleep_ms(1000);
        read_counters(dev, netdev, next_start);
    } else {
        mt_sleep_ms(500);
        read_counters(dev, netdev, prev_end);
        memcpy(next_start, prev_end, sizeof(long long) * NCOUNTERS);
    }
}

static long iters_for(long long size) {
    const char *s = getenv("ROCE_WIRE_N");
    if (s && atol(s) > 0)
        return atol(s);
    return size <= 4096 ? 100 : size <= 65536 ? 40 : 10;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, "wire");
    mt_require_ranks(2);
    const char *dev = getenv("ROCE_WIRE_DEV"), *netdev = getenv("ROCE_WIRE_NETDEV");
    dev = dev && *dev ? dev : "rxe_bond0";
    netdev = netdev && *netdev ? netdev : "bond0";
    if (!getenv("ROCE_BENCH_SIZES"))
        setenv("ROCE_BENCH_SIZES", "8,4K,64K,1M", 1);
    long long sizes[MAXSIZES], maxb = 0;
    int ns = bench_sizes(0, mt_max_bytes(1 << 20), sizes, MAXSIZES);
    for (int i = 0; i < ns; i++)
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    if (mt_rank == 0) {
        printf("# wire: %s + %s counters around ping-pong phases of N and 2N round trips\n", dev,
               netdev);
        printf("benchmark,size,metric,value\n");
    }
    uint8_t *sb = (uint8_t *)mt_malloc((size_t)maxb), *rb = (uint8_t *)mt_malloc((size_t)maxb);
    /* per size: delta[phase][counter], phase 0 = N, 1 = 2N */
    long long delta[MAXSIZES][2][NCOUNTERS];
    for (int si = 0; si < ns; si++) {
        long long n = sizes[si], c[4][NCOUNTERS];
        long it = iters_for(n);
        pingpong(n, WARMUP, sb, rb, "warm-up");
        boundary(dev, netdev, n, 0, c[0], c[1]);
        pingpong(n, it, sb, rb, "N phase");
        boundary(dev, netdev, n, 1, c[2], c[3]);
        pingpong(n, 2 * it, sb, rb, "2N phase");
        long long end[NCOUNTERS], unused[NCOUNTERS];
        boundary(dev, netdev, n, 2, end, unused);
        for (int k = 0; k < NCOUNTERS; k++) {
            delta[si][0][k] = c[2][k] - c[1][k];
            delta[si][1][k] = end[k] - c[3][k];
        }
    }
    long long *all = (long long *)mt_malloc(sizeof delta * 2);
    MPI_Gather(delta, (int)(sizeof delta / sizeof(long long)), MPI_LONG_LONG, all,
               (int)(sizeof delta / sizeof(long long)), MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        long long(*d)[MAXSIZES][2][NCOUNTERS] = (long long(*)[MAXSIZES][2][NCOUNTERS])all;
        for (int si = 0; si < ns; si++) {
            printf("wire_iters,%lld,n,%ld\n", sizes[si], iters_for(sizes[si]));
            for (int r = 0; r < 2; r++)
                for (int ph = 0; ph < 2; ph++)
                    for (int k = 0; k < NCOUNTERS; k++)
                        printf("%s,%lld,rank%d_%s,%lld\n", ph ? "wire_2n" : "wire_n", sizes[si], r,
                               counter_names[k], d[r][si][ph][k]);
        }
    }
    free(all);
    free(sb);
    free(rb);
    return mt_finish();
}
