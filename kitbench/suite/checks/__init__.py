"""The suite's checks, in order (availability, moves, mnist, ddp), each a plain function of a
context (``base``: what every check gets and gives); ``steps`` is the training step the MNIST and
DDP checks share: eager, captured whole (a CUDA graph, torch.compile) and profiled.

May import: the rest of the suite and the packages below it; torch, only when a check runs."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kitbench.suite.checks.base import CheckResult, Context

CHECKS = ("availability", "moves", "mnist", "ddp")
DEFAULT_CHECKS = ("availability", "moves", "mnist")  # ddp launches processes: asked for by name


def get(name: str) -> Callable[[Context], CheckResult]:
    """The check function by name. Each module is imported on its own, when its check
    runs: a broken torchvision fails the mnist check, and availability still says why."""
    found: Callable[[Context], CheckResult] = importlib.import_module(f"kitbench.suite.checks.{name}").run
    return found
