"""SIGTERM raised as an exception where Ctrl-C would be, so one handler keeps a
run's record for both (``docker stop``, nox and Slurm's scancel send SIGTERM)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from kitbench.errors import Terminated


@contextmanager
def sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
