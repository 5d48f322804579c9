"""A line at least every few seconds while a blocking phase runs.

A compile, a launch waiting for its ranks, CUDA's first call or a wheel
downloading inside an image build can each be silent for minutes; in a log that
looks like a hang. ``Heartbeat`` says, from a background thread, that the phase
is still running whenever ``every`` seconds passed without a line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

EVERY_S = 10.0


class Heartbeat:
    """Calls ``say(seconds_since_start)`` whenever ``every`` seconds pass without ``beat()``."""

    def __init__(
        self, say: Callable[[float], None], every: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._say, self._every, self._clock = say, EVERY_S if every is None else every, clock
        self._stop = threading.Event()
        self._started = self._last = clock()
        self._thread = threading.Thread(target=self._run, name="kitbench-heartbeat", daemon=True)

    def beat(self) -> None:
        """A line was just shown: the next heartbeat is due ``every`` seconds from now."""
        self._last = self._clock()

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(max(0.05, self._last + self._every - self._clock())):
            now = self._clock()
            if now - self._last >= self._every:
                self._last = now
                self._say(now - self._started)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
