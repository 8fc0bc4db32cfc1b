#!/bin/bash
# Two guests, 802.3ad bonds with layer3+4 hashing (run by tests/vm/two-lacp.test).
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"

# rxe (5.17+) sets a QP's UDP source port from its (local, remote) QPN pair, and
# concurrent QP creation pairs QPNs differently on every run, so the spread is
# random: 8 QPs would all land on one member once in 128 runs; 16 once in 32768.
QPS=16    # concurrent RC QPs
ITERS=20  # round trips per QP
SIZE=1024 # bytes per message

# bond_field NODE 'Label': the value of the first "Label: value" line of /proc/net/bonding/bond0.
bond_field() { on "$1" "sed -n 's/^[[:space:]]*$2: //p' /proc/net/bonding/$VMTEST_BOND | head -n1"; }
ports_in_aggregator() { [ "$(bond_field node1 'Number of ports')$(bond_field node2 'Number of ports')" = "$1$1" ]; }

# Both members of each bond sit in one aggregator whose partner is the other
# guest's bond: LACP frames crossed the tc mirred wires both ways.
lacp_aggregated() {
    local n peer mac partner ids
    wait_for 60 "2 ports in each active aggregator" ports_in_aggregator 2
    for n in $VMTEST_NODES; do
        peer=node1
        [ "$n" = node1 ] && peer=node2
        on "$n" "sed -n '/Active Aggregator Info/,/Partner Mac/p' /proc/net/bonding/$VMTEST_BOND" | sed "s/^/$n: /"
        [ "$(bond_field "$n" 'Transmit Hash Policy')" = "layer3+4 (1)" ] || die "$n: hash policy is not layer3+4"
        mac=$(on "$peer" "cat /sys/class/net/$VMTEST_BOND/address")
        partner=$(bond_field "$n" 'Partner Mac Address')
        [ "$partner" = "$mac" ] || die "$n: partner MAC $partner is not $peer's bond MAC $mac"
        ids=$(on "$n" "grep 'Aggregator ID:' /proc/net/bonding/$VMTEST_BOND | tr -d ' \\t' | sort -u | wc -l")
        [ "$ids" = 1 ] || die "$n: members are in different aggregators"
    done
}

lacp_spread_rc_qps() { spread_check 18600 "$QPS" "$ITERS" "$SIZE"; }

# A pulled member leaves the aggregator; fresh QPs then all use the other one.
lacp_cut_member_fresh_qps() {
    local n
    vmtest-fault cut 0
    wait_for 30 "1 port in each aggregator" ports_in_aggregator 1
    tx_snapshot "$CHECK_TMP/c0"
    rc_pingpong_pair 18620 4 "$ITERS" "$SIZE"
    tx_snapshot "$CHECK_TMP/c1"
    tx_report "$CHECK_TMP/c0" "$CHECK_TMP/c1"
    for n in $VMTEST_NODES; do
        [ "$(tx_delta "$CHECK_TMP/c0" "$CHECK_TMP/c1" "$n" eth0)" -eq 0 ] || die "$n: pulled eth0 sent bytes"
        [ "$(tx_delta "$CHECK_TMP/c0" "$CHECK_TMP/c1" "$n" eth1)" -ge $((4 * ITERS * SIZE)) ] ||
            die "$n: eth1 did not carry all 4 QPs"
    done
    vmtest-fault restore 0
    wait_for 60 "2 ports in each aggregator again" ports_in_aggregator 2
    note "eth0 rejoined the aggregator on both guests"
}

check lacp-aggregated 120 lacp_aggregated
check lacp-spread-rc-qps 300 lacp_spread_rc_qps
check lacp-cut-member-fresh-qps 300 lacp_cut_member_fresh_qps
finish
