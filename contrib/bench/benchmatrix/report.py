"""From raw results to summary.csv, gnuplot plots and docs/perf.md."""

import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

from . import guard, plan

SUBJECTS = {"host": ["roce"], "one": ["roce", "ob1-roce"], "two": ["roce", "ob1-roce"]}


def load(dirs):
    """dirs: place -> results directory. Returns raw rows, runs, transports, env."""
    raw, runs, tinfo, env = [], [], {}, {}
    for place, d in dirs.items():
        p = os.path.join(d, "raw.csv")
        if os.path.exists(p):
            raw += [r for r in csv.reader(open(p)) if r and r[0] == place]
        p = os.path.join(d, "runs.csv")
        if os.path.exists(p):
            runs += [r for r in csv.reader(open(p)) if r and r[0] == place]
        p = os.path.join(d, f"transports-{place}.json")
        if os.path.exists(p):
            tinfo[place] = json.load(open(p))
        p = os.path.join(d, f"env-{place}.json")
        if os.path.exists(p):
            env[place] = json.load(open(p))
    return raw, runs, tinfo, env


def summarize(raw):
    """(place, transport, bench, size, metric) -> dict(n, median, min, max, spread).
    Also keeps every repetition's value for the paired ratios (PAIRED)."""
    groups = defaultdict(list)
    PAIRED.clear()
    for place, t, rep, b, size, metric, value in raw:
        groups[(place, t, b, int(size), metric)].append(float(value))
        PAIRED.setdefault((place, t, b, int(size), metric), {})[int(rep)] = float(value)
    out = {}
    for k, v in groups.items():
        med = statistics.median(v)
        out[k] = {"n": len(v), "median": med, "min": min(v), "max": max(v),
                  "spread": (max(v) - min(v)) / med * 100 if med else 0.0}
    return out


def write_summary(summary, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["place", "transport", "benchmark", "size", "metric", "n", "median", "min",
                    "max", "spread_pct"])
        for k in sorted(summary):
            s = summary[k]
            w.writerow(list(k) + [s["n"], f"{s['median']:.6g}", f"{s['min']:.6g}",
                                  f"{s['max']:.6g}", f"{s['spread']:.1f}"])


def _source(t, key):
    """Where transport t's figure `key` comes from: (benchmark, size, metric,
    factor). An MPI round trip is twice the measured one-way latency;
    ibv_rc_pingpong measures its round trip itself."""
    b, size, metric, _hib, _label = plan.FIGURES[key]
    if key == "rtt8" and not t.startswith("raw-rc"):
        return "latency", 8, "usec", 2
    return b, size, metric, 1


def figure(summary, place, t, key):
    b, size, metric, k = _source(t, key)
    s = summary.get((place, t, b, size, metric))
    if s is None or k == 1:
        return s
    return {**s, "median": k * s["median"], "min": k * s["min"], "max": k * s["max"]}


def fmt(v):
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g} M"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.3g}"


def cell(s):
    return "n/a" if s is None else f"{fmt(s['median'])} ±{s['spread']:.0f}%"


PAIRED = {}  # (place, transport, bench, size, metric) -> {rep: value}, set by load()


def paired(place, t, key):
    b, size, metric, k = _source(t, key)
    return {r: k * x for r, x in PAIRED.get((place, t, b, size, metric), {}).items()}


def ratio(summary, place, a, b, key):
    """The median over the repetitions of a / b within each repetition (the
    transports alternate inside one, so both met the same machine), when at
    least 3 repetitions have both; else median(a) / median(b)."""
    pa, pb = paired(place, a, key), paired(place, b, key)
    both = [pa[r] / pb[r] for r in pa if r in pb and pb[r]]
    if len(both) >= 3:
        return statistics.median(both)
    sa, sb = figure(summary, place, a, key), figure(summary, place, b, key)
    if not sa or not sb or not sb["median"]:
        return None
    return sa["median"] / sb["median"]


def best_ratio(summary, place, a, b, key):
    """The best repetition of a over the best of b (the minimum of a time, the
    maximum of a rate): what each reached when nothing got in its way.
    Interference only slows a run down, so on a machine that switches between
    a fast and a slow state (the host here: 8 B latency 0.16-0.19 or
    0.42-0.48 us from one run to the next, for every transport) this compares
    the fast states; the paired median compares like with like only when both
    runs of a repetition met the same state."""
    hib = plan.FIGURES[key][3]
    sa, sb = figure(summary, place, a, key), figure(summary, place, b, key)
    if not sa or not sb:
        return None
    va, vb = (sa["max"], sb["max"]) if hib else (sa["min"], sb["min"])
    return va / vb if vb else None


def rfmt(r):
    return "n/a" if r is None else f"{r:.3g}x"


def why_na(tinfo, place, t, short=False):
    info = tinfo.get(place, {}).get("transports", {}).get(t)
    if not info:
        return "place not run"
    if info["status"] != "ok":
        r = info["reason"]
        return (r.split(";")[0][:160] + " (see Transports)") if short else r
    return "no figure (see runs.csv)"


# ---------------------------------------------------------------- plots
def plots(summary, outdir, places):
    """latency and bandwidth against size, one PNG per place and figure."""
    made = []
    if not shutil.which("gnuplot"):
        print("run-matrix: gnuplot is not installed (apt-get install gnuplot-nox): "
              "docs/perf.md gets no plots", file=sys.stderr)
        return made
    for place in places:
        for bench, metric, name, ylab in (("latency", "usec", "latency", "one-way latency (us)"),
                                          ("bw_uni", "MB/s", "bandwidth", "bandwidth (MB/s)")):
            series = defaultdict(list)
            for (p, t, b, size, m), s in summary.items():
                if p == place and b == bench and m == metric and size > 0:
                    series[t].append((size, s["median"], s["min"], s["max"]))
            if not series:
                continue
            dat, lines = [], []
            for i, t in enumerate(sorted(series)):
                f = os.path.join(outdir, f"{place}-{name}-{t}.dat")
                with open(f, "w") as fh:
                    for row in sorted(series[t]):
                        fh.write("%d %g %g %g\n" % row)
                dat.append(f)
                lines.append(f"'{f}' using 1:2:3:4 with yerrorlines title '{t}'")
            png = os.path.join(outdir, f"{place}-{name}.png")
            script = "\n".join([
                "set terminal pngcairo size 800,500",
                f"set output '{png}'",
                f"set title '{name}, {plan.PLACE_NAMES[place]} (median, bars: min..max)'",
                "set logscale xy", "set xlabel 'message size (bytes)'", f"set ylabel '{ylab}'",
                "set key left top" if bench == "bw_uni" else "set key left top",
                "set grid", "plot " + ", ".join(lines)])
            r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
            for f in dat:
                os.remove(f)
            if r.returncode == 0:
                made.append(os.path.basename(png))
    return made


# ---------------------------------------------------------------- perf.md
HOST_KEYS = ["lat0", "lat8", "lat1k", "lat64k", "lat1m", "bw64k", "bw1m", "bwbi1m", "msg8",
             "match100", "match1k", "match10k", "matchany10k", "matchunex10k", "ppsync8",
             "ppasync8", "ppbidir8", "ppsync1m", "cg", "instr", "btlsend", "btlrecv"]
GUEST_KEYS = ["lat8", "lat1k", "lat64k", "rtt8", "bw64k", "bw1m", "rc1m", "ppsync8", "ppasync8",
              "ppbidir8"]


def _verdict(r, target, higher):
    if r is None or target is None:
        return ""
    return "meets" if (r >= target if higher else r <= target) else "misses"


def headline(summary, tinfo, places):
    """The ratios issue 18 sets targets for (pml roce against ob1 on the host,
    against pml ucx and raw RC verbs in the two guests), and the tuning
    variants against the defaults."""
    rows = []

    def add(place, a, b, key, target, hib, what=None):
        r = ratio(summary, place, a, b, key)
        miss = ""
        if r is None:
            miss = "; ".join(f"{t}: {why_na(tinfo, place, t, True)}" for t in (a, b)
                             if not figure(summary, place, t, key))
        rows.append((place, what or f"{a} / {b}, {plan.FIGURES[key][4]}", r,
                     (("<= " if not hib else ">= ") + str(target)) if target else "",
                     _verdict(r, target, hib), miss, best_ratio(summary, place, a, b, key)))

    if "host" in places:
        for key, target, hib in (("instr", 0.8, False), ("cg", None, False), ("lat8", 0.9, False),
                                 ("msg8", 1.5, True), ("bw1m", 1.1, True)):
            add("host", "roce", "ob1", key, target, hib)
        for key in ("btlsend", "btlrecv"):  # already a ratio: against the verbs floor
            f = figure(summary, "host", "roce", key)
            r = f["median"] if f else None
            rows.append(("host", plan.FIGURES[key][4], r, "<= 3", _verdict(r, 3, False),
                         "" if f else "no btl_count_bench in this build", None))
        # Depth independence: the cost per message at 10,000 posted receives
        # against that at 100, both pml roce.
        a, b = figure(summary, "host", "roce", "match10k"), figure(summary, "host", "roce", "match100")
        r = a["median"] / b["median"] if a and b and b["median"] else None
        rows.append(("host", "pml roce match cost, 10,000 posted / 100 posted", r, "<= 1.5",
                     _verdict(r, 1.5, False), "" if r is not None else why_na(tinfo, "host", "roce", True),
                     None))
    if "two" in places:
        for a, b, key, target, hib in (("roce", "ucx", "lat8", 1.0, False),
                                       ("roce", "ucx", "lat64k", 1.0, False),
                                       ("roce", "ucx", "bw1m", 1.0, True),
                                       ("roce", "raw-rc", "rtt8", 1.3, False),
                                       ("roce", "raw-rc-spin", "rtt8", None, False),
                                       ("raw-rc-spin", "raw-rc", "rtt8", None, False),
                                       ("ob1-roce", "ucx", "lat8", None, False),
                                       ("ob1-roce", "ucx", "bw1m", None, True),
                                       ("roce-chunk256k", "roce", "lat8", None, False),
                                       ("roce-chunk256k", "roce", "bw1m", None, True),
                                       ("roce-chunk256k", "ucx", "bw1m", None, True),
                                       ("roce-eager64k", "roce", "lat64k", None, False),
                                       ("roce-eager64k", "ucx", "lat64k", None, False)):
            add("two", a, b, key, target, hib,
                what=(f"{a} / {b}, {plan.FIGURES[key][4]}: the same code (the chunk only "
                      f"matters from 256 KiB), so this is the noise of the place"
                      if (a, key) == ("roce-chunk256k", "lat8") else None))
    return rows


UCX_NOTES = """\
## pml ucx on rxe (UCX 1.13.1, Open MPI 4.1.4, Linux 6.1 rxe over the bond)

Found by hand in the two-guest fabric (2026-11-30, TCG); the matrix's probe
repeats the working setting every run, and `--ucx-explore` repeats the failing
GID one. Every variant with `--mca pml ucx`:

| setting | outcome |
|---|---|
| Open MPI defaults (`pml_ucx_tls`, `pml_ucx_devices` = `mlx*`) with `UCX_TLS=tcp,self` or `sm,self` | `PML ucx cannot be selected`: Open MPI 4.1.4 only takes pml ucx on mlx devices unless `--mca pml_ucx_tls any --mca pml_ucx_devices any` |
| `UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=rxe_bond0:1 UCX_IB_GID_INDEX=1` (bond0's IPv4-mapped RoCE v2 GID, the one our btl and `ibv_rc_pingpong` use) | aborts in the first barrier: `ud_ep.c:276 Fatal: UD endpoint ... unhandled timeout error` (with and without `pml_ucx_tls any`) |
| the same with `UCX_UD_TIMEOUT=600s UCX_RC_TIMEOUT=10s` | no abort, but no progress either: an 8-byte latency run did not finish in 120 s |
| `UCX_TLS=ud_verbs,self`, GID 1, `UCX_UD_TIMEOUT=600s` | no progress in 150 s |
| `UCX_TLS=rc_verbs,self` or `rc_verbs,tcp,self` | `no auxiliary transport ... Unsupported operation`, then `ucp_ep_create ... Destination is unreachable`: RC needs UD (or another verbs transport) to wire up |
| **`UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=rxe_bond0:1 UCX_IB_GID_INDEX=0`** (bond0's IPv6 link-local RoCE v2 GID) + `--mca pml_ucx_tls any --mca pml_ucx_devices any` | **works** (8 B latency and 1 MiB bandwidth verified): this is the `ucx` row in the guests |
| `UCX_TLS=tcp,self UCX_NET_DEVICES=bond0` + `pml_ucx_tls any`/`pml_ucx_devices any` | works (UCX over TCP, not RDMA); the probe's fallback if the verbs setting fails |

So UCX's UD transport loses its wire-up traffic when addressed through the
IPv4-mapped GID on rxe, while the link-local GID of the same netdev works.
Whether UCX or rxe is at fault was not pinned down (time-boxed).
"""


def perf_md(summary, runs, tinfo, env, places, plots_made, meta):
    L = []
    w = L.append
    w("# Performance: ompi-roce against ob1 and UCX")
    w("")
    w("Generated by `contrib/bench/run-matrix`; do not edit by hand (rerun the command). "
      f"Run: {meta['started']} to {meta['finished']}.")
    w("")
    w("```sh")
    w(meta["command"])
    w("```")
    w("")
    w("Figures are medians over the repetitions of the matrix (transports alternate within "
      "each repetition, rotating which goes first); `±N%` is the spread, (max - min) / median. "
      "A ratio is the median over the repetitions of the two figures' quotient within each "
      "repetition (both transports ran back to back, so a machine that slows down between "
      "repetitions moves both), or a median divided by a median when fewer than 3 "
      "repetitions have both figures. "
      "**Compare ratios, not absolute figures**: the host is a shared 2-core machine and the "
      "guests are emulated (TCG, about 100x slower than the host); never compare a guest "
      "figure with a host figure. Raw data: `docs/perf/matrix/raw.csv`, summary: "
      "`docs/perf/matrix/summary.csv`, runs (status, seconds, reason): "
      "`docs/perf/matrix/runs.csv`. How the harness works: `contrib/bench/README.md`.")
    w("")
    busy = [r for r in runs if r[4] == "busy"]
    left_out = [r for r in busy if not r[6].endswith("; repeated")]
    limits = sorted({str(t["guard"]["max_cores"]) for t in tinfo.values() if "guard" in t})
    w(f"Run guard: a timed run during which other processes used more than "
      f"{' / '.join(limits) or '0.1'} cores is repeated, and left out of the medians if it "
      f"stays busy ({len(busy)} busy "
      f"run(s), {len(left_out)} left out without a clean repetition; their figures in "
      f"`raw-busy.csv` of the results, the guard's record of every run in "
      f"`docs/perf/matrix/guard.csv`). "
      f"Minimum, median and maximum of every figure: `docs/perf/matrix/summary.csv`. "
      f"Deterministic instruction counts per message (pml roce against ob1 on the self "
      f"path, the btl over FakeVerbs against the bare verbs floor), which the load cannot "
      f"move: `docs/perf/instructions.md` (`contrib/bench/count-instructions`).")
    w("")
    w("## Headline ratios")
    w("")
    w("Latencies and instruction counts: below 1 is better for the first transport; "
      "bandwidth and message rate: above 1 is better. Round trip 8 B: an MPI round trip is "
      "twice the measured one-way latency; `ibv_rc_pingpong` reports its round trip directly.")
    w("")
    w("Targets are those of issue 18, set for pml roce; the same ratios for ob1 + btl "
      "roce show where our btl alone stands, and the `roce-chunk256k` and `roce-eager64k` rows "
      "(pml roce with one setting changed: the RDMA chunk 256 KiB, the default before "
      "2026-12-03; eager up to 64 KiB) what another setting would give. `raw-rc` is "
      "`ibv_rc_pingpong -e` (it sleeps on a completion channel), `raw-rc-spin` the same "
      "polling its CQ as MPI stacks do. A 64 KiB round trip is twice the 64 KiB latency, so their ratios are the "
      "same. Packets on the wire per message: `docs/perf/wire.md` (`contrib/bench/wire-counts`). "
      "Each missed target, with the profile that says where the time goes: "
      "`docs/perf/misses.md`.")
    w("")
    w("`value` is the paired median (above), on which the verdict is taken; `best / best` "
      "sets the best repetition of each against the other's (the lowest time, the highest "
      "rate), since interference only ever slows a run down. Deterministic counts have no "
      "repetitions to pair.")
    w("")
    w("| place | ratio | value | best / best | target | verdict | why n/a |")
    w("|---|---|---|---|---|---|---|")
    for place, what, r, target, verdict, miss, best in headline(summary, tinfo, places):
        val = "n/a" if r is None else (f"{r:.3g} us" if "absolute" in what else rfmt(r))
        w(f"| {place} | {what} | {val} | {'' if best is None else rfmt(best)} | {target} | "
          f"{verdict} | {miss} |")
    w("")
    w("## Transports")
    w("")
    w("| place | transport | status | why not / notes |")
    w("|---|---|---|---|")
    for place in places:
        for key, info in tinfo.get(place, {}).get("transports", {}).items():
            note = info["reason"] if info["status"] != "ok" else ""
            if key == "ucx" and info["attempts"]:
                note = (note + "; " if note else "") + "tried: " + "; ".join(
                    f"{a['variant']} -> {a['status']}" + (f" ({a['reason'][:200]})" if a['reason'] else "")
                    for a in info["attempts"])
            w(f"| {place} | `{key}`: {info['label']} | {info['status']} | {note} |")
        if place not in tinfo:
            w(f"| {place} | (all) | not run | {meta['skipped'].get(place, 'not requested')} |")
    w("")
    fails = [r for r in runs if r[4] not in ("ok", "busy") and r[3] != "probe"]
    if fails:
        w("Runs that failed after a transport passed its probe (place, transport, repetition, "
          "benchmark: reason):")
        w("")
        for r in fails[:30]:
            w(f"- {r[0]} `{r[1]}` rep {r[2]} {r[3]}: {r[4]} - {r[6][:300]}")
        w("")
    for place in places:
        if place not in tinfo:
            continue
        ts = [k for k, v in tinfo[place]["transports"].items()]
        keys = HOST_KEYS if place == "host" else GUEST_KEYS
        keys = [k for k in keys if any(figure(summary, place, t, k) for t in ts)]
        w(f"## {plan.PLACE_NAMES[place]}")
        w("")
        if not keys:
            w("No figures.")
            w("")
            continue
        w("| figure | " + " | ".join(f"`{t}`" for t in ts) + " |")
        w("|---|" + "---|" * len(ts))
        for k in keys:
            w(f"| {plan.FIGURES[k][4]} | " + " | ".join(cell(figure(summary, place, t, k))
                                                      for t in ts) + " |")
        w("")
        for subj in SUBJECTS[place]:
            if subj not in ts or not any(figure(summary, place, subj, k) for k in keys):
                continue
            peers = [t for t in ts if t != subj]
            w(f"Ratios `{subj}` / peer:")
            w("")
            w("| figure | " + " | ".join(f"/ `{p}`" for p in peers) + " |")
            w("|---|" + "---|" * len(peers))
            for k in keys:
                w(f"| {plan.FIGURES[k][4]} | " + " | ".join(
                    rfmt(ratio(summary, place, subj, p, k)) for p in peers) + " |")
            w("")
        for png in plots_made:
            if png.startswith(place + "-"):
                w(f"![{png}](perf/matrix/{png})")
        w("")
    w(UCX_NOTES)
    w("## Environment")
    w("")
    for place in places:
        e = env.get(place)
        if not e:
            continue
        w(f"**{plan.PLACE_NAMES[place]}**: " + "; ".join(
            f"{k}: {v}" for k, v in e.items() if v))
        w("")
    w("## Exact commands")
    w("")
    w("Every run's command line with its output is kept under the results directory "
      "(`logs/PLACE/TRANSPORT.BENCH.repN.out`). One per transport and benchmark:")
    w("")
    for place in places:
        info = tinfo.get(place)
        if not info:
            continue
        w(f"### {plan.PLACE_NAMES[place]}")
        w("")
        if place == "one":
            w("Run inside `contrib/vmtest/run one` (node1, 1 vCPU; both ranks oversubscribed on it).")
        if place == "two":
            w("Run inside `contrib/vmtest/run two` (node1 and node2, 1 vCPU each).")
        w("")
        w("```sh")
        for key, t in info["transports"].items():
            for bench, cmd in t["commands"].items():
                w(f"# {key} {bench}")
                w(cmd)
            if not t["commands"]:
                w(f"# {key}: n/a ({t['reason'][:200]})")
        w("```")
        w("")
    return "\n".join(L) + "\n"


def generate(dirs, docs_dir, meta):
    places = [p for p in plan.PLACES if p in dirs]
    raw, runs, tinfo, env = load(dirs)
    summary = summarize(raw)
    mdir = os.path.join(docs_dir, "perf", "matrix")
    os.makedirs(mdir, exist_ok=True)
    for f in os.listdir(mdir):
        if f.endswith((".png", ".csv")):
            os.remove(os.path.join(mdir, f))
    write_summary(summary, os.path.join(mdir, "summary.csv"))
    with open(os.path.join(mdir, "raw.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["place", "transport", "rep", "benchmark", "size", "metric", "value"])
        w.writerows(raw)
    with open(os.path.join(mdir, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["place", "transport", "rep", "benchmark", "status", "seconds", "reason"])
        w.writerows(runs)
    guard_rows = []  # the run guard's records (execute.py), every place
    for place, d in dirs.items():
        p = os.path.join(d, "guard.csv")
        if os.path.exists(p):
            guard_rows += [r for r in csv.reader(open(p)) if r and r[0] == place]
    if guard_rows:
        with open(os.path.join(mdir, "guard.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["place", "transport", "rep", "benchmark", "attempt"] + guard.FIELDS)
            w.writerows(guard_rows)
    made = plots(summary, mdir, places)
    text = perf_md(summary, runs, tinfo, env, places, made, meta)
    with open(os.path.join(docs_dir, "perf.md"), "w") as f:
        f.write(text)
    return headline(summary, tinfo, places)
