# shellcheck shell=sh
# contrib/test-tiers.sh: tiers 1-3 of contrib/test.sh as shell functions, so
# that contrib/test.sh (against the host's Open MPI 4.1) and
# contrib/test-ompi5.sh (inside a Debian 13 root, against its 5.0.7) run the
# very same steps. Sourced (POSIX sh, under set -eu); the caller sets
#   top    the source tree
#   build  the build directory (made afresh by tier_configure)
#   jobs   make's parallelism
# and prints its own step headings. Each function exits the shell with
# status 1, after the lines that say why, when its tier fails.
# shellcheck disable=SC2154 # top, build, jobs: set by the caller
: "${top:?}" "${build:?}" "${jobs:?}"

# The end of the log of every test that failed under build directory $1.
show_failed_logs() {
    for trs in $(grep -l -r --include='*.trs' -E '^:test-result: (FAIL|ERROR)' "$1"); do
        printf '\n--- %s\n' "${trs%.trs}.log"
        tail -n 60 "${trs%.trs}.log"
    done
}

# configure in a fresh $build; the components go to a private directory:
# testing never touches the system's.
tier_configure() {
    # A fresh clone has no configure yet.
    [ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
    rm -rf "$build"
    mkdir -p "$build"
    cd "$build" || exit 1
    "$top/configure" --enable-werror --prefix="$build/inst" \
        --with-ompi-component-dir="$build/inst/lib/ompi-components" >configure.log 2>&1 ||
        { tail -30 configure.log; exit 1; }
    sed -n '/^ompi-roce .* configured:/,$p' configure.log
}

tier_build() {
    make -C "$build" -j"$jobs" >"$build/make.log" 2>&1 ||
        { grep -E 'error|Error' "$build/make.log" | head -30; exit 1; }
}

# 1. unit tests
tier_check() {
    rc=0
    make -C "$build" -j"$jobs" check >"$build/check.log" 2>&1 || rc=$?
    grep -E '^  test_|^# (TOTAL|PASS|FAIL|ERROR)|^(FAIL|ERROR):' "$build/check.log" || true
    [ $rc = 0 ] || { show_failed_logs "$build"; exit 1; }
}

# 2. component checks against this Open MPI
tier_installcheck() {
    make -C "$build" install >"$build/install.log" 2>&1 || { tail -30 "$build/install.log"; exit 1; }
    rc=0
    make -C "$build" installcheck >"$build/installcheck.log" 2>&1 || rc=$?
    grep -E '^(PASS|FAIL|component checks)|^    \|' "$build/installcheck.log"
    [ $rc = 0 ] || exit 1
}

# run-suite over the installed components' build, quick mode, osc sm.
tier_suite() { "$top/tests/mpi/run-suite" --bindir "$build/tests/mpi" --osc sm --quick "$@"; }

# 3. the MPI programs with the installed components, quick mode, osc sm:
# tier_mpi SM_BTL OB1_BTLS [RUN-SUITE-ARGS FOR OB1...]
#   SM_BTL    Open MPI's shared-memory btl (vader on 4.1, sm on 5.0)
#   OB1_BTLS  the btls of the ob1 reference run
# ob1 is the reference (with the exclusions given); pml roce over self and
# tcp on the loopback at 4 ranks (a network btl: rendezvous messages up to
# pml_roce_stream_limit are streamed there, and pieces overtake their
# header); pml roce over self and SM_BTL at 2 ranks, then at 4 and 8
# oversubscribed ranks through the soak
# (one run each: a program that hangs is stopped after 120 s instead of
# run-suite's 600, with the stack of every rank in $build/soak-npN/).
tier_mpi() {
    sm=$1 ob1_btls=$2
    shift 2
    # OPAL's project-qualified name of the component path: 5.0's mpirun hands
    # the plain mca_base_component_path to PMIx too, which warns about our
    # directory (tests/mpi/check-components.sh); 4.1 reads it as well.
    OMPI_MCA_opal_mca_base_component_path="$build/inst/lib/ompi-components:SYS_DEFAULT"
    export OMPI_MCA_opal_mca_base_component_path
    tier_suite --np 2 --mca pml ob1 --mca btl "$ob1_btls" "$@"
    tier_suite --np 4 --oversubscribe --mca pml roce --mca btl self,tcp --mca btl_tcp_if_include lo
    tier_suite --np 2 --mca pml roce --mca btl "self,$sm"
    for np in 4 8; do
        "$top/tests/mpi/soak" --bindir "$build/tests/mpi" --np "$np" --runs 1 --hang-after 120 \
            --results "$build/soak-np$np" -- --quick --strict --osc sm --oversubscribe \
            --mca pml roce --mca btl "self,$sm" ||
            { cat "$build/soak-np$np"/run-*/suite.out 2>/dev/null; exit 1; }
    done
    unset OMPI_MCA_opal_mca_base_component_path
}
