#!/bin/sh
# The test command of the README (and of .ci/run): installs what is missing
# (as root), builds from this checkout in _build-test/, and runs every test
# tier this machine can run:
#   1. unit tests (make check; as root also the netlink tests in private
#      network namespaces)
#   2. component checks against the system's Open MPI (make installcheck)
#   3. the MPI test programs on this host (tests/mpi/run-suite) with the
#      installed components: pml roce over self,vader at 2, 4 and 8 ranks,
#      and pml ob1 as the reference
#   4. the VM tier (make vmcheck): soft-RoCE over real bonds in QEMU guests
#   5. make distcheck (the release tarball builds, installs and checks)
# Exit status 0 only when all of them pass. ROCE_TEST_SKIP_VM=1 leaves out
# step 4 (say so when you report results).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/_build-test"
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
step() { printf '\n==> %s (%ss)\n' "$1" "$(($(date +%s) - start))"; }

step "dependencies"
"$top/contrib/deps.sh" build

step "configure"
cd "$top"
./autogen.sh
rm -rf "$build"
mkdir -p "$build"
cd "$build"
# Components go to a private directory: testing never touches the system's.
"$top/configure" --enable-werror --prefix="$build/inst" \
    --with-ompi-component-dir="$build/inst/lib/ompi-components" >configure.log 2>&1 ||
    { tail -30 configure.log; exit 1; }
sed -n '/^ompi-roce .* configured:/,$p' configure.log

step "build"
make -j"$jobs" >make.log 2>&1 || { grep -E 'error|Error' make.log | head -30; exit 1; }

step "unit tests (make check)"
rc=0
make -j"$jobs" check >check.log 2>&1 || rc=$?
grep -E '^  test_|^# (TOTAL|PASS|FAIL|ERROR)|^(FAIL|ERROR):' check.log || true
[ $rc = 0 ] || { tail -60 tests/unit/*.log; exit 1; }

step "component checks (make install && make installcheck)"
make install >install.log 2>&1 || { tail -30 install.log; exit 1; }
rc=0
make installcheck >installcheck.log 2>&1 || rc=$?
grep -E '^(PASS|FAIL|component checks)|^    \|' installcheck.log
[ $rc = 0 ] || exit 1

step "MPI programs on this host (tests/mpi/run-suite)"
export OMPI_MCA_mca_base_component_path="$build/inst/lib/ompi-components:SYS_DEFAULT"
suite() { "$top/tests/mpi/run-suite" --bindir "$build/tests/mpi" --osc sm "$@"; }
suite --np 2 --mca pml ob1 --mca btl self,vader --quick
suite --np 2 --mca pml roce --mca btl self,vader --strict
suite --np 4 --mca pml roce --mca btl self,vader --oversubscribe --strict --quick
suite --np 8 --mca pml roce --mca btl self,vader --oversubscribe --strict --quick
unset OMPI_MCA_mca_base_component_path

if [ "${ROCE_TEST_SKIP_VM:-0}" = 1 ]; then
    step "VM tier SKIPPED (ROCE_TEST_SKIP_VM=1)"
else
    step "VM tier (make vmcheck)"
    make vmcheck
fi

step "make distcheck"
make -j"$jobs" distcheck >distcheck.log 2>&1 || { tail -40 distcheck.log; exit 1; }
grep -E 'archives ready for distribution|^ompi-roce-.*\.tar\.gz' distcheck.log | head -3

step "all tests passed"
