#!/bin/sh
# The demo of the README: installs what is missing (as root), builds this
# checkout, installs the components into a private directory and runs an MPI
# hello world with the roce BTL loaded next to self and vader, showing what
# the BTL decided and why (on a machine without RoCE hardware: it declines
# cleanly and the job runs over vader).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/_build-demo"
jobs=$(nproc 2>/dev/null || echo 2)

"$top/contrib/deps.sh" build
cd "$top"
./autogen.sh >/dev/null
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
    "$top/configure" --prefix="$build/inst" \
        --with-ompi-component-dir="$build/inst/lib/ompi-components" >configure.log 2>&1 ||
        { tail -30 configure.log; exit 1; }
fi
make -j"$jobs" >make.log 2>&1 || { grep -E 'error|Error' make.log | head -30; exit 1; }
make install >install.log 2>&1 || { tail -30 install.log; exit 1; }
mpicc -o "$build/hello" "$top/contrib/hello.c"

comps="$build/inst/lib/ompi-components"
export OMPI_MCA_mca_base_component_path="$comps:SYS_DEFAULT"
as_root=
[ "$(id -u)" = 0 ] && as_root=--allow-run-as-root

echo "== components seen by Open MPI (ompi_info, component path $comps)"
ompi_info | grep -E 'MCA (btl|pml): roce'
echo
echo "== mpirun -np 2 --mca pml ob1 --mca btl self,vader,roce --mca btl_base_verbose 10 ./hello"
mpirun $as_root -np 2 --mca pml ob1 --mca btl self,vader,roce --mca btl_base_verbose 10 \
    "$build/hello" 2>&1 | grep -E 'btl roce|hello from'
