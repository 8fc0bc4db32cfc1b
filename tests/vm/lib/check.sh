# shellcheck shell=bash
# In-guest check harness for the VM test scripts (bash; source it first).
#
#   check NAME SECONDS FUNCTION   run FUNCTION under a hard time limit; print
#                                 "PASS: NAME" or "FAIL: NAME: why"
#   skip NAME REASON              print "SKIP: NAME: REASON" (what soft-RoCE cannot show)
#   finish                        exit 1 if any check failed, else 0
#
# A check passes only if its function returns 0 within SECONDS. A function
# that finds, on the device in front of it, that the feature does not exist
# here calls `unsupported REASON` (exit 77): the check prints SKIP, not PASS. The function
# runs in its own process group under timeout(1), so whatever it started
# (ssh, ibv_rc_pingpong, ...) dies with it. Its output is shown indented below
# the result line; "note:" lines carry the figures worth reading.
# tests/vm/run-all counts the result lines against each group's "# checks:" header.

set -u
set -a # every variable the script sets is visible to the checks (bash -c)

VMTEST_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VMTEST_FAILS=0
CHECK_TMP=$(mktemp -d /tmp/vmcheck.XXXXXX)
chmod 0755 "$CHECK_TMP"

note() { echo "note: $*"; }
unsupported() {
    echo "why: $*"
    exit 77
}
die() {
    echo "why: $*"
    exit 1
}

check() {
    local name=$1 limit=$2 fn=$3 out rc t0 t1
    out=$CHECK_TMP/$name.out
    t0=$SECONDS
    # Functions must be visible to the child bash.
    for f in $(compgen -A function); do export -f "${f?}"; done
    timeout -k 5 "$limit" bash -c "$fn" >"$out" 2>&1 </dev/null
    rc=$?
    t1=$SECONDS
    if [ "$rc" -eq 0 ]; then
        echo "PASS: $name ($((t1 - t0)) s)"
    elif [ "$rc" -eq 77 ]; then
        echo "SKIP: $name: $(grep -m1 '^why: ' "$out" | cut -c6-)"
    else
        local why
        why=$(grep -m1 '^why: ' "$out" | cut -c6-)
        [ "$rc" -eq 124 ] && why="timed out after $limit s${why:+; last: $why}"
        echo "FAIL: $name: ${why:-exit status $rc}"
        VMTEST_FAILS=$((VMTEST_FAILS + 1))
    fi
    sed 's/^/    /' "$out"
}

skip() { echo "SKIP: $1: $2"; }

finish() {
    rm -rf "$CHECK_TMP"
    [ "$VMTEST_FAILS" -eq 0 ]
}
