"""One QEMU guest: its process, its QMP monitor and its two serial channels.

Every socket is a unix socket that the host listens on *before* QEMU starts
and QEMU connects to as a client while it starts up, so no message can be
written before the host is there to read it, and no polling for socket files
is needed.

Channels (virtio-serial ports):
  vmtest.ctl    the guest agent, JSON lines both ways: boot progress, command
                output, exit status, requests to run/signal/collect
  vmtest.fault  `vmtest-fault`, text lines: "cut N" / "restore N" -> "ok ..." / "error ..."
"""

import ctypes
import json
import os
import signal
import socket
import subprocess
import time

from .util import ToolError, log, pid_alive, signals_deferred, warn

_PR_SET_PDEATHSIG = 1


def _child_setup():
    """In the forked child: die with the tool, even if it gets SIGKILL; and do
    not inherit the signals the parent blocks around fork (a blocked SIGTERM
    would survive exec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class LineSocket:
    """A connected stream socket read as newline-terminated messages: JSON
    objects (the agent's channel) or, with text=True, plain lines (vmtest-fault)."""

    def __init__(self, sock, name, text=False):
        self.sock = sock
        self.name = name
        self.text = text
        self.buf = b""
        self.closed = False

    def fileno(self):
        return self.sock.fileno()

    def read_messages(self):
        """Read what is available (call when readable); return parsed messages."""
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return []
        self.buf += data
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not line.strip():
                continue
            if self.text:
                out.append(line.decode(errors="replace").strip())
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"ev": "garbage", "line": line[:200].decode(errors="replace")})
        return out

    def send(self, **msg):
        self._send((json.dumps(msg) + "\n").encode())

    def send_line(self, line):
        self._send((line.replace("\n", " ") + "\n").encode())

    def _send(self, data):
        self.sock.setblocking(True)
        self.sock.settimeout(10)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Qmp:
    """Synchronous QMP client on an accepted connection."""

    def __init__(self, sock, name):
        self.sock = sock
        self.name = name
        self.sock.settimeout(15)
        self.file = sock.makefile("rb")
        greeting = self._read()
        if "QMP" not in greeting:
            raise ToolError(f"{name}: unexpected QMP greeting {greeting}")
        self.execute("qmp_capabilities")

    def _read(self):
        try:
            line = self.file.readline()
        except OSError as e:  # reset, timeout: QEMU died or stalled
            raise ToolError(f"{self.name}: QMP connection to QEMU lost ({e or type(e).__name__}); "
                            "see its qemu.log in the results directory") from None
        if not line:
            raise ToolError(f"{self.name}: QMP connection closed by QEMU; "
                            "see its qemu.log in the results directory")
        try:
            return json.loads(line)
        except ValueError:
            raise ToolError(f"{self.name}: QEMU sent a malformed QMP line: {line[:200]!r}") from None

    def execute(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        try:
            self.sock.sendall((json.dumps(msg) + "\n").encode())
        except OSError as e:
            raise ToolError(f"{self.name}: QMP {command}: connection to QEMU lost "
                            f"({e or type(e).__name__})") from None
        while True:
            reply = self._read()
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                err = reply["error"]
                raise ToolError(f"{self.name}: QMP {command}: {err.get('desc', err)}")
            # Asynchronous events (e.g. NIC_RX_FILTER_CHANGED) are not replies.

    def close(self):
        for obj in (self.file, self.sock):
            try:
                obj.close()
            except OSError:
                pass


def _listen(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    return s


class Guest:
    def __init__(self, node, hostdir, results_dir):
        self.node = node
        self.name = f"node{node}"
        self.hostdir = hostdir
        self.results_dir = results_dir
        self.proc = None
        self.serving = False  # the agent answers requests (setup ended: ready or failed)
        self.qmp = None
        self.ctl = None
        self.fault = None
        self._listeners = {}
        self._paths = {}

    def sock_path(self, kind):
        return os.path.join(self.hostdir, f"{self.name}.{kind}")

    def start(self, argv_prefix, qemu_argv):
        """Listen on the sockets, start QEMU and accept its connections."""
        for kind in ("qmp", "ctl", "fault"):
            path = self.sock_path(kind)
            self._paths[kind] = path
            self._listeners[kind] = _listen(path)
        qemu_log = open(os.path.join(self.results_dir, "qemu.log"), "wb")
        try:
            # No Ctrl-C between fork and self.proc: cleanup must know the pid.
            with signals_deferred():
                self.proc = subprocess.Popen(
                    argv_prefix + qemu_argv,
                    stdin=subprocess.DEVNULL,
                    stdout=qemu_log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_child_setup,
                    # Ctrl-C goes to the tool, which then shuts QEMU down in order.
                    start_new_session=True,
                )
        finally:
            qemu_log.close()
        qmp_conn = self._accept("qmp")
        self.qmp = Qmp(qmp_conn, self.name)
        self.ctl = LineSocket(self._accept("ctl"), f"{self.name}.ctl")
        self.fault = LineSocket(self._accept("fault"), f"{self.name}.fault", text=True)
        for s in (self.ctl.sock, self.fault.sock):
            s.setblocking(False)
        self._close_listeners()
        log(f"{self.name}: QEMU pid {self.proc.pid} started")

    def _accept(self, kind, timeout=30):
        lst = self._listeners[kind]
        lst.settimeout(0.5)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                conn, _ = lst.accept()
                return conn
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise ToolError(
                        f"{self.name}: QEMU exited ({self.proc.returncode}) during start-up; "
                        f"see {os.path.join(self.results_dir, 'qemu.log')}:\n" + self.qemu_log_tail()
                    )
        raise ToolError(f"{self.name}: QEMU did not connect its {kind} socket in {timeout} s")

    def qemu_log_tail(self, lines=15):
        try:
            with open(os.path.join(self.results_dir, "qemu.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def set_link(self, netdev, up):
        self.qmp.execute("set_link", name=netdev, up=up)

    def _close_listeners(self):
        for s in self._listeners.values():
            s.close()
        self._listeners = {}

    def stop(self, grace=5.0):
        """Stop QEMU (QMP quit, then SIGTERM, then SIGKILL); close and unlink sockets.

        Never raises; returns True when the QEMU process is gone.
        """
        if self.proc is not None and self.proc.poll() is None:
            if self.qmp is not None:
                try:
                    self.qmp.sock.settimeout(2)
                    self.qmp.execute("quit")
                except (ToolError, OSError, ValueError):
                    pass
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    try:
                        self.proc.send_signal(sig)
                    except ProcessLookupError:
                        pass
                try:
                    self.proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.proc is not None:
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        for obj in (self.qmp, self.ctl, self.fault):
            if obj is not None:
                obj.close()
        self._close_listeners()
        for path in self._paths.values():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        gone = self.proc is None or (self.proc.poll() is not None and not pid_alive(self.proc.pid))
        if not gone:
            warn(f"{self.name}: QEMU pid {self.proc.pid} is still running")
        return gone
