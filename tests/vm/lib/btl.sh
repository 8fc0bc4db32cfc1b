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

# suite LOGNAME RUN-SUITE-ARGS...: tests/mpi/run-suite with our build's programs,
# under pml $SUITE_PML (default ob1); passes only if run-suite does (every
# program PASS, nothing on stderr).
suite() {
    local name=$1 rc
    shift
    python3 "$RUN_SUITE" --bindir "$MPI_BIN" --logdir "$LOGS/$name" --mca pml "${SUITE_PML:-ob1}" "$@" \
        >"$CHECK_TMP/$name.suite" 2>&1
    rc=$?
    cat "$CHECK_TMP/$name.suite"
    grep -E '^(PASS|FAIL|SKIP) ' "$CHECK_TMP/$name.suite" | sed 's/^/note: /'
    note "$(tail -n1 "$CHECK_TMP/$name.suite")"
    [ "$rc" = 0 ] || die "run-suite failed ($(grep -c '^FAIL ' "$CHECK_TMP/$name.suite") program(s)); logs in $LOGS/$name"
}

# tod HH:MM:SS.frac -> seconds of the day
tod() { awk -v t="$1" 'BEGIN { split(t, a, ":"); printf "%.3f\n", a[1] * 3600 + a[2] * 60 + a[3] }'; }
now_tod() { tod "$(date -u +%H:%M:%S.%N)"; }

# path_summary STDERR_LOG: one note with the per-path counters summed over
# every rank (printed at finalize with --mca btl_roce_verbose 10).
path_summary() {
    awk '/btl roce: path [0-9]+ to / {
             n++
             for (i = 1; i <= NF; i++) {
                 f = $i; sub(/,$/, "", f)
                 if ($(i + 1) ~ /^bytes/) b += f
                 if ($(i + 1) ~ /^retransmits/) r += f
                 if ($(i + 1) ~ /^failovers/) fo += f
                 if ($(i + 1) ~ /^reconnects/) c += f
             }
         }
         END { printf "note: per-path counters (%d path lines): %.1f MB, %d retransmits, %d failovers, %d reconnects\n",
                      n, b / 1e6, r, fo, c }' "$1"
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

# stress_report LOG CUT_TOD RESTORE_TOD: recovery figures from the progress
# lines of tests/mpi/stress (rank 0 prints one every ~2 s after an iteration).
# Time to recover = from the event to the start of the first progress interval
# after it whose iteration rate is back to >= 50% of the rate before the cut
# (resolution: one progress interval, ~2 s).
stress_report() {
    awk -v cut="$2" -v rst="$3" '
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
            print "RECOVERED " (rc_done ? 1 : 0) " " (post_it > 0 ? 1 : 0)
        }' "$1"
}
