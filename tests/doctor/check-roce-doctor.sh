#!/bin/sh
# Runs the built roce-doctor binary (the unit tests run its logic in-process):
# help and version, exit status 2 on bad arguments and unreadable captures,
# the LAG fixture in text and JSON, and this machine in live mode, where a
# build host without RDMA devices must say so with exit status 3.
set -u
doctor=${ROCE_DOCTOR:-$top_builddir/contrib/roce-doctor/roce-doctor}
fixtures=$top_srcdir/tests/fixtures
fail=0
out=$(mktemp) && err=$(mktemp) || exit 99
trap 'rm -f "$out" "$err"' EXIT

expect() { # expect STATUS DESCRIPTION -- ARGS...
    want=$1 what=$2
    shift 3
    "$doctor" "$@" >"$out" 2>"$err"
    got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL: $what: exit status $got, expected $want"
        sed 's/^/  stdout: /' "$out" | head -5
        sed 's/^/  stderr: /' "$err" | head -5
        fail=1
    else
        echo "ok: $what (exit $got)"
    fi
}
contains() { # contains FILE TEXT DESCRIPTION
    if grep -qF -- "$2" "$1"; then echo "ok: $3"; else echo "FAIL: $3: no '$2'"; fail=1; fi
}

expect 0 "--help" -- --help
contains "$out" "Exit status:" "--help documents the exit statuses"
expect 0 "--version" -- --version
expect 2 "unknown option" -- --frobnicate
contains "$err" "roce-doctor: unknown option '--frobnicate'" "the bad option is named"
expect 2 "unreadable capture" -- --from /nonexistent/capture
contains "$err" "capture directory /nonexistent/capture does not exist" "the capture is named"
expect 0 "LAG fixture, text" -- --from "$fixtures/mlx5_lag"
contains "$out" "=> [3]" "the chosen GID is marked"
expect 0 "LAG fixture, JSON, peer on the VLAN" -- --from "$fixtures/mlx5_lag" --json --peer 198.19.0.12
contains "$out" '"gid_index": 5' "the VLAN's GID is chosen for the peer"
expect 1 "LAG fixture, unreachable peer" -- --from "$fixtures/mlx5_lag" --json --peer 203.0.113.9
contains "$out" '"gid_index": null' "gid_index is null"
contains "$out" 'no reachable GID on mlx5_bond_0:1 for peer 203.0.113.9' "the error says why"

# This machine: with no RDMA devices the status is 3 and the message says so;
# a host with devices gives 0 or 1.
"$doctor" >"$out" 2>"$err"
live=$?
case $live in
3) contains "$err" "no RDMA devices found" "live: no RDMA devices, said clearly (exit 3)" ;;
0 | 1) echo "ok: live: this host has RDMA devices (exit $live)" ;;
*) echo "FAIL: live run: exit status $live"; sed 's/^/  /' "$err"; fail=1 ;;
esac
exit $fail
