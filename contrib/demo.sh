#!/bin/sh
# The demo of the README - the reported user's command, on our transport:
#
#     mpirun -np 2 --mca pml roce ./mpi-pingpong
#
# (a ping-pong with synchronous, asynchronous and bidirectional phases, 8 B to
# 1 MiB) between two nodes over RoCE on a bond, after printing what ompi-roce
# chose for the port (GID index, pkey, qkey, port, MTU, and the GID table
# with the chosen entry marked). It ends with a count of "Failed to modify"
# lines: there must be none.
#
# Installs what is missing (as root), builds this checkout and installs the
# components into _build-demo/inst (the system's Open MPI is not touched).
# On a host with an active RoCE port the two ranks run here; otherwise (and
# with --vm) the two-guest soft-RoCE fabric is booted (contrib/vmtest/run
# two, an 802.3ad bond with a VLAN on each guest) and they run across it.
#
# In the guests every round trip is emulated (about 2 ms), so the iteration
# counts are scaled by ROCE_TEST_SCALE=0.05 unless you set it (1 = full).
# The RoCE devices' sent-packet counters are printed before and after, so you
# can see that the traffic went over RoCE.
#
# usage: contrib/demo.sh [--vm | --host] [--bond-mode MODE]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/_build-demo"
comps="$build/inst/lib/ompi-components"

# --- inside the first guest (or on a RoCE host): the show itself -----------
if [ "${1:-}" = "--run" ]; then
    hostfile=${2:-}
    export OMPI_MCA_mca_base_component_path="$comps:SYS_DEFAULT"
    as_root=
    [ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
    # In the guests: the other guest's bond address, so the choice shown is
    # the one made for that peer.
    peer=${VMTEST_PEER_ADDR:-}
    echo "== what ompi-roce chose on $(hostname) (roce-doctor${peer:+ --peer $peer})"
    "$build/inst/bin/roce-doctor" ${peer:+--peer "$peer"} || true
    echo
    where="-np 2"
    [ -n "$hostfile" ] && where="-np 2 --hostfile $hostfile --map-by node"
    # Under emulation (the guests) a round trip costs about 2 ms: scale the
    # iteration counts down (ROCE_TEST_SCALE, 1 = the full 2000/400/60).
    scale=${ROCE_TEST_SCALE:-1}
    [ -n "$hostfile" ] && scale=${ROCE_TEST_SCALE:-0.05}
    export ROCE_TEST_SCALE=$scale
    echo "== mpirun $where --mca pml roce ./mpi-pingpong    (ROCE_TEST_SCALE=$scale)"
    # The RoCE devices' packet counters before and after show that the
    # traffic went over RoCE, not over another transport.
    pkts() {
        for c in /sys/class/infiniband/*/ports/*/hw_counters/sent_pkts; do
            [ -r "$c" ] && printf '%s=%s ' "$(echo "$c" | cut -d/ -f5)" "$(cat "$c")"
        done
    }
    before=$(pkts)
    log=$(mktemp /tmp/demo.XXXXXX)
    rc=0
    # shellcheck disable=SC2086
    mpirun $as_root $where -x OMPI_MCA_mca_base_component_path -x ROCE_TEST_SCALE \
        --mca pml roce "$build/tests/mpi/mpi-pingpong" >"$log" 2>&1 || rc=$?
    cat "$log"
    n=$(grep -c 'Failed to modify' "$log" || true)
    rm -f "$log"
    echo
    echo "== RoCE packets sent by $(hostname): before ${before:-(no counters)}; after $(pkts)"
    echo "== mpirun exit status $rc; 'Failed to modify' lines: $n"
    [ "$rc" = 0 ] && [ "$n" = 0 ]
    exit
fi

mode=auto
bond_mode=802.3ad
while [ $# -gt 0 ]; do
    case $1 in
    --vm) mode=vm ;;
    --host) mode=host ;;
    --bond-mode) bond_mode=$2; shift ;;
    -h | --help) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

jobs=$(nproc 2>/dev/null || echo 2)
"$top/contrib/deps.sh" build
cd "$top"
./autogen.sh >/dev/null
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
    "$top/configure" --prefix="$build/inst" \
        --with-ompi-component-dir="$comps" >configure.log 2>&1 ||
        { tail -30 configure.log; exit 1; }
fi
echo "== building into $build"
make -j"$jobs" >make.log 2>&1 || { grep -E 'error|Error' make.log | head -30; exit 1; }
make install >install.log 2>&1 || { tail -30 install.log; exit 1; }

if [ "$mode" = auto ]; then
    mode=vm
    # A usable RoCE port here: roce-doctor chooses one and exits 0.
    if "$build/inst/bin/roce-doctor" --json >/dev/null 2>&1; then
        mode=host
    fi
fi
if [ "$mode" = host ]; then
    exec "$top/contrib/demo.sh" --run ""
fi
echo "== no RoCE port on this host: booting two guests (soft-RoCE over a $bond_mode bond)"
exec "$top/contrib/vmtest/run" two --bond-mode "$bond_mode" --cmd-timeout 1200 -- \
    sh -c "exec '$top/contrib/demo.sh' --run \"\$VMTEST_HOSTFILE\""
