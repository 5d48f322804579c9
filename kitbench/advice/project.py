"""What each of a team's machines installs, as one project: install-cmd's answer for every machine (the
selector decides; nothing is chosen here that it did not choose), one release for all where one serves them
all, and how a project tells the machines apart: by platform where the platform decides, by an extra named
after the build where two machines share a platform but not a build.

``project_files`` writes the answer as a uv ``pyproject.toml`` and a pixi ``pixi.toml``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from kitbench.advice import releases
from kitbench.advice.rejections import Refused, note
from kitbench.advice.selector import HELD_BACK, Selection, select
from kitbench.advice.wording import words
from kitbench.errors import SelectionError, UsageError
from kitbench.machine.builds import build
from kitbench.machine.probe import Probe

FAMILY = ("torch", "torchvision", "torchaudio")

# Each platform kitbench answers for: its PEP 508 environment markers (sys.platform and
# platform.machine() as CPython reports them on it) and its conda subdir (pixi's platform names).
PLATFORMS: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): ("sys_platform == 'linux' and platform_machine == 'x86_64'", "linux-64"),
    ("linux", "aarch64"): ("sys_platform == 'linux' and platform_machine == 'aarch64'", "linux-aarch64"),
    ("macos", "arm64"): ("sys_platform == 'darwin' and platform_machine == 'arm64'", "osx-arm64"),
    ("macos", "x86_64"): ("sys_platform == 'darwin' and platform_machine == 'x86_64'", "osx-64"),
    ("windows", "x86_64"): ("sys_platform == 'win32' and platform_machine == 'AMD64'", "win-64"),
    ("windows", "aarch64"): ("sys_platform == 'win32' and platform_machine == 'ARM64'", "win-arm64"),
}
# pixi's environment names are the strictest of the names a machine's name becomes.
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class Wheels:
    """What a machine installs: its platform, the torch family's pins, and the index they come from."""

    platform: tuple[str, str]  # (os, the Python's arch)
    pins: tuple[tuple[str, str], ...]
    index: str | None  # PyTorch's index of the build; None: PyPI, as the command installs it
    build: str  # the wheels' build: cpu for a Mac's (MPS is in them)

    @property
    def marker(self) -> str:
        return PLATFORMS[self.platform][0]

    @property
    def subdir(self) -> str:
        return PLATFORMS[self.platform][1]


@dataclass
class Member:
    name: str
    machine: Probe
    chosen: Selection  # the team's answer for it
    own: Selection  # its answer alone (the team may hold it to an older release)
    wheels: Wheels
    extra: str | None = None  # the extra it syncs, where its platform does not decide its build

    @property
    def uv(self) -> str:
        return "uv sync" + (f" --extra {self.extra}" if self.extra else "")

    @property
    def pixi(self) -> str:
        return f"pixi install -e {self.name}"


@dataclass
class Team:
    members: list[Member]
    release: str | None  # the one release every machine gets; None where none serves them all
    notes: list[str] = field(default_factory=list)
    spec: str = "stable"  # the release asked for (stable, X.Y.Z), which ``release`` resolved

    @property
    def extras(self) -> list[str]:
        return list(dict.fromkeys(m.extra for m in self.members if m.extra))


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name) or len(name) > 64:
        # Cut short: a name may be any length, and the message is one line.
        shown = repr(name) if len(name) <= 40 else f"{name[:40]!r}... ({len(name):,} characters)"
        raise UsageError(
            f"machine name {shown} is not a lowercase word of at most 64 characters",
            hint="name each machine with lowercase letters, digits and '-', e.g. laptop, h100, ci "
            "(the name becomes a pixi environment)",
        )
    if name == "default":
        raise UsageError(
            "machine name 'default' is pixi's own environment's name",
            hint="name the machine after itself, e.g. laptop, h100, ci (pixi reserves 'default'); "
            "one the project remembers: --drop default, then give it again by another name",
        )
    return name


def wheels(chosen: Selection) -> Wheels:
    """What ``chosen``'s command installs: the pins and index it was made from."""
    if (chosen.os, chosen.arch) not in PLATFORMS or not any(name == "torch" for name, _ in chosen.pins):
        raise SelectionError(
            f"no project form for {chosen.os} {chosen.arch}'s answer: {chosen.command}",
            hint="answer that machine with `kitbench install-cmd` and install it by hand",
        )
    return Wheels(
        (chosen.os, chosen.arch), chosen.pins, chosen.index, "cpu" if chosen.compute == "mps" else chosen.compute
    )


def _serves(member: tuple[str, Probe, Selection], version: str) -> Selection | None:
    """Its answer at ``version``, where that release gives it what its own answer does (a GPU build where it
    got one, the Mac's wheel where it got that); None where it does not."""
    _, machine, own = member
    try:
        chosen = select(machine, release_spec=version)
    except SelectionError:
        return None
    return chosen if chosen.release == version and build(chosen.compute).kind == build(own.compute).kind else None


def _answer(name: str, machine: Probe, release_spec: str) -> Selection:
    try:
        return select(machine, release_spec=release_spec)
    except SelectionError as refused:
        # Which of the team's machines it is: the selector's words are for a machine alone, and a hint that names a
        # flag is worded for install-cmd on this host; a project words that fix for its machine.
        hint = refused.hint
        if isinstance(refused, Refused):
            hint = words(note(refused.fix.kind, **refused.fix.figures, member=name))
        raise SelectionError(f"{name}: {refused.message}", hint=hint) from None


def _compute_at(machine: Probe, version: str) -> str:
    try:
        return select(machine, release_spec=version).compute
    except SelectionError:
        return "nothing"


def plan(machines: Sequence[tuple[str, Probe]], release_spec: str = "stable") -> Team:
    """The team's project: every machine's answer at the newest release that serves them all, or, where none
    does, each machine's own answer and a note naming the machine that holds the team back."""
    if not machines:
        raise UsageError(
            "no machine given",
            hint="name each machine: --machine laptop=laptop.json (`kitbench probe --json` on it) or "
            "--machine ci='--os linux --no-gpu'",
        )
    names = [check_name(name) for name, _ in machines]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise UsageError(f"machine {twice!r} is given twice", hint="give each machine once, each by its own name")
    releases.release(release_spec)  # the project's own: refused as such, not as the first machine's
    own = [(name, machine, _answer(name, machine, release_spec)) for name, machine in machines]
    team: list[Selection] | None = [chosen for _, _, chosen in own]
    notes: list[str] = []
    if len({chosen.release for _, _, chosen in own}) > 1:
        team, note = _common(own)
        notes.append(note)
    members = [
        Member(name, machine, chosen, mine, wheels(chosen))
        for (name, machine, mine), chosen in zip(own, team or [m[2] for m in own], strict=True)
    ]
    _extras(members)
    return Team(members, team[0].release if team else None, notes, release_spec)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("+")[0].split("."))


def _common(own: list[tuple[str, Probe, Selection]]) -> tuple[list[Selection] | None, str]:
    """Every machine's answer at the newest release that serves them all, no newer than the oldest of their
    own answers, and the note that says so; None and the note naming the machine that holds the team back,
    where no release does."""
    holder, _, held = min(own, key=lambda m: _key(m[2].release))
    at_oldest: list[Selection | None] = []
    for rel in releases.newest_first():
        if rel.key > _key(held.release):
            continue
        answers = [_serves(m, rel.version) for m in own]
        at_oldest = at_oldest or answers
        if all(answers):
            newer = ", ".join(
                f"{name} {chosen.release} {chosen.compute}" for name, _, chosen in own if chosen.release != rel.version
            )
            return [a for a in answers if a is not None], (
                f"torch {rel.version} is the newest release that serves every machine ({holder}'s newest is "
                f"{held.release}); alone, {newer} would get a newer one"
            )
    lacking = ", ".join(
        f"{name} gets {_compute_at(machine, held.release)} there, not its own {chosen.compute} ({chosen.release})"
        for (name, machine, chosen), answer in zip(own, at_oldest, strict=True)
        if answer is None
    )
    # The selector's note on why its answer is not the newest release, else the reason for its build (every
    # answer has one).
    why = words(next((n for n in held.noted if n.kind in HELD_BACK), held.because[0]))
    return None, (
        f"no single release serves every machine: {holder} holds the team back at {held.release} ({why}), "
        f"and {lacking}; each machine gets its own release, pinned for its platform"
    )


def _extras(members: list[Member]) -> None:
    """An extra for each build on a platform that more than one build shares: named after the build, and after
    its release too where the same build is pinned twice; after its packages where even the release is the same
    (Windows on Arm: torch alone on a Python its torchvision has no wheel for)."""
    variants: dict[tuple[str, str], list[Wheels]] = {}
    for member in members:
        found = variants.setdefault(member.wheels.platform, [])
        if member.wheels not in found:
            found.append(member.wheels)
    names: dict[Wheels, str] = {}
    for found in variants.values():
        if len(found) < 2:
            continue
        for w in found:
            name = w.build
            clash = [other for other, n in names.items() if n == name and other.pins != w.pins]
            if any(dict(other.pins)["torch"] == dict(w.pins)["torch"] for other in clash):
                name = "-".join([w.build, *(package for package, _ in w.pins)])
            elif clash:
                name = f"{w.build}-{dict(w.pins)['torch'].replace('.', '-').replace('+', '-')}"
            names[w] = name
    for member in members:
        member.extra = names.get(member.wheels)
