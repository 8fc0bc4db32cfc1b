"""The environment a result came from (host, or a guest): CPU, kernel, versions."""

import os
import re
import subprocess


def _sh(cmd):
    try:
        return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True,
                               timeout=60).stdout.strip()
    except Exception:  # noqa: BLE001 - environment capture is best effort
        return ""


def collect(src=None):
    cpu = _sh("sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1")
    info = {
        "cpu": cpu,
        "cpus": str(os.cpu_count()),
        "kernel": _sh("uname -srvm"),
        "os": _sh(". /etc/os-release && echo \"$PRETTY_NAME\""),
        "loadavg": _sh("cut -d' ' -f1-3 /proc/loadavg"),
        "memory": _sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo"),
        "openmpi": _sh("mpirun --version 2>&1 | head -1"),
        "packages": _sh("dpkg-query -W -f='${Package} ${Version}\\n' libucx0 rdma-core "
                        "ibverbs-providers ibverbs-utils valgrind gnuplot-nox gnuplot-qt "
                        "gnuplot-x11 qemu-system-x86 2>/dev/null"),
        "date": _sh("date -u '+%Y-%m-%d %H:%M:%S UTC'"),
    }
    if os.environ.get("VMTEST"):
        info["guest"] = (f"topology {os.environ.get('VMTEST_TOPOLOGY')}, bond "
                         f"{os.environ.get('VMTEST_BOND_MODE')}, "
                         + _sh("rdma link show 2>/dev/null | head -2 | tr '\\n' ' '"))
        info["accel"] = _sh("grep -m1 -o 'hypervisor' /proc/cpuinfo") and "QEMU guest"
    if src:
        info["git"] = _sh(f"git -C {src} log -1 --format='%h %s' 2>/dev/null")
        info["branch"] = _sh(f"git -C {src} rev-parse --abbrev-ref HEAD 2>/dev/null")
        info["dirty"] = _sh(f"git -C {src} status --porcelain 2>/dev/null | wc -l")
    info["packages"] = re.sub(r"\n+", "; ", info["packages"])
    return info
