"""The two-guest wiring, entirely inside a private network namespace.

Every guest NIC is a tap in a namespace this run creates and deletes; nothing
is added to the host's own network. Bond members are joined pairwise by tc
mirred redirects (a transparent wire that also carries LACP frames, which a
Linux bridge would drop); the management NICs share a bridge, which also
carries an address so that `--keep` users can ssh in from the namespace.
"""

import os
import re

from .util import ToolError, log, pid_alive, run, warn

NETNS_PREFIX = "vmtest-"
MGMT_BRIDGE = "brmgmt"
MGMT_HOST_ADDR = "198.19.255.254/24"


def tap_name(node, nic):
    """Tap of guest `node` (1-based), NIC `nic` ('d0', 'd1' or 'm')."""
    return f"n{node}{nic}"


class Fabric:
    def __init__(self, nodes, members):
        self.nodes = nodes
        self.members = members
        self.ns = f"{NETNS_PREFIX}{os.getpid()}"

    def _ip(self, *args, check=True):
        return run(["ip", "-n", self.ns, *args], check=check)

    def _tc(self, *args):
        return run(["ip", "netns", "exec", self.ns, "tc", *args])

    def create(self):
        run(["ip", "netns", "add", self.ns])
        self._ip("link", "set", "lo", "up")
        for node in range(1, self.nodes + 1):
            for nic in [f"d{m}" for m in range(self.members)] + ["m"]:
                tap = tap_name(node, nic)
                self._ip("tuntap", "add", "dev", tap, "mode", "tap")
                self._ip("link", "set", tap, "up")
        # Member m of node 1 <-> member m of node 2: a wire in each direction.
        for m in range(self.members):
            a, b = tap_name(1, f"d{m}"), tap_name(2, f"d{m}")
            for src, dst in ((a, b), (b, a)):
                self._tc("qdisc", "add", "dev", src, "ingress")
                self._tc(
                    "filter", "add", "dev", src, "parent", "ffff:", "protocol", "all",
                    "u32", "match", "u32", "0", "0",
                    "action", "mirred", "egress", "redirect", "dev", dst,
                )
        self._ip("link", "add", MGMT_BRIDGE, "type", "bridge")
        for node in range(1, self.nodes + 1):
            self._ip("link", "set", tap_name(node, "m"), "master", MGMT_BRIDGE)
        self._ip("addr", "add", MGMT_HOST_ADDR, "dev", MGMT_BRIDGE)
        self._ip("link", "set", MGMT_BRIDGE, "up")
        log(f"fabric: netns {self.ns}: {self.nodes * (self.members + 1)} taps, "
            f"{self.members} tc mirred wires, management bridge {MGMT_BRIDGE}")

    def exec_prefix(self):
        """argv prefix that runs a program inside the namespace."""
        return ["ip", "netns", "exec", self.ns]

    def destroy(self):
        """Delete taps, bridge and namespace (if it exists); never raises; True when gone."""
        if self.ns not in list_netns():
            return True
        return destroy_netns(self.ns)


def destroy_netns(ns):
    """Delete every link in `ns`, then `ns` itself. True when it is gone."""
    try:
        p = run(["ip", "-n", ns, "-o", "link", "show"], check=False)
        for line in p.stdout.splitlines():
            m = re.match(r"\d+: ([^:@]+)", line)
            if m and m.group(1) != "lo":
                run(["ip", "-n", ns, "link", "del", m.group(1)], check=False)
        run(["ip", "netns", "del", ns], check=False)
    except ToolError as e:
        warn(f"fabric cleanup: {e}")
    gone = ns not in list_netns()
    if not gone:
        warn(f"network namespace {ns} could not be deleted")
    return gone


def list_netns():
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def remove_stale():
    """Delete namespaces left by runs whose process no longer exists (e.g. SIGKILL)."""
    for ns in list_netns():
        m = re.fullmatch(re.escape(NETNS_PREFIX) + r"(\d+)", ns)
        if m and not pid_alive(int(m.group(1))):
            log(f"removing stale network namespace {ns} of a dead run")
            destroy_netns(ns)
