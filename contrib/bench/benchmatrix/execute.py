"""Running the matrix at one place (the host, or inside a guest).

Writes into OUT: raw.csv (every figure of every repetition), runs.csv (every
run with status, seconds and reason), transports-PLACE.json (what was usable,
with the exact command or why not), logs/PLACE/... (stdout/stderr of each run),
guard.csv (the run guard's record of every timed run: load average, the other
processes' CPU) and raw-busy.csv (the figures of runs the guard marked busy:
taken while something else used more than --guard-cores; they are repeated up
to --guard-retries times and left out of raw.csv, so out of the medians).
A transport that cannot run is recorded "n/a" with its reason; nothing here
raises on a failed run.
"""

import csv
import json
import os
import re
import shlex
import subprocess
import time

from . import guard, plan

CSV_LINE = re.compile(r"^([A-Za-z][\w-]*),(\d+),([^,\s]+),([-+0-9.eE]+)$")
REASON_HINT = re.compile(r"error|fatal|abort|cannot|failed|unreachable|refus|not found|"
                         r"no such|timeout|killed|denied", re.I)


def parse_csv(text):
    rows = []
    for line in text.splitlines():
        m = CSV_LINE.match(line.strip())
        if m:
            rows.append((m.group(1), int(m.group(2)), m.group(3), float(m.group(4))))
    return rows


def reason_of(rc, out, err, timed_out):
    """One line saying why a run failed, from what the run printed."""
    if timed_out:
        head = "timed out"
    else:
        head = f"exit status {rc}"
    lines = [l.strip() for l in (err + "\n" + out).splitlines()
             if l.strip() and not set(l.strip()) <= set("-=*")]
    hits = [l for l in lines if REASON_HINT.search(l) and "ORTE_ERROR_LOG" not in l]
    pick = hits[:2] or lines[:1]
    text = "; ".join(pick)
    text = re.sub(r"\s+", " ", text)
    return f"{head}: {text[:300]}" if text else head


def shell_cmd(env, argv):
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (pre + " " if pre else "") + " ".join(shlex.quote(a) for a in argv)


class Place:
    """Runs one place's share of the matrix."""

    def __init__(self, place, out, build, comp_dir, reps, quick, log=print, explore=False,
                 guard_cores=guard.DEFAULT_MAX_CORES, guard_retries=2):
        self.place, self.out, self.build, self.explore = place, out, build, explore
        self.guard_cores, self.guard_retries = guard_cores, guard_retries
        self.probe_guard = {}  # transport key -> the guard's record of its probe
        self.comp_dir, self.reps, self.quick, self.log = comp_dir, reps, quick, log
        self.logdir = os.path.join(out, "logs", place)
        os.makedirs(self.logdir, exist_ok=True)
        self.gid = self._gid() if place != "host" else None
        self.info = {}  # key -> dict(label, status, reason, command, attempts)
        self.t0 = time.time()
        self.done = 0
        self.total = 0

    # ---- low level -------------------------------------------------------
    def _gid(self):
        helper = os.path.join(self.build["src"], "tests/vm/lib/gid-index")
        try:
            return subprocess.run([helper, "rxe_bond0", "bond0"], capture_output=True,
                                  text=True, timeout=120).stdout.strip() or "1"
        except Exception:  # noqa: BLE001 - a missing helper must not stop the run
            return "1"

    def _mpirun_argv(self, t, env, bench):
        argv = ["mpirun", "--allow-run-as-root", "-np", "2"]
        if self.place == "two":
            argv += ["--hostfile", os.environ.get("VMTEST_HOSTFILE", "/etc/vmtest/hostfile")]
        elif self.place == "one":
            argv += ["--oversubscribe", "--bind-to", "none"]
        argv += t.args
        for k in sorted(env):
            argv += ["-x", k]
        prog = os.path.join(self.build["dir"], bench.argv[0])
        return argv + [prog] + bench.argv[1:]

    def _run(self, argv, env, timeout, logname):
        full_env = dict(os.environ, **env)
        t = time.time()
        timed_out = False
        try:
            p = subprocess.run(argv, env=full_env, capture_output=True, text=True,
                               timeout=timeout, errors="replace")
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            timed_out, rc = True, 124
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        except OSError as e:
            rc, out, err = 127, "", str(e)
        secs = time.time() - t
        base = os.path.join(self.logdir, logname)
        with open(base + ".out", "w") as f:
            f.write(f"$ {shell_cmd(env, argv)}\n{out}")
        with open(base + ".err", "w") as f:
            f.write(err)
        return rc, out, err, secs, timed_out

    def _record_run(self, key, rep, bench, status, secs, reason, rows):
        raw = "raw-busy.csv" if status == "busy" else "raw.csv"  # busy: not in the medians
        with open(os.path.join(self.out, raw), "a", newline="") as f:
            w = csv.writer(f)
            for b, size, metric, value in rows:
                w.writerow([self.place, key, rep, b, size, metric, value])
        with open(os.path.join(self.out, "runs.csv"), "a", newline="") as f:
            csv.writer(f).writerow([self.place, key, rep, bench, status, f"{secs:.1f}", reason])

    # ---- the run guard -----------------------------------------------------
    def _record_guard(self, key, rep, bench, attempt, rec):
        path = os.path.join(self.out, "guard.csv")
        new = not os.path.exists(path)
        with open(path, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["place", "transport", "rep", "bench", "attempt"] + guard.FIELDS)
            w.writerow([self.place, key, rep, bench, attempt] + [rec[k] for k in guard.FIELDS])

    def _guarded_once(self, fn):
        g = guard.Guard(self.guard_cores, kernel_is_ours=self.place != "host")
        g.start()
        res = fn()
        return res, g.stop()

    def _timed(self, key, rep, bench, fn):
        """fn() -> (status, secs, reason, rows, cmd), run under the guard. A run
        that succeeded while others used more than guard_cores is recorded
        "busy" (its figures in raw-busy.csv) and repeated, up to guard_retries
        times; the last attempt, still busy, comes back with status "busy"."""
        for attempt in range(self.guard_retries + 1):
            res, rec = self._guarded_once(fn)
            self._record_guard(key, rep, bench, attempt, rec)
            if res[0] != "ok" or rec["verdict"] == "clean":
                return res
            st, secs, reason, rows, cmd = res
            why = guard.describe(rec)
            if attempt == self.guard_retries:
                return ("busy", secs, why, rows, cmd)
            self._record_run(key, rep, bench, "busy", secs, why + "; repeated", rows)
            self.log(f"[{self.place}] rep {rep} {key} {bench}: {why}; repeating", flush=True)
        raise AssertionError("unreachable")

    def _progress(self, what, status, secs, rows):
        self.done += 1
        el = time.time() - self.t0
        eta = el / self.done * (self.total - self.done) if self.done else 0
        fig = ""
        for b, size, metric, value in rows:
            if metric in ("usec", "MB/s", "msg/s", "usec/msg", "instr/pair") and size in (8, 1048576, 10000):
                fig = f"  {b} {size} B = {value:g} {metric}"
                break
        self.log(f"[{self.place} {self.done}/{self.total} {el / 60:4.1f} min, ~{eta / 60:.0f} min left] "
                 f"{what}: {status} ({secs:.0f} s){fig}", flush=True)

    # ---- MPI transports --------------------------------------------------
    def run_mpi(self, t, bench, rep, env_extra=None):
        env = dict(t.env, **bench.env, **(env_extra or {}))
        argv = self._mpirun_argv(t, env, bench)
        log = f"{t.key}.{bench.name}.rep{rep}"
        rc, out, err, secs, to = self._run(argv, env, bench.timeout, log)
        rows = parse_csv(out)
        if rc == 0 and rows:
            return "ok", secs, "", rows, shell_cmd(env, argv)
        reason = reason_of(rc, out, err, to) if rc != 0 else "no figures in the output"
        return "failed", secs, reason, rows, shell_cmd(env, argv)

    def probe(self, t, first):
        """Repetition 1 of the first benchmark decides whether a transport works
        here (an MPI job costs half a minute to start in a guest, so the probe is
        a real run and its figures count). Returns ok, reason, attempts, result."""
        if t.key == "ucx":
            attempts, chosen = [], None
            for name, env, args in plan.ucx_variants(self.place, self.gid, self.explore):
                cand = plan.Transport(t.key, f"{t.label}, {name}", t.args + args, env)
                res, rec = self._guarded_once(lambda: self.run_mpi(cand, first, 1))
                st, secs, reason = res[0], res[1], res[2]
                attempts.append({"variant": name, "env": env, "args": args, "status": st,
                                 "seconds": round(secs, 1), "reason": reason, "command": res[4]})
                self.log(f"[{self.place}] probe pml ucx, {name}: {st} ({secs:.0f} s) {reason}",
                         flush=True)
                if st == "ok" and chosen is None:
                    chosen = (cand, res)
                    self.probe_guard[t.key] = rec
                    if not self.explore:
                        break
            if chosen:
                cand, res = chosen
                t.label, t.env, t.args = cand.label, cand.env, cand.args
                return True, "", attempts, res
            return False, "no UCX setting worked (see attempts)", attempts, None
        res, rec = self._guarded_once(lambda: self.run_mpi(t, first, 1))
        self.probe_guard[t.key] = rec
        self.log(f"[{self.place}] probe {t.label}: {res[0]} ({res[1]:.0f} s) {res[2]}",
                 flush=True)
        return res[0] == "ok", res[2], [], res if res[0] == "ok" else None

    # ---- raw RC ----------------------------------------------------------
    def raw_available(self):
        for tool in ("ibv_rc_pingpong",):
            if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
                return False, f"{tool} not installed"
        if not os.path.isdir("/sys/class/infiniband/rxe_bond0"):
            return False, "no rxe_bond0 device"
        return True, ""

    def raw_pingpong(self, t, size, iters, port, logname):
        """One ibv_rc_pingpong of `iters` round trips of `size` bytes: the server
        on node2 (node1 itself for one guest), the client here. Returns rc, out,
        err, secs of the client."""
        opts = " ".join([f"-d rxe_bond0 -g {self.gid} -p {port} -s {size} -n {iters}"] + t.args)
        srv = f"timeout -k 5 240 ibv_rc_pingpong {opts}"
        if self.place == "two":
            server = subprocess.Popen(["ssh", "node2", srv], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            peer = "node2"
        else:
            server = subprocess.Popen(["sh", "-c", srv], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            peer = "127.0.0.1"
        argv = ["timeout", "-k", "5", "240", "ibv_rc_pingpong"] + opts.split() + [peer]
        rc, out, err, secs = 1, "", "", 0.0
        for _ in range(30):  # until the server listens
            time.sleep(1)
            rc, out, err, s, _to = self._run(argv, {}, 260, logname)
            secs += s
            if rc == 0 or "Couldn't connect" not in (out + err):
                break
        try:
            sout, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            sout, _ = server.communicate()
        with open(os.path.join(self.logdir, logname + ".server"), "w") as f:
            f.write(f"$ {srv}\n{sout}")
        return rc, out, err, secs

    def run_raw(self, t, rep):
        """ibv_rc_pingpong server (node2, or node1 for one guest) and client."""
        rows, secs_all, reasons = [], 0.0, []
        for i, (size, iters) in enumerate(plan.raw_sizes(self.quick)):
            port = 18600 + rep * 10 + i + (5 if t.args else 0)
            rc, out, err, secs = self.raw_pingpong(t, size, iters, port,
                                                   f"{t.key}.{size}.rep{rep}")
            secs_all += secs
            m = re.search(r"=\s*([0-9.]+)\s*usec/iter", out + err)
            mb = re.search(r"=\s*([0-9.]+)\s*Mbit/sec", out + err)
            if rc == 0 and m:
                rows.append(("rtt", size, "usec", float(m.group(1))))
                if mb and size >= 65536:
                    rows.append(("rc_pingpong_bw", size, "MB/s", float(mb.group(1)) / 8))
            else:
                reasons.append(f"{size} B: " + reason_of(rc, out, err, False))
        flags = "".join(" " + a for a in t.args)
        cmd = (f"server: ibv_rc_pingpong -d rxe_bond0 -g GID -s SIZE -n N{flags}; client: the same "
               f"+ {'node2' if self.place == 'two' else '127.0.0.1'} (GID from "
               f"tests/vm/lib/gid-index = {self.gid})")
        status = "ok" if rows and not reasons else ("partial" if rows else "failed")
        return status, secs_all, "; ".join(reasons), rows, cmd

    # ---- callgrind ---------------------------------------------------------
    def run_callgrind(self, t):
        script = os.path.join(self.build["src"], "tests/bench/callgrind-pair")
        iters = "2000" if self.quick else "20000"
        argv = [script, "--iters", iters] + t.args
        env = {"CG_PAIRS": os.path.join(self.build["dir"], "tests/bench/cg_pairs")}
        rc, out, err, secs, to = self._run(argv, env, 1200, f"{t.key}.callgrind")
        rows = parse_csv(out)
        if rc == 0 and rows:
            return "ok", secs, "", rows, shell_cmd(env, argv)
        return "failed", secs, reason_of(rc, out, err, to), rows, shell_cmd(env, argv)

    def run_counts(self):
        """contrib/bench/count-instructions: issue 18's deterministic counts
        (the self loop, pml roce and ob1; the btl over FakeVerbs against the
        bare verbs floor). Returns {transport: rows}; rows with the btl's
        ratios go to "roce"."""
        script = os.path.join(self.build["src"], "contrib/bench/count-instructions")
        argv = [script, "--build", self.build["dir"], "--iters", "500" if self.quick else "2000"]
        rc, out, err, secs, to = self._run(argv, {}, 1800, "counts")
        rows = parse_csv(out)
        by = {"roce": [], "ob1": []}
        for b, size, metric, value in rows:
            if b == "self_roce":
                by["roce"].append(("instr_self", size, metric, value))
            elif b == "self_ob1":
                by["ob1"].append(("instr_self", size, metric, value))
            elif b.startswith("ratio_btl_") or b.startswith("btl_") or b.startswith("floor_"):
                by["roce"].append((b, size, metric, value))
        ok = rc == 0 and by["roce"] and by["ob1"]
        return ("ok" if ok else "failed"), secs, "" if ok else reason_of(rc, out, err, to), \
            by, shell_cmd({}, argv)

    # ---- the loop ----------------------------------------------------------
    def run(self):
        ts = plan.transports(self.place, self.comp_dir)
        bs = plan.benches(self.place, self.quick)
        usable, probed = [], {}
        for t in ts:
            if t.kind == "raw":
                ok, reason = self.raw_available()
                attempts = []
            else:
                ok, reason, attempts, res = self.probe(t, bs[0])
                if ok:
                    probed[t.key] = res
            self.info[t.key] = {"label": t.label, "status": "ok" if ok else "n/a",
                                "reason": reason, "attempts": attempts, "commands": {},
                                "env": t.env, "args": t.args}
            if not ok:
                self._record_run(t.key, 0, "probe", "n/a", 0, reason, [])
            else:
                usable.append(t)
        redo = set()  # probes taken while the machine was busy: run repetition 1 again
        for key, res in probed.items():  # the probes were repetition 1 of bs[0]
            st, secs, reason, rows, cmd = res
            self.info[key]["commands"][bs[0].name] = cmd
            rec = self.probe_guard.get(key)
            if rec:
                self._record_guard(key, 1, bs[0].name, "probe", rec)
            if rec and rec["verdict"] == "busy":
                redo.add(key)
                st, reason = "busy", guard.describe(rec) + "; repeated"
            self._record_run(key, 1, bs[0].name, st, secs, reason, rows)
        per_rep = sum(1 if t.kind == "raw" else len(bs) for t in usable)
        cg = [t for t in usable if self.place == "host" and t.key in ("roce", "ob1")]
        self.total = per_rep * self.reps + len(cg) + (1 if cg else 0) - len(probed) + len(redo)
        self.log(f"[{self.place}] {len(usable)} of {len(ts)} transports usable; "
                 f"{self.total} more runs in {self.reps} repetition(s), transports alternating",
                 flush=True)
        for rep in range(1, self.reps + 1):
            k = (rep - 1) % max(1, len(usable))
            order = usable[k:] + usable[:k]  # rotate: no transport always goes first
            for t in order:
                work = [("rc_pingpong", None)] if t.kind == "raw" else [(b.name, b) for b in bs]
                for name, b in work:
                    if rep == 1 and t.key in probed and t.key not in redo and b is bs[0]:
                        continue
                    if t.kind == "raw":
                        st, secs, reason, rows, cmd = self._timed(
                            t.key, rep, name, lambda t=t: self.run_raw(t, rep))
                    else:
                        st, secs, reason, rows, cmd = self._timed(
                            t.key, rep, name, lambda t=t, b=b: self.run_mpi(t, b, rep))
                    self.info[t.key]["commands"][name] = cmd
                    self._record_run(t.key, rep, name, st, secs, reason, rows)
                    self._progress(f"rep {rep} {t.key} {name}", st if not reason else
                                   f"{st}: {reason[:160]}", secs, rows)
        for t in cg:  # instruction counts: deterministic, no guard
            st, secs, reason, rows, cmd = self.run_callgrind(t)
            self.info[t.key]["commands"]["callgrind"] = cmd
            self._record_run(t.key, 1, "callgrind", st, secs, reason, rows)
            self._progress(f"callgrind {t.key}", st if not reason else f"{st}: {reason[:160]}",
                           secs, rows)
        if cg:  # issue 18's own counts: deterministic, no guard
            st, secs, reason, by, cmd = self.run_counts()
            for key, rows in by.items():
                if key in self.info:
                    self.info[key]["commands"]["counts"] = cmd
                    self._record_run(key, 1, "counts", st, secs, reason, rows)
            self._progress("count-instructions", st if not reason else
                           f"{st}: {reason[:160]}", secs, by["roce"] + by["ob1"])
        with open(os.path.join(self.out, f"transports-{self.place}.json"), "w") as f:
            json.dump({"place": self.place, "gid_index": self.gid, "reps": self.reps,
                       "quick": self.quick, "transports": self.info,
                       "guard": {"max_cores": self.guard_cores, "retries": self.guard_retries},
                       "benches": [{"name": b.name, "argv": b.argv, "env": b.env} for b in bs],
                       "seconds": round(time.time() - self.t0)}, f, indent=1)
