"""The run guard: was anything else using the machine while a run was timed?

A timed run is only a figure when the benchmark had the cores to itself. The
guard samples, before and after a run, the load average (/proc/loadavg), the
busy time of all CPUs (/proc/stat: user, nice, system, irq, softirq, steal)
and every process's CPU time (/proc/<pid>/stat: utime + stime). The
benchmark's own process tree - this process and the children it reaped
(getrusage(RUSAGE_CHILDREN)), which is where mpirun and its ranks end up -
is subtracted from the machine's busy time; what is left is what everything
else used, in cores (busy jiffies / CLK_TCK / elapsed seconds). It includes
processes that started and ended during the run (they are in /proc/stat) and
kernel work (interrupts). Above `max_cores` (default 0.1, a tenth of a
core) the run is "busy": the drivers repeat it and, if it stays busy, leave
it out of the medians. The processes that used the most are named (from the
per-process samples) so the record says who it was.

In the emulated guests the kernel is part of the benchmark: rxe does the
NIC's work in softirq context and kernel threads (ksoftirqd, the bond's
workers), so there (`kernel_is_ours`) interrupt and softirq time and every
kernel thread count as the run's own; only user processes (the guest agent,
ssh) are "others".

Limits: jiffies tick at CLK_TCK (100 Hz), so a run shorter than about a
second has a coarse verdict (one tick = 0.01 core-seconds); descendants that
escape the tree (daemonized, never reaped) count as "others", which errs on
the side of repeating. The guard does not see a hypervisor's other guests
except as steal time.

Used by benchmatrix/execute.py and by contrib/bench/run-guard (the command
line form, for shell drivers such as tests/bench/compare-pml).
"""

import os
import resource
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
DEFAULT_MAX_CORES = 0.1
FIELDS = ["load1_before", "load1_after", "others_cores", "own_cores", "seconds", "limit",
          "verdict", "top"]


def _cpu_busy():
    """(busy jiffies of all CPUs, of which irq + softirq)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is inside user)
    return v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0), v[5] + v[6]


PF_KTHREAD = 0x00200000


def _loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _procs():
    """pid -> (ppid, comm, starttime, utime + stime, is a kernel thread) for every
    process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        # comm may hold spaces and parentheses: split after the last ')'
        lp, rp = s.find("("), s.rfind(")")
        rest = s[rp + 2:].split()
        # rest[0] is field 3 (state); utime, stime are fields 14, 15; starttime 22
        # flags is field 9
        out[int(d)] = (int(rest[1]), s[lp + 1:rp], int(rest[19]), int(rest[11]) + int(rest[12]),
                       bool(int(rest[6]) & PF_KTHREAD))
    return out


def _own_jiffies():
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime) * CLK_TCK


def _tree(procs, root):
    """The pids in root's tree (root included) in a process table."""
    kids = {}
    for pid, (ppid, _c, _s, _t, _k) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    seen, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo += kids.get(p, [])
    return seen


class Guard:
    """start(); run the benchmark as a child; stop() -> the record (a dict)."""

    def __init__(self, max_cores=DEFAULT_MAX_CORES, kernel_is_ours=False):
        self.max_cores = max_cores
        self.kernel_is_ours = kernel_is_ours
        self._b = None

    def start(self):
        self._b = (time.monotonic(), _loadavg(), _cpu_busy(), _own_jiffies(), _procs())

    def stop(self):
        t0, load0, (busy0, irq0), own0, procs0 = self._b
        procs1 = _procs()
        t1, load1, (busy1, irq1), own1 = time.monotonic(), _loadavg(), _cpu_busy(), _own_jiffies()
        secs = max(t1 - t0, 1e-6)
        me = os.getpid()
        # descendants still alive at the end are ours too (not reaped yet)
        mine = _tree(procs1, me) | _tree(procs0, me)
        live_own = sum(procs1[p][3] - (procs0[p][3] if p in procs0 and
                                       procs0[p][2] == procs1[p][2] else 0)
                       for p in mine if p in procs1 and p != me)
        own = (own1 - own0) + live_own
        top, kernel = [], 0
        for pid, (_pp, comm, start, t, kthread) in procs1.items():
            if pid in mine:
                continue
            before = procs0.get(pid)
            d = t - (before[3] if before and before[2] == start else 0)
            if before is None and start < self._start_ticks(t0):
                d = 0  # not seen before but older than the run: a race, skip
            if kthread and self.kernel_is_ours:
                kernel += max(d, 0)
            elif d > 0:
                top.append((d / CLK_TCK / secs, comm, pid))
        if self.kernel_is_ours:
            # softirq time is charged to whatever thread it interrupted: counted
            # whole here, and the kernel threads' own time above
            own += (irq1 - irq0) + kernel
        others = max(0.0, (busy1 - busy0) - own)
        others_cores = others / CLK_TCK / secs
        top.sort(reverse=True)
        rec = {
            "load1_before": round(load0, 2),
            "load1_after": round(load1, 2),
            "others_cores": round(others_cores, 3),
            "own_cores": round(own / CLK_TCK / secs, 3),
            "seconds": round(secs, 2),
            "limit": self.max_cores,
            "verdict": "busy" if self.max_cores > 0 and others_cores > self.max_cores else "clean",
            "top": " ".join(f"{c}[{p}]:{v:.2f}" for v, c, p in top[:4] if v >= 0.01),
        }
        return rec

    @staticmethod
    def _start_ticks(mono):
        """A monotonic time as clock ticks since boot (the unit of starttime)."""
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return (up - (time.monotonic() - mono)) * CLK_TCK


def describe(rec):
    """One line for logs and runs.csv."""
    s = (f"others used {rec['others_cores']:.2f} cores (limit {rec['limit']:g}), "
         f"load {rec['load1_before']:.2f}->{rec['load1_after']:.2f}, "
         f"own {rec['own_cores']:.2f} cores over {rec['seconds']:.1f} s")
    return s + (f"; top: {rec['top']}" if rec["top"] else "")
