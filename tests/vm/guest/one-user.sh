#!/bin/bash
# One guest, run as the unprivileged user with the default memlock limit
# (tests/vm/one-user.test).
. "$(dirname "$0")/../lib/check.sh"

DEV=$VMTEST_RDMA_DEV
# The attributes our selection gives on a RoCE bond: pkey_index 0 (the only
# pkey entry), port 1 (the bond device has one port), a qkey with bit 31 clear.
SEL_PORT=1 SEL_PKEY=0 SEL_QKEY=0x1ee7a330

# probe EXPECTED PORT PKEY_INDEX QKEY: one real UD RESET->INIT; the kernel's
# answer must be EXPECTED (OK or an errno name).
probe() {
    local out
    out=$("$VMTEST_PROBES/ud_init_probe" "$DEV" "$2" "$3" "$4") || die "probe could not run: $out"
    echo "$out"
    case $out in *"result=$1"*) ;; *) die "expected result=$1" ;; esac
}

user_env() {
    echo "uid $(id -u) ($(id -un)), ulimit -l $(ulimit -l), $(stat -c '%a %n' /dev/infiniband/uverbs*)"
    [ "$(id -un)" = "$VMTEST_USER" ] && [ "$(id -u)" != 0 ] || die "not running as $VMTEST_USER"
    # --default-memlock: the kernel's default, as for a user nobody raised it for.
    [ "$(ulimit -l)" = 8192 ] || die "ulimit -l is not the default 8192 KiB"
    [ "$(stat -c %a /dev/infiniband/uverbs0)" = 666 ] || die "uverbs0 is not 0666"
}
ud_init_selected_ok() { probe OK "$SEL_PORT" "$SEL_PKEY" "$SEL_QKEY"; }
ud_init_qkey_bit31_eperm() { probe EPERM "$SEL_PORT" "$SEL_PKEY" 0x80000001; }
ud_init_port2_einval() { probe EINVAL 2 "$SEL_PKEY" "$SEL_QKEY"; }

check user-env 30 user_env
check ud-init-selected-ok 60 ud_init_selected_ok
check ud-init-qkey-bit31-eperm 60 ud_init_qkey_bit31_eperm
check ud-init-port2-einval 60 ud_init_port2_einval
finish
