#!/bin/bash
# Two guests, active-backup bonds (tests/vm/btl-forge.test): issue 14 on the
# real stack. Runs as root (vmtest-fault, `rdma resource`, the ranks' /proc);
# every MPI job and the forger run as the UNPRIVILEGED user (RUN_AS).
#   1. Forged connection messages against a running job: a 2-rank
#      tests/mpi/stress (pml roce over btl self,vader,roce, one rank per
#      guest, every byte verified) while tests/vm/src/cm-forge on each guest
#      sprays the other guest's rank - REQ/REP/RTU/REJECT claiming to be its
#      real peer, guessed tokens, conn_id 0xffffffff, random job ids,
#      truncated and corrupted ones - first over every QP number rxe gave out
#      in that guest so far (the job's RC QPs included), then at the rank's UD
#      QP. The job passes with 0 errors; no path fails or reconnects; the
#      finalize counters count the drops; the warnings are rate-limited; the
#      ranks' memory does not grow.
#   2. Teardown under valgrind: a 2-rank stress run (ob1) whose ranks run
#      under memcheck, the active member's cable pulled shortly before the
#      end and never replugged: a path fails with work outstanding, and
#      MPI_Finalize retires and destroys the QPs (the btl's Retirement).
#      Both ranks end with "ERROR SUMMARY: 0 errors" (suppressions:
#      lib/valgrind-ompi41.supp, Open MPI's own) and no invalid access.
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

# shellcheck disable=SC2034 # BTL: read by mpi (lib/btl.sh)
BTL=self,vader,roce
RUN_AS=$VMTEST_USER
FORGE=$ROCE_BUILDDIR/tests/vm/src/cm-forge
# The GID index the forger sends from (lib/gid-index): the build tree's
# roce-doctor unless make vmcheck named one.
[ -n "${ROCE_DOCTOR:-}" ] || ROCE_DOCTOR=$ROCE_BUILDDIR/contrib/roce-doctor/roce-doctor

# Part 1.
# The stress job the spray runs against. The spray waits for the ranks'
# memory to be steady, by half of it at the latest: at 90 s (and load 12)
# it was not by t=45 s; at 180 s it was by t=50-82 s (docs/vmtest.md).
FORGE_SECONDS=${BTL_FORGE_SECONDS:-180}
FORGE_COUNT=${BTL_FORGE_COUNT:-8000}   # datagrams per guest at the rank's UD QP (0: no forger)
FORGE_SWEEP=$((FORGE_COUNT / 4))       # first, over QPNs 0x11..(the guest's highest + 8)
FORGE_RATE=1000                        # datagrams per second and forger
FORGE_WARMUP=15                        # stress seconds before the ranks' memory is watched
FORGE_AFTER=10                         # stress seconds after the spray for the last sample
RSS_STEADY_KB=64                       # "steady": 3 samples 2 s apart within this
# The ranks' VmRSS may grow by at most this much from just before the spray
# to its end and FORGE_AFTER s later (the runs in docs/vmtest.md: 0-264 kB,
# and once 2376 kB on one rank).
# Each rank gets FORGE_COUNT datagrams at its UD QP, so anything the btl
# kept per datagram of more than RSS_BOUND_KB * 1024 / FORGE_COUNT bytes
# (65 B with the defaults; an ompi_proc_t per forged name was far more)
# fails the check.
RSS_BOUND_KB=${BTL_FORGE_RSS_KB:-512}
WARN_INTERVAL=10 # the btl's warning interval (CmConfig::warn_interval_s)
# At least this many drops counted per rank (the rest of what the forger
# sent may be lost to a full UD receive queue: the device drops those).
MIN_DROPS=$((FORGE_COUNT / 8 > 0 ? FORGE_COUNT / 8 : 1))
DROP_WARNING='^\[[^]]*\] btl roce \[[^]]*\]: warning: dropped '

# Part 2.
VG_SECONDS=${BTL_VG_SECONDS:-60} # stress run time under valgrind
VG_CUT_AT=${BTL_VG_CUT_AT:-30}   # stress clock (s) of the pull; never replugged
VG_EXIT=97                       # the ranks' exit status on a valgrind error
VG_SUPP=$VMTEST_LIB/valgrind-ompi41.supp
VG_DIR=/tmp/btl-forge-vg # on each guest (the results share may be private to root)

# The jobs' user writes ompi_info output (btl_env) and its logs here.
user_dir "$CHECK_TMP" && user_dir "$LOGS" || echo "warning: cannot give $RUN_AS $CHECK_TMP and $LOGS"

# kv KEY LINE: the value of KEY=VALUE in LINE.
kv() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# rank_on NODE: lib/rank-info's line for the stress rank on NODE.
rank_on() { on "$1" "$VMTEST_LIB/rank-info $MPI_BIN/stress"; }
other_node() { if [ "$1" = node1 ]; then echo node2; else echo node1; fi; }

# user_on NODE SECONDS CMD: CMD (a shell command line) as RUN_AS on NODE.
user_on() {
    local who="setpriv --reuid=\$(id -u $RUN_AS) --regid=\$(id -g $RUN_AS) --init-groups env HOME=/home/$RUN_AS USER=$RUN_AS LOGNAME=$RUN_AS"
    if [ "$1" = "$ME" ]; then
        timeout -k 5 "$2" bash -c "$who $3"
    else
        timeout -k 5 "$2" ssh "$1" "$who $3"
    fi
}

forge_env() {
    local n
    [ "$(id -u)" = 0 ] || die "must run as root (vmtest-fault, rdma resource); the jobs run as $RUN_AS"
    as_user bash -c 'btl_env && pml_env' || exit 1
    [ -x "$FORGE" ] || die "no $FORGE: build the tree (make builds tests/vm/src/cm-forge)"
    "$FORGE" --help | head -n1
    command -v valgrind >/dev/null || die "valgrind is not installed on the host (apt-get install valgrind)"
    [ -r "$VG_SUPP" ] || die "no $VG_SUPP"
    note "$(valgrind --version), suppressions $VG_SUPP"
    ranks_as_user
    for n in $VMTEST_NODES; do
        on "$n" "rdma resource show qp" >/dev/null || die "$n: rdma resource show qp failed"
    done
    same_active_member
    note "active-backup: both bonds on $(active_member node1); jobs and forgers run as $RUN_AS"
}

# ---- 1. forged connection messages ------------------------------------------

# rss_sample PHASE: appends "PHASE WALL STRESS_T NODE1_KB NODE2_KB" to the
# job's RSS record; fails when a rank is gone.
# Reads the ranks' /proc/PID/status by the PIDs in forge.ranks (rank-info
# with its `rdma resource` and ps took ~15 s per sample under TCG).
rss_sample() {
    local n pid v kb=""
    for n in $VMTEST_NODES; do
        pid=$(kv pid "$(grep "^node=$n " "$CHECK_TMP/forge.ranks")")
        v=$(on "$n" "awk '/^VmRSS:/ { print \$2 }' /proc/$pid/status 2>/dev/null")
        [ -n "$v" ] || return 1
        kb="$kb $v"
    done
    echo "$1 $SECONDS $(stress_t)$kb" >>"$CHECK_TMP/forge.rss"
}
# rss_show: the samples so far, one line each, and a copy in $LOGS (the
# results share) for the record.
rss_show() {
    cp "$CHECK_TMP/forge.rss" "$LOGS/forge.rss" 2>/dev/null
    sed 's/^/rss: /' "$CHECK_TMP/forge.rss"
}
# rss_steady: the last 3 samples of each rank lie within RSS_STEADY_KB.
rss_steady() {
    tail -n3 "$CHECK_TMP/forge.rss" | awk -v d="$RSS_STEADY_KB" '
        { n++; for (i = 4; i <= NF; i++) { if (n == 1 || $i < lo[i]) lo[i] = $i; if (n == 1 || $i > hi[i]) hi[i] = $i } }
        END { if (n < 3) exit 1; for (i in lo) if (hi[i] - lo[i] > d) exit 1 }'
}
# sent_by NODE: datagrams NODE's forger reports it sent (both runs).
sent_by() { awk '/^cm-forge: sent [0-9]+ datagrams/ { n += $3 } END { print n + 0 }' "$CHECK_TMP/forge.sent.$1"; }
# forgers_running PID...: one of them still runs.
forgers_running() {
    local p
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null && return 0
    done
    return 1
}

# The job, the spray during its traffic, and the memory samples around it.
# Evidence for the next checks: $LOGS/forge.{out,err}; in $CHECK_TMP:
# forge.ranks (lib/rank-info of both ranks), forge.sent.NODE (what the
# forger on NODE sent, at the other guest's rank), forge.window (seconds
# the spray lasted), forge.rss (the samples).
forge_spray() {
    local pid rc n m line lo hi ud gid t_end t0 i victim as common
    local -A forger
    STRESS_LOG=$LOGS/forge
    rm -f "$CHECK_TMP"/forge.*
    MPI_PML=roce MPI_LIMIT=$((FORGE_SECONDS * 4 + 240)) ROCE_TEST_SECONDS=$FORGE_SECONDS \
        mpi "$STRESS_LOG" -np 2 --hostfile "$VMTEST_HOSTFILE" "$MPI_BIN/stress" &
    pid=$!
    wait_for 300 "stress t >= $FORGE_WARMUP s" t_at_least "$FORGE_WARMUP"
    for n in $VMTEST_NODES; do
        line=$(rank_on "$n")
        [ "$(echo "$line" | grep -c '^pid=')" = 1 ] || die "$n: not one stress rank (${line:-none}): the job ended?"
        [ "$(kv ud_qpn "$line")" != none ] || die "$n: no UD QP listed for the rank: $line"
        echo "node=$n $line" >>"$CHECK_TMP/forge.ranks"
        note "$n: $line"
    done
    # Warm-up (free lists, registrations) first: the spray starts once the
    # ranks' memory is steady.
    until rss_sample before && rss_steady; do
        kill -0 "$pid" 2>/dev/null || die "the job ended before the ranks' memory was steady"
        if t_at_least $((FORGE_SECONDS / 2)); then
            rss_show
            die "the ranks' memory was not steady by stress t=$((FORGE_SECONDS / 2)) s: growth could not be told from warm-up (raise BTL_FORGE_SECONDS)"
        fi
        sleep 2
    done
    note "memory steady at stress t=$(stress_t) s: $(tail -n1 "$CHECK_TMP/forge.rss" | cut -d' ' -f4-) kB"
    # The forger on each guest sprays the other guest's rank, as its real
    # peer (the rank on the forger's own guest).
    for n in $VMTEST_NODES; do
        m=$(other_node "$n")
        line=$(grep "^node=$m " "$CHECK_TMP/forge.ranks")
        ud=$(kv ud_qpn "$line")
        hi=$(($(kv qpns "$line" | tr ',' '\n' | sort -n | tail -n1) + 8))
        lo=17 # rxe's first QP number for a user's QP (0x11; 1 is the GSI QP)
        gid=$(gid_of "$n") || die "$n: no GID index for the forger"
        victim="$(kv jobid "$line"),$(kv rank "$line")"
        line=$(grep "^node=$n " "$CHECK_TMP/forge.ranks")
        as="$(kv jobid "$line"),$(kv rank "$line")"
        note "forger on $n: at $m's rank $victim (UD QP $ud) as $as, from gid[$gid]: $FORGE_SWEEP datagrams over QPNs $lo-$hi, then $FORGE_COUNT at $ud"
        common="$FORGE --dev $DEV --sgid-index $gid --dest $(peer_of "$n") --victim $victim --as $as --rate $FORGE_RATE"
        (user_on "$n" 900 "$common --qpn-range $lo-$hi --count $FORGE_SWEEP --seed 1" &&
            user_on "$n" 900 "$common --qpn-range $ud-$ud --count $FORGE_COUNT --seed 2") \
            >"$CHECK_TMP/forge.sent.$n" 2>&1 &
        forger[$n]=$!
    done
    t0=$SECONDS
    while forgers_running "${forger[@]}"; do
        rss_sample during || die "a rank ended during the spray"
        sleep 2
    done
    for n in $VMTEST_NODES; do
        wait "${forger[$n]}" || die "the forger on $n failed: $(cat "$CHECK_TMP/forge.sent.$n")"
    done
    echo $((SECONDS - t0)) >"$CHECK_TMP/forge.window"
    for n in $VMTEST_NODES; do
        sed "s/^/note: $n: /" "$CHECK_TMP/forge.sent.$n"
        [ "$(grep -c '^cm-forge: sent ' "$CHECK_TMP/forge.sent.$n")" = 2 ] || die "$n: the forger did not report both runs"
        i=$(sent_by "$n")
        [ "$i" = $((FORGE_SWEEP + FORGE_COUNT)) ] || die "$n: the forger sent $i datagrams, not $((FORGE_SWEEP + FORGE_COUNT))"
    done
    t_end=$(stress_t)
    note "spray: $(cat "$CHECK_TMP/forge.window") s, ended at stress t=$t_end s"
    # shellcheck disable=SC2034 # hold_over_at: read by hold_over (lib/btl.sh)
    hold_over_at=$((SECONDS + 4 * FORGE_AFTER))
    wait_for 300 "stress t >= $t_end + $FORGE_AFTER s" hold_over "$(awk -v t="$t_end" -v a="$FORGE_AFTER" 'BEGIN { print t + a }')"
    rss_sample after || die "the job ended before the sample $FORGE_AFTER s after the spray (raise BTL_FORGE_SECONDS)"
    rss_show
    wait "$pid"
    rc=$?
    grep -E '^stress: [0-9]+ iterations|^stress: (PASS|FAIL)' "$STRESS_LOG.out" | sed 's/^/note: /'
    if [ "$rc" != 0 ] || ! grep -q '^stress: PASS' "$STRESS_LOG.out"; then
        other_stderr "$STRESS_LOG.err" | head -40
        die "stress did not pass (exit $rc); logs $STRESS_LOG.{out,err}"
    fi
    grep -q '^stress: .* 0 errors$' "$STRESS_LOG.out" || die "data errors"
    # Path failures are forge-no-teardown's to judge; anything else but the
    # drop warnings is an error here.
    relay_lost_note "$STRESS_LOG.err"
    fault_stderr "$STRESS_LOG.err" | grep -v -E "$DROP_WARNING" >"$CHECK_TMP/forge.other"
    [ ! -s "$CHECK_TMP/forge.other" ] || {
        head -20 "$CHECK_TMP/forge.other"
        die "unexpected lines on stderr"
    }
}

need_spray() { [ -s "$CHECK_TMP/forge.window" ] && [ -s "$LOGS/forge.err" ] || die "no evidence: forge-spray did not get through the spray"; }

# No path failed, reconnected or failed over while the spray ran.
forge_no_teardown() {
    local err=$LOGS/forge.err lines retr fo rc
    need_spray
    grep -E 'btl roce: path [0-9]+ to .* reconnects' "$err" | sed 's/^.*btl roce: /note: /'
    read -r lines _ retr fo rc <<<"$(path_totals "$err")"
    note "per-path counters ($lines lines): $fo failovers, $rc reconnects, $retr retransmits"
    [ "$lines" -ge 2 ] || die "no per-path counters at finalize from both ranks ($lines lines)"
    if grep -E 'path [0-9]+ to .* failed|connection to .* failed' "$err" | head -5 | grep .; then
        die "a path failed during the spray"
    fi
    [ "$fo" = 0 ] && [ "$rc" = 0 ] || die "$fo failovers, $rc reconnects counted"
}

# sent_to NODE: datagrams the other guest's forger sent at NODE's rank.
sent_to() { sent_by "$(other_node "$1")"; }

# The finalize counters of each rank count what the other guest's forger
# sent: per peer (the forged messages that named its real peer, wrong
# token) and for names of no peer (malformed, misdirected, random job ids).
forge_drops_counted() {
    local err=$LOGS/forge.err n m peer line a b c mal mis tok unk total sent
    need_spray
    for n in $VMTEST_NODES; do
        m=$(other_node "$n")
        peer=$(kv name "$(grep "^node=$m " "$CHECK_TMP/forge.ranks")")
        line=$(grep -F "[$n:" "$err" | grep -F "($m, $peer): connection messages dropped: " | tail -n1)
        [ -n "$line" ] || die "$n: no drop counters for its peer $peer at finalize"
        note "${line#*btl roce: }"
        read -r a b c <<<"$(echo "$line" | sed -n 's/.*dropped: \([0-9]*\) with a wrong token, \([0-9]*\) misdirected, \([0-9]*\) fitting.*/\1 \2 \3/p')"
        line=$(grep -F "[$n:" "$err" | grep -F 'connection messages dropped that named no peer of ours: ' | tail -n1)
        [ -n "$line" ] || die "$n: no counters of drops naming no peer at finalize"
        note "${line#*btl roce: }"
        read -r mal mis tok unk <<<"$(echo "$line" | sed -n 's/.*ours: \([0-9]*\) malformed, \([0-9]*\) misdirected, \([0-9]*\) with a wrong token, \([0-9]*\) from.*/\1 \2 \3 \4/p')"
        total=$((a + b + mal + mis + tok + unk))
        sent=$(sent_to "$n")
        note "$n: $total forged datagrams counted of $sent sent at it ($c more dropped as late copies or races)"
        [ "${a:-0}" -ge 1 ] || die "$n: no forged message naming its peer was counted"
        [ "${mal:-0}" -ge 1 ] && [ "${tok:-0}" -ge 1 ] || die "$n: malformed ($mal) or foreign-job ($tok) drops missing"
        [ "$total" -ge "$MIN_DROPS" ] || die "$n: only $total drops counted (need >= $MIN_DROPS)"
        [ "$total" -le "$sent" ] || die "$n: $total drops counted but only $sent forged datagrams were sent at it"
    done
}

# The drop warnings are rate-limited: per rank and kind at most one line per
# WARN_INTERVAL s of spray (plus the first), a handful in all against
# thousands of datagrams.
forge_warn_limited() {
    local err=$LOGS/forge.err n window bound lines sent kinds k c
    need_spray
    window=$(cat "$CHECK_TMP/forge.window")
    bound=$((window / WARN_INTERVAL + 1))
    for n in $VMTEST_NODES; do
        grep -E "$DROP_WARNING" "$err" | grep -F "[$n:" >"$CHECK_TMP/warn.$n"
        lines=$(wc -l <"$CHECK_TMP/warn.$n")
        sent=$(sent_to "$n")
        kinds=$(awk '
            / naming rank [0-9]+ /                  { k["wrong-token-as-peer"]++; next }
            /claiming to be from .* wrong connection token/ { k["wrong-token-other-job"]++; next }
            /dropped a malformed connection message/  { k["malformed"]++; next }
            /\(not this process and port\)/           { k["misdirected"]++; next }
            /a process outside the jobs known here/   { k["unknown-sender"]++; next }
                                                      { k["other"]++ }
            END { for (i in k) print i, k[i] }' "$CHECK_TMP/warn.$n" | sort)
        note "$n: $lines drop warnings for $sent datagrams in $window s ($(echo "$kinds" | tr '\n' ',' | sed 's/,$//; s/,/, /g')); they stand for $(awk '{ if (match($0, /\(([0-9]+) such since the last report\)$/)) n += substr($0, RSTART + 1) + 0 } END { print n + 0 }' "$CHECK_TMP/warn.$n") more"
        head -n 4 "$CHECK_TMP/warn.$n" | sed 's/^/    /'
        [ "$lines" -ge 1 ] || die "$n: no drop warning at all"
        while read -r k c; do
            [ "$k" != other ] || die "$n: $c drop warnings of an unknown form"
            [ "$c" -le "$bound" ] || die "$n: $c '$k' warnings in a $window s spray (at most $bound: one per $WARN_INTERVAL s)"
        done <<<"$kinds"
        [ $((lines * 50)) -le "$sent" ] || die "$n: $lines warnings for $sent datagrams: not rate-limited"
    done
}

# The ranks' memory: just before the spray, during it, FORGE_AFTER s after.
forge_rss_flat() {
    local rss=$CHECK_TMP/forge.rss i n growth
    need_spray
    grep -q '^after ' "$rss" || die "no sample after the spray"
    i=4
    for n in $VMTEST_NODES; do
        read -r before peak after <<<"$(awk -v i=$i '
            $1 == "before" { b = $i }
            $1 == "during" || $1 == "after" { if ($i > p) p = $i }
            $1 == "after" { a = $i }
            END { print b, p, a }' "$rss")"
        growth=$((peak - before))
        note "$n: VmRSS $before kB before the spray, at most $peak kB during and after it, $after kB $FORGE_AFTER s after (growth $growth kB, bound $RSS_BOUND_KB kB)"
        [ "$growth" -le "$RSS_BOUND_KB" ] || die "$n: the rank's memory grew by $growth kB"
        i=$((i + 1))
    done
    note "samples: $(grep -c . "$rss") ($(awk '{ print $1 }' "$rss" | uniq -c | awk '{ printf "%s%s %s", s, $1, $2; s = ", " }'))"
}

# ---- 2. teardown under valgrind -----------------------------------------------

# vg_reap: valgrind ranks that outlived their mpirun (lib/btl.sh's reap
# matches only ranks started directly), killed by PID.
vg_reap() {
    local n pids
    for n in $VMTEST_NODES; do
        # The command is valgrind (not this shell or awk, whose arguments
        # name both too).
        pids=$(on "$n" "ps -eo pid=,args= | awk '\$2 ~ /(^|\\/)valgrind\$/ && index(\$0, \"$MPI_BIN/stress\") { print \$1 }'")
        [ -n "$pids" ] || continue
        pids=$(echo "$pids" | tr '\n' ' ')
        echo "$n: killing leftover valgrind ranks $pids"
        on "$n" "kill -9 $pids" 2>/dev/null
    done
}

# A 2-rank stress run (ob1: pml roce cannot take this pull yet, see
# docs/notes/btl-vm-findings.md) with both ranks under memcheck; the active
# member's cable pulled at stress t=VG_CUT_AT s and not replugged. Passes
# when the job passed (valgrind found nothing: --error-exitcode), a path
# failed with work on it, and finalize retired and destroyed QPs.
forge_vg_finalize() {
    local pid rc a n f qpn
    STRESS_LOG=$LOGS/vg
    for n in $VMTEST_NODES; do
        on "$n" "rm -rf $VG_DIR && mkdir -m 0755 $VG_DIR && chown $RUN_AS: $VG_DIR" || die "$n: cannot create $VG_DIR"
    done
    MPI_PML=ob1 MPI_LIMIT=$((VG_SECONDS * 6 + 600)) ROCE_TEST_SECONDS=$VG_SECONDS \
        mpi "$STRESS_LOG" -np 2 --hostfile "$VMTEST_HOSTFILE" \
        valgrind --error-exitcode=$VG_EXIT --suppressions="$VG_SUPP" -s --num-callers=30 \
        "--log-file=$VG_DIR/vg.rank%q{OMPI_COMM_WORLD_RANK}.log" "$MPI_BIN/stress" &
    pid=$!
    wait_for $((VG_SECONDS * 6 + 300)) "stress t >= $VG_CUT_AT s" t_at_least "$VG_CUT_AT"
    kill -0 "$pid" 2>/dev/null || die "the job ended before the pull (lower BTL_VG_CUT_AT)"
    a=$(active_member node1)
    vmtest-fault cut "${a#eth}" || die "vmtest-fault cut ${a#eth} failed"
    note "cut $a at utc $(date -u +%T) (stress t=$(stress_t) s of $VG_SECONDS when it returned); not replugged"
    wait "$pid"
    rc=$?
    vg_reap
    for n in $VMTEST_NODES; do
        for f in $(on "$n" "ls $VG_DIR"); do
            on "$n" "cat $VG_DIR/$f" >"$LOGS/$f"
            note "$n: $(grep -m1 'ERROR SUMMARY' "$LOGS/$f")"
        done
    done
    grep -E '^stress: [0-9]+ iterations|^stress: (PASS|FAIL)' "$STRESS_LOG.out" | sed 's/^/note: /'
    grep -E "$PATH_FAILED" "$STRESS_LOG.err" | sed 's/^/note: /'
    grep -E 'btl roce: .*(destroying [0-9]+ retired QPs? at teardown|retired RC QP)' "$STRESS_LOG.err" | sed 's/^/note: /'
    grep -E 'btl roce: path [0-9]+ to .* reconnects' "$STRESS_LOG.err" | sed 's/^.*btl roce: /note: /'
    if [ "$rc" != 0 ] || ! grep -q '^stress: PASS' "$STRESS_LOG.out"; then
        other_stderr "$STRESS_LOG.err" | head -20
        grep -h -A12 -E '^==[0-9]+== (Invalid|Conditional|Use of|Mismatched|Syscall)' "$LOGS"/vg.rank*.log 2>/dev/null | head -60
        die "the job failed (exit $rc; $VG_EXIT: valgrind reported an error); logs $STRESS_LOG.{out,err}, $LOGS/vg.rank*.log"
    fi
    grep -q '^stress: .* 0 errors$' "$STRESS_LOG.out" || die "data errors"
    [ -z "$(fault_stderr "$STRESS_LOG.err")" ] || {
        fault_stderr "$STRESS_LOG.err" | head -20
        die "errors or unexpected warnings on stderr"
    }
    grep -q -E "$PATH_FAILED" "$STRESS_LOG.err" || die "no path failed: the pull did not hit the traffic"
    read -r lines _ _ fo _ <<<"$(path_totals "$STRESS_LOG.err")"
    [ "$lines" -ge 2 ] && [ "$fo" -ge 1 ] || die "per-path counters: $lines lines, $fo failovers"
    for n in $VMTEST_NODES; do
        grep -F "[$n:" "$STRESS_LOG.err" | grep -q -E 'destroying [0-9]+ retired QPs? at teardown' ||
            die "$n: no QP was left in the Retirement at finalize"
    done
    # Was the QP whose failure was reported still held at finalize? rxe
    # never reports Last WQE Reached, so a retired QP goes 2 s after ERR; a
    # job with one path per peer cannot finish before its path reconnects.
    for qpn in $(sed -n "s/.*failed: .* on qpn \(0x[0-9a-f]*\):.*/\1/p" "$STRESS_LOG.err"); do
        if grep -E 'at teardown' "$STRESS_LOG.err" | grep -q -E "[ :,]$qpn \("; then
            note "the failed QP $qpn was still in the Retirement at finalize"
        else
            note "the failed QP $qpn was destroyed before finalize (the teardown destroyed its successor)"
        fi
    done
}

# Both ranks' memcheck: an ERROR SUMMARY of 0 errors, no invalid access.
forge_vg_clean() {
    local f n=0
    for f in "$LOGS"/vg.rank*.log; do
        [ -s "$f" ] || continue
        n=$((n + 1))
        grep -E 'ERROR SUMMARY|used_suppression' "$f" | sed "s|^|note: $(basename "$f"): |"
        grep -q 'ERROR SUMMARY: ' "$f" || die "$f: no ERROR SUMMARY (the rank did not end normally)"
        if grep -E -A20 'Invalid (read|write|free)|Mismatched free|Source and destination overlap|invalid file descriptor' "$f" | head -60 | grep .; then
            die "$f: invalid access"
        fi
        grep -q 'ERROR SUMMARY: 0 errors' "$f" || {
            grep -E -A20 '^==[0-9]+== [A-Z]' "$f" | head -60
            die "$f: memcheck errors"
        }
    done
    [ "$n" = 2 ] || die "$n memcheck logs, not 2: forge-vg-finalize did not run both ranks under valgrind"
}

check forge-env 120 forge_env
check forge-spray $((FORGE_SECONDS * 4 + 600)) forge_spray
check forge-no-teardown 30 forge_no_teardown
check forge-drops-counted 30 forge_drops_counted
check forge-warn-limited 30 forge_warn_limited
check forge-rss-flat 30 forge_rss_flat
check forge-vg-finalize $((VG_SECONDS * 6 + 900)) forge_vg_finalize
check forge-vg-clean 30 forge_vg_clean
finish
