"""Does a release's wheel install on a machine? Answered from ``envs/wheels.yaml``.

The facts are PyPI's own file names (``envs/scripts/fetch_wheels.py``): per release and
package, the platform tags and the Python tags of each. A wheel installs where pip would
pick it: the OS and arch match, the C library is glibc at least the tag's floor
(``manylinux_2_28``: glibc 2.28; musl takes ``musllinux`` only), macOS is at least the
tag's floor, and the interpreter's tag is listed and its version meets Requires-Python.
A fact the question leaves unknown (another machine's glibc, say) constrains nothing.
Nothing here imports torch or ``packaging``: the tags torch uses are few and regular.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

from kitbench import _files
from kitbench.advice import facts
from kitbench.machine.probe import Probe
from kitbench.records import manifest

# What a pinned command names; torchaudio where the release had one (and the facts record it).
PACKAGES = ("torch", "torchvision", "torchaudio")
# PEP 600's names for the legacy manylinux tags.
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}
_WINDOWS_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}
_PLATFORM = re.compile(r"^(?:(manylinux1|manylinux2010|manylinux2014)|(manylinux|musllinux|macosx)_([0-9]+)_([0-9]+)"
                       r"|win|linux)_(\w+)$")
_PYTHON_TAG = re.compile(r"^cp([0-9])([0-9]+)(t|-abi3)?$")
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<|~=)\s*([0-9.]+)\s*$")

Version = tuple[int, ...]


# The types below are named tuples, not dataclasses: as immutable, and far cheaper to define, which
# install-cmd's start-up pays on every run.
class Host(NamedTuple):
    """What decides whether a wheel installs; ``None`` is a fact the question leaves unknown."""

    os: str                         # linux | macos | windows
    arch: str                       # the interpreter's: x86_64 | aarch64 | arm64
    python: Version | None = None   # (3, 10)
    free_threaded: bool = False     # a free-threaded CPython (3.13t): only cpXYt (and py3) wheels install
    libc: str | None = None         # glibc | musl (Linux)
    libc_version: Version | None = None
    macos: Version | None = None


class Platform(NamedTuple):
    tag: str
    os: str
    arches: tuple[str, ...]
    libc: str | None        # glibc | musl on Linux
    floor: Version | None   # glibc's or macOS's

    @property
    def floor_text(self) -> str:
        return ".".join(map(str, self.floor or ()))


class Wheels(NamedTuple):
    """One package's wheels of one release."""

    version: str
    requires_python: str
    tags: dict[Platform, tuple[str, ...]]


class Facts(NamedTuple):
    source: str
    read: str
    releases: dict[str, dict[str, Wheels]]     # torch version -> package -> wheels, oldest first


def parse_version(text: str) -> Version:
    return tuple(int(p) for p in text.split("."))


def show(version: Version) -> str:
    return ".".join(map(str, version))


@cache
def platform(tag: str) -> Platform:
    match = _PLATFORM.match(tag)
    if match is None:
        return Platform(tag, "unknown", (), None, None)
    legacy, family, major, minor, arch = match.groups()
    if tag.startswith("win"):
        # win_arm64: Windows on Arm, which kitbench (as Linux) calls aarch64 (probe.normalize_arch).
        return Platform(tag, "windows", (_WINDOWS_ARCH.get(arch, arch),), None, None)
    if tag.startswith("linux_"):
        # A plain linux_x86_64 wheel (PyTorch's own index) states no C library: pip takes it on any Linux.
        return Platform(tag, "linux", (_ARCH.get(arch, arch),), None, None)
    if family == "macosx":
        arches = ("arm64", "x86_64") if arch == "universal2" else (_ARCH.get(arch, arch),)
        return Platform(tag, "macos", arches, None, (int(major), int(minor)))
    floor = _LEGACY[legacy] if legacy else (int(major), int(minor))
    return Platform(tag, "linux", (_ARCH.get(arch, arch),), "musl" if family == "musllinux" else "glibc", floor)


class IndexTags(NamedTuple):
    """What PyPI's tags do not say about PyTorch's Linux wheels (``envs/index_tags.yaml``)."""

    glibc: dict[str, tuple[Version, str]]               # tag -> (the glibc its binaries need, source)
    builds: dict[tuple[str, str], tuple[str, str]]      # (torch, compute) -> (its Linux x86_64 tag, source)


def index_tags() -> IndexTags:
    return _index_tags(_files.stamp(manifest.envs_dir() / "index_tags.yaml"))


@cache
def _index_tags(source: _files.Stamp) -> IndexTags:
    data = manifest.load(Path(source[0]), "index_tags").data
    return IndexTags({e["tag"]: (parse_version(e["glibc"]), e["source"]) for e in data["glibc"]},
                     {(e["torch"], e["compute"]): (e["linux_x86_64"], e["source"]) for e in data["builds"]})


def _glibc_need(platform: Platform) -> tuple[Version | None, str | None]:
    """The glibc a Linux wheel's binaries need: its tag's floor, raised where the facts say the tag understates
    it (PyTorch's manylinux1 and linux_x86_64 wheels need 2.17), with why."""
    found = index_tags().glibc.get(platform.tag)
    if found is not None and (platform.floor is None or found[0] > platform.floor):
        return found
    return platform.floor, None


def build(version: str, compute: str) -> Wheels | None:
    """torch ``version``'s ``compute`` build as PyTorch's index holds it, where a listing of it is recorded:
    its PyPI wheels' Python tags on the recorded Linux x86_64 platform tag. None: assumed to be PyPI's."""
    found = index_tags().builds.get((version, compute))
    packages = load().releases.get(version)
    if found is None or packages is None:
        return None
    torch = packages["torch"]
    linux = [p for p in torch.tags if p.os == "linux" and "x86_64" in p.arches]
    pythons = tuple(dict.fromkeys(t for p in linux for t in torch.tags[p]))
    tags = {p: t for p, t in torch.tags.items() if p not in linux}
    return Wheels(f"{version}+{compute}", torch.requires_python, {**tags, platform(found[0]): pythons})


def build_refusal(version: str, compute: str, host: Host) -> str | None:
    """Why ``compute``'s build of torch ``version`` does not install on ``host``, from its recorded index tags;
    None where it does, or where no listing of it is recorded (its tags are then PyPI's, checked already)."""
    wheels = build(version, compute) if host.os == "linux" and host.arch == "x86_64" else None
    if wheels is None:
        return None
    why = _refusal(wheels, "torch", host)
    return f"{why} ({index_tags().builds[version, compute][1]})" if why else None


def recorded(version: str, compute: str) -> bool:
    """Is the platform tag of this build's Linux x86_64 wheels recorded from PyTorch's index?"""
    return (version, compute) in index_tags().builds


def load() -> Facts:
    """The baked facts, and the releases the user's fact cache adds: read again whenever either file changes."""
    return _load(_files.stamp(manifest.envs_dir() / "wheels.yaml"), _files.stamp(facts.cache_dir() / "releases.json"))


@cache
def _load(source: _files.Stamp, cache_source: _files.Stamp) -> Facts:     # cache_source: a key only (facts reads it)
    data = manifest.load(Path(source[0]), "wheels").data
    found: dict[str, dict[str, Wheels]] = {}
    for entry in data["releases"]:
        found[entry["torch"]] = _wheels(entry, entry["wheels"])
    # Releases the user's cache knows and the baked facts do not (kitbench facts refresh).
    for derived in facts.derived():
        versions = {"torch": derived.version, "torchvision": derived.torchvision,
                    "torchaudio": derived.torchaudio or ""}
        found.setdefault(derived.version, _wheels(versions, derived.wheels))
    ordered = dict(sorted(found.items(), key=lambda item: parse_version(item[0])))
    return Facts(source=data["source"], read=data["read"], releases=ordered)


def _wheels(versions: dict[str, str], packages: dict[str, dict[str, str]]) -> dict[str, Wheels]:
    return {package: Wheels(versions[package], tags["requires_python"],
                            {platform(p): tuple(t.split()) for p, t in tags.items() if p != "requires_python"})
            for package, tags in packages.items()}


def python_allowed(spec: str, python: Version) -> bool:
    """``python`` (major, minor) meets Requires-Python ``spec``; a clause naming a patch
    release (``!=3.14.1``) cannot exclude a whole minor version, so it is passed."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = _CLAUSE.match(clause)
        if match is None:
            continue
        op, text = match.groups()
        bound = parse_version(text)
        ours = python + (0,) * (len(bound) - len(python))
        short = bound[:len(python)]
        ok = {">=": ours >= bound, ">": ours > bound and python > short, "<=": python <= short, "<": python < short,
              "==": python == short, "!=": len(bound) > len(python) or python != short,
              "~=": ours >= bound}[op]
        if not ok:
            return False
    return True


def python_of_tag(tag: str) -> tuple[Version, str] | None:
    """A CPython tag's version and kind: cp313 ("" : the default build), cp313t ("t": free-threaded),
    cp39-abi3 ("abi3": the stable ABI, any later default CPython too); None for py3 and others."""
    match = _PYTHON_TAG.match(tag)
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2))), (match.group(3) or "").lstrip("-")


def _python_ok(tags: tuple[str, ...], requires: str, python: Version, free_threaded: bool) -> bool:
    """A wheel tagged ``tags`` installs on this CPython: a free-threaded one takes cpXYt only (abi3 is the
    default build's stable ABI), the default build cpXY or an abi3 wheel of XY or older; py3 suits both."""
    def fits(tag: str) -> bool:
        found = python_of_tag(tag)
        if found is None:
            return tag == "py3"
        version, kind = found
        if free_threaded:
            return kind == "t" and version == python
        return (kind == "" and version == python) or (kind == "abi3" and version <= python)

    return any(fits(t) for t in tags) and python_allowed(requires, python)


def _pythons(wheels: Wheels, platforms: list[Platform], free_threaded: bool) -> str:
    """The Pythons of the build asked about these wheels install on, in words: "3.10 to 3.14",
    "free-threaded 3.13 to 3.14", "3.9 and newer" (abi3)."""
    found = [f for p in platforms for t in wheels.tags[p] for f in [python_of_tag(t)] if f is not None]
    if free_threaded:
        versions = sorted({v for v, kind in found if kind == "t"})
        return f"free-threaded {_span(versions)}" if versions else "no free-threaded build"
    stable = [v for v, kind in found if kind == "abi3"]
    if stable:
        return f"{show(min(stable))} and newer"
    versions = sorted({v for v, kind in found if kind == ""})
    return _span(versions) if versions else wheels.requires_python


def _span(versions: list[Version]) -> str:
    return show(versions[0]) if len(versions) == 1 else f"{show(versions[0])} to {show(versions[-1])}"


def refusal(version: str, host: Host) -> str | None:
    """Why ``torch==version`` (with its torchvision) has no wheel that installs on ``host``; None if it has."""
    packages = load().releases.get(version)
    if packages is None:
        return None
    for package in (p for p in PACKAGES if p in packages):
        why = _refusal(packages[package], package, host)
        if why:
            return why
    return None


def _refusal(wheels: Wheels, package: str, host: Host) -> str | None:
    name = f"{package} {wheels.version}"
    where = {"linux": "Linux", "macos": "macOS", "windows": "Windows"}.get(host.os, host.os)
    fits = [p for p in wheels.tags if p.os == host.os and host.arch in p.arches]
    if not fits:
        last = [v for v, packages in load().releases.items()
                if package in packages and any(p.os == host.os and host.arch in p.arches
                                               for p in packages[package].tags)]
        # In Windows' own word: it says ARM64 (and its wheels win_arm64) where kitbench says aarch64.
        chip = "arm64" if host.os == "windows" and host.arch == "aarch64" else host.arch
        return f"{name} has no {where} {chip} wheels" + (f": the last is {package} {last[-1]}" if last else "")
    if host.os == "linux" and host.libc is not None:
        libc = [p for p in fits if p.libc in (None, host.libc)]
        if not libc:
            return f"{name} has no wheel for musl (Alpine): its Linux wheels are manylinux, for glibc" \
                if host.libc == "musl" else f"{name} has no wheel for {host.libc}"
        fits = libc
    if host.os == "linux" and host.libc_version is not None:
        needs = {p: _glibc_need(p) for p in fits}
        floored = [p for p in fits if (needs[p][0] or ()) <= host.libc_version]
        if not floored:
            low = min(fits, key=lambda p: needs[p][0] or ())
            need, why = needs[low]
            said = f"{low.tag}, tagged for glibc {low.floor_text or 'any'}: {why}" if why else low.tag
            return (f"{name}'s Linux {host.arch} wheels need glibc {show(need or ())} or newer ({said}); "
                    f"this machine has {host.libc or 'glibc'} {show(host.libc_version)}")
        fits = floored
    if host.os == "macos" and host.macos is not None:
        floored = [p for p in fits if p.floor is None or p.floor <= host.macos]
        if not floored:
            low = min(fits, key=lambda p: p.floor or ())
            return (f"{name}'s macOS {host.arch} wheels need macOS {low.floor_text} or newer ({low.tag}); "
                    f"this machine has macOS {show(host.macos)}")
        fits = floored
    if host.python is not None and not any(_python_ok(wheels.tags[p], wheels.requires_python, host.python,
                                                      host.free_threaded) for p in fits):
        asked = f"a free-threaded Python {show(host.python)}t" if host.free_threaded else f"Python {show(host.python)}"
        has = _pythons(wheels, fits, host.free_threaded)
        return f"{name} has no wheel for {asked} (it has {has if host.free_threaded else 'Python ' + has})"
    return None


def newest(host: Host) -> str | None:
    """The newest release whose torch and torchvision wheels install on ``host``."""
    for version in reversed(load().releases):
        if refusal(version, host) is None:
            return version
    return None


def floor(version: str, os: str, arch: str) -> Version | None:
    """The lowest OS (macOS) or glibc (Linux) version any of ``version``'s torch wheels for ``os`` and ``arch``
    installs on; None when it has none there (or the facts do not cover it)."""
    packages = load().releases.get(version)
    floors = [p.floor for p in packages["torch"].tags if p.os == os and arch in p.arches and p.floor] \
        if packages else []
    return min(floors) if floors else None


def host_of(machine: Probe, arch: str | None = None, python: str | None = None) -> Host:
    """The facts of ``machine`` that decide which wheels install: ``arch`` and ``python`` replace
    the probed interpreter's (a target's own Python, say); an empty fact stays unknown."""
    def version(text: str | None) -> Version | None:
        numbers = tuple(int(p) for p in re.findall(r"[0-9]+", text or "")[:2])
        return numbers or None

    linux = machine.os == "linux"
    return Host(os=machine.os, arch=arch or machine.python_arch,
                python=version(python or machine.python_version),
                free_threaded=(python or machine.python_version or "").endswith("t"),
                libc=machine.libc if linux else None,
                libc_version=version(machine.libc_version) if linux else None,
                macos=version(machine.os_version) if machine.os == "macos" else None)
