"""PyTorch's builds (``cpu``, ``cu126``, ``rocm6.4``, ``xpu``, ``mps``) as values, parsed once from their tags.

A build's tag names its kind by its prefix and its toolkit's version by the rest, and its kind says what
it asks of a machine (an NVIDIA driver, an AMD GPU, an Intel GPU). Every place that asks of a tag reads
it here, from one table of kinds, instead of testing the tag's prefix itself. A tag no kind claims
parses too (a user's ``--compute`` may be anything): it is of kind ``unknown`` and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Kind:
    """One kind of build: how its tags read, and what it needs of the machine."""

    name: str           # cpu, cuda, rocm, xpu, mps
    prefix: str         # the tag's start that names the kind: "cu" is CUDA's, as PyTorch's index writes it
    form: str           # the whole tag a build of this kind has (a regular expression)
    needs: str          # what the machine must have for the build to run on its accelerator


KINDS = (
    Kind("cuda", "cu", r"cu[0-9]{3}", "an NVIDIA driver"),
    Kind("rocm", "rocm", r"rocm[0-9]+\.[0-9]+(\.[0-9]+)?", "an AMD GPU"),
    Kind("xpu", "xpu", "xpu", "an Intel GPU"),
    Kind("mps", "mps", "mps", "an Apple Silicon Mac"),
    Kind("cpu", "cpu", "cpu", "nothing"),
)
_UNKNOWN = Kind("unknown", "", "", "nothing known")


@dataclass(frozen=True)
class Build:
    """One build: its tag, kind, and its toolkit's version (CUDA 12.6: (12, 6); ROCm 7.14: (7, 14); else ())."""

    tag: str
    kind: str
    version: tuple[int, ...]
    needs: str
    known: bool         # the tag is in its kind's whole form (cu126, not cu12 or cuda)

    @property
    def index_path(self) -> str:
        """Where PyTorch's index keeps this build's wheels, under its root."""
        return f"whl/{self.tag}"

    @property
    def cuda(self) -> tuple[int, int] | None:
        """The CUDA version of a CUDA build (``cu118``: (11, 8)), else None."""
        return (self.version[0], self.version[1]) if self.kind == "cuda" and len(self.version) == 2 else None

    @property
    def gpu(self) -> bool:
        """A build for a GPU vendor's toolkit: CUDA, ROCm or XPU (not the CPU build, not the Mac's)."""
        return self.kind in ("cuda", "rocm", "xpu")


@cache
def build(tag: str) -> Build:
    """The build a tag names; pure, so each tag is parsed once."""
    kind = next((k for k in KINDS if tag.startswith(k.prefix)), _UNKNOWN)
    digits = tag[len(kind.prefix):]
    version: tuple[int, ...] = ()
    if kind.name == "cuda" and digits.isascii() and digits.isdigit() and len(digits) >= 2:
        # PyTorch writes CUDA 12.6 as cu126 and 11.8 as cu118: the last digit is the minor version.
        version = int(digits[:-1]), int(digits[-1])
    elif kind.name == "rocm" and re.fullmatch(r"[0-9]+(\.[0-9]+)*", digits):
        version = tuple(int(p) for p in digits.split("."))
    return Build(tag, kind.name, version, kind.needs, bool(kind.form) and re.fullmatch(kind.form, tag) is not None)


def newest_first(tags: list[str] | tuple[str, ...], kind: str) -> list[str]:
    """The builds of ``kind`` among ``tags``, the newest toolkit first."""
    return sorted((t for t in tags if build(t).kind == kind), key=lambda t: build(t).version, reverse=True)
