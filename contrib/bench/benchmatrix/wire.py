"""contrib/bench/wire-counts: packets, bytes and turns on the wire per MPI
round trip, across the two vmtest guests (issue 18, (b) and (c)).

The host side boots `contrib/vmtest/run two` (as run-matrix does), captures
the fabric on the host side (tcpdump on the bond members' taps in the run's
network namespace) and, when the guests are done, forms the figures. Inside
node1 (--inner) every transport runs through benchmatrix's Place:
pml roce, ob1 + btl roce and pml ucx run tests/bench/wire (which reads the
counters itself around phases of N and 2N round trips and sends the phase
markers), raw RC runs ibv_rc_pingpong once with N and once with 2N round
trips, the counters read and the markers sent here around each run.
Every figure is (C(2N) - C(N)) / N per round trip.
"""

import argparse
import csv
import ipaddress
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

from . import cli, execute, pcap, plan

DEFAULT_SIZES = "8,4K,64K,1M"
TRANSPORTS = ("roce", "ob1-roce", "ucx", "raw-rc")
RDMA_DEV, NETDEV = "rxe_bond0", "bond0"
MEMBER_TAPS = ("n1d0", "n1d1")  # node1's bond members, host side (vmtest/fabric.py)
COUNTERS = ("sent_pkts", "rcvd_pkts", "tx_bytes", "rx_bytes")

HELP = """\
Counts what crosses the wire per MPI round trip between the two vmtest guests
(rxe over the bond), for pml roce, pml ob1 + btl roce, pml ucx (rc_verbs and
ud_verbs on rxe_bond0) and raw RC verbs (ibv_rc_pingpong), at each size.

from the counters (both guests)
  packets   rxe's ports/1/hw_counters/sent_pkts of both guests, summed (the
            rcvd_pkts sum is printed beside it as a check)
  bytes     bond0's statistics/tx_bytes of both guests, summed (Ethernet
            header to the end of the payload, no FCS)
from the capture (tcpdump on the host side of node1's bond members)
  turns     how often the sender of consecutive data-bearing RoCE v2 frames
            (UDP 4791; not pure ACKs, BTH opcode 0x11, nor CNPs, 0x81) changes;
            beside it the minimum of the protocol seen: eager 2 (ping, pong),
            rendezvous 6 (3 one-way trips per message: RTS, read request, read
            response; or RTS, CTS, write)
  retransmitted  data-bearing frames sent again (same sender, QP and PSN), over
            both phases / 3N (they come at random, so not (C(2N) - C(N)) / N)
  opcodes   frames per round trip by BTH opcode class (send, write, read_req,
            read_resp, ack, cnp), which says the protocol each transport used

setup and wire-up never count
  tests/bench/wire (the MPI transports) runs, per size, 5 warm-up round trips
  and then a phase of N and a phase of 2N round trips in one job; each rank
  reads its own counters while the link is quiet around each phase, and rank 0
  sends a UDP broadcast marker (port 9) between phases, so the capture splits
  exactly where the counters were read. Raw RC runs ibv_rc_pingpong with -n N
  and with -n 2N (its setup goes over the management network, not the fabric)
  with the counters read and markers sent around each run. Every figure is
  (C(2N) - C(N)) / N: what happens once cancels. Packets are counted, not
  timed, except RC retransmissions (rxe resends when an ACK or a read response
  is late): the capture counts them apart ("retransmitted").

output (in --out): wire.csv (transport,size,figure,value), wire.md (the
tables), counters.csv (the raw counter readings), capture-*.pcap, logs/.

examples
  contrib/bench/wire-counts --build /path/to/build --out /path/to/results
  contrib/bench/wire-counts --build B --sizes 8,64K --transports roce,raw-rc
  contrib/bench/wire-counts --report-only RESULTS     # tables from an earlier run
  contrib/bench/wire-counts --self-test               # the pcap reader's test
"""


def parse(argv):
    ap = argparse.ArgumentParser(prog="contrib/bench/wire-counts", description=HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="build tree with tests/bench/wire and the components "
                    "(default SRC/_b)")
    ap.add_argument("--pml-build", help="build tree whose mca_pml_roce.so is used "
                    "(default: --build)")
    ap.add_argument("--out", help="results directory (default /tmp/ompi-roce-bench/wire-TIME)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"message sizes (default {DEFAULT_SIZES})")
    ap.add_argument("--n", type=int, help="round trips N of the first phase (default 100 up "
                    "to 4 KiB, 40 up to 64 KiB, 10 above); the second has 2N")
    ap.add_argument("--transports", default=",".join(TRANSPORTS),
                    help=f"subset of {','.join(TRANSPORTS)} (default all)")
    ap.add_argument("--bond-mode", default="active-backup",
                    choices=["active-backup", "balance-xor", "802.3ad"])
    ap.add_argument("--no-capture", action="store_true", help="counters only, no tcpdump")
    ap.add_argument("--mca", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="an MCA parameter for the runs of pml roce and ob1 + btl roce "
                    "(repeatable), e.g. --mca btl_roce_rdma_chunk 1048576 to count another "
                    "chunk size")
    ap.add_argument("--report-only", metavar="OUT", help="the tables from an earlier run")
    ap.add_argument("--self-test", action="store_true",
                    help="test the pcap reader on handmade captures and exit")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--comp-dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.transports = [t.strip() for t in a.transports.split(",") if t.strip()]
    for t in a.transports:
        if t not in TRANSPORTS:
            ap.error(f"unknown transport {t!r} ({', '.join(TRANSPORTS)})")
    return a


def sizes_of(text):
    out = []
    for w in text.split(","):
        m = re.fullmatch(r"(\d+)([KMG]?)", w.strip(), re.I)
        if not m:
            raise SystemExit(f"wire-counts: bad size {w!r}")
        out.append(int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()])
    return out


def default_n(size, n=None):
    """N of the first phase; tests/bench/wire's rule (keep the two alike)."""
    return n or (100 if size <= 4096 else 40 if size <= 65536 else 10)


def log(*args):
    print(*args, flush=True)


# ---- inside node1 ------------------------------------------------------------

def read_counters(node):
    """This guest's (node None) or node2's counters, by ssh over the management network."""
    paths = [f"/sys/class/infiniband/{RDMA_DEV}/ports/1/hw_counters/{c}" for c in COUNTERS[:2]]
    paths += [f"/sys/class/net/{NETDEV}/statistics/{c}" for c in COUNTERS[2:]]
    cmd = ["cat"] + paths
    if node:
        cmd = ["ssh", node, " ".join(shlex.quote(c) for c in cmd)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    vals = [int(v) for v in out.split()]
    if len(vals) != len(COUNTERS):
        raise RuntimeError(f"counters of {node or 'node1'}: {out!r}")
    return dict(zip(COUNTERS, vals))


def send_marker(size, k):
    """tests/bench/wire's marker, from here: a UDP broadcast on bond0, port 9."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", NETDEV], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"\binet (\S+/\d+)", out)  # the guests' addresses carry no brd
    if not m:
        raise RuntimeError(f"no IPv4 address on {NETDEV}: {out!r}")
    bcast = str(ipaddress.ip_interface(m.group(1)).network.broadcast_address)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, NETDEV.encode())
        s.sendto(pcap.MARKER_MAGIC + f"{size} {k}".encode(), (bcast, pcap.MARKER_PORT))
    finally:
        s.close()


def raw_boundary(size, k):
    """Counters at the end of one raw phase and at the start of the next, the
    marker between them (as tests/bench/wire does for the MPI transports)."""
    time.sleep(0.3)
    end = {r: read_counters(node) for r, node in ((0, None), (1, "node2"))}
    send_marker(size, k)
    time.sleep(0.3)
    start = {r: read_counters(node) for r, node in ((0, None), (1, "node2"))}
    return end, start


def inner(a):
    out = a.out or os.environ["VMTEST_RESULTS"]
    os.makedirs(out, exist_ok=True)
    src = cli.src_dir()
    place = execute.Place("two", out, {"dir": a.build, "src": src}, a.comp_dir, 1, False, log=log)
    sizes = sizes_of(a.sizes)
    info, rows = {}, []
    ts = {t.key: t for t in plan.transports("two", a.comp_dir)}
    for key in a.transports:
        t = ts[key]
        if key == "raw-rc":
            ok, reason = place.raw_available()
            if not ok:
                info[key] = {"label": t.label, "status": "n/a", "reason": reason}
                continue
            rs, status, reasons = [], "ok", []
            for i, size in enumerate(sizes):
                n = default_n(size, a.n)
                _, start = raw_boundary(size, 0)
                res = []
                for ph, iters in ((0, n), (1, 2 * n)):
                    rc, o, e, _secs = place.raw_pingpong(t, size, iters, 18700 + i * 2 + ph,
                                                         f"raw-rc.{size}.{iters}")
                    end, nxt = raw_boundary(size, ph + 1)
                    res.append((rc, o, e))
                    for r in (0, 1):
                        for c in COUNTERS:
                            rs.append((f"wire_{'2n' if ph else 'n'}", size, f"rank{r}_{c}",
                                       end[r][c] - start[r][c]))
                    start = nxt
                rs.append(("wire_iters", size, "n", n))
                bad = [execute.reason_of(rc, o, e, False) for rc, o, e in res if rc != 0]
                if bad:
                    status = "failed"
                    reasons.append(f"{size} B: {bad[0]}")
            info[key] = {"label": t.label, "status": status, "reason": "; ".join(reasons),
                         "command": f"ibv_rc_pingpong -d {RDMA_DEV} -g {place.gid} -s SIZE "
                         "-n N|2N -e (server on node2, client on node1)"}
            rows += [(key,) + r for r in rs]
            log(f"[wire] {t.label}: {status} {'; '.join(reasons)}")
            continue
        if key == "ucx":  # the first setting run-matrix tries: verbs on rxe_bond0
            name, env, args = plan.ucx_variants("two", place.gid)[0]
            t = plan.Transport(t.key, f"{t.label}, {name}", t.args + args, env)
        elif a.mca:  # ours only: the peers keep their own settings
            extra = [x for name, value in a.mca for x in ("--mca", name, value)]
            t = plan.Transport(t.key, t.label + " " + " ".join(extra), t.args + extra, t.env)
        env = {"ROCE_BENCH_SIZES": a.sizes, "ROCE_TEST_MAX_BYTES": str(max(sizes)),
               "ROCE_WIRE_DEV": RDMA_DEV, "ROCE_WIRE_NETDEV": NETDEV}
        if a.n:
            env["ROCE_WIRE_N"] = str(a.n)
        bench = plan.Bench("wire", ["tests/bench/wire"], env, 1200)
        st, secs, reason, rs, cmd = place.run_mpi(t, bench, 1)
        info[key] = {"label": t.label, "status": st, "reason": reason, "command": cmd}
        rows += [(key,) + r for r in rs if r[0].startswith("wire")]
        log(f"[wire] {t.label}: {st} ({secs:.0f} s) {reason}")
    with open(os.path.join(out, "counters.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["transport", "benchmark", "size", "metric", "value"])
        w.writerows(rows)
    with open(os.path.join(out, "transports.json"), "w") as f:
        json.dump({"gid_index": place.gid, "transports": info, "sizes": sizes}, f, indent=1)
    return 0


# ---- the figures -------------------------------------------------------------

def counter_figures(path):
    """{(transport, size): {figure: per round trip}} from counters.csv."""
    raw = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["transport"], int(r["size"]))
            raw.setdefault(key, {})[(r["benchmark"], r["metric"])] = float(r["value"])
    out = {}
    for key, d in raw.items():
        n = d[("wire_iters", "n")]
        fig = {"n": n}
        for name, c in (("pkts", "sent_pkts"), ("rcvd_pkts", "rcvd_pkts"),
                        ("bytes", "tx_bytes")):
            tot = {ph: sum(d[(ph, f"rank{r}_{c}")] for r in (0, 1)) for ph in ("wire_n", "wire_2n")}
            fig[name] = (tot["wire_2n"] - tot["wire_n"]) / n
            fig[name + "_n_phase"] = tot["wire_n"] / n  # for the reader: C(N)/N alone
        out[key] = fig
    return out


def capture_figures(outdir, counters):
    """{(transport, size): {figure: per round trip}} from the captures, using
    the N of each (transport, size) from the counters. The markers carry only
    the size, so the transports' phases are told apart by order: the
    transports ran one after the other in the order of counters.csv."""
    files = sorted(f for f in os.listdir(outdir)
                   if f.startswith("capture-") and f.endswith(".pcap"))
    if not files:
        return {}, "no capture"
    caps, tallies = [], {"other": 0, "malformed": 0}
    for fn in files:
        with open(os.path.join(outdir, fn), "rb") as f:
            pk, t = pcap.read_capture(f.read())
        caps.append(pk)
        for k in tallies:
            tallies[k] += t[k]
    packets = pcap.merge(*caps)
    order = []
    for key in counters:
        if key[0] not in order:
            order.append(key[0])
    # cut the stream into one run of markers per transport: sizes repeat per transport
    out, cur, seen = {}, [], set()
    runs = []
    for p in packets:
        if p.marker is not None and p.marker[1] == 0 and p.marker[0] in seen:
            runs.append(cur)
            cur, seen = [], set()
        if p.marker is not None:
            seen.add(p.marker[0])
        cur.append(p)
    runs.append(cur)
    runs = [r for r in runs if any(p.marker is not None for p in r)]
    if len(runs) != len(order):
        return {}, f"{len(runs)} marker runs in the capture for {len(order)} transports"
    for tr, pk in zip(order, runs):
        phases = pcap.split_phases(pk)
        for (t, size), fig in counters.items():
            if t == tr and (size, 1) in phases and (size, 2) in phases:
                out[(t, size)] = pcap.per_round_trip(phases, size, fig["n"])
    note = (f"{len(packets)} RoCE v2 frames and markers from {', '.join(files)}; "
            f"{tallies['other']} other frames ignored, {tallies['malformed']} malformed")
    return out, note


def protocol_of(cap):
    if cap.get("op_read_req", 0) > 0:
        return "rendezvous (RDMA read)", 6
    if cap.get("op_write", 0) > 0:
        return "rendezvous (RDMA write)", 6
    return "eager (sends)", 2


def fmt(v, nd=1):
    return "n/a" if v is None else f"{v:,.{nd}f}"


def report(outdir, meta):
    """Writes wire.csv and wire.md; returns the markdown."""
    cpath = os.path.join(outdir, "vm", "out", "counters.csv")
    counters = counter_figures(cpath)
    caps, capnote = capture_figures(outdir, counters) if os.path.isdir(outdir) else ({}, "")
    tinfo = json.load(open(os.path.join(outdir, "vm", "out", "transports.json")))["transports"]
    labels = {k: v["label"] for k, v in tinfo.items()}
    sizes = sorted({s for _, s in counters})
    trs = [t for t in TRANSPORTS if any(k[0] == t for k in counters)]
    rows = []
    for t in trs:
        for s in sizes:
            c = counters.get((t, s))
            if not c:
                continue
            for k, v in sorted(c.items()):
                rows.append((t, s, "counter_" + k, v))
            for k, v in sorted(caps.get((t, s), {}).items()):
                rows.append((t, s, "capture_" + k, v))
    with open(os.path.join(outdir, "wire.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["transport", "size", "figure", "value"])
        w.writerows(rows)

    def ratio(t, s, what, ref):
        a, b = counters.get((t, s), {}).get(what), counters.get((ref, s), {}).get(what)
        return None if a is None or not b else a / b

    md = [f"Command: `{meta.get('command', '?')}`  ",
          f"Commit: {meta.get('commit', '?')}; run {meta.get('started', '?')}; "
          f"N per size: " + ", ".join(f"{s} B: {int(counters[(trs[0], s)]['n'])}"
                                      for s in sizes if (trs[0], s) in counters) + ".", "",
          "Transports: " + "; ".join(f"`{t}` = {labels.get(t, t)}" for t in trs) + ".", "",
          "### Packets and bytes per round trip (counters of both guests, (C(2N) - C(N)) / N)",
          "",
          "| transport | size | packets | (rcvd check) | retransmitted | bytes | packets / UCX "
          "| packets / raw RC | bytes / UCX | bytes / raw RC |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        for t in trs:
            c = counters.get((t, s))
            if not c:
                continue
            retx = caps.get((t, s), {}).get("retx_mean")
            md.append(f"| {t} | {s:,} | {fmt(c['pkts'])} | {fmt(c['rcvd_pkts'])} | "
                      f"{fmt(retx, 2)} | {fmt(c['bytes'], 0)} | "
                      f"{fmt(ratio(t, s, 'pkts', 'ucx'), 2)} | "
                      f"{fmt(ratio(t, s, 'pkts', 'raw-rc'), 2)} | "
                      f"{fmt(ratio(t, s, 'bytes', 'ucx'), 2)} | "
                      f"{fmt(ratio(t, s, 'bytes', 'raw-rc'), 2)} |")
    md += ["", "### Turns per round trip (capture), against the protocol's minimum", "",
           f"Capture: {capnote}.", "",
           "| transport | size | turns | minimum | protocol seen | frames | retransmitted "
           "| bytes | frames by opcode class |",
           "|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for s in sizes:
        for t in trs:
            cap = caps.get((t, s))
            if not cap:
                md.append(f"| {t} | {s:,} | n/a | | | | | | |")
                continue
            proto, mn = protocol_of(cap)
            ops = ", ".join(f"{k[3:]} {v:,.1f}" for k, v in sorted(cap.items())
                            if k.startswith("op_") and v)
            md.append(f"| {t} | {s:,} | {fmt(cap['turns'])} | {mn} | {proto} | "
                      f"{fmt(cap['pkts'])} | {fmt(cap['retx_mean'], 2)} | "
                      f"{fmt(cap['bytes'], 0)} | "
                      f"{ops} |")
    text = "\n".join(md) + "\n"
    with open(os.path.join(outdir, "wire.md"), "w") as f:
        f.write(text)
    return text


# ---- on the host -------------------------------------------------------------

def start_capture(vm_pid, outdir, deadline=600):
    """tcpdump on node1's bond member taps in the run's namespace (vmtest-PID),
    once they exist. Returns the tcpdump processes (or [] with a warning)."""
    ns = f"vmtest-{vm_pid}"
    t0 = time.time()
    while time.time() - t0 < deadline:
        p = subprocess.run(["ip", "-n", ns, "link", "show", MEMBER_TAPS[-1]], capture_output=True)
        if p.returncode == 0:
            break
        time.sleep(0.5)
    else:
        log(f"wire-counts: namespace {ns} has no {MEMBER_TAPS[-1]}: no capture")
        return []
    procs = []
    for tap in MEMBER_TAPS:
        f = os.path.join(outdir, f"capture-{tap}.pcap")
        argv = ["ip", "netns", "exec", ns, "tcpdump", "-i", tap, "-U", "-s", "128", "-w", f,
                "udp"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                      stderr=open(f + ".log", "w")))
    log(f"wire-counts: capturing {', '.join(MEMBER_TAPS)} in {ns}")
    return procs


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.self_test:
        fails = pcap.self_test()
        for f in fails:
            log(f"wire-counts --self-test: FAIL {f}")
        log(f"wire-counts --self-test: {'FAIL' if fails else 'PASS'}")
        return 1 if fails else 0
    src = cli.src_dir()
    a.build = os.path.realpath(a.build or os.path.join(src, "_b"))
    a.pml_build = os.path.realpath(a.pml_build or a.build)
    if a.inner:
        return inner(a)
    if a.report_only:
        out = a.report_only
        meta = json.load(open(os.path.join(out, "meta.json")))
    else:
        if not os.access(os.path.join(a.build, "tests/bench/wire"), os.X_OK):
            log(f"wire-counts: {a.build}/tests/bench/wire not built "
                f"(make -C {a.build}/tests/bench)")
            return 2
        out = os.path.realpath(a.out or time.strftime("/tmp/ompi-roce-bench/wire-%Y%m%d-%H%M%S"))
        os.makedirs(out, exist_ok=True)
        comp, notes = cli.prepare_components(a, out)
        commit = subprocess.run(["git", "-C", src, "log", "-1", "--format=%h (%s)"],
                                capture_output=True, text=True).stdout.strip()
        meta = {"command": "contrib/bench/wire-counts " + " ".join(shlex.quote(x) for x in
                                                                  sys.argv[1:]),
                "commit": commit, "components": notes,
                "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        res = os.path.join(out, "vm")
        inner_argv = ["/usr/bin/python3", os.path.realpath(sys.argv[0]), "--inner", "--build",
                      a.build, "--comp-dir", comp, "--out", os.path.join(res, "out"),
                      "--sizes", a.sizes, "--transports", ",".join(a.transports)]
        if a.n:
            inner_argv += ["--n", str(a.n)]
        for name, value in a.mca:
            inner_argv += ["--mca", name, value]
        vm = [os.path.join(src, "contrib/vmtest/run"), "two", "--results", res, "--bond-mode",
              a.bond_mode, "--cmd-timeout", "3000", "--"] + inner_argv
        log(f"wire-counts: results in {out}; booting: {' '.join(shlex.quote(x) for x in vm)}")
        proc = subprocess.Popen(vm, cwd=src)
        caps = [] if a.no_capture else start_capture(proc.pid, out)
        rc = proc.wait()
        for c in caps:  # the namespace is gone with the run; stop what is left
            if c.poll() is None:
                c.send_signal(signal.SIGINT)
            c.wait()
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        meta["vm_status"] = rc
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if not os.path.exists(os.path.join(res, "out", "counters.csv")):
            log(f"wire-counts: the guest run ended with status {rc} and no counters "
                f"(logs in {res})")
            return 1
    text = report(out, meta)
    print(text)
    log(f"wire-counts: wrote {out}/wire.csv and {out}/wire.md")
    return 0
