"""What the tool needs on the host (and in the guests' root), and installing it
with apt-get when missing from the host."""

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


# What only the host runs (QEMU, the initramfs' busybox, per-run keys, the
# fabric namespace); with --root DIR the rest must be in DIR, the guests' root.
HOST_ONLY = ("qemu-system-x86_64", "/bin/busybox", "ssh-keygen", "ip", "tc")
# What the guests run that the host has anyway (the tool is Python), checked
# only in another root: the agent is PID 1 there, guest/setup is bash.
ROOT_ONLY = [("/usr/bin/python3", "python3"), ("/bin/bash", "bash")]
GUEST_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _present(check, root="/"):
    if root != "/":
        if check.startswith("/"):
            return bool(glob.glob(os.path.join(root, check.lstrip("/"))))
        return any(os.access(os.path.join(root, d.lstrip("/"), check), os.X_OK) for d in GUEST_PATH)
    if check.startswith("/"):
        return bool(glob.glob(check))
    return shutil.which(check) is not None


def missing_packages(root="/"):
    """Packages missing from the host (root "/": every requirement), or from the
    guests' root ROOT (what the guests run)."""
    pkgs = []
    for check, pkg in REQUIREMENTS + (ROOT_ONLY if root != "/" else []):
        if root != "/" and check in HOST_ONLY:
            continue
        if not _present(check, root) and pkg not in pkgs:
            pkgs.append(pkg)
    return pkgs


def missing_host_packages():
    pkgs = []
    for check, pkg in REQUIREMENTS:
        if check in HOST_ONLY and not _present(check) and pkg not in pkgs:
            pkgs.append(pkg)
    return pkgs


def ensure(install=True, timeout=1200, root="/"):
    """Make sure everything is installed; install with apt-get or say what to install.

    With another guests' root than "/", what the guests run must be in it
    (never installed from here: the root is built by its own script) and
    only the host's own tools are installed on the host."""
    if root != "/":
        inside = missing_packages(root)
        if inside:
            raise ToolError(f"the guest root {root} lacks packages: {' '.join(inside)} "
                            "(build a guest root with contrib/debian13-root --guest build)")
    missing = missing_packages if root == "/" else missing_host_packages
    pkgs = missing()
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
    still = missing()
    if still:
        raise ToolError("still missing after apt-get: " + " ".join(still))
