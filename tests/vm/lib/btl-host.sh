# shellcheck shell=sh
# Host side of the btl roce groups (tests/vm/btl-*.test; POSIX sh; set top= first).
#
# The guests must load OUR build of the btl, not one installed elsewhere: the
# component is copied into a directory of its own which the guests put first
# in mca_base_component_path (lib/btl.sh). The build directory is
# $ROCE_BUILDDIR, else the first of _build, _b under the source tree that holds
# the built btl and tests/mpi programs.

btl_builddir() {
    for d in ${ROCE_BUILDDIR:+"$ROCE_BUILDDIR"} "$top/_build" "$top/_b"; do
        if [ -f "$d/ompi_mca_btl_roce/.libs/mca_btl_roce.so" ] && [ -f "$d/ompi_mca_pml_roce/.libs/mca_pml_roce.so" ] &&
            [ -x "$d/tests/mpi/stress" ]; then
            (cd "$d" && pwd)
            return 0
        fi
    done
    echo "no build with mca_btl_roce.so, mca_pml_roce.so and tests/mpi/stress" \
        "(build first, or set ROCE_BUILDDIR)" >&2
    return 1
}

# btl_prepare GROUP FIRST_CHECK: sets btl_build and btl_stage (a directory the
# unprivileged guest user can read, removed on exit) holding comps/mca_btl_roce.so
# and comps/mca_pml_roce.so.
# On failure prints a FAIL line for FIRST_CHECK and exits 1.
btl_prepare() {
    btl_build=$(btl_builddir) || {
        echo "FAIL: $2: no build of the btl and tests/mpi (see above)"
        exit 1
    }
    btl_stage=$(mktemp -d "/tmp/vmtest-$1.XXXXXX") || exit 1
    trap 'rm -rf "$btl_stage"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mkdir "$btl_stage/comps"
    cp "$btl_build/ompi_mca_btl_roce/.libs/mca_btl_roce.so" "$btl_stage/comps/"
    # pml roce too (the pml groups select it; the btl groups select ob1).
    cp "$btl_build/ompi_mca_pml_roce/.libs/mca_pml_roce.so" "$btl_stage/comps/"
    chmod -R a+rX "$btl_stage"
}

# btl_envs: "--env NAME" for every BTL_* knob set on the host (unquoted use:
# names only, the tool takes the host's value).
btl_envs=
for v in BTL_TEST_SCALE BTL_STRESS_SECONDS BTL_CUT_AT BTL_HOLD BTL_PINGPONG_RUNS BTL_PINGPONG_ITERS BTL_MAX_BYTES BTL_CONNECT_TIMEOUT \
    BTL_FORGE_SECONDS BTL_FORGE_COUNT BTL_FORGE_RSS_KB BTL_VG_SECONDS BTL_VG_CUT_AT; do
    eval "[ -n \"\${$v+x}\" ]" && btl_envs="$btl_envs --env $v"
done
