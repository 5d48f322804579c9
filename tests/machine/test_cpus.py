"""kitbench.machine.cpus: usable cores from affinity and cgroup quotas, and the CPU's identity, on recorded roots."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kitbench.machine import cpus

CGROUP = Path(__file__).resolve().parent.parent / "resources" / "cgroup"


@pytest.mark.parametrize(
    ("root", "quota", "usable"),
    [
        ("v1-this-vm", None, 2),  # no quota: the affinity mask decides
        ("v1-docker-half", 0.5, 1),  # half a CPU still runs one thread
        ("v2-docker-1.5", 1.5, 2),  # 1.5 CPUs: two threads, each throttled
        ("v2-slurm-nested", 4.0, 4),  # the job's limit, two levels up, binds the unlimited step
        ("v2-unlimited", None, 8),
    ],
)
def test_usable_cores_are_the_smaller_of_affinity_and_quota(root: str, quota: float | None, usable: int) -> None:
    found = cpus.cores(CGROUP / root, affinity=set(range(8 if root != "v1-this-vm" else 2)))
    assert found.cgroup_cpus == quota
    assert found.usable == usable


def test_affinity_alone_bounds_the_count_below_the_machine() -> None:
    found = cpus.cores(CGROUP / "v2-unlimited", affinity={3})
    assert (found.usable, found.affinity, found.online) == (1, 1, os.cpu_count())


def test_a_root_without_cgroup_files_has_no_quota(tmp_path: Path) -> None:
    assert cpus.cgroup_cpus(tmp_path) is None
    assert cpus.cores(tmp_path, affinity={0, 1, 2}).usable == 3


@pytest.mark.parametrize(
    ("root", "available"),
    [
        ("v1-this-vm", 22756232 * 1024),  # no memory limit (2**63 rounded to a page): MemAvailable
        ("v1-docker-1g", 1073741824 - 1540096),  # docker run --memory=1g: the container's limit binds
        ("v2-docker-1.5", None),  # no memory files at all: unknown
    ],
)
def test_available_memory_is_the_smaller_of_the_kernels_and_the_cgroups(root: str, available: int | None) -> None:
    assert cpus.memory_available(CGROUP / root) == available


def _quota_here() -> bool:
    """Whether this process's cgroup limits its CPU time (read apart from kitbench: v2's cpu.max, v1's quota)."""
    for path, unlimited in (("/sys/fs/cgroup/cpu.max", "max"), ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1")):
        with contextlib.suppress(OSError):
            return Path(path).read_text().split()[0] != unlimited
    return False


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks on this OS")
@pytest.mark.parametrize("count", [1, 2])
def test_this_process_uses_its_affinity_not_cpu_count(count: int) -> None:
    """A child pinned to ``count`` of this machine's CPUs counts exactly those."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < count:
        pytest.skip(f"this process may use {len(mine)} CPU(s), fewer than {count}")
    if count > 1 and _quota_here():
        pytest.skip("a cgroup CPU quota here may bind below the affinity mask")
    code = (
        f"import os; os.sched_setaffinity(0, {mine[:count]!r}); from kitbench.machine import cpus; "
        "print(cpus.usable_cores())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.strip() == str(count)


def test_arm_identity_names_implementer_and_part() -> None:
    # lscpu's names for 0x41/0xd0c, as util-linux 2.37 prints them on that machine.
    found = cpus.identity(CGROUP / "arm-neoverse-n1", lscpu={"Vendor ID": "ARM", "Model name": "Neoverse-N1"})
    assert (found["vendor"], found["model"]) == ("ARM", "Neoverse-N1")
    assert (found["implementer"], found["part"], found["variant"], found["revision"]) == ("0x41", "0xd0c", "0x3", "1")
    assert "family" not in found


def test_x86_identity_keeps_family_model_and_stepping() -> None:
    found = cpus.identity(CGROUP / "x86-this-vm")
    # The model name alone ("AMD EPYC") names no generation here; family 25 model 1 is Zen 3.
    assert (found["vendor"], found["model"]) == ("AuthenticAMD", "AMD EPYC")
    assert (found["family"], found["model_number"], found["stepping"]) == ("25", "1", "1")
    assert "implementer" not in found
    assert found["cores_usable"] >= 1


def _fake(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_lscpu_and_sysctl_are_run_bounded_and_a_failure_reads_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lscpu is asked in the C locale (its field names are English there); a program that fails says nothing.
    _fake(tmp_path / "bin", "lscpu", 'echo "Vendor ID: ARM"; echo "Locale: $LC_ALL"; printf "Model name:\\377\\n"\n')
    _fake(tmp_path / "bin", "sysctl", 'echo "  Apple M2  "\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert cpus._lscpu() == {"Vendor ID": "ARM", "Locale": "C", "Model name": "\N{REPLACEMENT CHARACTER}"}
    assert cpus._sysctl("machdep.cpu.brand_string") == "Apple M2"
    _fake(tmp_path / "bin", "lscpu", "echo 'Vendor ID: ARM'; exit 1\n")
    _fake(tmp_path / "bin", "sysctl", "echo 'Apple M2'; exit 1\n")
    assert cpus._lscpu() == {}
    assert cpus._sysctl("machdep.cpu.brand_string") is None
