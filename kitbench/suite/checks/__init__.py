"""The suite: an ordered list of checks, each a plain function of a context."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kitbench.suite.checks.base import CheckResult, Context

CHECKS = ("availability", "moves", "mnist", "ddp")
DEFAULT_CHECKS = ("availability", "moves", "mnist")     # ddp launches processes: asked for by name


def get(name: str) -> Callable[[Context], CheckResult]:
    """The check function by name. Each module is imported on its own, when its check
    runs: a broken torchvision fails the mnist check, and availability still says why."""
    found: Callable[[Context], CheckResult] = importlib.import_module(f"kitbench.suite.checks.{name}").run
    return found
