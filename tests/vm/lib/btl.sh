# shellcheck shell=bash
# In-guest helpers for the btl roce groups (tests/vm/guest/btl-*.sh; source
# after check.sh and fabric.sh). The host side (lib/btl-host.sh) passes
# ROCE_BTL_COMPS (a directory holding only our mca_btl_roce.so) and
# ROCE_BUILDDIR (the build tree with tests/mpi and tests/bench).

: "${ROCE_BTL_COMPS:?set by the .test file (lib/btl-host.sh)}" "${ROCE_BUILDDIR:?}"
# Our build first; mpirun forwards OMPI_MCA_* to every rank, on both guests.
export OMPI_MCA_mca_base_component_path=$ROCE_BTL_COMPS:SYS_DEFAULT
MPI_BIN=$ROCE_BUILDDIR/tests/mpi
BENCH_BIN=$ROCE_BUILDDIR/tests/bench
RUN_SUITE=$(cd "$VMTEST_LIB/../../mpi" && pwd)/run-suite
# Logs go to the results share when there is one (the host keeps them).
LOGS=$CHECK_TMP
if [ -n "${VMTEST_RESULTS:-}" ] && mkdir -p "$VMTEST_RESULTS/btl" 2>/dev/null &&
    [ -w "$VMTEST_RESULTS/btl" ]; then
    LOGS=$VMTEST_RESULTS/btl
fi

# The btl in use is ours: ompi_info finds a btl roce with only our directory
# and SYS_DEFAULT on the path, and SYS_DEFAULT holds none.
btl_env() {
    local sys
    echo "uid $(id -u) ($(id -un)), ulimit -l $(ulimit -l), component path $OMPI_MCA_mca_base_component_path"
    ompi_info --parsable --param btl roce --level 9 >"$CHECK_TMP/ompi_info.txt" 2>&1
    grep -q '^mca:btl:roce:' "$CHECK_TMP/ompi_info.txt" || {
        head -20 "$CHECK_TMP/ompi_info.txt"
        die "ompi_info does not see btl roce"
    }
    sys=$(OMPI_MCA_mca_base_component_path=SYS_DEFAULT ompi_info --parsable --param btl roce 2>/dev/null |
        grep -c '^mca:btl:roce:')
    [ "$sys" = 0 ] || die "a btl roce is installed outside $ROCE_BTL_COMPS: the run would be ambiguous"
    note "btl roce from $ROCE_BTL_COMPS ($(md5sum <"$ROCE_BTL_COMPS/mca_btl_roce.so" | cut -c1-12)), build $ROCE_BUILDDIR"
}

# as_user CMD [ARGS...]: run CMD as $RUN_AS (the unprivileged user) when it
# is set and the script runs as root, else as is. For groups that run as root
# because they inject faults (vmtest-fault needs root) while the MPI jobs must
# run unprivileged. CMD must be a program, not a function (bash -c FUNCTION
# works: check exports every function).
as_user() {
    if [ -n "${RUN_AS:-}" ] && [ "$(id -u)" = 0 ]; then
        setpriv --reuid="$(id -u "$RUN_AS")" --regid="$(id -g "$RUN_AS")" --init-groups \
            env HOME="$(getent passwd "$RUN_AS" | cut -d: -f6)" USER="$RUN_AS" LOGNAME="$RUN_AS" "$@"
    else
        "$@"
    fi
}

# user_dir DIR: DIR exists and (with RUN_AS) the unprivileged user may write it.
user_dir() {
    mkdir -p "$1" || return 1
    [ -z "${RUN_AS:-}" ] || [ "$(id -u)" != 0 ] || chown "$RUN_AS:" "$1"
}

# pml_env: pml roce is visible from our component directory on both guests.
pml_env() {
    ompi_info --parsable --param pml roce 2>/dev/null | grep -q '^mca:pml:roce:' ||
        die "ompi_info does not see pml roce in $ROCE_BTL_COMPS"
    # ssh does not carry the environment: give node2 the same component path.
    on node2 "OMPI_MCA_mca_base_component_path=$OMPI_MCA_mca_base_component_path ompi_info --parsable --param pml roce 2>/dev/null | grep -q '^mca:pml:roce:'" ||
        die "node2 does not see pml roce"
}

# suite LOGNAME RUN-SUITE-ARGS...: tests/mpi/run-suite with our build's programs,
# under pml $SUITE_PML (default ob1), as $RUN_AS when set (as_user); passes
# only if run-suite does (every program PASS, nothing on stderr).
suite() {
    local name=$1 rc logdir=$LOGS/$1
    shift
    # run-suite writes its logs as the job's user, who may not reach the
    # results share (make vmcheck's results directory is private to root):
    # then they stay in the guest; run-suite's output below names failures.
    { user_dir "$logdir" && as_user test -w "$logdir"; } 2>/dev/null || {
        rmdir "$logdir" 2>/dev/null
        logdir=$CHECK_TMP/$name
        user_dir "$logdir" || die "cannot create $logdir"
    }
    as_user python3 "$RUN_SUITE" --bindir "$MPI_BIN" --logdir "$logdir" --mca pml "${SUITE_PML:-ob1}" "$@" \
        >"$CHECK_TMP/$name.suite" 2>&1
    rc=$?
    cat "$CHECK_TMP/$name.suite"
    grep -E '^(PASS|FAIL|SKIP) ' "$CHECK_TMP/$name.suite" | sed 's/^/note: /'
    note "$(tail -n1 "$CHECK_TMP/$name.suite")"
    [ "$rc" = 0 ] || die "run-suite failed ($(grep -c '^FAIL ' "$CHECK_TMP/$name.suite") program(s)); logs in $logdir"
}

# tod HH:MM:SS.frac -> seconds of the day
tod() { awk -v t="$1" 'BEGIN { split(t, a, ":"); printf "%.3f\n", a[1] * 3600 + a[2] * 60 + a[3] }'; }
now_tod() { tod "$(date -u +%H:%M:%S.%N)"; }

# path_totals STDERR_LOG: "LINES BYTES RETRANSMITS FAILOVERS RECONNECTS", the
# per-path counters summed over every rank (the btl prints one line per path
# at finalize with --mca btl_roce_verbose 10).
path_totals() {
    awk '/btl roce: path [0-9]+ to .* reconnects$/ {
             n++
             for (i = 1; i <= NF; i++) {
                 f = $i; sub(/,$/, "", f)
                 if ($(i + 1) ~ /^bytes/) b += f
                 if ($(i + 1) ~ /^retransmits/) r += f
                 if ($(i + 1) ~ /^failovers/) fo += f
                 if ($(i + 1) ~ /^reconnects/) c += f
             }
         }
         END { printf "%d %.0f %d %d %d\n", n, b, r, fo, c }' "$1"
}

# path_summary STDERR_LOG: the same as one note line.
path_summary() {
    path_totals "$1" | awk '{ printf "note: per-path counters (%d path lines): %.1f MB, %d retransmits, %d failovers, %d reconnects\n",
                                     $1, $2 / 1e6, $3, $4, $5 }'
}

# tx_split BEFORE AFTER: note every guest's member split in percent; prints
# the smallest share of any member (integer percent) on stdout's last line.
tx_split() {
    local n a b min=100 pa
    for n in $VMTEST_NODES; do
        a=$(tx_delta "$1" "$2" "$n" eth0)
        b=$(tx_delta "$1" "$2" "$n" eth1)
        if [ $((a + b)) -gt 0 ]; then
            pa=$((100 * a / (a + b)))
        else
            pa=0
        fi
        note "$n: eth0 +$a B ($pa%), eth1 +$b B ($((a + b > 0 ? 100 - pa : 0))%)"
        [ "$pa" -lt "$min" ] && min=$pa
        [ $((a + b > 0 ? 100 - pa : 0)) -lt "$min" ] && min=$((a + b > 0 ? 100 - pa : 0))
    done
    echo "$min"
}

# bandwidth_spread SPLIT WHAT [PER_RUN_NOTES]: a bandwidth run (1 MiB
# messages, window of 64, one way then both ways), one rank per guest,
# between two tx snapshots; SPLIT (tx_split: a bond's members, rail_split:
# the rails) notes every guest's shares, and each WHAT ("member", "rail")
# must carry >= MIN_SHARE% of the bytes. PER_RUN_NOTES, if given, is run
# with "before" and "after" around the job (figures of its own to note).
# Dies unless the run passed with nothing on stderr but verbose lines.
bandwidth_spread() {
    local split=$1 what=$2 extra=${3:-} min rc
    tx_snapshot "$CHECK_TMP/b0"
    [ -z "$extra" ] || $extra before
    ROCE_BENCH_SIZES=1M ROCE_TEST_MAX_BYTES=1M MPI_LIMIT=500 mpi "$LOGS/spread" -np 2 --hostfile "$VMTEST_HOSTFILE" \
        "$BENCH_BIN/bandwidth"
    rc=$?
    [ -z "$extra" ] || $extra after
    tx_snapshot "$CHECK_TMP/b1"
    grep -E '^# +1048576 ' "$LOGS/spread.out" | sed 's/^# */note: bytes, uni MB\/s, bi MB\/s: /'
    grep -E 'btl roce: (path [0-9]+ to |[^ ]+:[0-9]+: bandwidth )' "$LOGS/spread.err" | sed 's/^.*btl roce: /note: /' | sort -u
    path_summary "$LOGS/spread.err"
    tx_report "$CHECK_TMP/b0" "$CHECK_TMP/b1"
    $split "$CHECK_TMP/b0" "$CHECK_TMP/b1" >"$CHECK_TMP/split"
    grep '^note: ' "$CHECK_TMP/split"
    min=$(tail -n1 "$CHECK_TMP/split")
    [ "$rc" = 0 ] && grep -q '^bandwidth: PASS' "$LOGS/spread.out" || {
        tail -20 "$LOGS/spread.err"
        die "bandwidth run failed (exit $rc)"
    }
    [ -z "$(other_stderr "$LOGS/spread.err")" ] || {
        other_stderr "$LOGS/spread.err" | head -20
        die "warnings on stderr"
    }
    note "smallest $what share: $min% (need >= $MIN_SHARE%)"
    [ "$min" -ge "$MIN_SHARE" ] || die "a $what carried only $min% of the bytes"
}

# rail_split BEFORE AFTER (topology rails): note every guest's split of the
# bytes between its rails (rail 0: bond0's members eth0+eth1, rail 1: bond1's
# eth2+eth3); prints the smallest rail share (integer percent) last.
rail_split() {
    local n a b min=100 pa pb
    for n in $VMTEST_NODES; do
        a=$(($(tx_delta "$1" "$2" "$n" eth0) + $(tx_delta "$1" "$2" "$n" eth1)))
        b=$(($(tx_delta "$1" "$2" "$n" eth2) + $(tx_delta "$1" "$2" "$n" eth3)))
        pa=$((a + b > 0 ? 100 * a / (a + b) : 0))
        pb=$((a + b > 0 ? 100 - pa : 0))
        note "$n: rail 0 ($VMTEST_BOND, $VMTEST_RDMA_DEV) +$a B ($pa%), rail 1 ($VMTEST_BOND1, $VMTEST_RDMA_DEV1) +$b B ($pb%)"
        [ "$pa" -lt "$min" ] && min=$pa
        [ "$pb" -lt "$min" ] && min=$pb
    done
    echo "$min"
}

# stress_report LOG CUT_TOD RESTORE_TOD [RESTORE_BEGIN_TOD]: recovery figures from the progress
# lines of tests/mpi/stress (rank 0 prints one every ~2 s after an iteration).
# Time to recover = from the event to the start of the first progress interval
# after it whose iteration rate is back to >= 50% of the rate before the cut
# (resolution: one progress interval, ~2 s).
stress_report() {
    awk -v cut="$2" -v rst="$3" -v rst0="${4:-$3}" '
        function tod(s, a) { split(s, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        /^stress: .* start utc=/ { sub(/.*start utc=/, ""); t0 = tod($0); prev = t0; next }
        /^stress: progress / {
            u = $0; sub(/.*utc=/, "", u); sub(/ .*/, "", u); u = tod(u)
            k = $0; sub(/.*\(\+/, "", k); sub(/\).*/, "", k); k += 0
            dt = u - prev
            if (dt > gap) { gap = dt; gap_at = prev - t0 }
            if (u <= cut) { pre_it += k; pre_t = u - t0 }
            rate = dt > 0 ? k / dt : 0
            if (u > cut && !rc_done && pre_t > 0 && rate >= 0.5 * pre_it / pre_t) {
                rc = prev - cut; if (rc < 0) rc = 0; rc_done = 1
            }
            if (u > rst && prev >= rst) { post_it += k; post_t += dt }
            if (u > rst && !rr_done && pre_t > 0 && rate >= 0.5 * pre_it / pre_t) {
                rr = prev - rst; if (rr < 0) rr = 0; rr_done = 1
            }
            prev = u
        }
        END {
            printf "note: cut at t=%.1f s, restore at t=%.1f s (stress clock)\n", cut - t0, rst - t0
            printf "note: rate before the cut %.2f iterations/s; after the restore %.2f iterations/s\n",
                   (pre_t > 0 ? pre_it / pre_t : 0), (post_t > 0 ? post_it / post_t : 0)
            if (rc_done) printf "note: time to recover after the cut: %.1f s (back to >= 50%% of the rate)\n", rc
            else print "note: time to recover after the cut: never back to 50% of the rate"
            if (rr_done) printf "note: time to recover after the restore: %.1f s\n", rr
            else print "note: after the restore: never back to 50% of the rate"
            printf "note: longest gap between progress lines %.1f s (from t=%.1f s)\n", gap, gap_at
            # third field: back to half the rate before the restore (the
            # traffic moved to what was left, rather than waiting for the fault to end)
            print "RECOVERED " (rc_done ? 1 : 0) " " (post_it > 0 ? 1 : 0) " " (rc_done && cut + rc < rst0 ? 1 : 0)
        }' "$1"
}

# mpi LOG MPIRUN-ARGS...: mpirun (bounded by MPI_LIMIT s, default 600) with
# our btl ($BTL) under pml $MPI_PML (default ob1), as $RUN_AS when set
# (as_user), verbose BTL_VERBOSE (default 10: path counters and GID choices
# at finalize go to stderr; 50 adds each connection); LOG.out / LOG.err.
# Forwards the test knobs that are set (mpirun warns on stderr about a -x of
# an unset variable).
mpi() {
    local log=$1 v
    local fwd=(-x OMPI_MCA_mca_base_component_path)
    shift
    for v in ROCE_TEST_SECONDS ROCE_TEST_RUN_WHILE ROCE_TEST_SCALE ROCE_TEST_MAX_BYTES ROCE_BENCH_REPS ROCE_BENCH_MIN_BYTES ROCE_BENCH_SIZES; do
        [ -n "${!v+set}" ] && fwd+=(-x "$v")
    done
    as_user timeout -k 10 "${MPI_LIMIT:-600}" mpirun "${fwd[@]}" \
        --mca pml "${MPI_PML:-ob1}" --mca btl "$BTL" --mca btl_roce_verbose "${BTL_VERBOSE:-10}" \
        ${BTL_CONNECT_TIMEOUT:+--mca btl_roce_connect_timeout "$BTL_CONNECT_TIMEOUT"} \
        "$@" >"$log.out" 2>"$log.err"
    local rc=$?
    reap
    return $rc
}

# reap: ranks of ours that outlived their mpirun (a timed-out run) would spin
# on the one vCPU and starve the next run: list them and kill them by PID.
reap() {
    local n pids
    for n in $VMTEST_NODES; do
        pids=$(on "$n" "ps -eo pid=,args= | awk '\$2 ~ \"^$ROCE_BUILDDIR/tests/\" { print \$1 }'")
        [ -n "$pids" ] || continue
        echo "$n: killing leftover ranks $(echo $pids)"
        on "$n" "kill -9 $(echo $pids)" 2>/dev/null
    done
}

# ranks_as_user: an mpirun as RUN_AS puts a rank on every guest, each one
# running as RUN_AS with a non-zero uid; prints the ranks' lines.
ranks_as_user() {
    local out n
    out=$(as_user timeout -k 5 180 mpirun -x OMPI_MCA_mca_base_component_path --hostfile "$VMTEST_HOSTFILE" \
        -np 2 sh -c 'echo "rank on $(hostname) as $(id -un) uid $(id -u)"' 2>&1) || die "mpirun failed: $out"
    echo "$out"
    for n in $VMTEST_NODES; do
        echo "$out" | grep -qx "rank on $n as $RUN_AS uid [1-9][0-9]*" || die "no rank on $n as $RUN_AS"
    done
}

# Lines on stderr that are not the btl's verbose output (verbose lines start
# with "btl roce: " or "[host:pid] btl roce: ").
other_stderr() { grep -v -E '^(\[[^]]*\] )?btl roce: ' "$1" | grep -v '^[[:space:]]*$'; }
# During a fault the btl must say which path failed and that it reconnects
# (warning level, by design); any other line (an error, a pml FATAL) still fails.
PATH_FAILED='^\[[^]]*\] btl roce \[[^]]*\]: warning: path [0-9]+ to rank [0-9]+ .* failed: .*reconnecting$'
# A whole rail lost (topology rails): the module says once per peer that it
# lost every path and which rail carries the traffic, and once that it is back.
RAIL_LOST='^\[[^]]*\] btl roce \[[^]]*\]: warning: [^ ]+ lost every path to rank [0-9]+ .*; its traffic goes over [^ ]+ until this rail returns$'
RAIL_BACK='^\[[^]]*\] btl roce \[[^]]*\]: warning: [^ ]+ reaches rank [0-9]+ .* again: its traffic is back on this rail$'
# A port went down (PORT_ERR), said once per process and port: the paths to
# peers another rail reaches failed at once, or none does and they retry.
RAIL_DOWN='^\[[^]]*\] btl roce \[[^]]*\]: warning: [^ ]+ went down \(the device reported IBV_EVENT_PORT_ERR\); (the paths to [0-9]+ peer\(s\) another rail reaches failed at once, their traffic moves there until this port is back|no other rail of this process reaches its peers: their paths stay and retry \(a short flap heals\))$'
# With the components installed (as .ci/run does), the first failed path of
# each rank also shows the help topic "path failed" (help-mpi-btl-roce.txt),
# which mpirun prints once in a box of dashes and then counts ("N more
# processes have sent help message ..."): expected during a pull as well.
PATH_FAILED_HELP='^A RoCE path \(one queue pair to a peer\) failed while carrying traffic\.$'
PATH_FAILED_COUNT='^\[[^]]*\] [0-9]+ more process(es)? (has|have) sent help message help-mpi-btl-roce\.txt / path failed$'
HELP_AGGREGATE_HINT='^(\[[^]]*\] )?Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages$'
# Open MPI 4.1.4's mpirun loses some help messages of the ranks on its own
# node and prints this line instead: orte_rml_oob_send_buffer_nb
# (orte/mca/rml/oob/rml_oob_send.c), called on the PMIx server thread for a
# rank's PMIx_Log, queues the send callback that frees the buffer before it
# copies that buffer for the self-receive, so when mpirun's event thread runs
# first, orte_show_help_recv unpacks freed memory. Not ours, counted in a
# note; the same message from the other ranks, and every warning line, still
# come through.
OMPI_HELP_RELAY_LOST='^\[[^]]*\] \[\[[0-9]+,0\],0\] ORTE_ERROR_LOG: .* in file .*orte/util/show_help\.c at line [0-9]+$'
# without_help_box PATTERN: stdin without the dash-delimited help boxes whose
# first line matches PATTERN (an ERE, passed through the environment so awk
# keeps its backslashes); every other line unchanged.
without_help_box() {
    HELP_BOX_FIRST=$1 awk '
        BEGIN { pat = ENVIRON["HELP_BOX_FIRST"] }
        /^-----------------------------*$/ {
            if (!inbox) { inbox = 1; buf = $0; first = ""; n = 0; next }
            if (first !~ pat) print buf "\n" $0
            inbox = 0; next
        }
        inbox { buf = buf "\n" $0; if (n++ == 0) first = $0; next }
        { print }
        END { if (inbox) print buf }'
}
# fault_stderr FILE: the lines of FILE a fault may not cause: all but the
# verbose ones, the path-failure warnings, the "path failed" help topic with
# its count and Open MPI's lost-help-message line.
fault_stderr() {
    other_stderr "$1" | grep -v -E "$PATH_FAILED|$RAIL_LOST|$RAIL_BACK|$RAIL_DOWN" | without_help_box "$PATH_FAILED_HELP" |
        grep -v -E "$PATH_FAILED_COUNT|$HELP_AGGREGATE_HINT|$OMPI_HELP_RELAY_LOST"
}
# relay_lost_note FILE: a note if Open MPI lost help messages in FILE.
relay_lost_note() {
    local n
    n=$(grep -c -E "$OMPI_HELP_RELAY_LOST" "$1")
    [ "$n" = 0 ] || note "mpirun lost $n help message(s) (Open MPI 4.1.4's self-send race, not ours): $(grep -m1 -E "$OMPI_HELP_RELAY_LOST" "$1")"
}

# ---- tests/mpi/stress with a cable pull (stress_cut) -------------------------
# stress_t: the stress clock of the last progress line of $STRESS_LOG.out
# (empty before the first).
stress_t() { sed -n 's/^stress: progress t=\([0-9.]*\) s.*/\1/p' "$STRESS_LOG.out" | tail -n1; }
# t_at_least T: the stress clock reached T s, or the job ($pid) is gone.
t_at_least() {
    local t
    kill -0 "$pid" 2>/dev/null || return 0
    t=$(stress_t)
    [ -n "$t" ] && awk -v t="$t" -v m="$1" 'BEGIN { exit !(t >= m) }'
}
hold_over() { [ "$SECONDS" -ge "$hold_over_at" ] || t_at_least "$1"; }

# stress_cut NAME N MPIRUN-ARGS...: tests/mpi/stress (ROCE_TEST_SECONDS s,
# every byte and status verified) launched by `mpi` with MPIRUN-ARGS; member
# N's cable is pulled (vmtest-fault cut N: both guests; N may be a list, "2 3"
# pulls a whole rail of topology rails) at stress clock
# CUT_AT s and replugged HOLD stress seconds later (or after 2 x HOLD s of
# wall time if traffic stalls). Both faults are timed on the program's own
# clock (its progress lines): on a loaded host a guest's sleep and
# vmtest-fault can lag by a minute.
# Evidence for later checks: $LOGS/NAME.{out,err}, and the members' tx_bytes
# in $CHECK_TMP/NAME.{s0,b0,c0,r0,e0}: at the start, just before the pull,
# just after it took effect, just before the restore, at the end.
# Dies unless the job passed with 0 data errors, wrote nothing on stderr but
# verbose lines and the btl's path-failure warnings, was still running at the
# restore, got back to half its rate after the pull and kept going after the
# restore.
stress_cut() {
    local name=$1 ns=$2 pid rc cut rst rst0 rep alive=0 ev=$CHECK_TMP/$1 m what
    shift 2
    STRESS_LOG=$LOGS/$name
    tx_snapshot "$ev.s0"
    # The job runs at least ROCE_TEST_SECONDS, and on while this file exists
    # (rank 0, on this guest, looks): it goes once the job has run
    # AFTER_RESTORE stress seconds past the restore, however long a loaded
    # host took to inject and undo the fault (it took 23 s and 36 s in one CI
    # run, and the job had ended by the time the restore returned).
    local run_while=$CHECK_TMP/$name.run-while
    touch "$run_while" && chmod a+r "$run_while"
    # A die before the restore (each check is its own bash) must not leave the
    # job running on until its MPI_LIMIT.
    trap 'rm -f "$run_while"' EXIT
    ROCE_TEST_RUN_WHILE=$run_while MPI_LIMIT=$((ROCE_TEST_SECONDS * 4 + 240)) \
        mpi "$STRESS_LOG" "$@" "$MPI_BIN/stress" &
    pid=$!
    wait_for 600 "stress t >= $CUT_AT s" t_at_least "$CUT_AT"
    tx_snapshot "$ev.b0"
    # The fault is in place when vmtest-fault returns (it took up to 76 s on
    # the loaded host), so the event times are taken after it.
    what=
    for m in $ns; do
        vmtest-fault cut "$m" || die "vmtest-fault cut $m failed"
        what="$what${what:+, }eth$m"
    done
    cut=$(now_tod)
    note "cut $what at utc $(date -u +%T) (stress t=$(stress_t) s when it returned)"
    tx_snapshot "$ev.c0"
    hold_over_at=$((SECONDS + 2 * HOLD))
    wait_for 600 "stress t >= $(stress_t) + $HOLD s" hold_over "$(awk -v t="$(stress_t)" -v h="$HOLD" 'BEGIN { print t + h }')"
    tx_snapshot "$ev.r0"
    rst0=$(now_tod) # the first member may be back before the last restore returns
    for m in $ns; do
        vmtest-fault restore "$m" || die "vmtest-fault restore $m failed"
    done
    rst=$(now_tod)
    note "restored $what at utc $(date -u +%T) (stress t=$(stress_t) s when it returned)"
    kill -0 "$pid" 2>/dev/null && alive=1
    # Not wait_for: its die would leave the file, and the job running.
    local until_t end=$((SECONDS + 300 * VMTEST_TIME_SCALE))
    until_t=$(awk -v t="$(stress_t)" -v a="${AFTER_RESTORE:-20}" 'BEGIN { print t + a }')
    until t_at_least "$until_t" || [ "$SECONDS" -ge "$end" ]; do sleep 0.2; done
    rm -f "$run_while"
    trap - EXIT
    wait "$pid"
    rc=$?
    tx_snapshot "$ev.e0"
    grep '^stress: ' "$STRESS_LOG.out"
    grep -E '^stress: [0-9]+ iterations|^stress: iteration time|^stress: (PASS|FAIL)' \
        "$STRESS_LOG.out" | sed 's/^/note: /'
    rep=$(stress_report "$STRESS_LOG.out" "$cut" "$rst" "$rst0")
    echo "$rep" | grep '^note: '
    path_summary "$STRESS_LOG.err"
    local split=tx_split
    [ "${VMTEST_RAILS:-1}" -gt 1 ] && split=rail_split
    note "before the pull:"
    $split "$ev.s0" "$ev.b0" | grep '^note: '
    note "while $what was pulled:"
    $split "$ev.c0" "$ev.r0" | grep '^note: '
    note "after the restore (failback), until the end of the job:"
    $split "$ev.r0" "$ev.e0" | grep '^note: '
    note "whole run:"
    $split "$ev.s0" "$ev.e0" | grep '^note: '
    if [ "$rc" != 0 ] || ! grep -q '^stress: PASS' "$STRESS_LOG.out"; then
        echo "stderr (not verbose):"
        other_stderr "$STRESS_LOG.err" | head -40
        die "stress did not pass (exit $rc); logs $STRESS_LOG.{out,err}"
    fi
    grep -q '^stress: .* 0 errors$' "$STRESS_LOG.out" || die "data errors"
    grep -q '^stress: runs on while .* (it does now)$' "$STRESS_LOG.out" ||
        die "rank 0 did not see $run_while (not on this guest?): the job's end was not tied to the restore"
    note "$(other_stderr "$STRESS_LOG.err" | grep -c 'warning: path') path-failure warnings on stderr (expected during a pull)"
    relay_lost_note "$STRESS_LOG.err"
    [ -z "$(fault_stderr "$STRESS_LOG.err")" ] || {
        fault_stderr "$STRESS_LOG.err" | head -20
        die "errors or unexpected warnings on stderr"
    }
    [ "$alive" = 1 ] || die "the job ended before the restore: nothing shows the time after it (raise BTL_STRESS_SECONDS)"
    echo "$rep" | grep -q '^RECOVERED 1 1' || die "traffic did not recover to half its rate after the cut, or stopped after the restore"
    # STRESS_RECOVER_DURING_CUT=1: the traffic must come back while the fault
    # lasts (moved to the remaining rails), not only once it is undone.
    [ "${STRESS_RECOVER_DURING_CUT:-0}" = 0 ] || echo "$rep" | grep -q '^RECOVERED 1 1 1' ||
        die "traffic did not move to what was left: back to half its rate only after the restore ($(echo "$rep" | sed -n 's/^note: time to recover after the cut: //p'))"
}
