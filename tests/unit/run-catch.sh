#!/bin/sh
# Runs one Catch2 test program for the Automake harness: the full output goes
# to the program's .log, and its Catch2 summary is echoed to the terminal
# (fd 9, see AM_TESTS_FD_REDIRECT) so `make check` shows the counts.
prog=$1
shift
out=$(mktemp) || exit 99
# Catch2 2 says --use-colour no, Catch2 3 --colour-mode none (configure
# exports the one of the Catch2 found).
# shellcheck disable=SC2086
"$prog" ${ROCE_CATCH2_NO_COLOUR:---use-colour no} "$@" >"$out" 2>&1
rc=$?
cat "$out"
summary=$(grep -E '^(All tests passed|test cases:|assertions:)' "$out" | tr '\n' ' ')
rm -f "$out"
if { true >&9; } 2>/dev/null; then
    printf '  %s: %s\n' "$(basename "$prog")" "${summary:-no Catch2 summary (crashed?)}" >&9
fi
exit $rc
