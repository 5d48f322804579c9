"""Parsing of the version-like strings a machine reports.

Every parser refuses bad input with ``UsageError`` naming what it expected;
none of them ever raises anything else, whatever the input (property-tested).
"""

from __future__ import annotations

import re

from kitbench._numbers import is_whole
from kitbench.errors import UsageError

_DRIVER = re.compile(r"^\s*([0-9]{1,4})(?:\.([0-9]{1,4}))?(?:\.([0-9]{1,4}))?\s*$")
_CC = re.compile(r"^\s*(?:([0-9]{1,2})\.([0-9])|(?:sm_?)?([0-9]{1,3}))\s*$")
_CUDA = re.compile(r"^\s*(?:cu)?([0-9]{1,2})\.?([0-9])\s*$")


def parse_driver(text: str, given_as: str | None = None) -> tuple[int, int, int]:
    """``'535.104.05'`` -> ``(535, 104, 5)``; missing parts count as 0. ``given_as`` names where a
    user gave it (``--driver``, ``UV_CUDA_DRIVER_VERSION``), for the error."""
    match = _DRIVER.match(text)
    if match is None:
        windows = re.fullmatch(r"\s*[0-9]+\.[0-9]+\.([0-9]+)\.([0-9]{4})\s*", text)
        # Windows' Device Manager writes 572.16 as 32.0.15.7216: the last five digits are NVIDIA's version.
        digits = "".join(windows.groups())[-5:] if windows else ""
        hint = (
            f"that is Windows' form of NVIDIA's {digits[:3]}.{digits[3:]}: --driver {digits[:3]}.{digits[3:]}"
            if len(digits) == 5
            else "expected up to three numbers of at most 4 digits, as nvidia-smi's "
            "driver_version: 535.104.05 (or a branch: 580)"
        )
        raise UsageError(
            f"malformed NVIDIA driver version {text!r}" + (f" ({given_as})" if given_as else ""), hint=hint
        )
    major, minor, patch = (int(part) if part else 0 for part in match.groups())
    return major, minor, patch


def parse_capability(text: str) -> tuple[int, int]:
    """``'8.6'``, ``'sm_86'`` or ``'86'`` -> ``(8, 6)``; ``'10'`` -> ``(10, 0)``, ``'sm_100'`` -> ``(10, 0)``."""
    match = _CC.match(text)
    if match is None:
        raise UsageError(
            f"malformed compute capability {text!r}", hint="expected MAJOR.MINOR like 8.6 or 10.0 (or sm_86, sm_100)"
        )
    major, minor, compact = match.groups()
    if compact is None:
        return int(major), int(minor)
    # "86" means sm_86, "120" sm_120; a bare number below 20 is a major version ("10" is 10.0, Blackwell),
    # as no one asks about sm_10 to sm_13 (Tesla, 2008) without saying "sm_".
    if len(compact) == 1 or (int(compact) < 20 and not text.strip().startswith("sm")):
        return int(compact), 0
    return int(compact[:-1]), int(compact[-1])


def parse_cuda(text: str) -> tuple[int, int]:
    """``'12.6'`` or ``'cu126'`` -> ``(12, 6)``."""
    match = _CUDA.match(text)
    if match is None:
        raise UsageError(f"malformed CUDA version {text!r}", hint="expected MAJOR.MINOR like 12.6 or cu126")
    return int(match.group(1)), int(match.group(2))


def version_tuple(text: str) -> tuple[int, ...]:
    """``'12.3'`` -> ``(12, 3)``: OS versions, for ordering only; non-numeric parts are skipped."""
    return tuple(int(p) for p in text.split(".") if is_whole(p))


def format_capability(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def arch_of_capability(cc: tuple[int, int]) -> str:
    """``(8, 6)`` -> ``'sm_86'``, the name torch's arch lists use."""
    return f"sm_{cc[0]}{cc[1]}"


def capability_supported(cc: tuple[int, int], arch_list: list[str] | tuple[str, ...]) -> bool:
    """Whether a build with ``arch_list`` (torch's ``get_arch_list()`` names) runs on ``cc``."""
    return serving_arch(cc, arch_list) is not None


def serving_arch(cc: tuple[int, int], arch_list: list[str] | tuple[str, ...]) -> str | None:
    """The entry of ``arch_list`` whose kernels run on ``cc`` (its own where there is one), or None.

    A cubin for sm_XY runs on devices of the same major with minor >= Y; PTX
    (compute_XY) is JIT-compiled for any device of capability >= XY.
    """
    found = None
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not is_whole(digits) or len(digits) < 2:
            continue
        major, minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and (major, minor) == cc:
            return arch
        if found is None and (
            (kind == "sm" and major == cc[0] and minor <= cc[1]) or (kind == "compute" and (major, minor) <= cc)
        ):
            found = arch
    return found
