"""Does a target fit this host? Answered before anything is built.

The host facts come from ``probe`` and the driver rules from ``drivers``,
the same knowledge ``install-cmd`` uses; when a target does not fit, the
error names the target that would.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from kitbench.advice import vendors, wheels
from kitbench.environments import targets
from kitbench.environments.targets import Target
from kitbench.errors import PreflightError
from kitbench.machine import drivers
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe, no_driver_reason
from kitbench.machine.versions import version_tuple

GPUS_VARIABLE = "KITBENCH_GPUS"
CONDA_TOOLS = ("micromamba", "mamba", "conda")


def gpus_requested() -> bool:
    """``KITBENCH_GPUS=none`` builds and runs any accelerator target (image or venv, NVIDIA, AMD
    or Intel) without its GPU, on the CPU (CI); the default asks for all GPUs."""
    return os.environ.get(GPUS_VARIABLE, "all").lower() != "none"


def host_reasons(target: Target, machine: Probe, which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """Why ``target`` cannot run on ``machine`` (empty when it can); no daemon is asked."""
    reasons = []
    hosts = [h for h in target.hosts if h.os == machine.os]
    if not hosts:
        made_for = ", ".join(sorted({h.os for h in target.hosts}))
        return [f"it is made for {made_for}, this host runs {machine.os}"]
    if not any(machine.arch in h.arch for h in hosts):
        return [
            f"it is made for {'/'.join(a for h in hosts for a in h.arch)} on {machine.os}, this host is {machine.arch}"
        ]
    if target.kind in ("venv", "conda") and machine.python_arch != machine.arch:
        reasons.append(
            f"this Python is {machine.python_arch} on an {machine.arch} machine"
            + (" (Rosetta)" if machine.rosetta else "")
            + f": use an {machine.arch} Python"
        )
    for host in hosts:
        if host.min_os_version and version_tuple(machine.os_version) < version_tuple(host.min_os_version):
            reasons.append(f"it needs {machine.os} >= {host.min_os_version}, this host has {machine.os_version}")
    if target.kind in ("venv", "conda"):
        # These install PyPI's wheels on the host: its macOS or glibc must meet their floors (envs/wheels.yaml).
        why = wheels.refusal(target.torch.partition("+")[0], wheels.host_of(machine, python=target.python))
        if why:
            reasons.append(why)
    if target.kind == "conda" and not any(which(tool) for tool in CONDA_TOOLS):
        reasons.append(f"none of {', '.join(CONDA_TOOLS)} is installed")
    if not gpus_requested():
        # KITBENCH_GPUS=none: the environment is built and run without its GPU, so only what
        # decides whether it can be built at all (OS, chip, Python, wheels, conda) is asked.
        return reasons
    if target.cuda:
        need = drivers.load().requirement(target.cuda, machine.os)
        if machine.driver is None:
            reasons.append(
                no_driver_reason(container=machine.container, wsl=machine.wsl)
                + f" (CUDA {target.cuda} needs >= {need.floor})"
            )
        elif need.floor and not need.allows(machine.driver):
            reasons.append(
                f"NVIDIA driver {machine.driver} is older than {need.floor}, the floor for CUDA {target.cuda}"
            )
    reasons.extend(_vendor_reasons(target, machine))
    return reasons


def _vendor_reasons(target: Target, machine: Probe) -> list[str]:
    """An AMD or Intel target on a host without such a GPU, or one its build has no kernels for."""
    if build(target.compute).kind == "rocm":
        if not machine.amd_gpus:
            return ["no AMD GPU found (KFD topology, DRM devices; UV_AMD_GPU_ARCHITECTURE names one)"]
        # An integrated GPU beside a discrete one does not decide (as in install-cmd's choice).
        missing, left = vendors.load().rocm_missing(machine.amd_gpus, target.compute)
        if missing:
            aside = "".join(
                f" ({g.gfx}, HIP device {g.index}, an integrated GPU it has no kernels for either, was "
                "left out: it does not decide)"
                for g in left
            )
            return [f"its {target.compute} build has no kernels for {', '.join(missing)}{aside}"]
    if build(target.compute).kind == "xpu" and not machine.intel_gpus:
        return ["no Intel GPU found (PCI vendor 0x8086, display class)"]
    return []


def alternative(machine: Probe, exclude: str) -> str | None:
    """The best other target that fits this host: an accelerated one before plain CPU."""
    candidates = [t for t in targets.load_all().values() if t.name != exclude and not host_reasons(t, machine)]
    # Accelerated targets first, the newest CUDA among them first.
    candidates.sort(key=lambda t: (t.compute == "cpu", tuple(-n for n in version_tuple(t.cuda or "0"))))
    return candidates[0].name if candidates else None


def notes(target: Target, machine: Probe) -> list[str]:
    """What a target that fits is told all the same: an integrated AMD GPU its ROCm build has no kernels
    for, left out of the decision, is still a HIP device that PyTorch would use unless hidden."""
    if build(target.compute).kind != "rocm" or not gpus_requested():
        return []
    facts = vendors.load()
    left = facts.rocm_missing(machine.amd_gpus, target.compute)[1]
    return [facts.hidden_note(machine.amd_gpus, left, target.compute)] if left else []


def check(target: Target, machine: Probe) -> list[str]:
    """Raise ``PreflightError`` where ``target`` cannot run here; else its notes (``notes``)."""
    reasons = host_reasons(target, machine)
    if reasons:
        raise PreflightError(target.name, "; ".join(reasons), alternative(machine, target.name))
    return notes(target, machine)
