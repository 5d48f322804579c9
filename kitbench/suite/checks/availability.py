"""Is acceleration usable here, and if not, exactly why."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from kitbench.machine.probe import Probe
from kitbench.machine.versions import arch_of_capability, capability_supported, parse_capability
from kitbench.records import record as records
from kitbench.suite import devices
from kitbench.suite.checks.base import CheckResult, Context
from kitbench.suite.timing import timed

_KERNEL_TOLERANCE = 1e-4  # relative L2 error vs float64; TF32 (off by default) would exceed it


@dataclass
class DeviceInfo:
    index: int
    name: str
    capability: str  # "8.6"; on a HIP build the GPU's gfx ("gfx942")
    kernels_in_wheel: bool  # capability covered by torch.cuda.get_arch_list()
    total_memory_mib: int
    free_memory_mib: int | None
    multiprocessors: int


@dataclass
class KernelCheck:
    device: str
    relative_error: float
    tolerance: float
    passed: bool
    seconds: float


@dataclass
class AvailabilityResult(CheckResult):
    torch_version: str
    build_tag: str
    built_cuda: str | None
    cudnn: int | None
    built_hip: str | None
    mps_built: bool
    arch_list: list[str]
    cuda_visible_devices: str | None
    driver: str | None
    driver_source: str | None
    cuda_available: bool
    cuda_reason: str | None
    mps_available: bool
    mps_reason: str | None
    selected_device: str
    devices: list[DeviceInfo] = field(default_factory=list)
    kernel: KernelCheck | None = None
    fix: str | None = None  # the install command that gives this machine a working GPU build
    note: str | None = None  # the GPU a CPU build leaves unused, where a CPU build was asked for
    hip_visible_devices: str | None = None
    rocr_visible_devices: str | None = None
    xpu_built: bool = False
    xpu_available: bool = False
    xpu_reason: str | None = None
    xpu_devices: list[str] = field(default_factory=list)


def install_fix(machine: Probe, torch_version: str) -> str:
    """What ``kitbench install-cmd`` answers for this machine and this torch release (the
    newest release where this one is not in the manifests): one source for the advice."""
    from kitbench.advice import selector
    from kitbench.advice.wording import words
    from kitbench.errors import KitbenchError

    release = torch_version.partition("+")[0]
    try:
        chosen = selector.select(machine, release_spec=release)
    except KitbenchError:
        try:
            chosen = selector.select(machine)
        except KitbenchError as exc:  # musl, a Python no release has a wheel for: no command installs here
            return f"no release's wheel installs on this machine: {exc}"
    if chosen.compute == "cpu":
        return f"no build of torch {chosen.release} runs on this GPU and driver: {words(chosen.because[-1])}"
    return chosen.command


def cpu_asked_for(options_device: str, target: str | None = None) -> bool:
    """Whether this run asked for the CPU: ``--device cpu``, or a target whose compute is cpu.
    A CPU build beside a GPU is then what was wanted, not what stands between the user and the GPU."""
    if options_device == "cpu":
        return True
    name = target if target is not None else os.environ.get(records.TARGET_VARIABLE)
    if not name:
        return False
    from kitbench.environments import targets
    from kitbench.errors import KitbenchError

    try:
        return targets.get(name).compute == "cpu"
    except KitbenchError:  # not a target of envs/ (e.g. "bench"): nothing was asked of the build
        return False


def kernel_check(device: torch.device) -> KernelCheck:
    """A small matmul + softmax on ``device`` against a float64 CPU reference."""
    gen = torch.Generator().manual_seed(1234)
    a = torch.randn(256, 256, generator=gen)
    b = torch.randn(256, 256, generator=gen)

    def compute(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ y / 16.0, dim=1) @ y

    result, seconds = timed(lambda: compute(a.to(device), b.to(device)), device)
    reference = compute(a.double(), b.double())
    error = float(torch.linalg.norm(result.cpu().double() - reference) / torch.linalg.norm(reference))
    return KernelCheck(str(device), error, _KERNEL_TOLERANCE, error <= _KERNEL_TOLERANCE, seconds)


def _cuda_devices(arch_list: list[str], hip: bool) -> list[DeviceInfo]:
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        cc = (props.major, props.minor)
        free = torch.cuda.mem_get_info(index)[0] // 2**20
        if hip:
            # HIP reports "gfx942:sramecc+:xnack-"; the arch list names the bare gfx.
            gfx = str(props.gcnArchName).partition(":")[0]
            capability, covered = gfx, gfx in arch_list
        else:
            capability, covered = f"{cc[0]}.{cc[1]}", capability_supported(cc, arch_list)
        found.append(
            DeviceInfo(
                index, props.name, capability, covered, props.total_memory // 2**20, free, props.multi_processor_count
            )
        )
    return found


def _missing_kernels(device: DeviceInfo) -> str:
    arch = (
        device.capability
        if device.capability.startswith("gfx")
        else arch_of_capability(parse_capability(device.capability))
    )
    return f"no kernels for {arch} ({device.name}) in this wheel's arch list"


def run(ctx: Context) -> AvailabilityResult:
    cuda = devices.cuda_facts(ctx.machine)
    mps = devices.mps_facts(ctx.machine)
    cuda_reason = devices.cuda_unavailable_reason(cuda)
    mps_reason = devices.mps_unavailable_reason(mps)
    xpu = devices.xpu_facts(ctx.machine)
    xpu_reason = devices.xpu_unavailable_reason(xpu)
    arch_list = torch.cuda.get_arch_list() if cuda.built_cuda or cuda.built_hip else []
    found = _cuda_devices(arch_list, cuda.built_hip is not None) if cuda_reason is None else []
    kernel = kernel_check(ctx.device)
    tag = torch.__version__.partition("+")[2]
    problems = [_missing_kernels(d) for d in found if not d.kernels_in_wheel]
    # The build, not the machine, stands between it and its GPU: a CPU wheel beside a driver,
    # a wheel whose CUDA the driver cannot run, a wheel without kernels for the GPU, a build
    # for another vendor than the AMD or Intel GPU found.
    build_at_fault = problems or (
        ctx.machine.driver is not None
        and cuda_reason is not None
        and ((cuda.built_cuda is None and cuda.built_hip is None) or "is too old for this wheel's CUDA" in cuda_reason)
    )
    amd_unserved = bool(ctx.machine.amd_gpus) and cuda.built_hip is None and cuda_reason is not None
    intel_unserved = bool(ctx.machine.intel_gpus) and not xpu.built and cuda_reason is not None
    build_at_fault = build_at_fault or amd_unserved or intel_unserved
    if build_at_fault and cuda_reason is not None and not (intel_unserved and not amd_unserved):
        problems.append(f"cuda: {cuda_reason}")
    if intel_unserved and xpu_reason is not None:
        problems.append(f"xpu: {xpu_reason}")
    fix = install_fix(ctx.machine, torch.__version__) if build_at_fault else None
    note = None
    if problems and cpu_asked_for(ctx.options.device):
        note = "a CPU run, as asked; this machine's GPU is unused: " + "; ".join(problems)
        problems = []
    if not kernel.passed:
        problems.append(f"kernel result off by {kernel.relative_error:.2e} on {kernel.device}")
    if problems:
        summary = "; ".join(problems) + (f"; fix: {fix}" if fix else "")
    elif note:
        summary = note + (f"; for the GPU: {fix}" if fix else "")
    elif devices.is_accelerator(ctx.device):
        summary = f"{ctx.device} usable; kernel matches float64 reference ({kernel.relative_error:.1e})"
    else:
        summary = f"CPU only. cuda: {cuda_reason}; xpu: {xpu_reason}; mps: {mps_reason}"
    return AvailabilityResult(
        status="failed" if problems else "ok",
        summary=summary,
        torch_version=torch.__version__,
        build_tag=tag or "none (a PyPI default build)",
        built_cuda=cuda.built_cuda,
        cudnn=devices.cudnn_version(),
        built_hip=cuda.built_hip,
        mps_built=mps.built,
        arch_list=arch_list,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        driver=ctx.machine.driver,
        driver_source=ctx.machine.sources.get("driver"),
        cuda_available=cuda_reason is None,
        cuda_reason=cuda_reason,
        mps_available=mps_reason is None,
        mps_reason=mps_reason,
        selected_device=str(ctx.device),
        devices=found,
        kernel=kernel,
        fix=fix,
        note=note,
        hip_visible_devices=cuda.hip_visible_devices,
        rocr_visible_devices=cuda.rocr_visible_devices,
        xpu_built=xpu.built,
        xpu_available=xpu_reason is None,
        xpu_reason=xpu_reason,
        xpu_devices=list(xpu.names),
    )
