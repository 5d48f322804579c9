"""The CPU this process runs on: who made it, which one, and how many of its cores it may use.

No torch here (the fingerprint's host part is written before torch is imported). The
usable core count is what the scheduler lets this process have: its affinity mask
(``taskset``, Slurm's and a container's cpuset) and its cgroup's CPU bandwidth quota
(``docker --cpus``, Kubernetes limits), whichever is smaller. ``os.cpu_count()``
counts the machine's cores, which on a shared node or in a container can be many
times more, and sizing thread pools by it oversubscribes the cores there are.

Every reader takes ``root`` (``/`` on a live system) so that tests read recorded files.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kitbench import _proc
from kitbench._files import read_small
from kitbench._numbers import is_whole

_CGROUP = Path("sys/fs/cgroup")


@dataclass(frozen=True)
class Cores:
    usable: int  # min(affinity, cgroup quota rounded up); at least 1
    online: int | None  # os.cpu_count(): the machine's, whatever this process may use
    affinity: int | None  # CPUs in this process's affinity mask; None where the OS has no such call
    cgroup_cpus: float | None  # the CPU bandwidth quota in CPUs (quota / period); None when unlimited


def _own_cgroups(root: Path) -> dict[str, str]:
    """{controller or "" (v2): this process's cgroup path} from /proc/self/cgroup."""
    found: dict[str, str] = {}
    for line in (read_small(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                found[controller] = parts[2].strip()
    return found


def _ancestors(base: Path, path: str) -> list[Path]:
    """The cgroup's directory and every parent up to the mount; inside a container the cgroup
    is often the mount itself, so the mount is always among them."""
    parts = [p for p in path.strip("/").split("/") if p]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _quota_v2(root: Path, path: str) -> float | None:
    limits = []
    for folder in _ancestors(root / _CGROUP, path):
        text = read_small(folder / "cpu.max")
        if text is None:
            continue
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and is_whole(period) and int(period) > 0 and is_whole(quota):
            limits.append(int(quota) / int(period))
    return min(limits) if limits else None


def _quota_v1(root: Path, path: str) -> float | None:
    limits = []
    for mount in ("cpu,cpuacct", "cpu", "cpuacct,cpu"):
        for folder in _ancestors(root / _CGROUP / mount, path):
            quota, period = read_small(folder / "cpu.cfs_quota_us"), read_small(folder / "cpu.cfs_period_us")
            if quota is None or period is None:
                continue
            q, p = int(quota.strip() or -1), int(period.strip() or 0)
            if q > 0 and p > 0:
                limits.append(q / p)
    return min(limits) if limits else None


def cgroup_cpus(root: Path = Path("/")) -> float | None:
    """The CPU quota of this process's cgroup (v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``), the tightest along its ancestors; None when there is none."""
    own = _own_cgroups(root)
    if "" in own:
        found = _quota_v2(root, own[""])
        if found is not None:
            return found
    path = own.get("cpu")
    return _quota_v1(root, path) if path is not None else None


def cores(root: Path = Path("/"), affinity: set[int] | None = None) -> Cores:
    """How many cores this process may use; ``affinity`` stands in for the live mask in tests."""
    if affinity is None and hasattr(os, "sched_getaffinity"):
        affinity = os.sched_getaffinity(0)
    count = len(affinity) if affinity is not None else None
    quota = cgroup_cpus(root)
    online = os.cpu_count()
    usable = count or online or 1
    if quota is not None:
        # A quota of 1.5 CPUs still runs two threads at a time, each throttled: round up.
        usable = min(usable, max(1, math.ceil(quota)))
    return Cores(usable, online, count, quota)


def usable_cores() -> int:
    """The cores this process may use: what to size thread pools and process counts by."""
    return cores().usable


def memory_available(root: Path = Path("/")) -> int | None:
    """Bytes this process could still allocate: the kernel's MemAvailable, or less where its
    cgroup (v2 ``memory.max``, a container's or a Slurm job's limit) leaves less; None unknown."""
    found = [
        int(line.split()[1]) * 1024
        for line in (read_small(root / "proc/meminfo") or "").splitlines()
        if line.startswith("MemAvailable:") and is_whole(line.split()[1])
    ]
    own = _own_cgroups(root)
    # (v2 hierarchy, v1 memory controller): the limit and what is charged against it, where
    # "max" (v2) or 2**63 rounded to a page (v1) means no limit.
    for base, path, names in (
        (root / _CGROUP, own.get(""), ("memory.max", "memory.current")),
        (root / _CGROUP / "memory", own.get("memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")),
    ):
        for folder in _ancestors(base, path) if path is not None else []:
            limit, used = (read_small(folder / name) for name in names)
            if limit and used and is_whole(limit.strip()) and is_whole(used.strip()) and int(limit) < 2**62:
                found.append(max(0, int(limit) - int(used)))
    return min(found) if found else None


def _cpuinfo(root: Path) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Arm kernels print the implementer and
    part per core; x86 the vendor, family, model and stepping)."""
    fields: dict[str, str] = {}
    for line in (read_small(root / "proc/cpuinfo") or "").splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key not in fields:
            fields[key] = value.strip()
    return fields


def _lscpu() -> dict[str, str]:
    """lscpu's names for the Arm implementer and part codes (its own table: "ARM", "Neoverse-N1")."""
    if shutil.which("lscpu") is None:
        return {}
    try:
        done = _proc.run(["lscpu"], 5, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    text = done.stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


def _sysctl(name: str) -> str | None:
    try:
        done = _proc.run(["sysctl", "-n", name], 5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def identity(root: Path = Path("/"), lscpu: dict[str, str] | None = None) -> dict[str, Any]:
    """Which CPU: vendor and model name, x86's family/model/stepping, Arm's implementer and part
    codes (the model name reads "aarch64" or nothing on most Arm servers: the codes tell a
    Neoverse-N1 from a V2), and the cores this process may use."""
    info = _cpuinfo(root)
    implementer, part = info.get("CPU implementer"), info.get("CPU part")
    if implementer is not None and lscpu is None:
        lscpu = _lscpu()
    named = lscpu or {}
    vendor = info.get("vendor_id") or named.get("Vendor ID")
    model = info.get("model name") or named.get("Model name")
    if not info and platform.system() == "Darwin":
        model = _sysctl("machdep.cpu.brand_string")
        vendor = "Apple" if model and model.startswith("Apple") else vendor
    found: dict[str, Any] = {
        "vendor": vendor,
        "model": model or platform.processor() or platform.machine() or None,
        "family": info.get("cpu family"),
        "model_number": info.get("model"),
        "stepping": info.get("stepping"),
        "implementer": implementer,
        "part": part,
        "variant": info.get("CPU variant"),
        "revision": info.get("CPU revision"),
    }
    found = {k: v for k, v in found.items() if v is not None}
    found.update({f"cores_{k}": v for k, v in asdict(cores(root)).items()})
    return found
