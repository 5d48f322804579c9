"""Devices: which one to use, why an accelerator is not usable, and the
synchronization every clock read goes through.

The reasons are pure functions over facts (testable on any machine); only
the ``*_facts`` readers and ``synchronize`` touch torch, which is imported
lazily so that this module stays importable on a torch-free Python.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kitbench import drivers
from kitbench.errors import DeviceUnavailableError, UsageError
from kitbench.probe import Probe, no_driver_reason
from kitbench.versions import version_tuple

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


@dataclass(frozen=True)
class CudaFacts:
    torch_version: str
    built_cuda: str | None        # torch.version.cuda
    built_hip: str | None         # torch.version.hip
    visible_devices: str | None   # CUDA_VISIBLE_DEVICES as set, None if unset
    driver: str | None
    os: str
    in_container: bool
    wsl: bool
    available: bool
    device_count: int
    init_warning: str | None      # what torch warned while probing CUDA


@dataclass(frozen=True)
class MpsFacts:
    os: str
    os_version: str
    arch: str
    python_arch: str
    built: bool
    available: bool


def cuda_unavailable_reason(f: CudaFacts) -> str | None:
    """One line saying why CUDA cannot be used, or None when it can."""
    if f.available and f.device_count > 0:
        return None
    if f.built_cuda is None and f.built_hip is None:
        return f"this torch is a CPU-only build ({f.torch_version}): it was not compiled with CUDA"
    if f.visible_devices is not None and f.visible_devices.strip() in ("", "-1", "none", "NoDevFiles"):
        return f"GPUs are hidden by CUDA_VISIBLE_DEVICES={f.visible_devices!r}"
    if f.built_cuda is not None and f.driver is None:
        return no_driver_reason(container=f.in_container, wsl=f.wsl)
    if f.built_cuda is not None and f.driver is not None:
        need = drivers.load().requirement(f.built_cuda, f.os)
        if need.floor is not None and not need.allows(f.driver):
            return (f"NVIDIA driver {f.driver} is too old for this wheel's CUDA {f.built_cuda} "
                    f"(needs >= {need.floor})")
    if f.init_warning:
        return f"CUDA initialization failed: {f.init_warning.splitlines()[0]}"
    return "torch.cuda.is_available() is False and no device was found"


def mps_unavailable_reason(f: MpsFacts) -> str | None:
    if f.available:
        return None
    if f.os != "macos":
        return f"MPS exists only on macOS (this is {f.os})"
    if f.arch == "arm64" and f.python_arch == "x86_64":
        return "x86_64 Python under Rosetta on Apple Silicon: MPS needs an arm64 Python"
    if f.arch != "arm64":
        return "MPS needs Apple Silicon (or an AMD GPU Mac); this Mac is Intel without a supported GPU"
    if version_tuple(f.os_version) < (12, 3):
        return f"macOS {f.os_version} is older than 12.3, the first with MPS"
    if not f.built:
        return "this torch was built without MPS"
    return "torch.backends.mps.is_available() is False"


def cuda_facts(machine: Probe) -> CudaFacts:
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    warning = next((str(w.message) for w in caught), None)
    return CudaFacts(torch_version=torch.__version__, built_cuda=torch.version.cuda,
                     built_hip=getattr(torch.version, "hip", None),
                     visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), driver=machine.driver,
                     os=machine.os, in_container=machine.container, wsl=machine.wsl, available=available,
                     device_count=count, init_warning=warning)


def mps_facts(machine: Probe) -> MpsFacts:
    import torch

    return MpsFacts(os=machine.os, os_version=machine.os_version, arch=machine.arch,
                    python_arch=machine.python_arch, built=torch.backends.mps.is_built(),
                    available=torch.backends.mps.is_available())


def parse_spec(spec: str) -> tuple[str, int | None]:
    """Check ``--device`` syntax without touching torch: ``cuda:1`` -> ("cuda", 1)."""
    kind, _, index = spec.partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps") or (index and kind != "cuda"):
        raise UsageError(f"unknown device {spec!r}", hint=f"choose one of: {', '.join(DEVICE_CHOICES)}")
    if index and not index.isdigit():
        raise UsageError(f"bad device {spec!r}", hint="use cuda or cuda:N with N a number")
    return kind, int(index) if index else None


def resolve(spec: str, machine: Probe) -> torch.device:
    """Turn ``--device`` into a usable device, or say in one line why not."""
    import torch

    kind, index = parse_spec(spec)
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "auto":
        if cuda_unavailable_reason(cuda_facts(machine)) is None:
            return torch.device("cuda", 0)
        if mps_unavailable_reason(mps_facts(machine)) is None:
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "mps":
        reason = mps_unavailable_reason(mps_facts(machine))
        if reason:
            raise DeviceUnavailableError(spec, reason, hint="use --device cpu, or see `kitbench install-cmd`")
        return torch.device("mps")
    facts = cuda_facts(machine)
    reason = cuda_unavailable_reason(facts)
    if reason:
        raise DeviceUnavailableError(spec, reason, hint="use --device cpu, or see `kitbench install-cmd`")
    if (index or 0) >= facts.device_count:
        raise DeviceUnavailableError(spec, f"only {facts.device_count} CUDA device(s) are visible")
    return torch.device("cuda", index or 0)


def cudnn_version() -> int | None:
    import torch

    if torch.version.cuda is None:
        return None
    version: int | None = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    return version


def is_accelerator(device: torch.device) -> bool:
    return device.type != "cpu"


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device``: the only way to read a clock honestly."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def pinning_supported(device: torch.device) -> bool:
    """Pinned host memory only helps (and only exists for copies) towards CUDA."""
    return device.type == "cuda"

