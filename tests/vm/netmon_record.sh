#!/bin/sh
# Records the rtnetlink traffic of bonding scenarios with the real bonding
# driver, as replay fixtures for the unit tests (tests/fixtures/netlink/).
# Each scenario runs in a private network namespace of the guest.
#
#   contrib/vmtest/run one --results /tmp/r -- tests/vm/netmon_record.sh [BUILD_DIR]
#   cp /tmp/r/out/*.rec tests/fixtures/netlink/
set -eu
build=${1:-_build}
out=${2:-${VMTEST_RESULTS:-.}}
watch=$(cd "$build" && pwd)/contrib/netmon-watch
[ -x "$watch" ] || {
    echo "netmon_record.sh: $watch is missing (build first)" >&2
    exit 2
}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# record NAME SCRIPT: run SCRIPT (sh) in a fresh namespace while netmon-watch
# records everything it reads there (initial dump included) to NAME.rec.
record() {
    name=$1
    body=$2
    unshare -n sh -eu -c '
        echo 1 >/proc/sys/net/ipv6/conf/default/addr_gen_mode
        "$1" --no-gids --record "$2.rec" >"$2.jsonl" 2>"$2.err" &
        w=$!
        until grep -q "\"event\":\"ready\"" "$2.jsonl" 2>/dev/null; do sleep 0.1; done
        sh -eu -c "$3"
        sleep 1
        kill -TERM $w
        wait $w
    ' record "$watch" "$out/$name" "$body"
    { echo "# $name: recorded on $(uname -r) by tests/vm/netmon_record.sh"; cat "$out/$name.rec"; } \
        >"$out/$name.rec.tmp" && mv "$out/$name.rec.tmp" "$out/$name.rec"
    echo "recorded $out/$name.rec ($(grep -vc '^#' "$out/$name.rec") datagrams)"
}

record bond-active-backup '
    ip link add bond0 type bond mode active-backup miimon 50
    ip link add a0 type veth peer name b0
    ip link add a1 type veth peer name b1
    ip link set a0 master bond0
    ip link set a1 master bond0
    ip link set b0 up; ip link set b1 up; ip link set bond0 up
    sleep 1
    ip link add link bond0 name bond0.3027 type vlan id 3027
    ip link set bond0.3027 up
    ip addr add 198.18.0.1/24 dev bond0
    ip addr add 198.19.0.1/24 dev bond0.3027
    sleep 0.5
    ip link set b0 down
    sleep 1
    ip link set b0 up
    sleep 1
    ip link set a1 nomaster
'

record bond-8023ad '
    ip link add bond0 type bond mode 802.3ad miimon 50 lacp_rate fast xmit_hash_policy layer3+4
    ip link add bond1 type bond mode 802.3ad miimon 50 lacp_rate fast
    ip link add a0 type veth peer name b0
    ip link add a1 type veth peer name b1
    ip link set a0 master bond0; ip link set a1 master bond0
    ip link set b0 master bond1; ip link set b1 master bond1
    ip link set bond0 up; ip link set bond1 up
    i=0
    until grep -q "Number of ports: 2" /proc/net/bonding/bond0; do
        i=$((i + 1)); [ $i -lt 300 ]; sleep 0.1
    done
    sleep 1
    ip link set b1 down
    sleep 2
    ip link set b1 up
    i=0
    until grep -q "Number of ports: 2" /proc/net/bonding/bond0; do
        i=$((i + 1)); [ $i -lt 300 ]; sleep 0.1
    done
    sleep 1
    ip link set a1 nomaster
'
