"""Small shared helpers: logging to stderr, the tool's error type, commands."""

import contextlib
import signal
import subprocess
import sys
import time

_T0 = time.monotonic()
quiet = False


class ToolError(Exception):
    """A failure of the tool itself (not of the command): exit status 125."""


def log(msg):
    if not quiet:
        print(f"vmtest: [{elapsed():6.1f}s] {msg}", file=sys.stderr, flush=True)


def warn(msg):
    print(f"vmtest: [{elapsed():6.1f}s] WARNING: {msg}", file=sys.stderr, flush=True)


def elapsed():
    return time.monotonic() - _T0


def run(argv, timeout=30, check=True):
    """Run a short host command; return its CompletedProcess (text output)."""
    try:
        p = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"timed out after {timeout} s: {' '.join(argv)}")
    except FileNotFoundError:
        raise ToolError(f"command not found: {argv[0]}")
    if check and p.returncode != 0:
        raise ToolError(f"failed ({p.returncode}): {' '.join(argv)}: {p.stderr.strip()}")
    return p


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited already.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_deferred():
    """Hold Ctrl-C/SIGTERM while a process is created *and* recorded for cleanup."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
