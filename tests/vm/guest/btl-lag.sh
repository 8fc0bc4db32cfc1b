#!/bin/bash
# Two guests, root, ob1 over btl self,vader,roce with the btl's LAG paths
# (tests/vm/btl-lacp.test: MODE lacp, 802.3ad; tests/vm/btl-ab.test: MODE ab,
# active-backup). Usage: btl-lag.sh lacp|ab
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

MODE=${1:?lacp or ab}
BTL=self,vader,roce
STRESS_SECONDS=${BTL_STRESS_SECONDS:-360} # >= 60 s of data-verified traffic, long after the restore
CUT_AT=${BTL_CUT_AT:-60}                  # stress clock (s) of the pull
HOLD=${BTL_HOLD:-40}                      # stress seconds the cable stays pulled
MIN_SHARE=30                              # % of the bytes each member must carry
export ROCE_TEST_SECONDS=$STRESS_SECONDS ROCE_TEST_SCALE=${BTL_TEST_SCALE:-0.1}
export ROCE_TEST_MAX_BYTES=${BTL_MAX_BYTES:-256K} ROCE_BENCH_REPS=1 ROCE_BENCH_MIN_BYTES=1

bond_field() { on "$1" "sed -n 's/^[[:space:]]*$2: //p' /proc/net/bonding/$VMTEST_BOND | head -n1"; }
ports_in_aggregator() { [ "$(bond_field node1 'Number of ports')$(bond_field node2 'Number of ports')" = "$1$1" ]; }

lag_env() {
    btl_env
    if [ "$MODE" = lacp ]; then
        wait_for 60 "2 ports in each aggregator" ports_in_aggregator 2
        note "802.3ad: 2 ports in the aggregator on both guests"
    else
        note "active-backup: active member node1 $(active_member node1), node2 $(active_member node2)"
    fi
}

# A bandwidth run (1 MiB messages, window of 64, one way then both ways), one
# rank per guest (2 paths: the default on a 2-member bond):
# each member of each guest carries >= MIN_SHARE% of the bytes.
lag_spread() {
    [ "$MODE" = lacp ] || unsupported "active-backup sends on one member only"
    bandwidth_spread tx_split member
}

# The same spread with traffic in both directions that is not a window of 64
# each way at once (see docs/notes/btl-vm-findings.md): a 2-rank stress run,
# one rank per guest, 30 s; each member of each guest >= MIN_SHARE% of the bytes.
lag_spread_stress() {
    local min rc
    [ "$MODE" = lacp ] || unsupported "active-backup sends on one member only"
    tx_snapshot "$CHECK_TMP/p0"
    ROCE_TEST_SECONDS=30 MPI_LIMIT=400 mpi "$LOGS/spread-stress" -np 2 --hostfile "$VMTEST_HOSTFILE" \
        "$MPI_BIN/stress"
    rc=$?
    tx_snapshot "$CHECK_TMP/p1"
    grep -E '^stress: [0-9]+ iterations|^stress: (PASS|FAIL)' "$LOGS/spread-stress.out" | sed 's/^/note: /'
    grep -E 'btl roce: path [0-9]+ to ' "$LOGS/spread-stress.err" | sed 's/^.*btl roce: /note: /'
    path_summary "$LOGS/spread-stress.err"
    tx_split "$CHECK_TMP/p0" "$CHECK_TMP/p1" >"$CHECK_TMP/split2"
    grep '^note: ' "$CHECK_TMP/split2"
    min=$(tail -n1 "$CHECK_TMP/split2")
    [ "$rc" = 0 ] && grep -q '^stress: PASS' "$LOGS/spread-stress.out" || {
        other_stderr "$LOGS/spread-stress.err" | head -20
        die "stress run failed (exit $rc)"
    }
    note "smallest member share: $min% (need >= $MIN_SHARE%)"
    [ "$min" -ge "$MIN_SHARE" ] || die "a member carried only $min% of the bytes"
}

# 8 ranks (4 per guest), STRESS_SECONDS of all-to-all and ping-pong with every
# byte verified (4 ranks on one vCPU: they yield when idle); member N's cable
# (N = 0 on 802.3ad, the active member on active-backup) is pulled at stress
# clock CUT_AT s and replugged HOLD stress seconds later (lib/btl.sh stress_cut).
lag_stress_cut() {
    local m ns=0 n pre
    [ "$MODE" = ab ] && m=$(active_member node1) && ns=${m#eth}
    stress_cut stress-cut "$ns" -np 8 --host node1:4,node2:4 --bind-to none --mca mpi_yield_when_idle 1
    if [ "$MODE" = lacp ]; then
        # failback: the returned member carries traffic again on both guests
        for n in $VMTEST_NODES; do
            pre=$(tx_delta "$CHECK_TMP/stress-cut.r0" "$CHECK_TMP/stress-cut.e0" "$n" "eth$ns")
            [ "$pre" -gt 1000000 ] || die "$n: eth$ns carried only $pre B after the restore: no failback"
        done
    fi
}

# bond0's IPv4 on node1 is replaced (198.18.0.101/24, same subnet) while a
# 2-rank stress run is going; the run completes with no errors, and a fresh
# job's connections use the GID of the new address.
lag_addr_change() {
    local pid rc new=198.18.0.101
    [ "$MODE" = lacp ] || unsupported "run in the 802.3ad group"
    ROCE_TEST_SECONDS=40 MPI_LIMIT=400 mpi "$LOGS/addr" -np 2 --hostfile "$VMTEST_HOSTFILE" \
        "$MPI_BIN/stress" &
    pid=$!
    wait_for 300 "the first progress line of stress" grep -q '^stress: progress' "$LOGS/addr.out"
    sleep 10
    vmtest-fault addr-change || die "vmtest-fault addr-change failed"
    note "addr-change on node1 at utc $(date -u +%T): $(ip -4 -o addr show dev "$VMTEST_BOND" | awk '{print $4}' | tr '\n' ' ')"
    wait "$pid"
    rc=$?
    grep '^stress: ' "$LOGS/addr.out"
    grep -E '^stress: [0-9]+ iterations|^stress: iteration time|^stress: (PASS|FAIL)' "$LOGS/addr.out" | sed 's/^/note: /'
    path_summary "$LOGS/addr.err"
    echo "GID table of node1 after the change:"
    grep -H . /sys/class/infiniband/"$DEV"/ports/1/gids/[0-9] 2>/dev/null | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$' | head
    local ok=1
    if [ "$rc" != 0 ] || ! grep -q '^stress: PASS' "$LOGS/addr.out"; then
        other_stderr "$LOGS/addr.err" | head -40
        note "the job during the address change did not pass (exit $rc)"
        ok=0
    fi
    # A fresh job: node1's connections must come from the new address's GID.
    ROCE_TEST_SECONDS=5 MPI_LIMIT=300 BTL_VERBOSE=50 mpi "$LOGS/addr-fresh" -np 2 \
        --hostfile "$VMTEST_HOSTFILE" "$MPI_BIN/stress"
    local frc=$?
    grep -E 'btl roce: path [0-9]+ to rank .* up: ' "$LOGS/addr-fresh.err" | sed 's/^.*btl roce: /note: fresh job: /' | head -8
    grep -q '^stress: PASS' "$LOGS/addr-fresh.out" && [ "$frc" = 0 ] || {
        other_stderr "$LOGS/addr-fresh.err" | head -20
        die "the fresh job after the address change failed (exit $frc)"
    }
    # At verbose 50 the btl prints every connection it brings up, with the
    # GID it sends from ("path 0 to rank 1 (node2, ...) up: ... (gid[N] ADDR
    # (RoCE v2, bond0) -> ..."). The port's own line (no peer) may name
    # another GID that ties; connections use the per-peer choice.
    grep -q -E "\[node1:[0-9]+\] btl roce: path [0-9]+ to rank .* up: .*\(gid\[[0-9]+\] $new \(RoCE v2, $VMTEST_BOND\)" \
        "$LOGS/addr-fresh.err" || die "node1's fresh job does not use $new's GID"
    [ "$ok" = 1 ] || die "the job running across the address change failed (exit $rc); logs $LOGS/addr.{out,err}"
}

check "btl-$MODE-env" 120 lag_env
# The bandwidth run last: on a loaded host it can take its whole 500 s.
[ "$MODE" = lacp ] && check btl-lacp-spread-stress 500 lag_spread_stress
check "btl-$MODE-stress-cut" $((STRESS_SECONDS * 4 + 400)) lag_stress_cut
[ "$MODE" = lacp ] && check btl-lacp-addr-change 900 lag_addr_change
[ "$MODE" = lacp ] && check btl-lacp-spread 600 lag_spread
finish
