#!/bin/bash
# One guest, unprivileged user, ob1 over btl self,roce (tests/vm/btl-one-user.test).
# Sizes and iteration counts are scaled down for TCG (ROCE_TEST_SCALE); p2p
# still goes to 64 MiB, contiguous and non-contiguous.
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

BTL=self,roce
SCALE=${BTL_TEST_SCALE:-0.05}

one_env() {
    [ "$(id -u)" != 0 ] || die "running as root, not as $VMTEST_USER"
    btl_env
}

# roce-doctor --check: real QP transitions through the same preflight as the btl.
one_doctor() {
    local d=$ROCE_BUILDDIR/contrib/roce-doctor/roce-doctor
    [ -x "$d" ] || die "no $d"
    "$d" --check || die "roce-doctor --check exited $?"
}

# 0 B .. 64 MiB at every power of two and around it, blocking and nonblocking,
# vector/indexed/struct/hvector layouts up to 64 MiB.
one_p2p() {
    suite one-p2p --np 2 --oversubscribe --mca btl "$BTL" --timeout 1500 \
        --env ROCE_TEST_MAX_BYTES=64M --env "ROCE_TEST_SCALE=$SCALE" p2p
}

# The rest of the suite at 2 ranks; osc forced to osc/rdma (put, get, accumulate,
# fetch_and_op, compare_and_swap under lock_all over the btl's RDMA and atomics).
one_suite() {
    suite one-suite --np 2 --oversubscribe --mca btl "$BTL" --osc rdma --quick --timeout 600 \
        --env "ROCE_TEST_SCALE=$SCALE" --env ROCE_TEST_SECONDS=20 \
        many_to_one all_to_all collectives osc ordering wildcards probe zerobyte large stress
}

# 8 ranks through the one rxe device: many-to-one, all-to-all, collectives.
one_8ranks() {
    suite one-8 --np 8 --oversubscribe --mpirun-arg=--bind-to --mpirun-arg=none --mca btl "$BTL" --quick \
        --timeout 900 --env "ROCE_TEST_SCALE=$SCALE" many_to_one all_to_all collectives
}

check btl-one-env 60 one_env
check btl-one-doctor 120 one_doctor
check btl-one-p2p-64m 1600 one_p2p
check btl-one-suite 1800 one_suite
check btl-one-8ranks 1000 one_8ranks
finish
