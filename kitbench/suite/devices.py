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

from kitbench._numbers import is_whole
from kitbench.errors import DeviceUnavailableError, UsageError
from kitbench.machine import drivers
from kitbench.machine.probe import Probe, no_driver_reason
from kitbench.machine.versions import version_tuple

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps", "xpu", "xpu:N")
# Where the ROCm runtime reaches the GPUs: without access to it a HIP build sees none.
KFD_DEVICE = "/dev/kfd"
_HIDDEN = ("", "-1", "none", "NoDevFiles")


@dataclass(frozen=True)
class CudaFacts:
    torch_version: str
    built_cuda: str | None  # torch.version.cuda
    built_hip: str | None  # torch.version.hip
    visible_devices: str | None  # CUDA_VISIBLE_DEVICES as set, None if unset
    driver: str | None
    os: str
    in_container: bool
    wsl: bool
    available: bool
    device_count: int
    init_warning: str | None  # what torch warned while probing CUDA
    # HIP builds only: the ROCm runtime's own masks, and why /dev/kfd cannot be opened (None: it can)
    hip_visible_devices: str | None = None
    rocr_visible_devices: str | None = None
    kfd_problem: str | None = None


@dataclass(frozen=True)
class XpuFacts:
    torch_version: str
    built: bool  # torch.xpu is compiled in (a +xpu build)
    available: bool
    device_count: int
    names: tuple[str, ...]
    intel_gpus: int  # Intel GPUs the probe found on PCI
    affinity_mask: str | None  # ZE_AFFINITY_MASK, Level Zero's device mask


@dataclass(frozen=True)
class MpsFacts:
    os: str
    os_version: str
    arch: str
    python_arch: str
    built: bool
    available: bool
    torch: str = ""  # the installed torch's version, whose MPS floor envs/pytorch.yaml records


def cuda_unavailable_reason(f: CudaFacts) -> str | None:
    """One line saying why CUDA cannot be used, or None when it can."""
    if f.available and f.device_count > 0:
        return None
    if f.built_cuda is None and f.built_hip is None:
        kind = "an XPU (Intel GPU) build" if "+xpu" in f.torch_version else "a CPU-only build"
        return f"this torch is {kind} ({f.torch_version}): it was not compiled with CUDA"
    if f.visible_devices is not None and f.visible_devices.strip() in _HIDDEN:
        return f"GPUs are hidden by CUDA_VISIBLE_DEVICES={f.visible_devices!r}"
    if f.built_hip is not None:
        for name, value in (
            ("HIP_VISIBLE_DEVICES", f.hip_visible_devices),
            ("ROCR_VISIBLE_DEVICES", f.rocr_visible_devices),
        ):
            if value is not None and value.strip() in _HIDDEN:
                return f"GPUs are hidden by {name}={value!r}"
        if f.kfd_problem:
            return f.kfd_problem
    if f.built_cuda is not None and f.driver is None:
        return no_driver_reason(container=f.in_container, wsl=f.wsl)
    if f.built_cuda is not None and f.driver is not None:
        need = drivers.load().requirement(f.built_cuda, f.os)
        if need.floor is not None and not need.allows(f.driver):
            return f"NVIDIA driver {f.driver} is too old for this wheel's CUDA {f.built_cuda} (needs >= {need.floor})"
    if f.init_warning:
        return f"CUDA initialization failed: {f.init_warning.splitlines()[0]}"
    return "torch.cuda.is_available() is False and no device was found"


def xpu_unavailable_reason(f: XpuFacts) -> str | None:
    """One line saying why an Intel GPU cannot be used through torch.xpu, or None when it can."""
    if f.available and f.device_count > 0:
        return None
    if not f.built:
        return f"this torch has no XPU support ({f.torch_version}): Intel GPUs need the xpu build"
    if f.affinity_mask is not None and f.affinity_mask.strip() in _HIDDEN:
        return f"GPUs are hidden by ZE_AFFINITY_MASK={f.affinity_mask!r}"
    if f.intel_gpus == 0:
        return "no Intel GPU found (PCI vendor 0x8086, display class)"
    return (
        "torch.xpu.is_available() is False although an Intel GPU is on PCI: its driver (i915 or xe) "
        "or the Level Zero runtime is missing, or this user cannot open /dev/dri/renderD* (render group)"
    )


def kfd_problem(path: str = KFD_DEVICE) -> str | None:
    """Why the ROCm runtime cannot open ``path``, in the words that point at the fix; None when it can."""
    if not os.path.exists(path):
        return (
            f"{path} is missing: the amdgpu driver is not loaded, or this container was started "
            f"without --device={path} --device=/dev/dri"
        )
    if not os.access(path, os.R_OK | os.W_OK):
        return f"no permission on {path}: add this user to the render and video groups"
    return None


def mps_unavailable_reason(f: MpsFacts) -> str | None:
    if f.available:
        return None
    if f.os != "macos":
        return f"MPS exists only on macOS (this is {f.os})"
    if f.arch == "arm64" and f.python_arch == "x86_64":
        return "x86_64 Python under Rosetta on Apple Silicon: MPS needs an arm64 Python"
    if f.arch != "arm64":
        return "MPS needs Apple Silicon (or an AMD GPU Mac); this Mac is Intel without a supported GPU"
    from kitbench.advice.releases import mps_floor

    floor = mps_floor(f.torch or "0")
    need = floor.macos if floor else "12.3"
    if version_tuple(f.os_version) < version_tuple(need):
        return (
            f"macOS {f.os_version} is older than {need}, the first whose MPS torch {f.torch} runs on"
            if f.torch
            else f"macOS {f.os_version} is older than {need}, the first with MPS"
        )
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
    hip = getattr(torch.version, "hip", None)
    return CudaFacts(
        torch_version=torch.__version__,
        built_cuda=torch.version.cuda,
        built_hip=hip,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        driver=machine.driver,
        os=machine.os,
        in_container=machine.container,
        wsl=machine.wsl,
        available=available,
        device_count=count,
        init_warning=warning,
        hip_visible_devices=os.environ.get("HIP_VISIBLE_DEVICES"),
        rocr_visible_devices=os.environ.get("ROCR_VISIBLE_DEVICES"),
        kfd_problem=kfd_problem() if hip is not None and not available else None,
    )


def xpu_facts(machine: Probe) -> XpuFacts:
    import torch

    built = hasattr(torch, "xpu") and bool(torch.xpu._is_compiled())
    available = built and bool(torch.xpu.is_available())
    count = int(torch.xpu.device_count()) if available else 0
    names = tuple(str(torch.xpu.get_device_name(i)) for i in range(count))
    return XpuFacts(
        torch_version=torch.__version__,
        built=built,
        available=available,
        device_count=count,
        names=names,
        intel_gpus=len(machine.intel_gpus),
        affinity_mask=os.environ.get("ZE_AFFINITY_MASK"),
    )


def mps_facts(machine: Probe) -> MpsFacts:
    import torch

    return MpsFacts(
        os=machine.os,
        os_version=machine.os_version,
        arch=machine.arch,
        python_arch=machine.python_arch,
        built=torch.backends.mps.is_built(),
        available=torch.backends.mps.is_available(),
        torch=torch.__version__,
    )


def parse_spec(spec: str) -> tuple[str, int | None]:
    """Check ``--device`` syntax without touching torch: ``cuda:1`` -> ("cuda", 1)."""
    kind, _, index = spec.partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps", "xpu") or (index and kind not in ("cuda", "xpu")):
        raise UsageError(f"unknown device {spec!r}", hint=f"choose one of: {', '.join(DEVICE_CHOICES)}")
    if index and not is_whole(index):
        raise UsageError(f"bad device {spec!r}", hint=f"use {kind} or {kind}:N with N a number")
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
        if xpu_unavailable_reason(xpu_facts(machine)) is None:
            return torch.device("xpu", 0)
        if mps_unavailable_reason(mps_facts(machine)) is None:
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "mps":
        _usable(spec, mps_unavailable_reason(mps_facts(machine)))
        return torch.device("mps")
    if kind == "xpu":
        xpu = xpu_facts(machine)
        _usable(spec, xpu_unavailable_reason(xpu), index, xpu.device_count, "XPU")
        return torch.device("xpu", index or 0)
    facts = cuda_facts(machine)
    _usable(spec, cuda_unavailable_reason(facts), index, facts.device_count, "CUDA")
    return torch.device("cuda", index or 0)


def _usable(spec: str, reason: str | None, index: int | None = None, count: int = 1, name: str = "") -> None:
    """Refuse ``spec`` in one line: its backend is unusable (``reason``), or ``index`` is past the devices seen."""
    if reason:
        raise DeviceUnavailableError(spec, reason, hint="use --device cpu, or see `kitbench install-cmd`")
    if (index or 0) >= count:
        raise DeviceUnavailableError(spec, f"only {count} {name} device(s) are visible")


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

    if device.type == "cpu":
        return
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "synchronize"):
        # torch >= 2.6: one call for CUDA, HIP, XPU and MPS alike.
        accelerator.synchronize(device)
    elif device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "xpu":
        torch.xpu.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def pinning_supported(device: torch.device) -> bool:
    """Pinned host memory only helps (and only exists for copies) towards CUDA."""
    return device.type == "cuda"
