"""Boot a topology, run one command on node1, collect logs, always clean up.

Stages, each bounded by its own timeout: prepare (run dir, keys, initramfs),
start (fabric namespace, QEMU processes), boot (until every guest agent has
finished setup and says "ready"), command, collect (guest state into the
results directory), cleanup (which runs whatever happened before it).
"""

import base64
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import fabric, initramfs
from .guest import Guest
from .util import HANDLED_SIGNALS, ToolError, elapsed, log, pid_alive, run, signals_deferred, warn

EXIT_TIMEOUT = 124
EXIT_TOOL = 125

TOPOLOGIES = {"one": 1, "two": 2, "rails": 2}
# Rails (bonds, each with its own rxe device and subnet) per guest.
RAILS = {"one": 1, "two": 1, "rails": 2}
BOND_MODES = ("active-backup", "balance-xor", "802.3ad")
MEMBERS = 2  # per bond
VLAN_ID = 3027
GUEST_USER, GUEST_UID = "vmuser", 2900
RUNDIR_PREFIX = "vmtest."


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


def install_signal_handlers():
    for s in HANDLED_SIGNALS:
        signal.signal(s, _raise_interrupted)


def ignore_signals():
    for s in HANDLED_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def node_plan(node, nodes, rails=1):
    """Addresses, names and MACs of guest `node`: the one place they are decided.

    Rail r (0-based) is bond<r> over eth<2r>, eth<2r+1> on 198.18.<r>.0/24;
    only rail 0 has the VLAN."""
    plan = {
        "name": f"node{node}",
        "bond_addr": f"198.18.0.{node}/24",
        "vlan_addr": f"198.19.0.{node}/24",
        "mgmt_addr": f"198.19.255.{node}/24",
        "nics": {f"52:54:00:19:{node:02x}:00": "mgmt0"},
    }
    for r in range(1, rails):
        plan[f"bond{r}_addr"] = f"198.18.{r}.{node}/24"
    if nodes > 1:
        for m in range(MEMBERS * rails):
            plan["nics"][f"52:54:00:18:{node:02x}:{m:02x}"] = f"eth{m}"
    return plan


def guest_env(opts, node, nodes, results):
    """VMTEST_* variables of guest `node` (for the command and ssh sessions)."""
    rails = RAILS[opts.topology]
    plan = node_plan(node, nodes, rails)
    env = {
        "VMTEST": "1",
        "VMTEST_TOPOLOGY": opts.topology,
        "VMTEST_NODE": str(node),
        "VMTEST_NODES": " ".join(f"node{n}" for n in range(1, nodes + 1)),
        "VMTEST_BOND_MODE": opts.bond_mode,
        "VMTEST_BOND": "bond0",
        "VMTEST_VLAN": f"bond0.{VLAN_ID}",
        "VMTEST_MEMBERS": " ".join(f"eth{m}" for m in range(MEMBERS)),
        "VMTEST_RDMA_DEV": "rxe_bond0",
        "VMTEST_ADDR": plan["bond_addr"].split("/")[0],
        "VMTEST_ADDR_CIDR": plan["bond_addr"],
        "VMTEST_VLAN_ADDR": plan["vlan_addr"].split("/")[0],
        "VMTEST_MGMT_ADDR": plan["mgmt_addr"].split("/")[0],
        "VMTEST_HOSTFILE": "/etc/vmtest/hostfile",
        "VMTEST_RESULTS": os.path.join(results, "out"),
        "VMTEST_USER": GUEST_USER,
        "VMTEST_RAILS": str(rails),
    }
    for r in range(1, rails):
        env[f"VMTEST_BOND{r}"] = f"bond{r}"
        env[f"VMTEST_MEMBERS{r}"] = " ".join(f"eth{m}" for m in range(MEMBERS * r, MEMBERS * (r + 1)))
        env[f"VMTEST_RDMA_DEV{r}"] = f"rxe_bond{r}"
        env[f"VMTEST_ADDR{r}"] = plan[f"bond{r}_addr"].split("/")[0]
        env[f"VMTEST_ADDR{r}_CIDR"] = plan[f"bond{r}_addr"]
    if nodes > 1:
        peer = node_plan(2 if node == 1 else 1, nodes, rails)
        env["VMTEST_PEER"] = peer["name"]
        env["VMTEST_PEER_ADDR"] = peer["bond_addr"].split("/")[0]
        env["VMTEST_PEER_VLAN_ADDR"] = peer["vlan_addr"].split("/")[0]
        for r in range(1, rails):
            env[f"VMTEST_PEER_ADDR{r}"] = peer[f"bond{r}_addr"].split("/")[0]
    return env


def _qemu_path(path):
    """QEMU option values escape a comma by doubling it."""
    return path.replace(",", ",,")


def pick_accel(pref):
    """'kvm' or 'tcg', with one clear line saying which and why."""
    if pref == "tcg":
        log("accel: TCG (software emulation), as requested by --accel tcg")
        return "tcg"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        if pref == "kvm":
            raise ToolError("--accel kvm: /dev/kvm is missing or not accessible")
        log("accel: /dev/kvm not available -> TCG (software emulation: slower, same guest kernel)")
        return "tcg"
    # KVM can exist and still fail (seen: an MSR error with -cpu host): probe it.
    probe = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-machine", "pc",
             "-nodefaults", "-display", "none", "-S", "-monitor", "none", "-serial", "none"]
    p = subprocess.Popen(probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        log("accel: KVM (-cpu host)")  # still running after 3 s: KVM initialised
        return "kvm"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    msg = err.decode(errors="replace").strip().splitlines()
    reason = msg[-1] if msg else f"exit {p.returncode}"
    if pref == "kvm":
        raise ToolError(f"--accel kvm: KVM probe failed: {reason}")
    log(f"accel: KVM probe failed ({reason}) -> TCG (software emulation)")
    return "tcg"


class Run:
    def __init__(self, opts):
        self.o = opts
        self.nodes = TOPOLOGIES[opts.topology]
        self.rails = RAILS[opts.topology]
        self.guests = []
        self.fabric = None
        self.rundir = None
        self.results = None
        self.cmd_log = None
        self.sel = None
        self.summary = {"topology": opts.topology, "bond_mode": opts.bond_mode, "stages": {}}
        self._stage_t0 = None

    # ---- stages -------------------------------------------------------------

    def execute(self):
        """Run every stage; returns the command's exit status (or 124 on timeout)."""
        self._stage("prepare")
        self._prepare()
        self._stage("start")
        self._start()
        try:
            self._stage("boot")
            self._boot()
            self._stage("command")
            status = self._command()
        except ToolError:
            if any(g.serving for g in self.guests):
                self._collect(timeout=min(20, self.o.collect_timeout), quiet=True)
            raise
        self._stage("collect")
        self._collect(timeout=self.o.collect_timeout)
        self._stage(None)
        self.summary["status"] = status
        self._write_summary()
        if self.o.keep:
            self._keep()
        return status

    def _stage(self, name):
        now = time.monotonic()
        if self._stage_t0 is not None:
            prev, t0 = self._stage_t0
            self.summary["stages"][prev] = round(now - t0, 1)
        self._stage_t0 = (name, now) if name else None

    def _prepare(self):
        remove_stale_runs()
        base = os.environ.get("TMPDIR", "/tmp")
        # Unix socket paths are limited to 107 bytes.
        if len(base) > 40 or not os.path.isdir(base):
            base = "/tmp"
        with signals_deferred():
            self.rundir = tempfile.mkdtemp(prefix=RUNDIR_PREFIX, dir=base)
            with open(os.path.join(self.rundir, "owner"), "w") as f:
                f.write(f"{os.getpid()}\n")
        self.hostdir = os.path.join(self.rundir, "host")
        self.share = os.path.join(self.rundir, "share")
        os.makedirs(self.hostdir, mode=0o700)
        os.makedirs(self.share, mode=0o700)
        shutil.copytree(initramfs.GUEST_DIR, os.path.join(self.share, "guest"))

        self.results = os.path.abspath(self.o.results or os.path.join(self.rundir, "results"))
        for n in range(1, self.nodes + 1):
            d = os.path.join(self.results, f"node{n}")
            os.makedirs(d, exist_ok=True)
            for stale in os.listdir(d):  # files of an earlier run into the same DIR
                if os.path.isfile(os.path.join(d, stale)):
                    os.unlink(os.path.join(d, stale))
        out = os.path.join(self.results, "out")
        os.makedirs(out, exist_ok=True)
        if self.o.user:
            # The unprivileged command writes here (9p shows host ownership).
            os.chown(out, GUEST_UID, GUEST_UID)
        self.cmd_log = open(os.path.join(self.results, "command.log"), "wb")
        self.faults_log = open(os.path.join(self.results, "faults.log"), "w")

        self._make_keys()
        self._write_spec()
        root = self.o.root or "/"
        self.release, self.vmlinuz = initramfs.find_kernel(self.o.kernel, root)
        self.initrd = initramfs.get_initramfs(self.release, self.vmlinuz, self.o.cache_dir, root)
        self.accel = pick_accel(self.o.accel)
        self.summary.update(kernel=self.release, accel=self.accel)
        if self.o.root:
            self.summary.update(root=self.o.root, binds=self.o.binds)
            log(f"guest root {self.o.root} (kernel {self.release}); shared at the same paths: "
                f"{', '.join(self.o.binds)}")

    def _make_keys(self):
        """Per-run ssh host keys (one per guest) and one user key, never reused."""
        keys = os.path.join(self.share, "keys")
        os.makedirs(keys, mode=0o700)
        gen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C"]
        run(gen + [f"vmtest-{os.getpid()}", "-f", os.path.join(keys, "id_ed25519")])
        known = []
        for n in range(1, self.nodes + 1):
            path = os.path.join(keys, f"node{n}_host_ed25519")
            run(gen + [f"node{n}", "-f", path])
            with open(path + ".pub") as f:
                pub = " ".join(f.read().split()[:2])
            plan = node_plan(n, self.nodes, self.rails)
            names = [plan["name"]] + [plan[k].split("/")[0] for k in
                                      ("mgmt_addr", "bond_addr", "vlan_addr")]
            known.append(f"{','.join(names)} {pub}\n")
        with open(os.path.join(keys, "known_hosts"), "w") as f:
            f.writelines(known)

    def _write_spec(self):
        cwd = os.getcwd()
        cmd_env = guest_env(self.o, 1, self.nodes, self.results)
        for item in self.o.env:
            name, eq, value = item.partition("=")
            cmd_env[name] = value if eq else os.environ.get(name, "")
        spec = {
            "topology": self.o.topology,
            "nodes": self.nodes,
            "bond_mode": self.o.bond_mode,
            "vlan_id": VLAN_ID,
            "user": {"name": GUEST_USER, "uid": GUEST_UID},
            "run_as_user": self.o.user,
            "memlock": "default" if self.o.default_memlock else "unlimited",
            "argv": self.o.command,
            "cwd": cwd,
            "cmd_env": cmd_env,
            "results": self.results,
            # Extra 9p shares (--root): tag and the path the agent mounts it at.
            "binds": [{"tag": f"bind{i}", "path": d} for i, d in enumerate(self.o.binds)],
            "setup_timeout": self.o.boot_timeout,
            "plans": {str(n): node_plan(n, self.nodes, self.rails)
                      for n in range(1, self.nodes + 1)},
            "node_env": {str(n): guest_env(self.o, n, self.nodes, self.results)
                         for n in range(1, self.nodes + 1)},
        }
        with open(os.path.join(self.share, "spec.json"), "w") as f:
            json.dump(spec, f, indent=1)

    def _qemu_argv(self, node):
        res = os.path.join(self.results, f"node{node}")
        sock = lambda kind: _qemu_path(os.path.join(self.hostdir, f"node{node}.{kind}"))
        argv = [
            "qemu-system-x86_64", "-name", f"vmtest-{os.getpid()}-node{node}",
            "-machine", "pc", "-accel", self.accel,
            "-m", str(self.o.memory), "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", self.vmlinuz, "-initrd", self.initrd,
            "-append", f"console=ttyS0 panic=-1 mitigations=off vmtest.node={node}",
            "-chardev", f"file,id=con,path={_qemu_path(os.path.join(res, 'console.log'))}",
            "-serial", "chardev:con",
        ]
        if self.accel == "kvm":
            argv += ["-cpu", "host"]
        # "hostroot" is the guests' root: the host's /, or --root DIR.
        shares = [("hostroot", self.o.root or "/", True), ("vmrun", self.share, True),
                  ("results", self.results, False)]
        shares += [(f"bind{i}", d, True) for i, d in enumerate(self.o.binds)]
        for tag, path, ro in shares:
            extra = ",readonly=on" if ro else ""
            if tag == "hostroot" or tag.startswith("bind"):
                extra += ",multidevs=remap"
            argv += ["-fsdev", f"local,id={tag},path={_qemu_path(path)},security_model=none{extra}",
                     "-device", f"virtio-9p-pci,fsdev={tag},mount_tag={tag}"]
        argv += ["-device", "virtio-serial-pci,id=vser"]
        for kind in ("ctl", "fault"):
            argv += ["-chardev", f"socket,id={kind},path={sock(kind)}",
                     "-device", f"virtserialport,bus=vser.0,chardev={kind},name=vmtest.{kind}"]
        argv += ["-chardev", f"socket,id=qmp,path={sock('qmp')}", "-mon", "chardev=qmp,mode=control"]
        plan = node_plan(node, self.nodes, self.rails)
        for mac, name in sorted(plan["nics"].items(), key=lambda kv: kv[1]):
            nic = "m" if name == "mgmt0" else f"d{name[3:]}"
            argv += ["-netdev", f"tap,id={nic},ifname={fabric.tap_name(node, nic)},"
                     "script=no,downscript=no",
                     "-device", f"virtio-net-pci,netdev={nic},mac={mac},speed=25000,duplex=full"]
        return argv

    def _start(self):
        # Cleanup deletes the namespace by name, even if create() was interrupted.
        self.fabric = fabric.Fabric(self.nodes, MEMBERS * self.rails if self.nodes > 1 else 0)
        try:
            self.fabric.create()
        except ToolError as e:
            raise ToolError(f"creating the fabric namespace failed: {e}")
        self.sel = selectors.DefaultSelector()
        for n in range(1, self.nodes + 1):
            g = Guest(n, self.hostdir, os.path.join(self.results, f"node{n}"))
            self.guests.append(g)
            g.start(self.fabric.exec_prefix(), self._qemu_argv(n))
            self.sel.register(g.ctl, selectors.EVENT_READ, (g, "ctl"))
            self.sel.register(g.fault, selectors.EVENT_READ, (g, "fault"))

    def _boot(self):
        deadline = time.monotonic() + self.o.boot_timeout
        pending = [g.name for g in self.guests]
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._show_consoles()
                raise ToolError(f"boot timeout: {', '.join(pending)} not ready after "
                                f"{self.o.boot_timeout} s (--boot-timeout)")
            for g, m in self._pump(remaining):
                ev = m.get("ev")
                if ev in ("ready", "failed"):
                    g.serving = True
                if ev == "ready":
                    pending.remove(g.name)
                    log(f"{g.name}: ready (guest uptime {m.get('uptime')} s)")
                elif ev == "booting":
                    log(f"{g.name}: agent running (guest uptime {m.get('uptime')} s)")
                elif ev == "failed":
                    self._show_consoles()
                    raise ToolError(f"{g.name}: guest setup failed: {m.get('msg')}")
                else:
                    warn(f"{g.name}: unexpected message during boot: {m}")

    def _command(self):
        g1 = self.guests[0]
        log(f"{g1.name}: running {' '.join(self.o.command)!r} as "
            f"{GUEST_USER if self.o.user else 'root'} in {os.getcwd()}")
        g1.ctl.send(op="run")
        status = self._wait_exit(g1, self.o.cmd_timeout)
        if status is not None:
            log(f"{g1.name}: command exited with status {status}")
            return status
        warn(f"command timeout after {self.o.cmd_timeout} s (--cmd-timeout); "
             "sending SIGTERM to its process group")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            g1.ctl.send(op="signal", sig=int(sig))
            status = self._wait_exit(g1, 10)
            if status is not None:
                break
        else:
            warn("the command did not exit even after SIGKILL")
        self.summary["timed_out"] = True
        return EXIT_TIMEOUT

    def _wait_exit(self, g, timeout):
        """Pump until `g` reports the command's exit; its status, or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            for src, m in self._pump(remaining):
                if src is g and m.get("ev") == "exit":
                    return int(m["status"])
                warn(f"{src.name}: unexpected message: {m}")

    def _collect(self, timeout, quiet=False):
        """Ask every live guest to save its state into results/nodeN/; best effort."""
        pending = []
        for g in self.guests:
            # Before its setup ended, an agent does not read requests yet.
            if g.alive() and g.serving:
                try:
                    g.ctl.send(op="collect")
                    pending.append(g.name)
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        try:
            while pending and time.monotonic() < deadline:
                for g, m in self._pump(deadline - time.monotonic()):
                    if m.get("ev") == "collected" and g.name in pending:
                        pending.remove(g.name)
        except ToolError as e:
            warn(f"collect: {e}")
        if pending:
            warn(f"collect: no state from {', '.join(pending)} within {timeout} s")
        elif not quiet:
            log(f"collect: guest state saved under {self.results}/node*/")

    def _keep(self):
        key = os.path.join(self.share, "keys")
        log("--keep: guests are up; from the host:")
        for g in self.guests:
            addr = node_plan(g.node, self.nodes)["mgmt_addr"].split("/")[0]
            print(f"  ip netns exec {self.fabric.ns} ssh -i {key}/id_ed25519 "
                  f"-o UserKnownHostsFile={key}/known_hosts root@{addr}   # {g.name}",
                  file=sys.stderr)
        log("press Ctrl-C (or send SIGTERM) to shut down and clean up")
        try:
            while True:
                for g, m in self._pump(3600):
                    warn(f"{g.name}: unexpected message: {m}")
        except Interrupted:
            log("--keep: shutting down")

    # ---- message pump -----------------------------------------------------------

    def _pump(self, timeout):
        """Serve all guest channels once (output relay, fault requests); return other events."""
        events = []
        for key, _ in self.sel.select(timeout=max(0.0, min(timeout, 0.5))):
            g, kind = key.data
            chan = key.fileobj
            msgs = chan.read_messages()
            if chan.closed:
                self.sel.unregister(chan)
            for m in msgs:
                if kind == "fault":
                    self._handle_fault(g, m)
                elif m.get("ev") == "out":
                    self._relay(m)
                elif m.get("ev") == "log":
                    log(f"{g.name}: {m.get('msg')}")
                else:
                    events.append((g, m))
        for g in self.guests:
            if not g.alive():
                self._show_consoles()
                raise ToolError(f"{g.name}: QEMU exited unexpectedly (status {g.proc.returncode})")
        return events

    def _relay(self, m):
        data = base64.b64decode(m.get("data", ""))
        stream = sys.stdout.buffer if m.get("fd") == 1 else sys.stderr.buffer
        stream.write(data)
        stream.flush()
        self.cmd_log.write(data)
        self.cmd_log.flush()

    def _handle_fault(self, g, line):
        """One `vmtest-fault` request line ("cut N" / "restore N"); reply "ok ..." or "error ..."."""
        words = line.split()
        try:
            if len(words) != 2 or words[0] not in ("cut", "restore"):
                raise ToolError(f"bad request {line!r}")
            op, member = words[0], int(words[1]) if words[1].isdigit() else -1
            if self.nodes < 2:
                raise ToolError("topology one has no cables: its bond members are dummy NICs "
                                "(use 'ip link set ethN down' there)")
            members = MEMBERS * self.rails
            if not 0 <= member < members:
                raise ToolError(f"member must be 0..{members - 1}, got {words[1]!r}")
            for peer in self.guests:
                peer.set_link(f"d{member}", op == "restore")
            what = f"{op} member {member} (eth{member}) on {', '.join(p.name for p in self.guests)}"
            log(f"fault: {what} (requested by {g.name})")
            self.faults_log.write(f"{elapsed():.1f} {g.name} {what}\n")
            self.faults_log.flush()
            g.fault.send_line(f"ok {what}")
        except ToolError as e:
            g.fault.send_line(f"error {e}")

    # ---- diagnostics and cleanup --------------------------------------------------

    def _show_consoles(self, lines=25):
        for g in self.guests:
            path = os.path.join(g.results_dir, "console.log")
            try:
                with open(path, errors="replace") as f:
                    tail = f.readlines()[-lines:]
            except OSError:
                continue
            if not tail:
                continue
            print(f"---- last {len(tail)} console lines of {g.name} ({path}) ----",
                  file=sys.stderr)
            sys.stderr.write("".join(tail))
        sys.stderr.flush()

    def _write_summary(self):
        try:
            with open(os.path.join(self.results, "run.json"), "w") as f:
                json.dump(self.summary, f, indent=1)
        except (OSError, TypeError):
            pass

    def cleanup(self):
        """Stop guests, kill strays, delete the namespace and the run dir. Never raises."""
        ok = True
        for g in self.guests:
            ok &= g.stop()
        if self.rundir:
            ok &= kill_processes_mentioning(self.rundir)
        if self.fabric:
            ok &= self.fabric.destroy()
        for f in (self.cmd_log, getattr(self, "faults_log", None)):
            if f:
                f.close()
        if self.sel:
            self.sel.close()
        if self.rundir:
            shutil.rmtree(self.rundir, ignore_errors=True)
            if os.path.exists(self.rundir):
                warn(f"could not remove {self.rundir}")
                ok = False
        if ok:
            log("cleanup: no QEMU process, network namespace, socket or run directory left")
        else:
            warn("cleanup incomplete (see above)")
        return ok


def kill_processes_mentioning(path):
    """SIGKILL every process whose command line names `path` (a stray QEMU). True if none."""
    me = os.getpid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if path.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    for pid in found:
        warn(f"killing stray process {pid} of this run")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while any(pid_alive(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(pid_alive(p) for p in found)


def remove_stale_runs():
    """Clean what runs killed by SIGKILL left behind (their owner pid is gone)."""
    fabric.remove_stale()
    base_dirs = {"/tmp", os.environ.get("TMPDIR", "/tmp")}
    for base in base_dirs:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith(RUNDIR_PREFIX):
                continue
            path = os.path.join(base, name)
            try:
                with open(os.path.join(path, "owner")) as f:
                    owner = int(f.read().strip())
            except (OSError, ValueError):
                continue
            if not pid_alive(owner):
                log(f"removing stale run directory {path} of a dead run")
                kill_processes_mentioning(path)
                shutil.rmtree(path, ignore_errors=True)
