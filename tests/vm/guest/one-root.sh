#!/bin/bash
# One guest, as root (tests/vm/one-root.test).
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"

PORT=/sys/class/infiniband/$DEV/ports/1
hexip() { printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ }; }
# gid_at ADDR: "INDEX TYPE NETDEV" of the GID entry holding IPv4 ADDR (none: empty).
gid_at() {
    local f i
    f=$(grep -lx "$(hexip "$1")" "$PORT"/gids/* 2>/dev/null | head -n1)
    [ -n "$f" ] || return 0
    i=${f##*/}
    echo "$i $(cat "$PORT/gid_attrs/types/$i") $(cat "$PORT/gid_attrs/ndevs/$i")"
}
gid_table() { grep -H . "$PORT"/gids/* | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$' | sed 's|.*/gids/|  gid |'; }
present() { [ -n "$(gid_at "$1")" ]; }
absent() { [ -z "$(gid_at "$1")" ]; }

one_rxe_over_bond() {
    local m
    rdma link show "$DEV/1"
    rdma link show "$DEV/1" | grep -q "state ACTIVE .*netdev $VMTEST_BOND\( \|$\)" || die "$DEV not ACTIVE on $VMTEST_BOND"
    ibv_devinfo -d "$DEV" | grep -q 'phys_port_cnt:[[:space:]]*1$' || die "not one port"
    [ "$(cat "/sys/class/net/$VMTEST_BOND/bonding/slaves")" = "$VMTEST_MEMBERS" ] || die "members are not $VMTEST_MEMBERS"
    for m in $VMTEST_MEMBERS; do
        ip -d link show "$m" | grep -qw dummy || die "$m is not a dummy NIC"
    done
    ip -d link show "$VMTEST_VLAN" | grep -q "vlan protocol 802.1Q id 3027" || die "no VLAN 3027 on the bond"
    [ "$(hostname)" = node1 ] || die "hostname is not node1"
    echo "bond $(cat "/sys/class/net/$VMTEST_BOND/bonding/mode"), members $VMTEST_MEMBERS (dummy), VLAN $VMTEST_VLAN, hostname $(hostname)"
}

# As on a ConnectX LAG: [1] bond0's IPv4 and [2] the VLAN's IPv4, both RoCE v2.
one_gid_table() {
    gid_table
    [ "$(gid_at "$VMTEST_ADDR")" = "1 RoCE v2 $VMTEST_BOND" ] || die "bond0 address not at [1]: $(gid_at "$VMTEST_ADDR")"
    [ "$(gid_at "$VMTEST_VLAN_ADDR")" = "2 RoCE v2 $VMTEST_VLAN" ] || die "VLAN address not at [2]: $(gid_at "$VMTEST_VLAN_ADDR")"
    [ "$(gid_of node1)" = 1 ] || die "lib/gid-index does not pick [1]"
}

# A new bond0 address replaces the old GID entry; the helper follows it.
one_addr_change_gid() {
    local new=198.18.0.101
    vmtest-fault addr-change "$new/24"
    wait_for 10 "GID of $new" present "$new"
    wait_for 10 "GID of $VMTEST_ADDR to go" absent "$VMTEST_ADDR"
    note "after addr-change: $new at $(gid_at "$new"); lib/gid-index -> $(gid_of node1)"
    [ "$(gid_of node1)" = "$(gid_at "$new" | cut -d' ' -f1)" ] || die "lib/gid-index does not follow the change"
    vmtest-fault addr-restore
    wait_for 10 "GID of $VMTEST_ADDR back" present "$VMTEST_ADDR"
    absent "$new" || die "$new still in the GID table"
    note "after addr-restore: $VMTEST_ADDR at $(gid_at "$VMTEST_ADDR")"
    gid_table
}

# No IPv4 on bond0: no RoCE v2 IPv4 GID to select, and the helper says so.
one_addr_del_gid() {
    vmtest-fault addr-del
    wait_for 10 "GID of $VMTEST_ADDR to go" absent "$VMTEST_ADDR"
    if out=$(gid_of node1 2>&1); then die "lib/gid-index still picked $out"; fi
    note "without an address: $out"
    vmtest-fault addr-restore
    wait_for 10 "GID of $VMTEST_ADDR back" present "$VMTEST_ADDR"
}

# VLAN down/up. Observed on 6.1: only the VLAN's IPv6 link-local entry leaves
# (the kernel drops IPv6 addresses of a down netdev); its IPv4 entry STAYS in
# the GID table while the VLAN is down. So a valid-looking GID can sit on a
# down netdev: selection must check the netdev's state, not only the table.
vlan_v6_entries() {
    local f
    for f in $(grep -l '^fe80:' "$PORT"/gids/* 2>/dev/null); do
        [ "$(cat "$PORT/gid_attrs/ndevs/${f##*/}" 2>/dev/null)" = "$VMTEST_VLAN" ] && echo "${f##*/}"
    done
}
vlan_v6_absent() { [ -z "$(vlan_v6_entries)" ]; }
vlan_v6_present() { [ -n "$(vlan_v6_entries)" ]; }
one_vlan_down_up_gid() {
    vlan_v6_present || die "no IPv6 link-local entry of $VMTEST_VLAN to begin with"
    vmtest-fault vlan-down
    wait_for 10 "the IPv6 link-local entry of $VMTEST_VLAN to go" vlan_v6_absent
    sleep 2
    present "$VMTEST_VLAN_ADDR" || die "the IPv4 entry of $VMTEST_VLAN left too (kernel behaviour changed)"
    note "$VMTEST_VLAN $(cat "/sys/class/net/$VMTEST_VLAN/operstate"): IPv4 entry still at $(gid_at "$VMTEST_VLAN_ADDR"), IPv6 link-local entry gone"
    vmtest-fault vlan-up
    wait_for 10 "the IPv6 link-local entry of $VMTEST_VLAN back" vlan_v6_present
    note "after vlan-up: IPv6 link-local entry at [$(vlan_v6_entries)]"
    gid_table
}

# RC through rxe's loopback (server and client on node1): the verbs path
# works; in this topology no packet crosses the (dummy) members.
one_rc_loopback() {
    local g
    g=$(gid_of node1) || die "no GID"
    timeout -k 5 120 ibv_rc_pingpong -d "$DEV" -g "$g" -p 18515 -n 200 -s 1024 -e >"$CHECK_TMP/lo.srv" 2>&1 &
    wait_for 30 "server listening" listening 18515
    timeout -k 5 120 ibv_rc_pingpong -d "$DEV" -g "$g" -p 18515 -n 200 -s 1024 -e localhost >"$CHECK_TMP/lo.cli" 2>&1 ||
        die "client failed: $(cat "$CHECK_TMP/lo.cli")"
    wait $! || die "server failed: $(cat "$CHECK_TMP/lo.srv")"
    note "loopback: $(grep 'iters in' "$CHECK_TMP/lo.cli")"
}

# Root may use a controlled qkey (bit 31); port 2 is EINVAL for anyone.
one_ud_init_root() {
    local a b
    a=$("$VMTEST_PROBES/ud_init_probe" "$DEV" 1 0 0x80000001) || die "probe could not run"
    b=$("$VMTEST_PROBES/ud_init_probe" "$DEV" 2 0 0x1ee7a330) || die "probe could not run"
    echo "$a"
    echo "$b"
    case $a in *result=OK*) ;; *) die "root with qkey bit 31 was not OK" ;; esac
    case $b in *result=EINVAL*) ;; *) die "root with port 2 was not EINVAL" ;; esac
}

# Topology one has no cables to pull; the tool must say so, not pretend.
one_cut_refused() {
    local out
    if out=$(vmtest-fault cut 0 2>&1); then die "cut succeeded: $out"; fi
    echo "$out"
    case $out in *"no cables"*) ;; *) die "unexpected refusal: $out" ;; esac
}

# mlx5-only features: ask the device (mlx5dv_is_supported) instead of assuming.
# On soft-RoCE they SKIP with the reason; on an mlx5 LAG (tier 4, the same
# scripts) they FAIL until a hardware check exists, so nobody mistakes a gap for a pass.
dv_answer() { "$VMTEST_PROBES/dv_probe" "$DEV" || die "dv_probe could not query $DEV"; }
dv_lag_port_affinity() {
    local a
    a=$(dv_answer)
    echo "$a"
    case $a in
    *mlx5dv=no*) unsupported "$DEV is soft-RoCE, not mlx5 (mlx5dv_is_supported() is false): no queue-affinity LAG, mlx5dv_modify_qp_lag_port/mlx5dv_query_qp_lag_port unavailable; placement here is the bond's layer3+4 hash (two-lacp, two-xor)" ;;
    esac
    die "$DEV speaks mlx5dv ($a): the hardware LAG port affinity check is not written yet"
}
dv_dc_transport() {
    local a
    a=$(dv_answer)
    echo "$a"
    case $a in
    *mlx5dv=no*) unsupported "$DEV is soft-RoCE, not mlx5: DC (DCI/DCT through mlx5dv_create_qp) does not exist here" ;;
    esac
    die "$DEV speaks mlx5dv ($a): the hardware DC check is not written yet"
}

check one-rxe-over-bond 60 one_rxe_over_bond
check one-gid-table 60 one_gid_table
check one-addr-change-gid 90 one_addr_change_gid
check one-addr-del-gid 90 one_addr_del_gid
check one-vlan-down-up-gid 90 one_vlan_down_up_gid
check one-rc-loopback 120 one_rc_loopback
check one-ud-init-root 60 one_ud_init_root
check one-cut-refused 60 one_cut_refused
check dv-lag-port-affinity 60 dv_lag_port_affinity
check dv-dc-transport 60 dv_dc_transport
finish
