# shellcheck shell=bash
# Helpers for the VM test scripts (source after check.sh; run on node1 as root).

DEV=$VMTEST_RDMA_DEV
ME=$(hostname)
# Our selection code's CLI: the build tree's (make vmcheck), else an installed one.
ROCE_DOCTOR=${ROCE_DOCTOR:-$(command -v roce-doctor || true)}

# on NODE 'shell command': run it on NODE (ssh to the other guest, bounded).
on() {
    local node=$1
    shift
    if [ "$node" = "$ME" ]; then
        bash -c "$*"
    else
        timeout -k 5 120 ssh "$node" "$*"
    fi
}

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds, or die
# (after SECONDS x VMTEST_TIME_SCALE: see check.sh).
wait_for() {
    local limit=$(($1 * VMTEST_TIME_SCALE)) what=$2
    local end=$((SECONDS + limit))
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || die "timed out after $limit s waiting for $what"
        sleep 0.2
    done
}

# peer_of NODE: the bond address NODE's RoCE traffic goes to in these tests:
# the other guest's in two-guest, its own in one-guest (rxe loops back).
peer_of() {
    if [ "$1" = node1 ] && [ -n "${VMTEST_PEER_ADDR:-}" ]; then
        echo "$VMTEST_PEER_ADDR"
    else
        echo "$VMTEST_ADDR" # node1's: node2's peer, or node1 itself in one-guest
    fi
}

# The GID index for RoCE traffic over the bond on NODE, chosen by our selection
# code: `roce-doctor --json --peer $(peer_of NODE)` (see lib/gid-index).
# $ROCE_DOCTOR (the build tree's binary, from `make vmcheck`) is passed on to
# node2, whose ssh sessions only get the VMTEST_* variables.
gid_of() {
    on "$1" "ROCE_DOCTOR='${ROCE_DOCTOR:-}' $VMTEST_LIB/gid-index $DEV $VMTEST_BOND $(peer_of "$1")"
}

# doctor NODE ARGS...: run roce-doctor on NODE (as gid_of does).
doctor() {
    local node=$1
    shift
    on "$node" "'${ROCE_DOCTOR:-roce-doctor}' $*"
}

active_member() { on "$1" "cat /sys/class/net/$VMTEST_BOND/bonding/active_slave"; }
# same_active_member: both guests' bonds send on the same member (dies if not).
same_active_member() {
    local a
    a=$(active_member node1)
    [ "$(active_member node2)" = "$a" ] || die "active members differ: node1 $a, node2 $(active_member node2)"
}
carrier() { on "$1" "cat /sys/class/net/$2/carrier"; }

# Every bond member of every rail (topology rails: bond1's eth2/eth3 too).
ALL_MEMBERS="$VMTEST_MEMBERS${VMTEST_MEMBERS1:+ $VMTEST_MEMBERS1}"

# tx_snapshot FILE: "node member tx_bytes" for every member of every guest.
tx_snapshot() {
    local n
    for n in $VMTEST_NODES; do
        on "$n" 'for m in '"$ALL_MEMBERS"'; do
                     echo "$(hostname) $m $(cat /sys/class/net/$m/statistics/tx_bytes)"
                 done'
    done >"$1"
}

# tx_delta BEFORE AFTER NODE MEMBER: bytes MEMBER of NODE sent in between.
tx_delta() {
    awk -v n="$3" -v m="$4" '$1 == n && $2 == m { if (FNR == NR) b = $3; else a = $3 }
                             END { print a - b }' "$1" "$2"
}

# tx_report BEFORE AFTER: one note line with every member's delta.
tx_report() {
    local n m line=""
    for n in $VMTEST_NODES; do
        for m in $ALL_MEMBERS; do
            line="$line $n/$m +$(tx_delta "$1" "$2" "$n" "$m")"
        done
    done
    note "tx_bytes:$line"
}

listening() { ss -Hltn "sport = :$1" | grep -q .; }

# ibv_rc_pingpong runs with -e (completion events): a busy-polling process on a
# one-vCPU TCG guest starves the kernel's rxe work and round trips get slower.
#
# start_servers FIRST_PORT COUNT ITERS SIZE GID: ibv_rc_pingpong servers here, in
# the background (bounded), output in $CHECK_TMP/srv.PORT; waits until all listen.
start_servers() {
    local p
    for ((p = $1; p < $1 + $2; p++)); do
        timeout -k 5 300 ibv_rc_pingpong -d "$DEV" -g "$5" -p "$p" -n "$3" -s "$4" -e \
            >"$CHECK_TMP/srv.$p" 2>&1 &
    done
    for ((p = $1; p < $1 + $2; p++)); do
        wait_for 60 "ibv_rc_pingpong server on port $p" listening "$p"
    done
}

# run_clients FIRST_PORT COUNT ITERS SIZE GID: the matching clients on node2, all at
# once; prints "PORT STATUS" per client and copies their output to $CHECK_TMP/cli.PORT.
run_clients() {
    on node2 "for ((p = $1; p < $1 + $2; p++)); do
                  timeout -k 5 300 ibv_rc_pingpong -d $DEV -g $5 -p \$p -n $3 -s $4 -e node1 \
                      >/tmp/cli.\$p 2>&1 &
                  pids[\$p]=\$!
              done
              for ((p = $1; p < $1 + $2; p++)); do
                  wait \${pids[\$p]}; echo \"status \$p \$?\"
              done
              for ((p = $1; p < $1 + $2; p++)); do
                  sed \"s/^/out \$p /\" /tmp/cli.\$p
              done" >"$CHECK_TMP/clients.raw"
    local p
    for ((p = $1; p < $1 + $2; p++)); do
        sed -n "s/^out $p //p" "$CHECK_TMP/clients.raw" >"$CHECK_TMP/cli.$p"
    done
    sed -n 's/^status //p' "$CHECK_TMP/clients.raw" | tee "$CHECK_TMP/clients.status"
}

# rc_pingpong_pair PORT COUNT ITERS SIZE: COUNT RC QPs between node1 (servers) and
# node2 (clients) over the bond with the GID index our selection code chose
# (gid_of: roce-doctor --json --peer); every QP
# must complete ITERS round trips of SIZE bytes. Notes the per-QP round trip.
rc_pingpong_pair() {
    local port=$1 count=$2 iters=$3 size=$4 g1 g2 p st bad=0
    g1=$(gid_of node1) || die "no RoCE v2 IPv4 GID on node1"
    g2=$(gid_of node2) || die "no RoCE v2 IPv4 GID on node2"
    note "GID index node1 $g1, node2 $g2 (roce-doctor --json --peer: node1 -> $(peer_of node1), node2 -> $(peer_of node2))"
    start_servers "$port" "$count" "$iters" "$size" "$g1"
    run_clients "$port" "$count" "$iters" "$size" "$g2" >/dev/null
    while read -r p st; do
        if [ "$st" != 0 ]; then
            echo "client on port $p exited $st:"
            cat "$CHECK_TMP/cli.$p"
            bad=1
        fi
    done <"$CHECK_TMP/clients.status"
    wait # for the servers
    for ((p = port; p < port + count; p++)); do
        grep -q "$iters iters in" "$CHECK_TMP/srv.$p" || {
            echo "server on port $p did not complete:"
            cat "$CHECK_TMP/srv.$p"
            bad=1
        }
        note "QP $((p - port + 1))/$count: $(grep -h 'iters in' "$CHECK_TMP/cli.$p" 2>/dev/null)"
    done
    [ "$bad" = 0 ] || die "ibv_rc_pingpong did not complete on every QP"
}

# spread_check PORT COUNT ITERS SIZE: COUNT concurrent RC QPs complete, and on
# every guest EACH member sent at least one QP's worth (ITERS x SIZE) of them:
# the bond's layer3+4 hash spread the QPs (rxe derives each QP's UDP source
# port from its local and remote QP numbers).
spread_check() {
    local n m d
    tx_snapshot "$CHECK_TMP/s0"
    rc_pingpong_pair "$@"
    tx_snapshot "$CHECK_TMP/s1"
    tx_report "$CHECK_TMP/s0" "$CHECK_TMP/s1"
    for n in $VMTEST_NODES; do
        for m in $VMTEST_MEMBERS; do
            d=$(tx_delta "$CHECK_TMP/s0" "$CHECK_TMP/s1" "$n" "$m")
            [ "$d" -ge $(($3 * $4)) ] || die "$n: $m sent only $d bytes of $2 QPs: no spread"
        done
    done
}
