#!/bin/bash
# Two guests, unprivileged user, ob1 over btl self,vader,roce (tests/vm/btl-two-user.test).
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

BTL=self,vader,roce
SCALE=${BTL_TEST_SCALE:-0.05}
RUNS=${BTL_PINGPONG_RUNS:-20}
PP_ITERS=${BTL_PINGPONG_ITERS:-2} # timed iterations per size: the runs are about connection setup, not timing

two_env() {
    [ "$(id -u)" != 0 ] || die "running as root, not as $VMTEST_USER"
    btl_env
    # ssh does not carry the environment: give node2 the same component path.
    on node2 "OMPI_MCA_mca_base_component_path=$OMPI_MCA_mca_base_component_path ompi_info --parsable --param btl roce 2>/dev/null | grep -q '^mca:btl:roce:'" ||
        die "node2 does not see btl roce"
}

two_doctor() {
    local d=$ROCE_BUILDDIR/contrib/roce-doctor/roce-doctor n
    [ -x "$d" ] || die "no $d"
    for n in $VMTEST_NODES; do
        echo "== $n"
        on "$n" "$d --check" || die "roce-doctor --check failed on $n"
    done
}

# One rank per guest: every byte crosses the bond.
two_p2p() {
    suite two-p2p --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --timeout 1500 \
        --env ROCE_TEST_MAX_BYTES=64M --env "ROCE_TEST_SCALE=$SCALE" p2p
}

# osc forced to osc/rdma across the guests (the btl's RDMA and 64-bit atomics).
two_suite() {
    suite two-suite --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --osc rdma --quick \
        --timeout 600 --env "ROCE_TEST_SCALE=$SCALE" --env ROCE_TEST_SECONDS=20 \
        many_to_one all_to_all collectives osc ordering wildcards probe zerobyte large stress
}

# 8 ranks, 4 per guest (one vCPU each: no binding).
two_8ranks() {
    suite two-8 --np 8 --host node1:4,node2:4 --mpirun-arg=--bind-to --mpirun-arg=none --mca btl "$BTL" \
        --quick --timeout 900 --env "ROCE_TEST_SCALE=$SCALE" many_to_one all_to_all collectives
}

# The reported program's pattern (sync, async, bidirectional; 8 B .. 1 MiB)
# RUNS times in a row; not one "Failed to modify" line, every run PASS.
two_pingpong() {
    local i rc bad=0 fm=0 log
    for ((i = 1; i <= RUNS; i++)); do
        log=$LOGS/pingpong.$i
        ROCE_TEST_SCALE=$SCALE timeout -k 5 300 mpirun -np 2 --hostfile "$VMTEST_HOSTFILE" \
            -x ROCE_TEST_SCALE -x OMPI_MCA_mca_base_component_path \
            --mca pml ob1 --mca btl "$BTL" "$MPI_BIN/mpi-pingpong" --iters "$PP_ITERS" >"$log.out" 2>"$log.err"
        rc=$?
        n=$(cat "$log.out" "$log.err" | grep -c 'Failed to modify')
        fm=$((fm + n))
        if [ "$rc" != 0 ] || ! grep -q '^mpi-pingpong: PASS' "$log.out" || [ -s "$log.err" ]; then
            bad=$((bad + 1))
            echo "run $i: exit $rc, stderr:"
            head -20 "$log.err"
        fi
        echo "run $i: exit $rc, $(grep -m1 '^mpi-pingpong: ' "$log.out"), $n 'Failed to modify'"
    done
    note "$RUNS runs: $((RUNS - bad)) passed clean, $bad failed or wrote to stderr, $fm 'Failed to modify' lines"
    note "last run: $(grep -E '^ *(8|1048576) ' "$LOGS/pingpong.$RUNS.out" | tr -s ' ' | tr '\n' ';')"
    [ "$fm" = 0 ] || die "$fm 'Failed to modify' lines"
    [ "$bad" = 0 ] || die "$bad of $RUNS runs failed"
}

# Cheapest and most asked-for first: a slow host may end the group early.
check btl-two-env 120 two_env
check btl-two-doctor 180 two_doctor
check btl-two-pingpong-20 $((RUNS * 330 + 60)) two_pingpong # each run is bounded by 300 s
check btl-two-suite 1800 two_suite
check btl-two-8ranks 1000 two_8ranks
check btl-two-p2p-64m 1600 two_p2p
finish
