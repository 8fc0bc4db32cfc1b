#!/bin/bash
# Two guests, two rails each (tests/vm/btl-rails.test), root: ob1 over btl
# self,vader,roce; one btl roce module per RDMA device.
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

BTL=self,vader,roce
STRESS_SECONDS=${BTL_STRESS_SECONDS:-240}
CUT_AT=${BTL_CUT_AT:-40}
HOLD=${BTL_HOLD:-40}
MIN_SHARE=30 # % of the bytes each rail must carry
export ROCE_TEST_SECONDS=$STRESS_SECONDS ROCE_TEST_SCALE=${BTL_TEST_SCALE:-0.1}
export ROCE_TEST_MAX_BYTES=${BTL_MAX_BYTES:-256K} ROCE_BENCH_REPS=1 ROCE_BENCH_MIN_BYTES=1

# Both RDMA devices on both guests, each on its own bond; a 2-rank job at
# verbose 50: every rank has one module per device, says the bandwidth each
# derived from its port, and connects to the peer over both.
rails_env() {
    local n
    btl_env
    for n in $VMTEST_NODES; do
        on "$n" "rdma link show" | sed "s/^/$n: /"
        on "$n" "rdma link show | grep -q '$VMTEST_RDMA_DEV/1 .*netdev $VMTEST_BOND\b' &&
                 rdma link show | grep -q '$VMTEST_RDMA_DEV1/1 .*netdev $VMTEST_BOND1\b'" ||
            die "$n: not both $VMTEST_RDMA_DEV on $VMTEST_BOND and $VMTEST_RDMA_DEV1 on $VMTEST_BOND1"
    done
    ROCE_TEST_SECONDS=5 MPI_LIMIT=300 BTL_VERBOSE=50 mpi "$LOGS/rails-env" -np 2 \
        --hostfile "$VMTEST_HOSTFILE" "$MPI_BIN/stress"
    local rc=$?
    grep -E 'btl roce: rxe_bond[01]:1: bandwidth' "$LOGS/rails-env.err" | sed 's/^.*btl roce: /note: /' | sort -u
    grep -E 'btl roce: path [0-9]+ to rank .* up: ' "$LOGS/rails-env.err" | sed 's/^.*btl roce: /note: /' | head -8
    [ "$rc" = 0 ] && grep -q '^stress: PASS' "$LOGS/rails-env.out" || {
        other_stderr "$LOGS/rails-env.err" | head -20
        die "the 2-rank job failed (exit $rc)"
    }
    for n in $VMTEST_NODES; do
        for d in "$VMTEST_RDMA_DEV" "$VMTEST_RDMA_DEV1"; do
            grep -q -E "\[$n:[0-9]+\] btl roce: $d:1: bandwidth 50000 Mb/s \(2 members x 25 Gb/s of " "$LOGS/rails-env.err" ||
                die "$n: no module on $d, or its bandwidth not derived from the bond (2 x 25 Gb/s)"
        done
    done
    # A bandwidth the user sets wins over the derived one, and the line says so.
    ROCE_TEST_SECONDS=3 MPI_LIMIT=300 mpi "$LOGS/rails-bw" -np 2 --hostfile "$VMTEST_HOSTFILE" \
        --mca btl_roce_bandwidth 12345 "$MPI_BIN/stress"
    rc=$?
    grep -E 'btl roce: rxe_bond[01]:1: bandwidth' "$LOGS/rails-bw.err" | sed 's/^.*btl roce: /note: --mca btl_roce_bandwidth 12345: /' | sort -u
    [ "$rc" = 0 ] && grep -q '^stress: PASS' "$LOGS/rails-bw.out" || die "the job with btl_roce_bandwidth 12345 failed (exit $rc)"
    [ "$(grep -c -E 'btl roce: rxe_bond[01]:1: bandwidth 12345 Mb/s \(btl_roce_bandwidth, set explicitly' "$LOGS/rails-bw.err")" = 4 ] ||
        die "btl_roce_bandwidth 12345 was not kept by all 4 modules (2 ranks x 2 rails)"
}

# rxe_packets before|after: both devices' sent_pkts on every guest; "after"
# notes each device's packets since "before".
rxe_packets() {
    local n
    for n in $VMTEST_NODES; do
        on "$n" "for d in $VMTEST_RDMA_DEV $VMTEST_RDMA_DEV1; do
                     echo \"\$(hostname) \$d \$(cat /sys/class/infiniband/\$d/ports/1/hw_counters/sent_pkts)\"
                 done"
    done >"$CHECK_TMP/pkts.$1"
    [ "$1" = after ] || return 0
    awk 'FNR == NR { b[$1 " " $2] = $3; next } { printf "note: %s %s: +%d packets sent (rxe hw_counters/sent_pkts)\n", $1, $2, $3 - b[$1 " " $2] }' \
        "$CHECK_TMP/pkts.before" "$CHECK_TMP/pkts.after"
}

# A bandwidth run (1 MiB messages, window of 64, one way then both ways), one
# rank per guest: each rail of each guest carries >= MIN_SHARE% of the bytes
# (the bml weighs the two modules by their btl_bandwidth).
rails_spread() {
    bandwidth_spread rail_split rail rxe_packets
}

# 8 ranks (4 per guest), STRESS_SECONDS of all-to-all and ping-pong with every
# byte verified; rail 1's cables (eth2 and eth3, both members of bond1) are
# pulled at stress clock CUT_AT s and replugged HOLD stress seconds later;
# the traffic must get back to half its rate while rail 1 is out (issue 16:
# a lost rail's traffic moves to the others), and rail 1 carry it again after.
rails_stress_cut() {
    local n d
    # The rail's traffic must move to rail 0 while rail 1 is out, not wait for it.
    STRESS_RECOVER_DURING_CUT=1 stress_cut stress-cut "2 3" -np 8 --host node1:4,node2:4 --bind-to none --mca mpi_yield_when_idle 1
    # failback: rail 1 carries traffic again on both guests
    for n in $VMTEST_NODES; do
        d=$(($(tx_delta "$CHECK_TMP/stress-cut.r0" "$CHECK_TMP/stress-cut.e0" "$n" eth2) +
            $(tx_delta "$CHECK_TMP/stress-cut.r0" "$CHECK_TMP/stress-cut.e0" "$n" eth3)))
        [ "$d" -gt 1000000 ] || die "$n: rail 1 carried only $d B after the restore: no failback"
    done
}

check btl-rails-env 300 rails_env
check btl-rails-spread 600 rails_spread
check btl-rails-stress-cut $((STRESS_SECONDS * 4 + 400)) rails_stress_cut
finish
