"""The suite: an ordered list of checks, each a plain function of a context."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kitbench.checks.base import CheckResult, Context

CHECKS = ("availability", "moves", "mnist")


def get(name: str) -> Callable[[Context], CheckResult]:
    """The check function by name; imported on demand because checks import torch."""
    from kitbench.checks import availability, mnist, moves

    found: dict[str, Callable[[Context], CheckResult]] = {
        "availability": availability.run, "moves": moves.run, "mnist": mnist.run}
    return found[name]
