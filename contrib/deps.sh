#!/bin/sh
# Installs the Debian 12 packages ompi-roce needs, if any are missing.
#
# usage: contrib/deps.sh [build] [vm] [bench]
#   build  compilers, Autotools, Open MPI 4.1 devel, rdma-core, libnl, hwloc, Catch2,
#          gdb (contrib/test.sh's soak dumps the stacks of a hung MPI test with it)
#   vm     what contrib/vmtest needs: QEMU, Debian's kernel, busybox, sshd, perftest
#   bench  plotting for the benchmark reports
# With no argument: build. Needs root to install; without root it prints the
# apt-get command to run and exits 2.
set -eu
[ $# -eq 0 ] && set -- build
pkgs=
for group in "$@"; do
    case $group in
    build) pkgs="$pkgs autoconf automake libtool pkg-config make g++ binutils
        libopenmpi-dev openmpi-bin libibverbs-dev ibverbs-providers rdma-core ibverbs-utils
        libnl-3-dev libnl-route-3-dev libhwloc-dev catch2 iproute2 gdb" ;;
    vm) pkgs="$pkgs qemu-system-x86 linux-image-amd64 busybox-static openssh-server
        openssh-client kmod cpio gzip perftest ibverbs-utils rdma-core iproute2 ethtool" ;;
    bench) pkgs="$pkgs gnuplot-nox valgrind" ;;
    *) echo "deps.sh: unknown group '$group' (use build, vm, bench)" >&2; exit 2 ;;
    esac
done
missing=
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing Debian packages:$missing" >&2
    echo "deps.sh: run as root:  apt-get install -y --no-install-recommends$missing" >&2
    exit 2
fi
echo "deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null || apt-get update
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
