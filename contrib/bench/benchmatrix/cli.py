"""contrib/bench/run-matrix: the benchmark matrix in one command."""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

from . import envinfo, execute, guard, plan, report

HELP = """\
Runs the benchmark matrix: transports x places, several repetitions with the
transports alternating, median and spread; writes CSV, gnuplot plots and
docs/perf.md (ratio tables against every peer, the environment, the exact
commands).

transports
  host:   pml roce (btl self,vader) | pml ob1 (self,vader) | pml ucx (UCX_TLS=sm,self)
          - on the host only the pml differs.
  guests: pml roce (btl roce between nodes, vader within; in one guest self,roce so
          the traffic goes through rxe) | pml ob1 + btl roce | pml ob1 + btl tcp
          (bond0) | pml ucx (the first UCX setting that passes a probe: rc_verbs+ud_verbs
          on rxe_bond0 with the bond's GID index, then the same with TCG-sized
          timeouts, then tcp) | raw ibv_rc_pingpong between the same endpoints, sleeping
          on a completion channel (-e: raw-rc) and polling (raw-rc-spin); in two guests
          also pml roce with one setting changed (roce-chunk256k: btl_roce_rdma_chunk
          256 KiB, the default before 2026-12-03; roce-eager64k: eager up to 64 KiB).
  A transport that does not work at a place is probed once, recorded "n/a" with
  the reason, and skipped; it never stops the run.

run guard (benchmatrix/guard.py)
  every timed run records the load average and the CPU the other processes used
  (/proc/stat, /proc/PID/stat, the run's own process tree excluded) in
  guard.csv; a run during which they used more than --guard-cores (0.1) is
  repeated up to --guard-retries (2) times and, still busy, left out of the
  medians (status "busy" in runs.csv, figures in raw-busy.csv). In the guests
  rxe's kernel work (softirq time, kernel threads) counts as the run's own.

ratios
  the median over the repetitions of a / b within each repetition (paired),
  and the best repetition of each against the other's; docs/perf.md's
  headline sets issue 18's targets against them.

places
  host   this machine, 2 ranks (shared memory)
  one    contrib/vmtest/run one  (node1 alone, both ranks on rxe loopback)
  two    contrib/vmtest/run two  (node1 + node2, rxe over an active-backup bond)

benchmarks (tests/bench, tests/mpi/mpi-pingpong)
  host:   latency 0 B, 8 B, 1 KiB, 64 KiB, 1 MiB, bandwidth uni/bi 8 B, 64 KiB, 1 MiB (window 64), message rate 8 B
          (window 64), matching (100/1,000/10,000 posted receives, ANY_SOURCE,
          unexpected), mpi-pingpong (sync/async/bidir), callgrind instructions
          per 8 B send+receive pair (pml roce and ob1, btl self), and
          contrib/bench/count-instructions (the self loop, the btl over FakeVerbs)
  guests: one MPI job per run (tests/bench/pair): latency 8 B (and 64 KiB), bandwidth
          1 MiB (and 64 KiB; window 4, unidirectional); ibv_rc_pingpong 8 B (and 1 MiB)

time (2 cores, quiet): --quick about 10 min for all places; the full run of
host and two guests took 16 min on 2026-12-03 (host 1.5 min with the counts,
two guests 14 min: 7 transports x 5 repetitions of ~30 s, and the boot).

examples
  contrib/bench/run-matrix --quick --places host          # check the harness
  contrib/bench/run-matrix                                 # the full matrix
  contrib/bench/run-matrix --pml-build /work/wt-pml/_b     # pml roce from another tree
  contrib/bench/run-matrix --report-only /tmp/ompi-roce-bench/20261130-200000
"""


def src_dir():
    here = os.path.dirname(os.path.realpath(__file__))  # SRC/contrib/bench/benchmatrix
    return os.path.dirname(os.path.dirname(os.path.dirname(here)))


def parse(argv):
    ap = argparse.ArgumentParser(prog="contrib/bench/run-matrix", description=HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--places", default="host,one,two",
                    help="comma-separated subset of host,one,two (default all)")
    ap.add_argument("--reps", type=int, help="repetitions on the host (default 5; --quick 1)")
    ap.add_argument("--guest-reps", type=int,
                    help="repetitions in the guests (default 5; --quick 1)")
    ap.add_argument("--guard-cores", type=float, default=guard.DEFAULT_MAX_CORES,
                    help="the run guard: a timed run during which the other processes used "
                    "more than this many cores is repeated, and left out of the medians if "
                    "it stays busy (default 0.1; 0: off)")
    ap.add_argument("--guard-retries", type=int, default=2,
                    help="how often a busy run is repeated (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="CI-style: fewer sizes, iterations and repetitions")
    ap.add_argument("--out", help="results directory (default /tmp/ompi-roce-bench/TIMESTAMP)")
    ap.add_argument("--build", help="build tree with tests/bench, tests/mpi and the btl "
                    "(default SRC/_b)")
    ap.add_argument("--pml-build", help="build tree whose ompi_mca_pml_roce/.libs/"
                    "mca_pml_roce.so is used (default: --build)")
    ap.add_argument("--docs", help="where perf.md and perf/matrix/ go (default SRC/docs)")
    ap.add_argument("--no-docs", action="store_true", help="do not write docs/perf.md")
    ap.add_argument("--report-only", metavar="OUT",
                    help="regenerate docs/perf.md and plots from an earlier results directory")
    ap.add_argument("--bond-mode", default="active-backup",
                    choices=["active-backup", "balance-xor", "802.3ad"])
    ap.add_argument("--guest-timeout", type=int, default=1800,
                    help="seconds the matrix may run inside one guest boot (default 1800)")
    ap.add_argument("--ucx-explore", action="store_true",
                    help="probe every pml ucx setting in the guests (also the known-failing "
                    "IPv4 GID one) and record each outcome; costs a few minutes")
    ap.add_argument("--inner", choices=plan.PLACES, help=argparse.SUPPRESS)
    ap.add_argument("--comp-dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.places = [p.strip() for p in a.places.split(",") if p.strip()]
    for p in a.places:
        if p not in plan.PLACES:
            ap.error(f"unknown place {p!r} (host, one, two)")
    if a.reps is None:
        a.reps = 1 if a.quick else 5
    if a.guest_reps is None:
        a.guest_reps = 1 if a.quick else 5
    return a


def log(*args, flush=True):
    print(*args, flush=flush)


def run_inner(a):
    """Inside a guest (or for the host): one place's share of the matrix."""
    src = src_dir()
    out = a.out or os.environ.get("VMTEST_RESULTS")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"env-{a.inner}.json"), "w") as f:
        json.dump(envinfo.collect(src if a.inner == "host" else None), f, indent=1)
    reps = a.reps if a.inner == "host" else a.guest_reps
    place = execute.Place(a.inner, out, {"dir": a.build, "src": src}, a.comp_dir, reps,
                          a.quick, log=log, explore=a.ucx_explore,
                          guard_cores=a.guard_cores, guard_retries=a.guard_retries)
    place.run()
    return 0


def prepare_components(a, out):
    """Copies of the components (a rebuild during the run cannot change them), in a
    directory the guests see (the host root is shared read-only at boot time)."""
    comp = os.path.join(out, "components")
    os.makedirs(comp, exist_ok=True)
    notes = {}
    for name, tree in (("btl", a.build), ("pml", a.pml_build)):
        so = os.path.join(tree, f"ompi_mca_{name}_roce", ".libs", f"mca_{name}_roce.so")
        if os.path.exists(so):
            shutil.copy2(so, comp)
            git = subprocess.run(["sh", "-c", f"cd {shlex.quote(tree)}/.. 2>/dev/null && "
                                  "git log -1 --format='%h, %cd' --date=short 2>/dev/null"],
                                 capture_output=True, text=True).stdout.strip()
            notes[name] = f"{so} ({git})" if git else so
        else:
            notes[name] = f"missing: {so}"
            log(f"run-matrix: {so} is missing; its rows will be n/a")
    return comp, notes


def run_guest(a, place, out, comp, skipped):
    res = os.path.join(out, f"vm-{place}")
    me = os.path.realpath(sys.argv[0])
    inner = ["/usr/bin/python3", me, "--inner", place, "--build", a.build, "--comp-dir", comp,
             "--guest-reps", str(a.guest_reps), "--out", os.path.join(res, "out"),
             "--guard-cores", str(a.guard_cores), "--guard-retries", str(a.guard_retries)]
    if a.quick:
        inner.append("--quick")
    if a.ucx_explore:
        inner.append("--ucx-explore")
    argv = [os.path.join(src_dir(), "contrib/vmtest/run"), place, "--results", res,
            "--bond-mode", a.bond_mode, "--cmd-timeout", str(a.guest_timeout), "--"] + inner
    log(f"run-matrix: [{place}] booting: {' '.join(shlex.quote(x) for x in argv)}")
    t = time.time()
    rc = subprocess.call(argv, cwd=src_dir())
    log(f"run-matrix: [{place}] guest run ended with status {rc} after {time.time() - t:.0f} s")
    if rc != 0 and not os.path.exists(os.path.join(res, "out", f"transports-{place}.json")):
        skipped[place] = f"contrib/vmtest/run {place} exited {rc} (logs in {res})"
    return os.path.join(res, "out")


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    src = src_dir()
    a.build = os.path.realpath(a.build or os.path.join(src, "_b"))
    a.pml_build = os.path.realpath(a.pml_build or a.build)
    if a.inner:
        return run_inner(a)
    docs = a.docs or os.path.join(src, "docs")
    if a.report_only:
        out = a.report_only
        meta = json.load(open(os.path.join(out, "meta.json")))
        dirs = meta["dirs"]
    else:
        for prog in ("tests/bench/latency", "tests/bench/bandwidth", "tests/mpi/mpi-pingpong"):
            if not os.access(os.path.join(a.build, prog), os.X_OK):
                log(f"run-matrix: {a.build}/{prog} not built (run make in {a.build})")
                return 2
        out = os.path.realpath(a.out or time.strftime("/tmp/ompi-roce-bench/%Y%m%d-%H%M%S"))
        os.makedirs(out, exist_ok=True)
        comp, comp_notes = prepare_components(a, out)
        cmd = "contrib/bench/run-matrix " + " ".join(shlex.quote(x) for x in sys.argv[1:])
        meta = {"command": cmd.strip(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                  time.gmtime()),
                "components": comp_notes, "dirs": {}, "skipped": {}, "out": out}
        log(f"run-matrix: results in {out}; places {','.join(a.places)}; "
            f"{'quick' if a.quick else 'full'}; host reps {a.reps}, guest reps {a.guest_reps}")
        for place in a.places:
            if place == "host":
                d = os.path.join(out, "host")
                os.makedirs(d, exist_ok=True)
                sub = argparse.Namespace(**vars(a))
                sub.inner, sub.out, sub.comp_dir = "host", d, comp
                run_inner(sub)
            else:
                d = run_guest(a, place, out, comp, meta["skipped"])
            meta["dirs"][place] = d
            with open(os.path.join(out, "meta.json"), "w") as f:  # --report-only works on a
                json.dump(dict(meta, finished="(partial)"), f, indent=1)  # cut-short run
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    meta.setdefault("finished", "?")
    if a.no_docs:
        log(f"run-matrix: results in {out} (no docs written)")
        return 0
    meta["command"] += f"   # results: {out}; components: " + "; ".join(
        f"{k} {v}" for k, v in meta.get("components", {}).items())
    rows = report.generate(meta["dirs"], docs, meta)
    log(f"run-matrix: wrote {docs}/perf.md and {docs}/perf/matrix/ (results in {out})")
    for place, what, r, target, verdict, miss, best in rows:
        val = "n/a" if r is None else f"{r:.3g}"
        b = "" if best is None else f" (best/best {best:.3g})"
        log(f"  {place:4} {what}: {val}{b} {target} {verdict} {miss[:120]}")
    return 0
