#!/bin/sh
# netmon in the VM tier: the real bonding driver, 8021q and rdma_rxe on the bond.
#
# On the host, as root, from the source tree (BUILD_DIR defaults to _build):
#   contrib/vmtest/run one -- tests/vm/netmon_bond.sh [BUILD_DIR]
#   contrib/vmtest/run two -- tests/vm/netmon_bond.sh [BUILD_DIR]
#   contrib/vmtest/run two --bond-mode 802.3ad -- tests/vm/netmon_bond.sh [BUILD_DIR]
#
# Part 1 runs the bond cases of tests/netns/test_netns in the guest (bonds
# over veth pairs in private namespaces: active-backup failover on member
# carrier loss, 802.3ad member loss and removal between two bonds wired back
# to back, a VLAN on a bond, a real VLAN).
# Part 2 watches the guest's own fabric (bond0 over eth0/eth1, bond0.3027,
# rxe_bond0 on bond0) with contrib/netmon-watch and checks its JSON lines:
# the initial model, a member failure (cable pull on `two`, member down on
# `one`), an address change on bond0 (GID table rewrite: address events on
# the RoCE netdev and a GID_CHANGE verbs event), the VLAN going down and up.
# Exit 0 only when every check passed; the event log is copied to
# $VMTEST_RESULTS when set.
set -u
build=${1:-_build}
watch=$build/contrib/netmon-watch
netns=$build/tests/netns/test_netns
fails=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

if [ -z "${VMTEST:-}" ]; then
    echo "netmon_bond.sh runs inside the VM tier: contrib/vmtest/run one -- $0 $build" >&2
    exit 2
fi
for f in "$watch" "$netns"; do
    [ -x "$f" ] || {
        echo "netmon_bond.sh: $f is missing: build first (make && make check)" >&2
        exit 2
    }
done
bond=${VMTEST_BOND:-bond0}
vlan=${VMTEST_VLAN:-bond0.3027}
rdma=${VMTEST_RDMA_DEV:-rxe_bond0}
mode=${VMTEST_BOND_MODE:-active-backup}
topo=${VMTEST_TOPOLOGY:-one}

# ---- part 1: the netns bond cases ----------------------------------------
(cd "$(dirname "$netns")" && ./test_netns --require=bond "[bond]") && pass "test_netns [bond]" ||
    fail "test_netns [bond]"
(cd "$(dirname "$netns")" && ./test_netns --require=bond --require=vlan "[bondvlan]") &&
    pass "test_netns [bondvlan]" || fail "test_netns [bondvlan]"
(cd "$(dirname "$netns")" && ./test_netns --require=vlan "[vlan]") && pass "test_netns [vlan]" ||
    fail "test_netns [vlan]"

# ---- part 2: the guest's fabric through netmon-watch ---------------------
out=$(mktemp)
err=$(mktemp)
"$watch" --verbs --final-dump >"$out" 2>"$err" &
wpid=$!

# expect SECONDS DESCRIPTION EXTENDED-REGEX: wait for a matching line.
expect() {
    t=$1
    what=$2
    re=$3
    end=$(($(date +%s) + t))
    while ! grep -Eq "$re" "$out"; do
        if [ "$(date +%s)" -ge "$end" ]; then
            fail "$what (no line matching $re within ${t}s)"
            return 1
        fi
        sleep 0.2
    done
    pass "$what"
}
# mark: remember how far the log is; since: lines after the mark.
mark() { lines=$(wc -l <"$out"); }
since() { tail -n +"$((lines + 1))" "$out"; }
expect_since() {
    t=$1
    what=$2
    re=$3
    end=$(($(date +%s) + t))
    while ! since | grep -Eq "$re"; do
        if [ "$(date +%s)" -ge "$end" ]; then
            fail "$what (no new line matching $re within ${t}s)"
            return 1
        fi
        sleep 0.2
    done
    pass "$what"
}

expect 60 "monitor ready on netlink" '"event":"ready","mode":"netlink"'
active=$(cat "/sys/class/net/$bond/bonding/active_slave" 2>/dev/null || true)
echo "bond $bond mode $mode, active member '${active}', topology $topo"

# Member failure.
member=eth0
mark
if [ "$topo" = two ]; then
    vmtest-fault cut 0
else
    ip link set "$member" down
fi
expect_since 20 "member failure reported" "\"event\":\"bond-member-down\".*\"netdev\":\"$member\",\"bond\":\"$bond\""
expect_since 5 "member event carries the bond's RDMA port" "\"event\":\"bond-member-down\".*\"rdma\":\\[\"$rdma:1\"\\]"
if [ "$mode" = active-backup ] && [ "$active" = "$member" ]; then
    expect_since 20 "failover reported" "\"event\":\"active-slave-changed\".*\"old_name\":\"$member\",\"new_name\":\"eth1\""
fi
if [ "$mode" != 802.3ad ] || [ "$topo" = two ]; then
    expect_since 20 "LAG member count drops" "\"event\":\"lag-member-count-changed\",.*\"netdev\":\"$bond\".*\"old\":2,\"new\":1"
fi
mark
if [ "$topo" = two ]; then
    vmtest-fault restore 0
else
    ip link set "$member" up
fi
expect_since 60 "member back" "\"event\":\"bond-member-up\".*\"netdev\":\"$member\""

# Address change on the bond: the GID table is rewritten.
old_addr=$(ip -4 -o addr show dev "$bond" | awk '{print $4; exit}')
mark
vmtest-fault addr-change
expect_since 20 "old address removed on the RoCE netdev" "\"event\":\"address-removed\".*\"netdev\":\"$bond\",\"address\":\"$old_addr\".*\"rdma\":\\[\"$rdma:1\"\\]"
expect_since 20 "new address added on the RoCE netdev" "\"event\":\"address-added\".*\"netdev\":\"$bond\".*\"rdma\":\\[\"$rdma:1\"\\]"
expect_since 20 "GID_CHANGE from $rdma" "\"event\":\"verbs-async\".*\"rdma_device\":\"$rdma\".*\"verbs_event_name\":\"GID_CHANGE\""
vmtest-fault addr-restore >/dev/null

# The VLAN down and up.
mark
vmtest-fault vlan-down
expect_since 20 "VLAN down" "\"event\":\"link-down\".*\"netdev\":\"$vlan\""
vmtest-fault vlan-up
expect_since 20 "VLAN up" "\"event\":\"link-up\".*\"netdev\":\"$vlan\""

kill -TERM "$wpid" 2>/dev/null
wait "$wpid"
grep -q "\"netdev\":\"$bond\",.*\"bond\":{\"mode\":\"$mode\",\"slaves\":\\[\"eth0\",\"eth1\"\\]" "$out" &&
    pass "final model: $bond $mode over eth0, eth1" || fail "final model of $bond"
grep -q "\"netdev\":\"$vlan\",.*\"parent\":\"$bond\",\"vlan_id\":3027" "$out" &&
    pass "final model: $vlan on $bond, id 3027" || fail "final model of $vlan"
cat "$err" >&2
if [ -n "${VMTEST_RESULTS:-}" ]; then
    cp "$out" "$VMTEST_RESULTS/netmon-watch.jsonl"
fi
rm -f "$out" "$err"
echo "netmon_bond.sh: $fails failure(s)"
[ "$fails" = 0 ]
