"""Does a release's wheel install on a machine? Answered from ``envs/wheels.yaml``.

The facts are PyPI's own file names (``envs/scripts/fetch_wheels.py``): per release and
package, the platform tags and the Python tags of each. A wheel installs where pip would
pick it: the OS and arch match, the C library is glibc at least the tag's floor
(``manylinux_2_28``: glibc 2.28; musl takes ``musllinux`` only), macOS is at least the
tag's floor, and the interpreter's tag is listed and its version meets Requires-Python.
A fact the question leaves unknown (another machine's glibc, say) constrains nothing.
Where PyPI has no torch wheel for the machine's OS and chip at all (Windows on Arm), what installs is what
PyTorch's own index is recorded serving there (``envs/index_tags.yaml``'s ``wheels``): torch, and each of its
companions only where that index is recorded serving it too.
Requires-Python and the releases' order are read by ``packaging`` (imported where first asked); the platform
tags are this module's own reading: their floors are another machine's glibc or macOS, which
``packaging.tags`` (this interpreter's tags) cannot answer. What torch pulls in on
Linux (triton, the CUDA runtime packages: ``envs/runtime_tags.yaml``, ``envs/scripts/fetch_runtime_tags.py``)
is read only for a Linux answer with a known glibc, and decides a build, not a release: the CPU build pulls
none of it in.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kitbench import _files
from kitbench.advice import facts
from kitbench.machine.probe import Probe
from kitbench.records import manifest

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# What a pinned command names; torchaudio where the release had one (and the facts record it).
PACKAGES = ("torch", "torchvision", "torchaudio")
# PEP 600's names for the legacy manylinux tags.
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}
_WINDOWS_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}
_PLATFORM = re.compile(
    r"^(?:(manylinux1|manylinux2010|manylinux2014)|(manylinux|musllinux|macosx)_([0-9]+)_([0-9]+)"
    r"|win|linux)_(\w+)$"
)
_PYTHON_TAG = re.compile(r"^cp([0-9])([0-9]+)(t|-abi3)?$")

Version = tuple[int, ...]


# Named tuples, not dataclasses: "Start-up" in docs/architecture.md.
class Host(NamedTuple):
    """What decides whether a wheel installs; ``None`` is a fact the question leaves unknown."""

    os: str  # linux | macos | windows
    arch: str  # the interpreter's: x86_64 | aarch64 | arm64
    python: Version | None = None  # (3, 10)
    free_threaded: bool = False  # a free-threaded CPython (3.13t): only cpXYt (and py3) wheels install
    libc: str | None = None  # glibc | musl (Linux)
    libc_version: Version | None = None
    macos: Version | None = None


class Platform(NamedTuple):
    tag: str
    os: str
    arches: tuple[str, ...]
    libc: str | None  # glibc | musl on Linux
    floor: Version | None  # glibc's or macOS's

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
    releases: dict[str, dict[str, Wheels]]  # torch version -> package -> wheels, oldest first


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


class IndexWheels(NamedTuple):
    """Wheels of one release that PyTorch's index serves on a platform PyPI has none for, as one source says."""

    platform: Platform
    pythons: dict[str, tuple[str, ...]]  # package -> its Python tags there
    published: bool
    read: str
    source: str
    confirm: str  # for an inferred fact, what would confirm it


class Runtime(NamedTuple):
    """What a torch wheel pulls in on Linux for some Pythons, and the glibc each of those packages' wheels need:
    a row of ``envs/runtime_tags.yaml``, from PyPI's wheels (``releases``) or a build of PyTorch's index recorded
    from a real install (``builds``)."""

    pythons: tuple[str, ...]  # cp312, cp313t
    requires: tuple[tuple[str, str, Version | None], ...]  # (requirement, via, glibc: () any, None no wheel)
    source: str


class IndexTags(NamedTuple):
    """What PyPI's tags do not say about PyTorch's wheels (``envs/index_tags.yaml``)."""

    glibc: dict[str, tuple[Version, str]]  # tag -> (the glibc its binaries need, source)
    builds: dict[tuple[str, str], tuple[str, str]]  # (torch, compute) -> (its Linux x86_64 tag, source)
    wheels: dict[str, tuple[IndexWheels, ...]]  # torch version -> the wheels only its index serves


def index_tags() -> IndexTags:
    return _index_tags(_files.stamp(manifest.envs_dir() / "index_tags.yaml"))


@cache
def _index_tags(source: _files.Stamp) -> IndexTags:
    data = manifest.load(Path(source[0]), "index_tags").data
    found: dict[str, tuple[IndexWheels, ...]] = {}
    for e in data.get("wheels", ()):
        row = IndexWheels(
            platform(e["platform"]),
            {p: tuple(t.split()) for p, t in e["pythons"].items()},
            e["kind"] == "published",
            e["read"],
            e["source"],
            e.get("confirm", ""),
        )
        found[e["torch"]] = (*found.get(e["torch"], ()), row)
    return IndexTags(
        {e["tag"]: (parse_version(e["glibc"]), e["source"]) for e in data["glibc"]},
        {(e["torch"], e["compute"]): (e["linux_x86_64"], e["source"]) for e in data["builds"]},
        found,
    )


def _serves(platform: Platform, host: Host) -> bool:
    return platform.os == host.os and host.arch in platform.arches


def index_only(version: str, host: Host) -> bool:
    """Whether PyPI has no torch wheel of ``version`` for the host's OS and chip (Windows on Arm), so that what
    installs there is what PyTorch's index is recorded serving."""
    packages = load().releases.get(version)
    return packages is not None and not any(_serves(p, host) for p in packages["torch"].tags)


def index_rows(version: str, host: Host, inferred: bool = False) -> list[IndexWheels]:
    """The recorded facts of what PyTorch's index serves of ``version`` on the host's platform: the published ones,
    and with ``inferred`` the inferred ones too."""
    return [r for r in index_tags().wheels.get(version, ()) if _serves(r.platform, host) and (r.published or inferred)]


def _index_wheels(version: str, host: Host) -> dict[str, Wheels]:
    """``version``'s packages as PyTorch's index is recorded (published) serving them on the host's platform (a
    package with no such record is absent), with each one's PyPI Requires-Python: the same release's metadata."""
    found: dict[str, dict[Platform, tuple[str, ...]]] = {}
    for row in index_rows(version, host):
        for package, pythons in row.pythons.items():
            tags = found.setdefault(package, {})
            tags[row.platform] = tuple(dict.fromkeys(tags.get(row.platform, ()) + pythons))
    pypi = load().releases[version]
    return {p: Wheels(pypi[p].version, pypi[p].requires_python, tags) for p, tags in found.items() if p in pypi}


class RuntimeTags(NamedTuple):
    """What torch's Linux wheels pull in (``envs/runtime_tags.yaml``)."""

    releases: dict[tuple[str, ...], tuple[Runtime, ...]]  # (torch, arch) -> its PyPI wheels'
    builds: dict[tuple[str, ...], tuple[Runtime, ...]]  # (torch, compute, arch) -> a recorded index build's


def runtime_tags() -> RuntimeTags:
    return _runtime_tags(_files.stamp(manifest.envs_dir() / "runtime_tags.yaml"))


@cache
def _runtime_tags(source: _files.Stamp) -> RuntimeTags:
    data = manifest.load(Path(source[0]), "runtime_tags").data
    pypi = f"envs/runtime_tags.yaml: PyPI's torch wheels' Requires-Dist, read {data['read']}"
    found = RuntimeTags({}, {})
    for rows, section, key in (
        (found.releases, "releases", ("torch", "arch")),
        (found.builds, "builds", ("torch", "compute", "arch")),
    ):
        for entry in data[section]:
            requires = tuple(
                (
                    r["requirement"],
                    r.get("via", ""),
                    None if r["glibc"] == "no wheel" else () if r["glibc"] == "any" else parse_version(r["glibc"]),
                )
                for r in entry["requires"]
            )
            at = tuple(entry[k] for k in key)
            rows[at] = (
                *rows.get(at, ()),
                Runtime(tuple(entry["pythons"].split()), requires, entry.get("source", pypi)),
            )
    return found


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


def build_refusal(version: str, compute: str, host: Host) -> tuple[str, str] | None:
    """Why ``compute``'s build of torch ``version`` does not install on ``host``, and the recorded listing that says
    so ("" where none does): its recorded index tags, then what it pulls in on Linux (``runtime_refusal``); None
    where both install, or where nothing of it is recorded (its own tags are then PyPI's, checked already)."""
    wheels = build(version, compute) if host.os == "linux" and host.arch == "x86_64" else None
    why = _refusal(wheels, "torch", host) if wheels is not None else None
    if why:
        return why, index_tags().builds[version, compute][1]
    pulled = runtime_refusal(version, compute, host)
    return (pulled, "") if pulled else None


def runtime_refusal(version: str, compute: str, host: Host) -> str | None:
    """Why what ``compute``'s build of torch ``version`` pulls in on Linux (triton, the CUDA runtime packages) does
    not install on ``host``: a package whose wheels need a newer glibc than the host's, or that has none for its
    Python. Read from the build's own record (envs/runtime_tags.yaml's ``builds``) where there is one for the
    host's Python, else, for a CUDA build, from the release's PyPI wheels (its ``releases``), which the words
    then say is assumed. None where everything installs, or nothing is recorded."""
    if host.os != "linux" or host.libc != "glibc" or host.libc_version is None:
        return None
    # Only here: the tables and this import are for a Linux answer with a known glibc, not install-cmd's start-up.
    from kitbench.machine import builds

    def fits(rows: tuple[Runtime, ...]) -> list[Runtime]:
        return [r for r in rows if host.python is None or _python_ok(r.pythons, "", host.python, host.free_threaded)]

    table = runtime_tags()
    rows = fits(table.builds.get((version, compute, host.arch), ()))
    recorded = bool(rows)
    if not rows and builds.build(compute).kind == "cuda":
        rows = fits(table.releases.get((version, host.arch), ()))
    whys = [_runtime_refusal(row, f"torch {version}+{compute}", host) for row in rows]
    if not whys or None in whys:
        return None  # a Python it is not known for leaves it unknown: every row must refuse
    said = (
        rows[0].source
        if recorded
        else (
            f"{rows[0].source}; no record of torch {version}+{compute}'s own "
            "requirements, so they are taken to be its PyPI wheels'"
        )
    )
    return f"{whys[0]} ({said})"


def _runtime_refusal(row: Runtime, name: str, host: Host) -> str | None:
    assert host.libc_version is not None
    where = f"Linux {host.arch}"
    missing = [(requirement, via) for requirement, via, floor in row.requires if floor is None]
    if missing:
        requirement, via = missing[0]
        asked = f"Python {show(host.python)}{'t' if host.free_threaded else ''}" if host.python else "its Python"
        return (
            f"{name} pulls in {requirement}{f' (through {via})' if via else ''}, which has no {where} wheel for {asked}"
        )
    above = [r for r in row.requires if (r[2] or ()) > host.libc_version]
    if not above:
        return None
    requirement, via, floor = max(above, key=lambda r: r[2] or ())
    return (
        f"{name} pulls in {requirement}{f' (through {via})' if via else ''}, whose {where} wheels need glibc "
        f"{show(floor or ())} or newer; this machine has glibc {show(host.libc_version)}"
    )


def recorded(version: str, compute: str) -> bool:
    """Is the platform tag of this build's Linux x86_64 wheels recorded from PyTorch's index?"""
    return (version, compute) in index_tags().builds


def load() -> Facts:
    """The baked facts, and the releases the user's fact cache adds: read again whenever either file changes."""
    return _load(_files.stamp(manifest.envs_dir() / "wheels.yaml"), _files.stamp(facts.cache_dir() / "releases.json"))


@cache
def _load(source: _files.Stamp, cache_source: _files.Stamp) -> Facts:  # cache_source: a key only (facts reads it)
    data = manifest.load(Path(source[0]), "wheels").data
    found: dict[str, dict[str, Wheels]] = {}
    for entry in data["releases"]:
        found[entry["torch"]] = _wheels(entry, entry["wheels"])
    # Releases the user's cache knows and the baked facts do not (kitbench facts refresh).
    for derived in facts.derived():
        versions = {
            "torch": derived.version,
            "torchvision": derived.torchvision,
            "torchaudio": derived.torchaudio or "",
        }
        found.setdefault(derived.version, _wheels(versions, derived.wheels))
    from packaging.version import Version as Release

    ordered = dict(sorted(found.items(), key=lambda item: Release(item[0])))
    return Facts(source=data["source"], read=data["read"], releases=ordered)


def _wheels(versions: dict[str, str], packages: dict[str, dict[str, str]]) -> dict[str, Wheels]:
    return {
        package: Wheels(
            versions[package],
            tags["requires_python"],
            {platform(p): tuple(t.split()) for p, t in tags.items() if p != "requires_python"},
        )
        for package, tags in packages.items()
    }


def python_allowed(spec: str, python: Version) -> bool:
    """``python`` (major, minor) meets Requires-Python ``spec``, taken as its first release (3.14 as 3.14.0: a
    clause excluding a later patch, ``!=3.14.1``, leaves 3.14 allowed). A spec that is not PEP 440's constrains
    nothing, as pip ignores one."""
    allowed = _requires_python(spec)
    return allowed is None or allowed.contains(show(python))


@cache
def _requires_python(spec: str) -> "SpecifierSet | None":
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # see "Start-up" in docs/architecture.md

    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        return None


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
    """Why ``torch==version`` (with its torchvision) has no wheel that installs on ``host``; None if it has. Where
    only PyTorch's index serves the host's platform, torch alone decides, on that index's published facts (its
    companions are named where recorded there: ``named``)."""
    packages = load().releases.get(version)
    if packages is None:
        return None
    if index_only(version, host):
        return _refusal(_index_wheels(version, host).get("torch", packages["torch"]), "torch", host)
    for package in (p for p in PACKAGES if p in packages):
        why = _refusal(packages[package], package, host)
        if why:
            return why
    return None


def named(version: str, host: Host) -> tuple[str, ...] | None:
    """The packages a command for ``host`` names of ``version``, where only PyTorch's index serves the host's
    platform: torch, and each companion recorded there that installs on ``host`` (published facts alone). None
    where PyPI serves it: the command names every package of the release."""
    if not index_only(version, host):
        return None
    served = _index_wheels(version, host)
    return ("torch", *(p for p in PACKAGES[1:] if p in served and _refusal(served[p], p, host) is None))


def place(host: Host) -> str:
    """The host's platform in words: "Linux aarch64", "Windows arm64"."""
    where = {"linux": "Linux", "macos": "macOS", "windows": "Windows"}.get(host.os, host.os)
    # In Windows' own word: it says ARM64 (and its wheels win_arm64) where kitbench says aarch64.
    chip = "arm64" if host.os == "windows" and host.arch == "aarch64" else host.arch
    return f"{where} {chip}"


def source_of(version: str, host: Host, package: str, inferred: bool = False) -> IndexWheels | None:
    """The recorded fact that PyTorch's index serves a wheel of ``package`` (``version``'s) that installs on
    ``host``: a published one, else, with ``inferred``, an inferred one; None where none is recorded."""
    pypi = load().releases[version][package]
    rows = sorted(index_rows(version, host, inferred), key=lambda r: not r.published)
    return next(
        (
            r
            for r in rows
            if package in r.pythons
            and _refusal(Wheels(pypi.version, pypi.requires_python, {r.platform: r.pythons[package]}), package, host)
            is None
        ),
        None,
    )


def _refusal(wheels: Wheels, package: str, host: Host) -> str | None:
    name = f"{package} {wheels.version}"
    fits = [p for p in wheels.tags if _serves(p, host)]
    if not fits:
        last = [
            v
            for v, packages in load().releases.items()
            if package in packages and any(_serves(p, host) for p in packages[package].tags)
        ]
        if last:
            return f"{name} has no {place(host)} wheels: the last is {package} {last[-1]}"
        # PyPI has none of any release here: the releases PyTorch's index is on record serving, which says only
        # what is on record (a release in a gap between them may exist unrecorded).
        served = _index_served(
            package,
            host,
            _files.stamp(manifest.envs_dir() / "wheels.yaml"),
            _files.stamp(facts.cache_dir() / "releases.json"),
            _files.stamp(manifest.envs_dir() / "index_tags.yaml"),
        )
        return f"{name} has no {place(host)} wheels" + (
            f" on record: PyPI has none, and PyTorch's index is on record serving {package} {', '.join(served)} "
            "(envs/index_tags.yaml)"
            if served
            else ""
        )
    if host.os == "linux" and host.libc is not None:
        libc = [p for p in fits if p.libc in (None, host.libc)]
        if not libc:
            return (
                f"{name} has no wheel for musl (Alpine): its Linux wheels are manylinux, for glibc"
                if host.libc == "musl"
                else f"{name} has no wheel for {host.libc}"
            )
        fits = libc
    if host.os == "linux" and host.libc_version is not None:
        needs = {p: _glibc_need(p) for p in fits}
        floored = [p for p in fits if (needs[p][0] or ()) <= host.libc_version]
        if not floored:
            low = min(fits, key=lambda p: needs[p][0] or ())
            need, why = needs[low]
            said = f"{low.tag}, tagged for glibc {low.floor_text or 'any'}: {why}" if why else low.tag
            return (
                f"{name}'s Linux {host.arch} wheels need glibc {show(need or ())} or newer ({said}); "
                f"this machine has {host.libc or 'glibc'} {show(host.libc_version)}"
            )
        fits = floored
    if host.os == "macos" and host.macos is not None:
        floored = [p for p in fits if p.floor is None or p.floor <= host.macos]
        if not floored:
            low = min(fits, key=lambda p: p.floor or ())
            return (
                f"{name}'s macOS {host.arch} wheels need macOS {low.floor_text} or newer ({low.tag}); "
                f"this machine has macOS {show(host.macos)}"
            )
        fits = floored
    if host.python is not None and not any(
        _python_ok(wheels.tags[p], wheels.requires_python, host.python, host.free_threaded) for p in fits
    ):
        asked = f"a free-threaded Python {show(host.python)}t" if host.free_threaded else f"Python {show(host.python)}"
        has = _pythons(wheels, fits, host.free_threaded)
        return f"{name} has no wheel for {asked} (it has {has if host.free_threaded else 'Python ' + has})"
    return None


@cache
def _index_served(package: str, host: Host, *sources: _files.Stamp) -> tuple[str, ...]:
    """``package``'s versions PyTorch's index is on record serving on the host's platform. Asked of every release
    a search for the newest one refuses; the facts' stamps are the key (a refresh or an edit reads them again)."""
    releases = load().releases
    return tuple(releases[v][package].version for v in releases if package in _index_wheels(v, host))


def newest(host: Host, having: tuple[str, ...] = ()) -> str | None:
    """The newest release whose torch and torchvision wheels install on ``host``; with ``having``, the newest whose
    command names those packages too, where it has them (where only PyTorch's index serves the host, one whose
    companions are recorded there)."""
    for version, packages in reversed(load().releases.items()):
        only = named(version, host) if having else None
        if refusal(version, host) is None and (only is None or all(p in only for p in having if p in packages)):
            return version
    return None


def other_pythons(host: Host) -> list[Version]:
    """The Pythons of the host's build (default or free-threaded) that some release installs on, on its platform:
    what a host none installs on is told."""
    if newest(host._replace(python=None)) is None:
        return []  # its Python is not what keeps every release off it (a musl or an old glibc is)
    found: set[Version] = set()
    for version, packages in load().releases.items():
        torch = (_index_wheels(version, host) if index_only(version, host) else packages).get("torch")
        for tag in (t for p, pythons in (torch.tags.items() if torch else ()) if _serves(p, host) for t in pythons):
            python = python_of_tag(tag)
            if python is not None and (python[1] == "t") == host.free_threaded:
                found.add(python[0])
    return [v for v in sorted(found) if newest(host._replace(python=v)) is not None]


def floor(version: str, os: str, arch: str) -> Version | None:
    """The lowest OS (macOS) or glibc (Linux) version any of ``version``'s torch wheels for ``os`` and ``arch``
    installs on; None when it has none there (or the facts do not cover it)."""
    packages = load().releases.get(version)
    floors = (
        [p.floor for p in packages["torch"].tags if p.os == os and arch in p.arches and p.floor] if packages else []
    )
    return min(floors) if floors else None


def host_of(machine: Probe, arch: str | None = None, python: str | None = None) -> Host:
    """The facts of ``machine`` that decide which wheels install: ``arch`` and ``python`` replace
    the probed interpreter's (a target's own Python, say); an empty fact stays unknown."""

    def version(text: str | None) -> Version | None:
        numbers = tuple(int(p) for p in re.findall(r"[0-9]+", text or "")[:2])
        return numbers or None

    linux = machine.os == "linux"
    return Host(
        os=machine.os,
        arch=arch or machine.python_arch,
        python=version(python or machine.python_version),
        free_threaded=(python or machine.python_version or "").endswith("t"),
        libc=machine.libc if linux else None,
        libc_version=version(machine.libc_version) if linux else None,
        macos=version(machine.os_version) if machine.os == "macos" else None,
    )
