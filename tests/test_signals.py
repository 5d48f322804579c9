"""_signals: SIGTERM is raised as Terminated, even where it lands in a finalizer, whose exceptions Python drops."""

from __future__ import annotations

import os
import signal
import sys
import time
import typing
from collections.abc import Iterator

import pytest

from kitbench._signals import sigterm_raises
from kitbench.errors import Terminated

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is sent with os.kill, POSIX's")


def _lands_in_a_finalizer(signum: int) -> Iterator[int]:
    try:
        yield 1
        yield 2
    finally:
        # Closed as it is dropped: Python runs this as a finalizer, and the signal is handled inside it.
        os.kill(os.getpid(), signum)
        sum(range(1000))


def _running(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


def _terminated() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    _running(5)


def _stopped_in_a_finalizer(signum: int) -> None:
    generator = _lands_in_a_finalizer(signum)
    next(generator)
    del generator
    _running(5)


def test_sigterm_raises_terminated_where_the_run_is() -> None:
    with sigterm_raises(), pytest.raises(Terminated):
        _terminated()


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_that_lands_in_a_finalizer_is_raised_again_where_the_run_is(
    signum: int, raised: type[BaseException], capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen once in CI: a run went on training for 60 s after SIGTERM, its exception dropped by a finalizer."""
    started = time.monotonic()
    with sigterm_raises(), pytest.raises(raised):
        _stopped_in_a_finalizer(signum)
    assert time.monotonic() - started < 4
    assert "Exception ignored" not in capsys.readouterr().err


def test_other_dropped_exceptions_still_reach_python_s_hook() -> None:
    seen: list[BaseException | None] = []

    def ours(unraisable: typing.Any) -> None:
        seen.append(unraisable.exc_value)

    hook, sys.unraisablehook = sys.unraisablehook, ours
    try:
        with sigterm_raises():

            class Broken:
                def __del__(self) -> None:
                    raise ValueError("in a finalizer")

            Broken()
        assert sys.unraisablehook is ours  # put back as it was
    finally:
        sys.unraisablehook = hook
    assert [type(e) for e in seen] == [ValueError]
