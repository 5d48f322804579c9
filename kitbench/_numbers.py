"""The one way kitbench reads a whole number from text it did not write (a flag, a file, a tool's
output), and writes a one-time cost in words.

ASCII digits only: ``str.isdigit()`` accepts ``'²'``, which ``int()`` refuses (a traceback), and
``int()`` accepts ``'٣'``, ``' 7 '`` and ``'1_0'``, none of which any tool kitbench reads would write.
"""

from __future__ import annotations

MAX_DIGITS = 40  # int() of a 100,000-digit string takes seconds; no count kitbench reads is near 10**40


def is_whole(text: str) -> bool:
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def whole(text: str) -> int | None:
    """``'12'`` -> 12; anything else (signs, spaces, other scripts' digits, empty) -> None."""
    return int(text) if is_whole(text) else None


def once(seconds: float) -> str:
    """A one-time cost as people read it: a CUDA graph's capture takes milliseconds, which one
    decimal of a second would print as "0.0 s"; a compile takes tens of seconds."""
    return f"{seconds * 1e3:.0f} ms" if seconds < 0.1 else f"{seconds:.1f} s"
