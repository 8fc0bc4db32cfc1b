"""The benchmark matrix behind contrib/bench/run-matrix (see its --help)."""
