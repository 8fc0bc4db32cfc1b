#!/bin/sh
# Runs ./test_netns (tier 2: the netlink monitor against the real kernel in
# private network namespaces) with the given arguments for the Automake
# harness. Exit 77 (SKIP) comes from test_netns itself: not root, no
# unshare, no iproute2, or a link kind the kernel lacks (--require=KIND).
# The Catch2 summary, or the SKIP reason, is echoed to the terminal (fd 9).
out=$(mktemp) || exit 99
# shellcheck disable=SC2086
./test_netns ${ROCE_CATCH2_NO_COLOUR:---use-colour no} "$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc = 77 ]; then
    summary=$(grep '^SKIP:' "$out" | head -n 1)
else
    summary=$(grep -E '^(All tests passed|test cases:|assertions:|overflow test:)' "$out" | tr '\n' ' ')
fi
rm -f "$out"
if { true >&9; } 2>/dev/null; then
    printf '  test_netns %s: %s\n' "$*" "${summary:-no Catch2 summary (crashed?)}" >&9
fi
exit $rc
