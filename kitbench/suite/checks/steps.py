"""The training step three ways, and what one step costs.

``eager`` is the step the tutorial and resident loops take. ``capture`` takes
the same step whole for the graphed loop: a CUDA graph on CUDA (the documented
whole-network capture: warm-up on a side stream, then forward, backward and
the optimizer's step in one ``torch.cuda.graph``), ``torch.compile`` on the
CPU and on MPS. Capturing runs the step on the real model, so the model and
the optimizer are put back exactly as they were afterwards (in place: a CUDA
graph keeps their addresses), and so is the random stream; the graphed loop then
starts where the resident loop starts, on the same permutation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from kitbench.suite import devices

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def eager(model: nn.Module, opt: torch.optim.Optimizer) -> Step:
    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        # Kept on the device: .item() here would synchronize every step.
        return loss.detach()

    return step


def fork_rng(device: torch.device) -> AbstractContextManager[None]:
    """The CPU's random state, and ``device``'s where it has its own (CUDA, MPS), put back on exit."""
    if device.type == "cpu":
        return torch.random.fork_rng(devices=[])
    return torch.random.fork_rng(devices=[device], device_type=device.type)


def device_rng_state(device: torch.device) -> torch.Tensor | None:
    """``device``'s own random state (CUDA's per device, MPS's one); None on the CPU, whose
    state is ``torch.random.get_rng_state()``."""
    if device.type == "cpu":
        return None
    state: torch.Tensor = torch.get_device_module(device.type).get_rng_state(device)
    return state


def set_device_rng_state(device: torch.device, state: torch.Tensor) -> None:
    torch.get_device_module(device.type).set_rng_state(state, device)


@dataclass
class Captured:
    step: Step
    how: str  # what captured it
    capture_s: float  # one-time: compiling or capturing, with its warm-up calls


class CaptureImpossible(Exception):
    """The step cannot be captured here; the message says why in one line."""


def capture(
    model: nn.Module, opt: torch.optim.Optimizer, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> Captured:
    saved = _snapshot(model, opt)
    # The random stream too: capturing's warm steps draw dropout masks the loop must draw itself.
    try:
        with fork_rng(device):
            if device.type == "cuda":
                return _cuda_graph(model, opt, device, x, y)
            return _compiled(model, opt, device, x, y)
    except Exception as exc:  # the backends fail in many ways; each is a reason, not a crash
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CaptureImpossible(f"{type(exc).__name__}: {text}"[:300]) from None
    finally:
        _restore(saved, model, opt)


def _compiled(
    model: nn.Module, opt: torch.optim.Optimizer, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> Captured:
    import torch._inductor.config as inductor

    step = torch.compile(eager(model, opt))
    start = time.perf_counter()
    # Random numbers from eager's generator, not inductor's own: the cnn's dropout masks are then the
    # resident loop's, and the two loops' losses can be compared step by step.
    with inductor.patch(fallback_random=True):
        for _ in range(3):  # the first call compiles; the next settle the optimizer's recompile
            step(x, y)
    devices.synchronize(device)
    return Captured(step, "torch.compile (inductor)", time.perf_counter() - start)


def _cuda_graph(
    model: nn.Module, opt: torch.optim.Optimizer, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> Captured:
    for group in opt.param_groups:
        if "capturable" in group:  # step counters on the device, where a graph can advance them
            group["capturable"] = True
    static_x, static_y = x.clone(), y.clone()
    start = time.perf_counter()
    side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream(device))
    warm = eager(model, opt)
    with torch.cuda.stream(side):
        for _ in range(3):
            warm(static_x, static_y)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)  # the gradients are then allocated, and rewritten, inside the graph
    with torch.cuda.graph(graph):
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
    devices.synchronize(device)
    seconds = time.perf_counter() - start

    def step(batch_x: torch.Tensor, batch_y: torch.Tensor) -> torch.Tensor:
        static_x.copy_(batch_x)
        static_y.copy_(batch_y)
        graph.replay()
        return static_loss.detach().clone()

    return Captured(step, "CUDA graph (torch.cuda.graph, forward + backward + optimizer step)", seconds)


def _snapshot(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    return {
        "params": [p.detach().clone() for p in model.parameters()],
        "state": {
            id(p): {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()} for p, s in opt.state.items()
        },
    }


def _restore(saved: dict[str, Any], model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Back to the snapshot, in place. Optimizer state that capturing created starts at zero,
    which is where the optimizer's first step starts it (a zero momentum buffer after one step
    is the gradient, as a fresh one is)."""
    with torch.no_grad():
        for live, value in zip(model.parameters(), saved["params"], strict=True):
            live.copy_(value)
        for param, state in opt.state.items():
            before = saved["state"].get(id(param), {})
            for key, value in state.items():
                if torch.is_tensor(value):
                    if key in before:
                        value.copy_(before[key])
                    else:
                        value.zero_()
                elif key not in before and isinstance(value, (int, float)):
                    state[key] = type(value)(0)


@dataclass
class StepProfile:
    steps: int
    wall_s_per_step: float
    ops_per_step: float  # operators dispatched on the host (aten::*, top level)
    kernels_per_step: float | None  # device kernels launched (CUDA only)
    device_busy_s_per_step: float | None
    host_overhead_s_per_step: float | None  # wall time the device sat idle: launches, Python, the loop


def profile(step: Step, batches: list[tuple[torch.Tensor, torch.Tensor]], device: torch.device) -> StepProfile:
    """A few steps under torch.profiler: what each step dispatches and, on CUDA, how long the GPU
    was busy; the rest of the wall time is the host's (time between launches)."""
    # Kineto (the profiler's backend) logs its bookkeeping to stderr, and on a CUDA build without a GPU an
    # "ERROR: gpuGetDeviceCount failed" that is not one; read before its first use, unless the user set it.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    devices.synchronize(device)
    with torch_profile(activities=activities) as prof:
        start = time.perf_counter()
        for x, y in batches:
            step(x, y)
        devices.synchronize(device)
        wall = time.perf_counter() - start
    events = prof.events()
    n = len(batches)
    ops = sum(1 for e in events if e.name.startswith("aten::") and e.cpu_parent is None)
    if device.type != "cuda":
        return StepProfile(n, wall / n, ops / n, None, None, None)
    kernels = [e for e in events if str(e.device_type).endswith("CUDA")]
    busy = sum(e.device_time_total for e in kernels) / 1e6 / n
    return StepProfile(n, wall / n, ops / n, len(kernels) / n, busy, max(0.0, wall / n - busy))
