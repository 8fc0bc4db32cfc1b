#!/bin/bash
# Two guests, unprivileged user, pml roce over btl self,vader,roce
# (tests/vm/pml-two-user.test). Sizes and iteration counts are scaled down
# for TCG (ROCE_TEST_SCALE, --quick: messages up to 4 MiB).
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

BTL=self,vader,roce
SCALE=${BTL_TEST_SCALE:-0.05}
export SUITE_PML=roce

# Our pml and btl are the ones loaded, on both guests.
two_env() {
    [ "$(id -u)" != 0 ] || die "running as root, not as $VMTEST_USER"
    btl_env
    pml_env
}

# Every program, one rank per guest: all traffic between the ranks is RoCE.
two_suite() {
    suite pml-two --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --osc rdma --quick --strict \
        --timeout 600 --env "ROCE_TEST_SCALE=$SCALE" --env ROCE_TEST_SECONDS=20
}

# 8 ranks, 4 per guest: vader inside a guest and roce between them at once.
two_8ranks() {
    suite pml-two-8 --np 8 --host node1:4,node2:4 --mpirun-arg=--bind-to --mpirun-arg=none \
        --mca btl "$BTL" --quick --strict --timeout 900 --env "ROCE_TEST_SCALE=$SCALE" \
        --env ROCE_TEST_SECONDS=20 \
        many_to_one all_to_all collectives ordering wildcards probe ssend commrace threads
}

check pml-two-env 120 two_env
check pml-two-suite 2700 two_suite
check pml-two-8ranks 1800 two_8ranks
finish
