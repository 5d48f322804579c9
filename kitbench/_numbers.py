"""The one way kitbench reads a whole number from text it did not write: a flag, a file, a tool's output.

ASCII digits only: ``str.isdigit()`` accepts ``'²'``, which ``int()`` refuses (a traceback), and
``int()`` accepts ``'٣'``, ``' 7 '`` and ``'1_0'``, none of which any tool kitbench reads would write.
"""

from __future__ import annotations

MAX_DIGITS = 40      # int() of a 100,000-digit string takes seconds; no count kitbench reads is near 10**40


def is_whole(text: str) -> bool:
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def whole(text: str) -> int | None:
    """``'12'`` -> 12; anything else (signs, spaces, other scripts' digits, empty) -> None."""
    return int(text) if is_whole(text) else None
