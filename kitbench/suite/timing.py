"""Timing on any device through one path: warm up, synchronize, repeat, summarize."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kitbench.suite.devices import synchronize
from kitbench.suite.stats import Summary

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


def measure(
    fn: Callable[[], object], device: torch.device, *, repeats: int, warmup: int = 2, inner: int = 1
) -> Summary:
    """Seconds per call of ``fn``: ``warmup`` untimed calls, then ``repeats``
    samples of ``inner`` calls each, the device synchronized around every sample."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) / inner)
    return Summary.of(samples)


def timed(fn: Callable[[], T], device: torch.device) -> tuple[T, float]:
    """One synchronized call and its seconds (for one-time costs, which have no repeats)."""
    synchronize(device)
    start = time.perf_counter()
    value = fn()
    synchronize(device)
    return value, time.perf_counter() - start
