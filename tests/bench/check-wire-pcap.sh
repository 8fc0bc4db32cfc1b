#!/bin/sh
# The pcap reader of contrib/bench/wire-counts (benchmatrix/pcap.py) on
# captures built byte by byte in its self-test: frames, markers, phases,
# turns, retransmissions, and the refusal of cut-short or foreign files.
# A unit test of the tool, not a benchmark: it needs no MPI, guest or root.
exec "$top_srcdir/contrib/bench/wire-counts" --self-test
