"""What the matrix runs: transports per place, benchmarks per place and mode.

Pure data; no I/O. Every transport is a set of mpirun arguments plus
environment (forwarded to all ranks with -x), so the exact command of every
row can be printed in docs/perf.md.
"""

from dataclasses import dataclass, field

SYS_COMPONENTS = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
PLACES = ("host", "one", "two")
PLACE_NAMES = {"host": "host (shared memory)", "one": "one guest (rxe loopback)",
               "two": "two guests (rxe over the bond)"}


@dataclass
class Transport:
    key: str  # stable id used in CSV and ratios
    label: str
    args: list = field(default_factory=list)  # mpirun arguments (raw: ibv_rc_pingpong's)
    env: dict = field(default_factory=dict)  # forwarded with -x
    kind: str = "mpi"  # "mpi" or "raw" (ibv_rc_pingpong)
    note: str = ""


@dataclass
class Bench:
    name: str  # id in logs
    argv: list  # program (relative to the build tree) and arguments
    env: dict = field(default_factory=dict)
    timeout: int = 600


def ucx_variants(place, gid, explore=False):
    """UCX settings to try for pml ucx, in order; the first that passes the
    probe is used and every attempt is recorded (docs/perf.md)."""
    # Open MPI 4.1.4 selects pml ucx only on mlx* devices with its default
    # pml_ucx_tls/pml_ucx_devices lists; "any" lets it run on shm, rxe and tcp.
    anyargs = ["--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any"]
    if place == "host":
        return [("shared memory", {"UCX_TLS": "sm,self"}, anyargs)]
    # Found on 6.1 rxe + UCX 1.13.1 (docs/perf.md, "pml ucx on rxe"): with the
    # IPv4-mapped RoCE v2 GID (index 1, what our btl and ibv_rc_pingpong use) UCX's
    # UD wire-up aborts with "UD endpoint ... unhandled timeout error"; with the
    # bond's IPv6 link-local RoCE v2 GID (index 0) it works. rc_verbs alone has no
    # wire-up transport ("no auxiliary transport"), so ud_verbs must stay in.
    verbs = {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_NET_DEVICES": "rxe_bond0:1",
             "UCX_IB_GID_INDEX": "0"}
    tcp = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "bond0"}
    out = [("verbs (rc_verbs,ud_verbs) on GID 0, link-local", verbs, anyargs)]
    if explore:
        out.append(("verbs on the IPv4 GID %s" % gid, dict(verbs, UCX_IB_GID_INDEX=str(gid)),
                    anyargs))
    return out + [("tcp over bond0 (not RDMA)", tcp, anyargs)]


def transports(place, comp_dir):
    """The rows of one place. pml ucx gets its env from the probe."""
    path = ["--mca", "mca_base_component_path", f"{SYS_COMPONENTS}:{comp_dir}"]
    if place == "host":
        return [
            Transport("roce", "pml roce (self,vader)",
                      path + ["--mca", "pml", "roce", "--mca", "btl", "self,vader"]),
            Transport("ob1", "pml ob1 (self,vader)",
                      path + ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"]),
            Transport("ucx", "pml ucx", path + ["--mca", "pml", "ucx"]),
        ]
    # one guest: both ranks on node1; btl vader is left out so that pml roce and
    # ob1+roce go through rxe (loopback), which is what the place is for.
    netbtl = "self,roce" if place == "one" else "self,vader,roce"
    tcpbtl = "self,tcp"
    return [
        Transport("roce", f"pml roce ({netbtl})",
                  path + ["--mca", "pml", "roce", "--mca", "btl", netbtl]),
        Transport("ob1-roce", f"pml ob1 + btl roce ({netbtl})",
                  path + ["--mca", "pml", "ob1", "--mca", "btl", netbtl]),
        Transport("ob1-tcp", "pml ob1 + btl tcp (bond0)",
                  path + ["--mca", "pml", "ob1", "--mca", "btl", tcpbtl,
                          "--mca", "btl_tcp_if_include", "bond0"]),
        Transport("ucx", "pml ucx", path + ["--mca", "pml", "ucx"]),
        Transport("raw-rc", "ibv_rc_pingpong (raw RC verbs, -e)", ["-e"], kind="raw"),
        # The same without -e: it polls the CQ like an MPI stack does, instead
        # of sleeping on a completion channel (docs/perf/misses.md).
        Transport("raw-rc-spin", "ibv_rc_pingpong (raw RC verbs, polling)", [], kind="raw"),
    ] + (tuning_variants(path, netbtl) if place == "two" else [])


# Eager up to 64 KiB: the btl's fragments must hold 64 KiB + the pml's
# 16-byte MATCH header, so 65 KiB; 128 receive and 64 send buffers of
# 66,624 B are 12.2 MiB of registered memory per port (the defaults: 768 of
# 8,256 B, 6.0 MiB).
EAGER_64K = ["--mca", "btl_roce_max_send_size", "66560", "--mca", "btl_roce_eager_limit", "66560",
             "--mca", "btl_roce_rndv_eager_limit", "66560", "--mca", "pml_roce_eager_limit",
             "66560", "--mca", "btl_roce_srq_size", "128", "--mca", "btl_roce_send_frags", "64"]


def tuning_variants(path, netbtl):
    """pml roce with one setting changed, so that the defaults are chosen from
    figures of the same run (the headline of docs/perf.md, docs/perf/misses.md):
    the RDMA chunk size at 1 MiB (against the 256 KiB default before
    2026-12-03), and eager instead of the streamed rendezvous at 64 KiB."""
    base = path + ["--mca", "pml", "roce", "--mca", "btl", netbtl]
    return [
        Transport("roce-chunk256k", "pml roce, btl_roce_rdma_chunk 256 KiB",
                  base + ["--mca", "btl_roce_rdma_chunk", "262144"]),
        Transport("roce-eager64k", "pml roce, eager up to 64 KiB", base + EAGER_64K),
    ]


def benches(place, quick):
    """Benchmarks of one place; the argv is relative to the build tree."""
    if place == "host":
        # Sizes are a list (not the full sweep). Scale 0.5: a few seconds per
        # run; at 0.05 (until 2026-12-03) a run lasted well under a second and
        # figures spread by 30-70% between repetitions on a quiet host.
        scale = "0.02" if quick else "0.5"
        common = {"ROCE_TEST_SCALE": scale, "ROCE_BENCH_REPS": "1" if quick else "3"}
        return [
            Bench("latency", ["tests/bench/latency"],
                  dict(common, ROCE_BENCH_SIZES="0,8,1K,64K,1M")),
            Bench("bandwidth", ["tests/bench/bandwidth"],
                  dict(common, ROCE_BENCH_SIZES="8,64K,1M")),
            Bench("msgrate", ["tests/bench/msgrate", "8"], dict(common)),
            Bench("matching", ["tests/bench/matching"] + (["100", "10000"] if quick else
                                                          ["100", "1000", "10000"]),
                  dict(common, ROCE_BENCH_REPS="1")),
            Bench("pingpong", ["tests/mpi/mpi-pingpong", "--csv", "--min", "8", "--max",
                               "64K" if quick else "1M"], dict(common)),
        ]
    # guests (TCG, ~100x slower, 1 vCPU each): latency and bandwidth in one job
    # (tests/bench/pair), only what the ratios need. Scale 0.05: 1,000 / 200 round
    # trips at 8 B / 64 KiB, 10 MB / 20 MB per bandwidth figure, each the median
    # of 3 inside the job (about 25 s per run); at 0.002 single figures
    # spread by 50-90% between repetitions (2026-12-03).
    return [Bench("pair", ["tests/bench/pair"],
                  {"ROCE_TEST_SCALE": "0.01" if quick else "0.05",
                   "ROCE_BENCH_REPS": "1" if quick else "3",
                   "ROCE_BENCH_SIZES": "8" if quick else "8,64K",
                   "ROCE_BENCH_BW_SIZES": "1M" if quick else "64K,1M",
                   "ROCE_BENCH_WINDOW": "4", "ROCE_TEST_MAX_BYTES": "1M"}, 400)]


def raw_sizes(quick):
    """(size, round trips) for ibv_rc_pingpong in the guests."""
    return [(8, 50)] if quick else [(8, 100), (1048576, 5)]


# The figures the ratio tables are built from:
# key -> (benchmark, size, metric, higher_is_better, label)
FIGURES = {
    "lat0": ("latency", 0, "usec", False, "latency 0 B (us)"),
    "lat8": ("latency", 8, "usec", False, "latency 8 B (us)"),
    "lat1k": ("latency", 1024, "usec", False, "latency 1 KiB (us)"),
    "lat64k": ("latency", 65536, "usec", False, "latency 64 KiB (us)"),
    "lat1m": ("latency", 1048576, "usec", False, "latency 1 MiB (us)"),
    "rtt8": ("rtt", 8, "usec", False, "round trip 8 B (us)"),
    "bw64k": ("bw_uni", 65536, "MB/s", True, "bandwidth 64 KiB (MB/s)"),
    "bw1m": ("bw_uni", 1048576, "MB/s", True, "bandwidth 1 MiB (MB/s)"),
    "bwbi1m": ("bw_bi", 1048576, "MB/s", True, "bidir bandwidth 1 MiB (MB/s)"),
    "rc1m": ("rc_pingpong_bw", 1048576, "MB/s", True, "ping-pong bandwidth 1 MiB (MB/s)"),
    "msg8": ("msgrate", 8, "msg/s", True, "message rate 8 B (msg/s)"),
    "match100": ("match_posted", 100, "usec/msg", False, "match, 100 posted (us/msg)"),
    "match1k": ("match_posted", 1000, "usec/msg", False, "match, 1,000 posted (us/msg)"),
    "match10k": ("match_posted", 10000, "usec/msg", False, "match, 10,000 posted (us/msg)"),
    "matchany10k": ("match_posted_any", 10000, "usec/msg", False,
                    "match, 10,000 posted ANY_SOURCE (us/msg)"),
    "matchunex10k": ("match_unexpected", 10000, "usec/msg", False,
                     "match, 10,000 unexpected (us/msg)"),
    "ppsync8": ("pingpong-sync", 8, "usec", False, "mpi-pingpong sync 8 B (us)"),
    "ppasync8": ("pingpong-async", 8, "usec", False, "mpi-pingpong async 8 B (us)"),
    "ppbidir8": ("pingpong-bidir", 8, "usec", False, "mpi-pingpong bidir 8 B (us)"),
    "ppsync1m": ("pingpong-sync", 1048576, "MB/s", True, "mpi-pingpong sync 1 MiB (MB/s)"),
    "cg": ("callgrind_self", 8, "instr/pair", False,
           "instructions per 8 B Irecv+Send+Wait to self (receive posted first)"),
    "instr": ("instr_self", 8, "instr/msg", False,
              "instructions per 8 B Isend+Recv+Wait to self (issue 18's loop)"),
    "btlsend": ("ratio_btl_send_over_floor", 24, "ratio", False,
                "btl over FakeVerbs: instructions per eager send / bare verbs floor"),
    "btlrecv": ("ratio_btl_send_recv_over_floor", 24, "ratio", False,
                "btl over FakeVerbs: instructions per receive completion / bare verbs floor"),
}
