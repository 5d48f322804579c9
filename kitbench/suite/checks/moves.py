"""How fast tensors move between host and device, and the two lessons
tutorials teach badly: round trips cost more than the work, and tensors on
different devices do not mix.

One sweep function serves every direction and memory kind; on a host
without an accelerator it measures a host-to-host copy through the very same
code as the device rows' reference, and the device rows say why they are
missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from kitbench.records.types import Direction, Memory
from kitbench.suite import devices
from kitbench.suite.checks.base import CheckResult, Context
from kitbench.suite.timing import measure

_KIB = 1024
_FULL_SIZES = tuple(_KIB * 4**i for i in range(10))  # 1 KiB .. 256 MiB
_QUICK_SIZES = _FULL_SIZES[:8]  # .. 16 MiB
_BYTES_PER_SAMPLE = 8 * 2**20  # small copies are repeated until a sample moves this much
_MATMUL = 200


@dataclass
class Transfer:
    direction: Direction
    memory: Memory
    bytes: int
    gb_per_s: float  # median of samples
    gb_per_s_q1: float
    gb_per_s_q3: float
    samples: int


@dataclass
class RoundTrip:
    size: int
    device: str
    numpy_s: float
    device_s: float
    device_vs_numpy: float  # > 1: torch on the device beats NumPy
    device_with_copies_s: float | None  # None without an accelerator: there is nothing to copy
    copies_overhead: float | None  # how many times slower the round trip makes it


@dataclass
class MovesResult(CheckResult):
    device: str
    transfers: list[Transfer] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    round_trip: RoundTrip | None = None
    mismatch_error: str | None = None


def _sweep(
    src_device: torch.device,
    dst_device: torch.device,
    pinned: bool,
    sizes: tuple[int, ...],
    repeats: int,
    ctx: Context,
    direction: Direction,
) -> list[Transfer]:
    clock_device = dst_device if devices.is_accelerator(dst_device) else src_device
    rows = []
    for size in sizes:
        count = size // 4
        src = torch.ones(count, dtype=torch.float32, device=src_device)
        dst = torch.empty(count, dtype=torch.float32, device=dst_device)
        if pinned:
            # The host side of the copy is the one that is pinned.
            if src_device.type == "cpu":
                src = src.pin_memory()
            else:
                dst = dst.pin_memory()
        inner = max(1, _BYTES_PER_SAMPLE // size)
        seconds = measure(
            partial(dst.copy_, src, non_blocking=pinned), clock_device, repeats=repeats, warmup=1, inner=inner
        )
        # The slower quartile of times is the lower quartile of rates.
        rows.append(
            Transfer(
                direction,
                "pinned" if pinned else "pageable",
                size,
                size / seconds.median / 1e9,
                size / seconds.q3 / 1e9,
                size / seconds.q1 / 1e9,
                seconds.n,
            )
        )
        ctx.progress.advance()
    return rows


def round_trip(device: torch.device, repeats: int) -> RoundTrip:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((_MATMUL, _MATMUL), dtype=np.float32)
    b = rng.standard_normal((_MATMUL, _MATMUL), dtype=np.float32)
    ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
    cpu = torch.device("cpu")
    numpy_s = measure(lambda: a @ b, cpu, repeats=repeats, inner=20).median
    device_s = measure(lambda: ta @ tb, device, repeats=repeats, inner=20).median
    if not devices.is_accelerator(device):
        return RoundTrip(_MATMUL, str(device), numpy_s, device_s, numpy_s / device_s, None, None)
    copies_s = measure(
        lambda: (torch.from_numpy(a).to(device) @ torch.from_numpy(b).to(device)).cpu().numpy(),
        device,
        repeats=repeats,
        inner=20,
    ).median
    return RoundTrip(_MATMUL, str(device), numpy_s, device_s, numpy_s / device_s, copies_s, copies_s / device_s)


def mismatch_error(device: torch.device) -> str | None:
    """The message torch raises when a ``device`` tensor meets a CPU tensor."""
    try:
        torch.ones(3, device=device) + torch.ones(3)
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return None


def run(ctx: Context) -> MovesResult:
    device = ctx.device
    cpu = torch.device("cpu")
    sizes = _QUICK_SIZES if ctx.options.quick else _FULL_SIZES
    repeats = 3 if ctx.options.quick else 7
    transfers: list[Transfer] = []
    skipped: list[str] = []
    if devices.is_accelerator(device):
        kinds = [False, True] if devices.pinning_supported(device) else [False]
        if not devices.pinning_supported(device):
            skipped.append(f"pinned: no pinned memory for {device.type}")
        ctx.progress.start(f"host<->{device} copies", total=2 * len(kinds) * len(sizes))
        for pinned in kinds:
            transfers += _sweep(cpu, device, pinned, sizes, repeats, ctx, "h2d")
            transfers += _sweep(device, cpu, pinned, sizes, repeats, ctx, "d2h")
    else:
        skipped.append("h2d, d2h: skipped: no accelerator")
        ctx.progress.start("host copy reference", total=len(sizes))
        transfers += _sweep(cpu, cpu, False, sizes, repeats, ctx, "host_copy")
    ctx.progress.done()
    lesson = round_trip(device, repeats)
    mismatch = mismatch_error(device) if devices.is_accelerator(device) else None
    if mismatch is None and devices.is_accelerator(device):
        return MovesResult(
            "failed", f"mixing {device} and cpu tensors did not raise", str(device), transfers, skipped, lesson, None
        )
    peak = max(transfers, key=lambda t: t.gb_per_s)
    summary = f"peak {peak.direction} {peak.memory} {peak.gb_per_s:.1f} GB/s at {peak.bytes // _KIB} KiB; "
    if lesson.copies_overhead is None:
        skipped += ["round trip with copies: skipped: no accelerator", "device mismatch: skipped: no accelerator"]
        summary += f"{_MATMUL}x{_MATMUL} matmul: torch {lesson.device_vs_numpy:.2f}x NumPy's speed"
    else:
        summary += f"{_MATMUL}x{_MATMUL} matmul round trip {lesson.copies_overhead:.1f}x the resident time"
    return MovesResult("ok", summary, str(device), transfers, skipped, lesson, mismatch)
