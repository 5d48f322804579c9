"""SIGTERM raised as an exception where Ctrl-C would be, so one handler keeps a
run's record for both (``docker stop``, nox and Slurm's scancel send SIGTERM); either
one that Python drops is sent again."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from kitbench.errors import Terminated

# How long a signal whose exception Python dropped waits to be sent again: the finalizer it landed in has ended.
_AGAIN_S = 0.1


@contextmanager
def sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    def dropped(unraisable: sys.UnraisableHookArgs) -> None:
        # Python prints and drops an exception raised while a finalizer runs (a generator closed as it is
        # dropped, a __del__): a SIGTERM or Ctrl-C handled there was lost, and the run went on as if none had
        # come. It is sent again from a thread, a moment later, to land where the run can stop.
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            again = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
            threading.Timer(_AGAIN_S, signal.raise_signal, (again,)).start()
        else:
            hook(unraisable)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    hook, sys.unraisablehook = sys.unraisablehook, dropped
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook
