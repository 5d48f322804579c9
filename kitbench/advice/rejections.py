"""install-cmd's decision as values: why auto mode passed over a build (``Rejection``), and each reason and
note of the answer (``Note``). The decision (``selector``) records them, ``wording`` words them, once, at the
end; whatever reads the answer (``project``, the availability check's fix, ``--json``, the short answer)
reads these, never the sentences.

Kept apart from both so that neither imports the other's job: a rule asks ``cause`` or ``kind`` (a machine
without an NVIDIA driver is not told that its CUDA builds need one), never the words a user reads.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
from typing import Any, Literal, NamedTuple

from kitbench.errors import SelectionError

Cause = Literal[
    "no driver",  # a CUDA build on a machine without an NVIDIA driver
    "driver floor",  # the driver is older than the CUDA family's floor
    "gpu floor",  # the driver is older than the first that drives the GPU's generation at all
    "no kernels",  # the build's recorded list (CUDA's sm_, ROCm's gfx) lacks the GPUs' architectures
    "toolkit range",  # no list recorded, and the build's CUDA cannot compile for the GPUs' architectures
    "dropped before",  # no list recorded, and an older release's build of that CUDA had already dropped them
    "install",  # the build's recorded index tags, or what it pulls in on Linux, do not install on this host
    "unrecorded",  # listed on the index, not in envs/releases/, its kernel list not on record: named only
]


class Rejection(NamedTuple):
    """One build passed over: which, why (``cause``), and the facts its words need (the rest empty) (a named
    tuple: "Start-up" in docs/architecture.md)."""

    build: str
    cause: Cause
    arches: tuple[str, ...] = ()  # the GPUs' architectures it has no kernels for: sm_90, gfx1031
    driver: str = ""  # the machine's NVIDIA driver, and the floor it missed
    floor: str = ""
    cuda: tuple[int, int] = (0, 0)  # the build's CUDA
    span: tuple[str, str] = ("", "")  # the oldest and newest architectures that CUDA compiles for
    earlier: str = ""  # the older release whose recorded list had dropped them, and this one
    release: str = ""
    detail: str = ""  # the install refusal's own words, or where a ROCm gfx list was read
    listing: str = ""  # the recorded listing of the build's index tags that refuses it, where one does


class Note(NamedTuple):
    """One reason or note of an answer, as decided: ``kind`` names what it says (and the ``wording`` function
    that words it), ``figures`` the values it says it of (releases, builds, driver floors, rejections)."""

    kind: str
    figures: dict[str, Any]


def note(kind: str, **figures: Any) -> Note:
    return Note(kind, figures)


class Refused(SelectionError):
    """A refusal whose hint names a flag to give, with that fix as values: ``hint`` is install-cmd's words of it
    for this host, and a project words ``fix`` again for its own machine, never rewriting the words."""

    def __init__(self, message: str, hint: str, fix: Note) -> None:
        super().__init__(message, hint)
        self.fix = fix
