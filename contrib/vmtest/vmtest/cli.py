"""Command line of contrib/vmtest/run."""

import argparse
import os
import signal
import sys
import traceback

from . import deps, util
from .runner import (BOND_MODES, EXIT_TOOL, GUEST_USER, TOPOLOGIES, Interrupted, Run,
                     ignore_signals, install_signal_handlers)
from .util import ToolError, log

DEFAULT_CACHE = "/var/cache/ompi-roce-vmtest"
# The source tree this tool belongs to: shared with the guests under --root.
SOURCE_TREE = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "..", "..", ".."))

DESCRIPTION = """\
Boot a soft-RoCE (rdma_rxe) over Linux-bond fabric in QEMU guests and run
COMMAND as root (or --user) on the first guest, in the current directory.
The host's root filesystem is visible read-only at the same paths (with a
tmpfs overlay on top: writes stay in the guest), so the project's build tree,
rdma-core, Open MPI etc. are all there; it is cached (9p cache=loose), so build
what COMMAND needs before the run. With --root DIR the guests boot DIR's kernel
and see DIR as their root instead (same overlay), plus the source tree and
every --bind directory at their host paths. Exits with COMMAND's exit status.
"""

EPILOG = f"""\
topologies:
  one   node1 alone: bond0 (--bond-mode) over two dummy NICs eth0/eth1,
        VLAN bond0.3027, rxe_bond0 on bond0. rxe loops back to itself, so
        verbs tests run against the same device, not over the members.
  two   node1 and node2, each with two virtio NICs eth0/eth1 bonded into bond0,
        VLAN bond0.3027 and rxe_bond0 on bond0. Member N of node1 is wired to
        member N of node2 by a tc mirred redirect between taps in a private
        network namespace (a transparent cable: LACP passes, so 802.3ad
        aggregates). 802.3ad and balance-xor use xmit_hash_policy layer3+4.
  rails as two, plus a second rail: eth2/eth3 bonded into bond1 (same
        --bond-mode, no VLAN) with its own rxe_bond1 on its own subnet, wired
        like the first (member N to member N), so each guest has two RDMA
        devices, each reaching only the peer's device on its subnet.
  All topologies also have a management NIC mgmt0 (a bridge in the same
  namespace) with sshd, so `ssh node2 CMD` and mpirun work between guests.

addresses (inside the guests and the namespace only):
  bond0 198.18.0.N/24   bond0.3027 198.19.0.N/24   mgmt0 198.19.255.N/24
  bond1 198.18.1.N/24 (rails)
  /etc/hosts: nodeN (mgmt0), nodeN-bond, nodeN-vlan, nodeN-bond1 (rails)

environment of COMMAND (also set for ssh sessions into any guest):
  VMTEST=1, VMTEST_TOPOLOGY, VMTEST_NODE (1), VMTEST_NODES ("node1 node2"),
  VMTEST_BOND_MODE, VMTEST_BOND (bond0), VMTEST_VLAN (bond0.3027),
  VMTEST_MEMBERS ("eth0 eth1"), VMTEST_RDMA_DEV (rxe_bond0),
  VMTEST_ADDR / VMTEST_VLAN_ADDR / VMTEST_MGMT_ADDR (this guest's addresses),
  VMTEST_ADDR_CIDR (bond0's address with its prefix),
  VMTEST_PEER / VMTEST_PEER_ADDR / VMTEST_PEER_VLAN_ADDR (two and rails),
  VMTEST_RAILS (1, or 2 in rails), and in rails: VMTEST_BOND1 (bond1),
  VMTEST_MEMBERS1 ("eth2 eth3"), VMTEST_RDMA_DEV1 (rxe_bond1),
  VMTEST_ADDR1 / VMTEST_ADDR1_CIDR / VMTEST_PEER_ADDR1 (bond1's addresses),
  VMTEST_HOSTFILE (an mpirun hostfile listing every guest, slots=1 each),
  VMTEST_RESULTS (RESULTS/out: writable, on the host at the same path),
  VMTEST_USER ({GUEST_USER}, the unprivileged user; it exists in every run),
  OMPI_ALLOW_RUN_AS_ROOT[_CONFIRM]=1 when running as root,
  HOME, USER, LOGNAME, PATH, LANG=C.UTF-8, plus --env.
  COMMAND's stdin is /dev/null; its stdout/stderr stream to this terminal.
  Open MPI: /etc/openmpi/openmpi-mca-params.conf sets oob_tcp_if_include=mgmt0
  so the launch/control plane stays off the fabric under test (4.1's ORTE);
  under 5.0, where mpirun is PRRTE's, /etc/openmpi/prte-mca-params.conf sets
  prte_if_include=mgmt0 (PRRTE's name of it), when that file exists.
  ulimit -l is unlimited for root and --user (also for sshd sessions), unless
  --default-memlock. /dev/infiniband/* is 0666, as rdma-core's udev rules make it.

fault injection inside the guests (root):
  vmtest-fault cut N | restore N   pull / replug the cable of member N (ethN,
                                   N = 0 or 1; 0-3 in rails) on both ends (QMP set_link on
                                   both guests; the guests see carrier loss)
  vmtest-fault addr-change [A/P]   replace bond0's IPv4 address (default
                                   198.18.0.(100+N)/24): rewrites the GID table
  vmtest-fault addr-del | addr-restore   remove / restore bond0's address
  vmtest-fault vlan-down | vlan-up       take bond0.3027 down / up
  vmtest-fault status              members' carrier, active member, addresses
  addr-*/vlan-* act on the guest they run in (`ssh node2 vmtest-fault ...`).

another guest root (--root DIR):
  a root directory such as `contrib/debian13-root --guest build` makes
  (Debian 13: kernel 6.12, rdma-core 56, Open MPI 5.0.7). The guests boot the
  newest DIR/boot/vmlinuz-* whose DIR/lib/modules has rdma_rxe (--kernel picks
  another), with an initramfs made from DIR's modules (cached apart from the
  host's), and see DIR, not the host's /, read-only under the tmpfs overlay.
  DIR must hold what the guests run: python3, bash, iproute2, rdma-core and
  ibverbs-utils, openssh-server and -client, iputils-ping, kmod, procps.
  The source tree this tool belongs to ({SOURCE_TREE}) and every --bind DIR2
  are extra read-only 9p shares the agent mounts at the same paths, each
  under a tmpfs overlay of its own; so a tree built inside DIR (e.g.
  contrib/test-ompi5.sh's _build-test-ompi5) runs in the guests. The current
  directory must be under one of them. Host paths not shared this way (the
  host's /tmp, /usr) are the root's, not the host's.

results directory (--results DIR, else a temporary one that is removed):
  command.log (COMMAND's output), faults.log, run.json (stage times, status),
  out/ (VMTEST_RESULTS), nodeN/console.log (serial console), nodeN/qemu.log,
  nodeN/setup.log, and after the command nodeN/{{dmesg,ip,bonding,rdma,gids,
  ibv_devinfo,ps}}.txt. On a boot failure the console tails are printed.

exit status:
  COMMAND's status; 124 when --cmd-timeout expired (COMMAND got SIGTERM, then
  SIGKILL); 125 when the tool failed (missing packages, boot failure or
  timeout, cleanup incomplete); 128+N when interrupted by signal N (130 for
  Ctrl-C). Whatever happens, QEMU processes, the network namespace, sockets
  and the run directory are removed before exit.

examples:
  contrib/vmtest/run two -- ibv_devinfo -d rxe_bond0
  contrib/vmtest/run two --bond-mode 802.3ad --results /tmp/r -- sh -c 'cat /proc/net/bonding/bond0'
  contrib/vmtest/run one --user -- tests/vm/guest/one-user.sh
  contrib/vmtest/run two --keep -- true      # then ssh in (printed), Ctrl-C to stop
  contrib/vmtest/run two --root "$(contrib/debian13-root --guest path)" -- \
      sh -c 'uname -r; ompi_info --version'
"""


def parse(argv):
    if "--" in argv:
        i = argv.index("--")
        opts_argv, command = argv[:i], argv[i + 1:]
    else:
        opts_argv, command = argv, []
    p = argparse.ArgumentParser(
        prog="contrib/vmtest/run",
        usage="%(prog)s TOPOLOGY [options] -- COMMAND [ARGS...]",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topology", metavar="TOPOLOGY", choices=sorted(TOPOLOGIES),
                   help="one | two | rails (see below)")
    p.add_argument("--user", action="store_true",
                   help=f"run COMMAND as the unprivileged user {GUEST_USER} (ulimit -l unlimited)")
    p.add_argument("--default-memlock", action="store_true",
                   help="keep the kernel's default ulimit -l (8192 KiB) instead of unlimited")
    p.add_argument("--bond-mode", choices=BOND_MODES, default="active-backup",
                   help="bond mode (default active-backup; miimon 100; 802.3ad: lacp_rate fast)")
    p.add_argument("--results", metavar="DIR",
                   help="keep console logs and guest state here (mounted writable in the guests)")
    p.add_argument("--boot-timeout", type=float, default=300, metavar="S",
                   help="seconds until every guest finished setup (default 300)")
    p.add_argument("--cmd-timeout", type=float, default=1800, metavar="S",
                   help="seconds COMMAND may run (default 1800); then 124")
    p.add_argument("--collect-timeout", type=float, default=60, metavar="S",
                   help="seconds to save guest state after COMMAND (default 60)")
    p.add_argument("--keep", action="store_true",
                   help="after COMMAND, keep the guests up (ssh commands are printed) until "
                        "Ctrl-C/SIGTERM; still exits with COMMAND's status")
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="set NAME in COMMAND's environment (without =VALUE: the host's value)")
    p.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                   help="auto (default) tries KVM and falls back to TCG with a line saying so")
    p.add_argument("--memory", type=int, default=2048, metavar="MIB",
                   help="guest RAM in MiB (default 2048)")
    p.add_argument("--kernel", metavar="RELEASE",
                   help="guest kernel release (default: newest /boot/vmlinuz-* with rdma_rxe, "
                        "under --root DIR when given)")
    p.add_argument("--root", metavar="DIR",
                   help="boot DIR's kernel and give the guests DIR as their root instead of the "
                        "host's / (see 'another guest root' below)")
    p.add_argument("--bind", action="append", default=[], metavar="DIR2",
                   help="with --root: also show host directory DIR2 at the same path in the "
                        "guests (read-only, overlay); repeatable")
    p.add_argument("--cache-dir", default=os.environ.get("VMTEST_CACHE_DIR", DEFAULT_CACHE),
                   metavar="DIR", help=f"initramfs cache (default $VMTEST_CACHE_DIR or {DEFAULT_CACHE})")
    p.add_argument("--no-install", action="store_true",
                   help="never run apt-get; only say what is missing")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    opts = p.parse_args(opts_argv)
    if not command:
        p.error("missing -- COMMAND [ARGS...]")
    if opts.default_memlock and not opts.user:
        # Root bypasses the limit (CAP_IPC_LOCK), so the option only means something for --user.
        p.error("--default-memlock only applies with --user")
    for t in ("boot_timeout", "cmd_timeout", "collect_timeout"):
        if getattr(opts, t) <= 0:
            p.error(f"--{t.replace('_', '-')} must be positive")
    if opts.root is not None:
        opts.root = os.path.realpath(opts.root)
        if opts.root == "/":
            opts.root = None  # the host's own root: the default
        elif not os.path.isdir(opts.root):
            p.error(f"--root {opts.root}: not a directory")
    if opts.bind and not opts.root:
        p.error("--bind only applies with --root DIR (with the host's / the guests see it whole)")
    opts.binds = []
    if opts.root:
        for d in [SOURCE_TREE] + opts.bind:
            d = os.path.realpath(d)
            if not os.path.isdir(d):
                p.error(f"--bind {d}: not a directory")
            if d == "/" or any(d == x or d.startswith(x + "/")
                               for x in ("/proc", "/sys", "/dev", "/run")):
                p.error(f"--bind {d}: the guests' own {d.split('/')[1] or '/'} cannot be replaced")
            if d not in opts.binds:
                opts.binds.append(d)
        # Parents first: a share inside another is mounted on top of it.
        opts.binds.sort(key=lambda d: (d.count("/"), d))
    opts.command = command
    return opts


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    util.quiet = opts.quiet
    if os.geteuid() != 0:
        print("vmtest: must run as root (network namespace, taps, /boot/vmlinuz, 9p export of /)",
              file=sys.stderr)
        return EXIT_TOOL
    install_signal_handlers()
    run = Run(opts)
    status = EXIT_TOOL
    try:
        deps.ensure(install=not opts.no_install, root=opts.root or "/")
        status = run.execute()
    except Interrupted as e:
        log(f"interrupted by {e}; cleaning up")
        status = 128 + e.signum
    except ToolError as e:
        print(f"vmtest: ERROR: {e}", file=sys.stderr, flush=True)
    except OSError as e:
        # A socket or file the tool relies on failed in a way not foreseen
        # above: one line with the cause, not a traceback.
        print(f"vmtest: ERROR: {e.__class__.__name__}: {e}", file=sys.stderr, flush=True)
    except Exception:
        traceback.print_exc()
    finally:
        # A second Ctrl-C must not abandon the cleanup half-way.
        ignore_signals()
        clean = run.cleanup()
    if not clean and status == 0:
        status = EXIT_TOOL
    return status
