#!/bin/bash
# Two guests booted on the Debian 13 guest root (tests/vm/pml-two-deb13.test:
# contrib/vmtest/run --root, contrib/debian13-root --guest): Debian 13's
# kernel, rdma-core and Open MPI 5.0.7, our components built against 5.0.7
# (_build-test-ompi5). Runs as root; the MPI suites run as the unprivileged
# user (RUN_AS, lib/btl.sh as_user), one rank per guest, so every byte
# between the ranks crosses rxe over the bond.
#   1. deb13-env: Debian 13, its kernel (not the host's), Open MPI 5.0.x,
#      PRRTE's launch plane on mgmt0, our btl and pml (and only ours) seen by
#      ompi_info on both guests;
#   2. deb13-mpirun: 5.0's mpirun (PRRTE) puts a rank on each guest, as root
#      and as the unprivileged user;
#   3. deb13-pml-roce: tests/mpi/run-suite under pml roce over btl
#      self,sm,roce (the core programs of pml-two-ci but osc);
#   4. deb13-ob1-roce: the same under ob1 over btl self,sm,roce (the
#      reference; without --strict, as contrib/test-ompi5.sh's: ob1 writes
#      past a truncated receive buffer, tests/mpi/README.md);
#   5. deb13-osc-rdma: the osc program over osc/rdma, which drives the btl's
#      RDMA and atomics directly (whatever the pml), under pml roce. Its own
#      check: under 5.0.7 it hung in its first run (docs/vmtest.md), and a
#      hang must cost one bounded check, not hide the suites' results;
#   6. deb13-osc-native: osc/rdma takes the btl's own RDMA (remote
#      completion), and the osc program passes on it;
#   7. deb13-osc-am: with the btl's remote-completion flag taken away,
#      osc/rdma's active-message emulation over the btl's sends passes too.
. "$(dirname "$0")/../lib/check.sh"
. "$VMTEST_LIB/fabric.sh"
. "$VMTEST_LIB/btl.sh"

# Open MPI 5.0: OPAL's project-qualified name of the component path. 5.0's
# mpirun hands the plain mca_base_component_path to PMIx as well, which then
# warns on stderr about our file names (tests/mpi/check-components.sh).
unset OMPI_MCA_mca_base_component_path
export OMPI_MCA_opal_mca_base_component_path=$ROCE_BTL_COMPS:SYS_DEFAULT
BTL=self,sm,roce
RUN_AS=$VMTEST_USER
SCALE=${BTL_TEST_SCALE:-0.05} # iteration counts under emulation, as pml-two-ci
# pml-two-ci's core programs: eager/rendezvous and non-contiguous p2p,
# matching order, wildcards, probe/mprobe, ssend, truncation, collectives,
# the ping-pong; one-sided through osc/rdma (the btl's RDMA and atomics) is
# deb13-osc-rdma.
CORE="p2p ordering wildcards probe ssend truncate collectives mpi-pingpong"
OSC_LIMIT=${BTL_OSC_LIMIT:-300} # run-suite's limit for the osc program (4.1: 6 s in pml-two-ci)
export ROCE_TEST_SCALE=$SCALE
user_dir "$CHECK_TMP" && user_dir "$LOGS" || echo "warning: cannot give $RUN_AS $CHECK_TMP and $LOGS"

# comps_seen NODE: ompi_info on NODE lists btl roce and pml roce from our
# directory, and none without it (SYS_DEFAULT alone).
comps_seen() {
    local n=$1 q out sys
    q="OMPI_MCA_opal_mca_base_component_path=$OMPI_MCA_opal_mca_base_component_path ompi_info --parsable --param btl roce;
       OMPI_MCA_opal_mca_base_component_path=$OMPI_MCA_opal_mca_base_component_path ompi_info --parsable --param pml roce"
    if [ "$n" = "$ME" ]; then
        out=$(as_user bash -c "$q" 2>&1)
    else
        out=$(as_user timeout -k 5 120 ssh "$n" "$q" 2>&1)
    fi
    echo "$out" | grep -q '^mca:btl:roce:' || die "$n: ompi_info does not see btl roce: $(echo "$out" | head -5)"
    echo "$out" | grep -q '^mca:pml:roce:' || die "$n: ompi_info does not see pml roce"
    sys=$(on "$n" "OMPI_MCA_opal_mca_base_component_path=SYS_DEFAULT ompi_info --parsable --param btl roce 2>/dev/null;
                   OMPI_MCA_opal_mca_base_component_path=SYS_DEFAULT ompi_info --parsable --param pml roce 2>/dev/null" |
        grep -c -E '^mca:(btl|pml):roce:')
    [ "$sys" = 0 ] || die "$n: a btl or pml roce is installed outside $ROCE_BTL_COMPS: the run would be ambiguous"
}

deb_env() {
    local n ver kernel
    for n in $VMTEST_NODES; do
        # shellcheck disable=SC2016 # expanded on the guest
        on "$n" '. /etc/os-release; echo "$(hostname): $PRETTY_NAME (debian_version $(cat /etc/debian_version)), kernel $(uname -r), $(ompi_info --version | head -n 1), rdma-core $(dpkg-query -W -f="\${Version}" rdma-core)"' |
            sed 's/^/note: /'
        # shellcheck disable=SC2016 # expanded on the guest
        on "$n" '. /etc/os-release; [ "$VERSION_ID" = 13 ]' || die "$n is not Debian 13"
        # The kernel is the root's: its image and modules are in this root.
        kernel=$(on "$n" 'uname -r')
        on "$n" "[ -e /boot/vmlinuz-$kernel ] && [ -d /lib/modules/$kernel ]" ||
            die "$n runs kernel $kernel, which is not this root's"
        ver=$(on "$n" 'ompi_info --version' | sed -n 's/^Open MPI v\([0-9.]*\).*/\1/p' | head -n 1)
        case $ver in 5.0.*) ;; *) die "$n: Open MPI '$ver', not 5.0.x" ;; esac
        on "$n" "prte_info --all 2>/dev/null | grep -A1 '\"prte_if_include\"' | tr -s ' ' | tr '\n' ' '; echo" |
            sed 's/^/note: PRRTE: /'
        on "$n" "grep -qx 'prte_if_include = mgmt0' /etc/openmpi/prte-mca-params.conf" ||
            die "$n: PRRTE's launch plane is not kept on mgmt0"
        comps_seen "$n"
    done
    note "btl and pml roce from $ROCE_BTL_COMPS ($(md5sum <"$ROCE_BTL_COMPS/mca_pml_roce.so" | cut -c1-12)), build $ROCE_BUILDDIR"
}

# ranks_on_each USER_DESC CMD...: the mpirun output has one rank on each guest.
ranks_on_each() {
    local who=$1 out n
    shift
    # shellcheck disable=SC2016 # expanded by each rank
    out=$("$@" timeout -k 5 180 mpirun --hostfile "$VMTEST_HOSTFILE" -np 2 \
        sh -c 'echo "rank on $(hostname) as $(id -un) uid $(id -u)"' 2>&1) || die "mpirun as $who failed: $out"
    echo "$out"
    for n in $VMTEST_NODES; do
        echo "$out" | grep -qx "rank on $n as $who uid [0-9]*" || die "no rank on $n as $who"
    done
}

deb_mpirun() {
    [ "$(id -u)" = 0 ] || die "must run as root"
    # Root: the agent set OMPI_ALLOW_RUN_AS_ROOT[_CONFIRM]=1, which 5.0 honours too.
    ranks_on_each root env
    ranks_on_each "$RUN_AS" as_user
}

# deb_suite NAME PML [RUN-SUITE-ARGS...]: the core programs under PML.
deb_suite() {
    local name=$1 pml=$2
    shift 2
    # shellcheck disable=SC2034 # read by suite (lib/btl.sh)
    SUITE_PML=$pml
    # shellcheck disable=SC2086 # CORE: program names
    suite "$name" --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --quick "$@" \
        --timeout 600 --env "ROCE_TEST_SCALE=$SCALE" $CORE
}

deb_osc() {
    # shellcheck disable=SC2034 # read by suite (lib/btl.sh)
    SUITE_PML=roce
    suite deb13-osc-rdma --np 2 --hostfile "$VMTEST_HOSTFILE" --mca btl "$BTL" --osc rdma --quick --strict \
        --timeout "$OSC_LIMIT" --env "ROCE_TEST_SCALE=$SCALE" osc
}

# osc_path NAME WANT [MPIRUN-ARGS...]: the osc program once under pml roce
# over osc/rdma with osc's verbose output, outside run-suite (whose --strict
# refuses stderr lines): it must pass on both ranks, and osc/rdma must say it
# took the path WANT (a regular expression on its verbose lines).
osc_path() {
    local name=$1 want=$2 out rc
    shift 2
    out=$(as_user timeout -k 5 "$OSC_LIMIT" mpirun --hostfile "$VMTEST_HOSTFILE" -np 2 \
        -x OMPI_MCA_opal_mca_base_component_path -x ROCE_TEST_SCALE \
        --mca pml roce --mca btl "$BTL" --mca osc rdma --mca osc_base_verbose 40 "$@" \
        "$MPI_BIN/osc" 2>&1)
    rc=$?
    echo "$out" >"$CHECK_TMP/$name.out"
    echo "$out" | grep -E 'accelerated_query|alternate btl|^osc:' | sort | uniq -c | sed 's/^/note: /'
    [ "$rc" = 0 ] || die "osc exited $rc ($([ "$rc" = 124 ] && echo "hung: killed after ${OSC_LIMIT} s"); last lines: $(echo "$out" | tail -n 5 | tr '\n' ' ')"
    [ "$(echo "$out" | grep -cE "$want")" -ge 2 ] ||
        die "osc/rdma did not say '$want' on both ranks: $(echo "$out" | grep -E 'accelerated_query|alternate btl' | sort -u | tr '\n' ' ')"
}

# 5.0's osc/rdma drives a btl's own RDMA only when the btl has remote
# completion; the btl says so (compat/ompi_series.h), so osc/rdma selects it.
deb_osc_native() {
    osc_path deb13-osc-native 'accelerated_query: selected btl: roce'
}

# Without fetching atomics (a btl_roce_flags value without them, as a user may
# set), no btl qualifies as "accelerated" and osc/rdma emulates put, get and
# atomics with active messages over the btls' sends (btl/base am_rdma), which
# sends one descriptor again for the next part of a large get: each send must
# be a new message to the btl (its first run hung on exactly that,
# docs/vmtest.md).
deb_osc_am() {
    osc_path deb13-osc-am 'found alternate btl roce' \
        --mca btl_roce_flags send,put,get,inplace,atomics,rdma-flush
}

check deb13-env 180 deb_env
check deb13-mpirun 180 deb_mpirun
check deb13-pml-roce 900 'deb_suite deb13-pml-roce roce --strict'
check deb13-ob1-roce 900 'deb_suite deb13-ob1-roce ob1'
check deb13-osc-rdma $((OSC_LIMIT / VMTEST_TIME_SCALE + 120)) deb_osc
check deb13-osc-native $((OSC_LIMIT / VMTEST_TIME_SCALE + 120)) deb_osc_native
check deb13-osc-am $((OSC_LIMIT / VMTEST_TIME_SCALE + 120)) deb_osc_am
finish
