#!/bin/sh
# netmon in the VM tier: the real bonding driver, 8021q and rdma_rxe on the bond.
#
# In the suite (`make vmcheck`): groups one-netmon and two-netmon-lacp run it.
# By hand, on the host, as root, from the source tree (BUILD_DIR defaults to _build):
#   contrib/vmtest/run one -- tests/vm/netmon_bond.sh [--netns-only|--fabric-only] [BUILD_DIR]
#   contrib/vmtest/run two -- tests/vm/netmon_bond.sh [BUILD_DIR]
#   contrib/vmtest/run two --bond-mode 802.3ad -- tests/vm/netmon_bond.sh [BUILD_DIR]
# The tools are $NETMON_WATCH and $TEST_NETNS when set (`make vmcheck` sets
# them to the build tree's), else BUILD_DIR/contrib/netmon-watch and
# BUILD_DIR/tests/netns/test_netns (`make -C BUILD_DIR/tests/netns test_netns`).
#
# Part 1 (netns) runs the bond cases of tests/netns/test_netns in the guest
# (bonds over veth pairs in private namespaces): active-backup failover on
# member carrier loss, 802.3ad member loss and removal between two bonds wired
# back to back, a VLAN on a bond across a failover, a real VLAN.
# Part 2 (fabric) watches the guest's own fabric (bond0 over eth0/eth1,
# bond0.3027, rxe_bond0 on bond0) with contrib/netmon-watch and checks its
# JSON lines: the initial model, a member failure (a cable pull of the active
# member on `two`, that member set down on `one`), an active-backup failover,
# the LAG member count, the member's return, an address change on bond0 (GID
# table rewrite: address events on the RoCE netdev and a GID_CHANGE verbs
# event), the VLAN going down and up, and the final model.
#
# Each check prints "PASS: NAME" or "FAIL: NAME: why" (tests/vm/run-all counts
# them against the group's "# checks:" line): netmon-netns-* for part 1 and
# netmon-TAG-* for part 2, TAG = $NETMON_TAG or TOPOLOGY-MODE (one-ab,
# two-lacp, ...). Which part-2 checks exist depends on the bond mode:
# TAG-failover only in active-backup. Exit 0 only when every check passed; the
# event log is copied to $VMTEST_RESULTS when set.
set -u
parts="netns fabric"
case ${1:-} in
--netns-only) parts=netns && shift ;;
--fabric-only) parts=fabric && shift ;;
esac
build=${1:-_build}
watch=${NETMON_WATCH:-$build/contrib/netmon-watch}
netns=${TEST_NETNS:-$build/tests/netns/test_netns}
fails=0
# Waits are guards, not latency claims: scaled for a loaded TCG host (as in
# tests/vm/lib/check.sh).
scale=${VMTEST_TIME_SCALE:-3}
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

if [ -z "${VMTEST:-}" ]; then
    echo "netmon_bond.sh runs inside the VM tier: contrib/vmtest/run one -- $0 $build" >&2
    exit 2
fi
bond=${VMTEST_BOND:-bond0}
vlan=${VMTEST_VLAN:-bond0.3027}
rdma=${VMTEST_RDMA_DEV:-rxe_bond0}
mode=${VMTEST_BOND_MODE:-active-backup}
topo=${VMTEST_TOPOLOGY:-one}
case $mode in
active-backup) short=ab ;;
802.3ad) short=lacp ;;
balance-xor) short=xor ;;
*) short=$mode ;;
esac
tag=${NETMON_TAG:-$topo-$short}

# ---- part 1: the netns bond cases ----------------------------------------
# netns_case CHECK REQUIRES SPEC: run the test_netns cases SPEC (Catch2 test
# spec) under a time limit. A SKIP (exit 77) is a failure here: the guest's
# kernel has bonding and 8021q, so nothing may be missing.
# The colour flag of the Catch2 test_netns was built with: 2 says --use-colour
# no, 3 (Debian 13) --colour-mode none; its --help lists the one it takes.
if "$netns" --help 2>/dev/null | grep -q -- '--colour-mode'; then
    nocolour="--colour-mode none"
else
    nocolour="--use-colour no"
fi
netns_case() {
    name=$1
    req=$2
    spec=$3
    log=$(mktemp)
    # shellcheck disable=SC2086 # $nocolour, $req: several words
    (cd "$(dirname "$netns")" && timeout -k 5 $((240 * scale)) ./test_netns $nocolour $req "$spec") >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^(All tests passed|test cases:)' "$log" | tr '\n' ' ')
    if [ "$rc" = 0 ] && grep -q '^All tests passed' "$log"; then
        pass "$name ($summary)"
    elif [ "$rc" = 77 ]; then
        fail "$name: test_netns skipped in the VM, where it must run: $(grep -m1 '^SKIP' "$log")"
    elif [ "$rc" = 124 ]; then
        fail "$name: test_netns $spec timed out after $((240 * scale)) s"
    else
        fail "$name: test_netns $spec exited $rc${summary:+ ($summary)}"
    fi
    sed 's/^/    /' "$log"
    rm -f "$log"
}

if [ "${parts#*netns}" != "$parts" ]; then
    if [ ! -x "$netns" ]; then
        for c in ab-failover lacp-member-removal vlan-on-bond vlan; do
            fail "netmon-netns-$c: $netns is missing (make -C BUILD_DIR/tests/netns test_netns, or make vmcheck)"
        done
    else
        netns_case netmon-netns-ab-failover --require=bond \
            "bond: active-backup failover on member carrier loss"
        netns_case netmon-netns-lacp-member-removal --require=bond \
            "bond: 802.3ad member loss and removal change the LAG member count"
        netns_case netmon-netns-vlan-on-bond "--require=bond --require=vlan" "[bondvlan]"
        netns_case netmon-netns-vlan --require=vlan "[vlan]"
    fi
fi

# ---- part 2: the guest's fabric through netmon-watch ---------------------
fabric() {
    c=netmon-$tag
    out=$(mktemp)
    err=$(mktemp)
    "$watch" --verbs --final-dump >"$out" 2>"$err" &
    wpid=$!

    # expect SECONDS CHECK EXTENDED-REGEX: wait for a matching line in the log.
    expect() {
        t=$1
        what=$2
        re=$3
        t=$((t * scale))
        end=$(($(date +%s) + t))
        while ! grep -Eq "$re" "$out"; do
            if [ "$(date +%s)" -ge "$end" ]; then
                fail "$what: no line matching $re within ${t}s"
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
        t=$((t * scale))
        end=$(($(date +%s) + t))
        while ! since | grep -Eq "$re"; do
            if [ "$(date +%s)" -ge "$end" ]; then
                fail "$what: no new line matching $re within ${t}s"
                return 1
            fi
            sleep 0.2
        done
        pass "$what"
    }

    expect 90 "$c-ready" '"event":"ready","mode":"netlink"'
    active=$(cat "/sys/class/net/$bond/bonding/active_slave" 2>/dev/null || true)
    # The member to fail: the active one in active-backup (so the bond must
    # fail over), eth0 otherwise.
    member=eth0
    if [ "$mode" = active-backup ] && [ -n "$active" ]; then
        member=$active
    fi
    other=eth1
    [ "$member" = eth1 ] && other=eth0
    echo "bond $bond mode $mode, active member '$active', failing $member, topology $topo"

    # Member failure.
    mark
    if [ "$topo" = two ]; then
        vmtest-fault cut "$member"
    else
        ip link set "$member" down
    fi
    expect_since 30 "$c-member-down" "\"event\":\"bond-member-down\".*\"netdev\":\"$member\",\"bond\":\"$bond\""
    expect_since 10 "$c-member-rdma" "\"event\":\"bond-member-down\".*\"netdev\":\"$member\".*\"rdma\":\\[\"$rdma:1\"\\]"
    if [ "$mode" = active-backup ]; then
        expect_since 30 "$c-failover" "\"event\":\"active-slave-changed\".*\"old_name\":\"$member\",\"new_name\":\"$other\""
    fi
    # One-guest 802.3ad over dummy NICs has no partner: no aggregator to count.
    if [ "$mode" != 802.3ad ] || [ "$topo" = two ]; then
        expect_since 30 "$c-lag-count" "\"event\":\"lag-member-count-changed\",.*\"netdev\":\"$bond\".*\"old\":2,\"new\":1"
    fi
    mark
    if [ "$topo" = two ]; then
        vmtest-fault restore "$member"
    else
        ip link set "$member" up
    fi
    expect_since 90 "$c-member-up" "\"event\":\"bond-member-up\".*\"netdev\":\"$member\""

    # Address change on the bond: the GID table is rewritten.
    old_addr=$(ip -4 -o addr show dev "$bond" | awk '{print $4; exit}')
    mark
    vmtest-fault addr-change
    expect_since 30 "$c-addr-removed" "\"event\":\"address-removed\".*\"netdev\":\"$bond\",\"address\":\"$old_addr\".*\"rdma\":\\[\"$rdma:1\"\\]"
    expect_since 30 "$c-addr-added" "\"event\":\"address-added\".*\"netdev\":\"$bond\".*\"rdma\":\\[\"$rdma:1\"\\]"
    expect_since 30 "$c-gid-change" "\"event\":\"verbs-async\".*\"rdma_device\":\"$rdma\".*\"verbs_event_name\":\"GID_CHANGE\""
    vmtest-fault addr-restore >/dev/null

    # The VLAN down and up.
    mark
    vmtest-fault vlan-down
    expect_since 30 "$c-vlan-down" "\"event\":\"link-down\".*\"netdev\":\"$vlan\""
    vmtest-fault vlan-up
    expect_since 30 "$c-vlan-up" "\"event\":\"link-up\".*\"netdev\":\"$vlan\""

    kill -TERM "$wpid" 2>/dev/null
    wait "$wpid"
    if grep -q "\"netdev\":\"$bond\",.*\"bond\":{\"mode\":\"$mode\",\"slaves\":\\[\"eth0\",\"eth1\"\\]" "$out" &&
        grep -q "\"netdev\":\"$vlan\",.*\"parent\":\"$bond\",\"vlan_id\":3027" "$out"; then
        pass "$c-final-model ($bond $mode over eth0, eth1; $vlan on $bond, id 3027)"
    else
        fail "$c-final-model: the final dump lacks $bond ($mode over eth0, eth1) or $vlan (on $bond, id 3027)"
    fi
    sed 's/^/    netmon-watch: /' "$err"
    if [ -n "${VMTEST_RESULTS:-}" ]; then
        cp "$out" "$VMTEST_RESULTS/netmon-watch-$tag.jsonl"
    fi
    rm -f "$out" "$err"
}

if [ "${parts#*fabric}" != "$parts" ]; then
    if [ -x "$watch" ]; then
        fabric
    else
        fail "netmon-$tag-ready: $watch is missing (build first, or make vmcheck)"
    fi
fi
echo "netmon_bond.sh: $fails failure(s)"
[ "$fails" = 0 ]
