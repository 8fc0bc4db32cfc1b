"""What the tool needs on the host, and installing it with apt-get when missing."""

import glob
import os
import shutil
import subprocess
import sys

from .util import ToolError, log

# (check, Debian package). A check is a command name or an absolute path/glob.
REQUIREMENTS = [
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("/boot/vmlinuz-*", "linux-image-amd64"),
    ("/bin/busybox", "busybox-static"),
    ("/usr/sbin/sshd", "openssh-server"),
    ("ssh-keygen", "openssh-client"),
    ("ssh", "openssh-client"),
    ("ip", "iproute2"),
    ("ping", "iputils-ping"),
    ("tc", "iproute2"),
    ("rdma", "iproute2"),
    ("modprobe", "kmod"),
    ("ibv_devinfo", "ibverbs-utils"),
    ("ibv_rc_pingpong", "ibverbs-utils"),
    ("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so", "ibverbs-providers"),
    ("/usr/sbin/rdma-ndd", "rdma-core"),
]


def _present(check):
    if check.startswith("/"):
        return bool(glob.glob(check))
    return shutil.which(check) is not None


def missing_packages():
    pkgs = []
    for check, pkg in REQUIREMENTS:
        if not _present(check) and pkg not in pkgs:
            pkgs.append(pkg)
    return pkgs


def ensure(install=True, timeout=1200):
    """Make sure everything is installed; install with apt-get or say what to install."""
    pkgs = missing_packages()
    if not pkgs:
        return
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs]
    if not install or os.geteuid() != 0:
        raise ToolError("missing packages; install them with:\n  " + " ".join(cmd))
    log(f"installing missing packages: {' '.join(pkgs)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (1, 2):
        try:
            # stdout to stderr: the tool's stdout belongs to COMMAND.
            p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ToolError(f"apt-get install timed out after {timeout} s")
        if p.returncode == 0:
            break
        if attempt == 1:
            log("apt-get install failed; running apt-get update and retrying")
            subprocess.run(["apt-get", "update", "-q"], env=env, stdin=subprocess.DEVNULL,
                           stdout=sys.stderr, timeout=timeout)
    still = missing_packages()
    if still:
        raise ToolError("still missing after apt-get: " + " ".join(still))
