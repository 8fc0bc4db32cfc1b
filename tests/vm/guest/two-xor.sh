#!/bin/bash
# Two guests, balance-xor bonds with layer3+4 hashing (run by tests/vm/two-xor.test).
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"

xor_mode() {
    local n
    for n in $VMTEST_NODES; do
        on "$n" "grep -E '^(Bonding Mode|Transmit Hash Policy):' /proc/net/bonding/$VMTEST_BOND" | sed "s/^/$n: /"
        on "$n" "grep -qx 'Bonding Mode: load balancing (xor)' /proc/net/bonding/$VMTEST_BOND" ||
            die "$n: not balance-xor"
        on "$n" "grep -qx 'Transmit Hash Policy: layer3+4 (1)' /proc/net/bonding/$VMTEST_BOND" ||
            die "$n: hash policy is not layer3+4"
    done
}

# 16 QPs: see two-lacp.sh for why the spread is random per run.
xor_spread_rc_qps() { spread_check 18700 16 20 1024; }

check xor-mode 60 xor_mode
check xor-spread-rc-qps 300 xor_spread_rc_qps
finish
