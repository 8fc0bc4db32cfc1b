#!/bin/bash
# Two guests, active-backup bonds (tests/vm/pml-two-ci.test): the CI-sized
# check of our pml roce over btl self,vader,roce on the real stack. Runs as
# root (vmtest-fault needs it); every MPI job runs as the unprivileged user
# (RUN_AS, lib/btl.sh as_user), one rank per guest.
#   1. the core tests/mpi programs (ROCE_TEST_SCALE, --quick, --strict);
#   2. tests/mpi/stress with the active member's cable pulled and replugged
#      (lib/btl.sh stress_cut): 0 data errors; the traffic moved to the
#      surviving member (tx_bytes); the btl's path failed and reconnected
#      (its warnings and per-path counters);
#   3. both cables pulled for good during stress: the job ends with the
#      pml's fatal error naming btl roce, not a hang.
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

BTL=self,vader,roce
RUN_AS=$VMTEST_USER
export SUITE_PML=roce MPI_PML=roce
SCALE=${BTL_TEST_SCALE:-0.05} # iteration counts under emulation, as contrib/demo.sh
# The programs a pml must pass: eager/rendezvous and non-contiguous p2p,
# matching order, wildcards, probe/mprobe, the synchronous protocol,
# truncation, collectives over the pml, the demo's ping-pong; and one-sided
# communication through osc/rdma, which takes the btl's RDMA and atomics
# directly (the only check in this tier that a btl without PUT/GET - as
# 676d652 made it - cannot pass).
CORE="p2p ordering wildcards probe ssend truncate collectives mpi-pingpong osc"
STRESS_SECONDS=${BTL_STRESS_SECONDS:-120} # the job runs on after the restore
# shellcheck disable=SC2034 # CUT_AT, HOLD: read by stress_cut (lib/btl.sh)
CUT_AT=${BTL_CUT_AT:-30}                  # stress clock (s) of the pull
HOLD=${BTL_HOLD:-30}                      # stress seconds the cable stays pulled
MIN_MOVED=1000000                         # bytes a member must send to count as carrying the job
MIN_SHARE=90                              # % of a guest's bond bytes that member must send
export ROCE_TEST_SCALE=$SCALE

# The jobs' user writes its logs and ompi_info output (btl_env) here too.
user_dir "$CHECK_TMP" && user_dir "$LOGS" || echo "warning: cannot give $RUN_AS $CHECK_TMP and $LOGS"

other_member() { if [ "$1" = eth0 ]; then echo eth1; else echo eth0; fi; }

# Root here, the unprivileged user in the jobs; our btl and pml are the ones
# loaded on both guests; the ranks of a job run as that user on both guests;
# both bonds send on the same member.
ci_env() {
    [ "$(id -u)" = 0 ] || die "must run as root (vmtest-fault); the MPI jobs run as $RUN_AS"
    as_user bash -c 'btl_env && pml_env' || exit 1
    ranks_as_user
    same_active_member
    note "active-backup: both bonds on $(active_member node1); jobs run as $RUN_AS (ranks on $VMTEST_NODES)"
}

# The core programs, one rank per guest: every byte between the ranks is RoCE.
ci_core() {
    # shellcheck disable=SC2086 # CORE: program names
    suite pml-ci-core --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --osc rdma --quick --strict \
        --timeout 600 --env "ROCE_TEST_SCALE=$SCALE" $CORE
}

# 2 ranks, one per guest; the active member's cable pulled at stress t=CUT_AT s
# for HOLD stress seconds. stress_cut dies unless the job passed with 0 data
# errors and recovered; the next two checks read the evidence it left.
ci_stress_cut() {
    local a
    a=$(active_member node1)
    echo "$a" >"$CHECK_TMP/stress-cut.member"
    ROCE_TEST_SECONDS=$STRESS_SECONDS stress_cut stress-cut "${a#eth}" -np 2 --hostfile "$VMTEST_HOSTFILE"
}

# The traffic moved: before the pull the pulled member sent the job's bytes
# on both guests, while it was out the other member did (>= MIN_MOVED bytes
# and >= MIN_SHARE% of the bond's, each time).
ci_cut_moved() {
    local ev=$CHECK_TMP/stress-cut m s n x y
    [ -s "$ev.r0" ] && [ -s "$CHECK_TMP/stress-cut.member" ] || die "no evidence: pml-ci-stress-cut did not get to the restore"
    m=$(cat "$CHECK_TMP/stress-cut.member")
    s=$(other_member "$m")
    tx_report "$ev.s0" "$ev.b0" | sed 's/tx_bytes:/before the pull, tx_bytes:/'
    tx_report "$ev.c0" "$ev.r0" | sed "s/tx_bytes:/while $m was pulled, tx_bytes:/"
    for n in $VMTEST_NODES; do
        x=$(tx_delta "$ev.s0" "$ev.b0" "$n" "$m")
        y=$(tx_delta "$ev.s0" "$ev.b0" "$n" "$s")
        [ "$x" -ge "$MIN_MOVED" ] && [ $((100 * x)) -ge $((MIN_SHARE * (x + y))) ] ||
            die "$n: before the pull $m sent $x B and $s $y B: $m did not carry the job"
        x=$(tx_delta "$ev.c0" "$ev.r0" "$n" "$s")
        y=$(tx_delta "$ev.c0" "$ev.r0" "$n" "$m")
        [ "$x" -ge "$MIN_MOVED" ] && [ $((100 * x)) -ge $((MIN_SHARE * (x + y))) ] ||
            die "$n: while $m was pulled $s sent $x B and $m $y B: the traffic did not move to $s"
        note "$n: $m carried the job before the pull, $s while it was out ($x B)"
    done
}

# The path failed over: the btl warned that its path failed and reconnects,
# and its per-path counters at finalize count failovers and reconnects.
ci_cut_failover() {
    local err=$LOGS/stress-cut.err lines bytes retr fo rc w
    [ -s "$LOGS/stress-cut.out" ] || die "no evidence: pml-ci-stress-cut did not run"
    w=$(grep -c -E "$PATH_FAILED" "$err")
    grep -E "$PATH_FAILED" "$err" | head -4 | sed 's/^/note: /'
    read -r lines bytes retr fo rc <<<"$(path_totals "$err")"
    grep -E 'btl roce: path [0-9]+ to .* reconnects$' "$err" | sed 's/^.*btl roce: /note: /'
    note "$w path-failure warnings; per-path counters ($lines lines): $fo failovers, $rc reconnects, $retr retransmits"
    [ "$lines" -ge 2 ] || die "no per-path counters at finalize from both ranks ($lines lines)"
    [ "$w" -ge 1 ] || die "the btl did not report a failed path"
    [ "$fo" -ge 1 ] || die "no failover counted"
    [ "$rc" -ge 1 ] || die "no path reconnected"
}

# Both cables pulled for good: the peer is lost. The btl gives up on the
# endpoint after btl_roce_connect_timeout (PEER_LOST_TIMEOUT s) and reports
# it to the pml as fatal; the pml must end the job with an error that names
# it, not leave it hanging (before the fix the pml registered its error
# callback before the bml knew any btl, so the report went nowhere).
PEER_LOST_TIMEOUT=10
ci_peer_lost() {
    local log=$LOGS/peer-lost t0 rc
    STRESS_LOG=$log
    ROCE_TEST_SECONDS=900 BTL_CONNECT_TIMEOUT=$PEER_LOST_TIMEOUT MPI_LIMIT=600 \
        mpi "$log" -np 2 --hostfile "$VMTEST_HOSTFILE" "$MPI_BIN/stress" &
    pid=$!
    wait_for 600 "stress t >= 10 s" t_at_least 10
    kill -0 "$pid" 2>/dev/null || die "stress ended before the pull: $(tail -3 "$log.err")"
    vmtest-fault cut 0 && vmtest-fault cut 1 || die "vmtest-fault cut failed"
    t0=$SECONDS
    note "both members cut at utc $(date -u +%T) (stress t=$(stress_t) s)"
    wait "$pid"
    rc=$?
    vmtest-fault restore 0 && vmtest-fault restore 1 || die "vmtest-fault restore failed"
    note "the job ended $((SECONDS - t0)) s after both cables were out, mpirun exit $rc"
    grep -E 'fatal|connection to .* failed' "$log.err" | head -4 | sed 's/^/note: /'
    [ "$rc" != 124 ] && [ "$rc" != 137 ] || die "the job hung until the ${MPI_LIMIT:-600} s limit"
    [ "$rc" != 0 ] || die "the job passed although its peer was gone"
    grep -q -E '^stress: PASS' "$log.out" && die "stress says PASS"
    grep -q -E 'pml roce \[[^]]*\]: fatal: ' "$log.err" ||
        die "no 'pml roce [host]: fatal:' line on stderr (logs $log.{out,err})"
}

check pml-ci-env 120 ci_env
check pml-ci-core 600 ci_core
check pml-ci-stress-cut $((STRESS_SECONDS * 4 + 400)) ci_stress_cut
check pml-ci-cut-moved 60 ci_cut_moved
check pml-ci-cut-failover 30 ci_cut_failover
check pml-ci-peer-lost 900 ci_peer_lost
finish
