#!/bin/sh
# Builds the Debian package from a clean export of HEAD, checks its contents,
# installs it, checks that Open MPI sees the components, and removes it.
# Leaves the system as it found it (the package is purged at the end, also
# on failure). Root only; takes as long as a build plus `make check`
# (DEB_BUILD_OPTIONS=nocheck skips the unit tests inside the build).
#
# usage: tests/deb/check-package.sh [WORKDIR]
# Exit status 0 when every check passes; prints one line per check.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; [ -f "${2:-/dev/null}" ] && tail -40 "$2" | sed 's/^/    | /'; }
installed() { dpkg-query -W -f='${Status}' ompi-roce 2>/dev/null | grep -q 'install ok installed'; }

[ "$(id -u)" = 0 ] || { echo "check-package.sh: run as root (dpkg -i / -r)" >&2; exit 2; }
if installed; then
    echo "check-package.sh: ompi-roce is installed already; remove it first (dpkg -r ompi-roce)" >&2
    exit 2
fi
trap 'installed && dpkg -P ompi-roce >/dev/null 2>&1' EXIT INT TERM

version=$(sed -n '1s/^ompi-roce (\([^)]*\)).*/\1/p' "$src/debian/changelog")
tree="$work/ompi-roce-$version"
rm -rf "$tree" && mkdir -p "$tree"
rev=$(git -C "$src" rev-parse --short HEAD)
git -C "$src" archive "$rev" | tar -x -C "$tree"
if (cd "$tree" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
    ok "dpkg-buildpackage -us -uc -b from a clean export of $rev"
else
    bad "dpkg-buildpackage failed" "$work/build.log"
    echo "package checks: $pass passed, $fail failed"
    exit 1
fi
deb=$(ls "$work"/ompi-roce_"$version"_*.deb)

dir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/contents"
for f in "$dir/mca_btl_roce.so" "$dir/mca_pml_roce.so" /usr/bin/roce-doctor \
    /usr/share/man/man1/roce-doctor.1.gz /usr/share/ompi-roce/help-mpi-btl-roce.txt \
    /usr/share/ompi-roce/help-mpi-pml-roce.txt /usr/share/doc/ompi-roce/troubleshooting.md; do
    grep -qx "$f" "$work/contents" && ok "package contains $f" || bad "package lacks $f" "$work/contents"
done
grep -q '\.la$' "$work/contents" && bad "package ships libtool archives" "$work/contents" || ok "no .la files"
dep=$(dpkg-deb -f "$deb" Depends)
want="libopenmpi3 (= $(dpkg-query -W -f='${Version}' libopenmpi3))"
case $dep in *"$want"*) ok "Depends names the exact Open MPI: $want" ;; *) echo "$dep" >"$work/dep"; bad "Depends lacks $want" "$work/dep" ;; esac

if command -v lintian >/dev/null 2>&1; then
    lintian "$deb" >"$work/lintian" 2>&1
    if grep -q '^E: ' "$work/lintian"; then
        bad "lintian reports errors" "$work/lintian"
    else
        ok "lintian: no errors ($(grep -c '^W: ' "$work/lintian") warnings)"
    fi
fi

if dpkg -i "$deb" >"$work/install" 2>&1; then ok "dpkg -i $(basename "$deb")"; else bad "dpkg -i failed" "$work/install"; fi
env -u OMPI_MCA_mca_base_component_path ompi_info >"$work/info" 2>&1
grep -q 'MCA btl: roce' "$work/info" && grep -q 'MCA pml: roce' "$work/info" &&
    ok "ompi_info lists the installed btl roce and pml roce" || bad "ompi_info does not list them" "$work/info"
roce-doctor --help >/dev/null 2>&1 && ok "roce-doctor runs from /usr/bin" || bad "roce-doctor does not run"

if dpkg -r ompi-roce >"$work/remove" 2>&1; then ok "dpkg -r ompi-roce"; else bad "dpkg -r failed" "$work/remove"; fi
env -u OMPI_MCA_mca_base_component_path ompi_info >"$work/info2" 2>&1
grep -q 'roce' "$work/info2" && bad "ompi_info still lists roce after removal" "$work/info2" ||
    ok "ompi_info no longer lists roce"
left=$(ls "$dir"/mca_*_roce* /usr/bin/roce-doctor /usr/share/ompi-roce 2>/dev/null)
[ -z "$left" ] && ok "no files left behind" || { echo "$left" >"$work/left"; bad "files left behind" "$work/left"; }
dpkg -P ompi-roce >/dev/null 2>&1

echo "package checks: $pass passed, $fail failed"
[ "$fail" = 0 ]
