#!/bin/sh
# Regenerates configure and the Makefile.in files (autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --force --install --verbose >/dev/null 2>&1 || autoreconf --force --install --verbose
echo "autogen.sh: configure is ready; next: ./configure && make"
