"""PyTorch's builds (``cpu``, ``cu126``, ``rocm6.4``, ``xpu``, ``mps``) as values, parsed once from their tags.

A build's tag names its kind by its prefix and its toolkit's version by the rest, and its kind says what
it asks of a machine (an NVIDIA driver, an AMD GPU, an Intel GPU). Every place that asks of a tag reads
it here, from one table of kinds, instead of testing the tag's prefix itself. A tag no kind claims
parses too (a user's ``--compute`` may be anything): it is of kind ``unknown`` and never raises.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
from functools import cache
from typing import NamedTuple

# One row per kind of build: its name, the tag's start that names it ("cu" is CUDA's, as PyTorch's index
# writes it), and what it needs of the machine.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("cuda", "cu", "an NVIDIA driver"),
    ("rocm", "rocm", "an AMD GPU"),
    ("xpu", "xpu", "an Intel GPU"),
    ("mps", "mps", "an Apple Silicon Mac"),
    ("cpu", "cpu", "nothing"),
)
_UNKNOWN = ("unknown", "", "nothing known")


class Build(NamedTuple):
    """One build: its tag, kind, and its toolkit's version (CUDA 12.6: (12, 6); ROCm 7.14: (7, 14); else ())
    (a named tuple: "Start-up" in docs/architecture.md)."""

    tag: str
    kind: str
    version: tuple[int, ...]
    needs: str
    known: bool  # the tag is in its kind's whole form (cu126, not cu12 or cuda)

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
    """The build a tag names; pure, so each tag is parsed once. No regular expression: install-cmd's start-up."""
    name, prefix, needs = next((k for k in KINDS if tag.startswith(k[1])), _UNKNOWN)
    rest = tag[len(prefix) :]
    parts = rest.split(".")
    version: tuple[int, ...] = ()
    if name == "cuda" and rest.isascii() and rest.isdigit() and len(rest) >= 2:
        # PyTorch writes CUDA 12.6 as cu126 and 11.8 as cu118: the last digit is the minor version.
        version = int(rest[:-1]), int(rest[-1])
    elif name == "rocm" and all(p.isascii() and p.isdigit() for p in parts):
        version = tuple(int(p) for p in parts)
    # The whole form: cu and three digits (cu126), rocm and two or three numbers (rocm6.4, rocm5.4.2), or the bare name.
    known = (
        len(rest) == 3 and bool(version)
        if name == "cuda"
        else len(version) in (2, 3)
        if name == "rocm"
        else name != "unknown" and not rest
    )
    return Build(tag, name, version, needs, known)


def newest_first(tags: list[str] | tuple[str, ...], kind: str) -> list[str]:
    """The builds of ``kind`` among ``tags``, the newest toolkit first."""
    return sorted((t for t in tags if build(t).kind == kind), key=lambda t: build(t).version, reverse=True)


def page_order(tag: str) -> tuple[int, tuple[int, ...]]:
    """Where ``tag`` goes in pytorch.org's order of a release's builds: ROCm's, then CUDA's, each oldest first,
    then the rest (CPU)."""
    found = build(tag)
    return {"rocm": 0, "cuda": 1}.get(found.kind, 2), found.version
