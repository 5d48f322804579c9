"""Write ``envs/runtime_tags.yaml``: what each torch release's Linux wheels on PyPI pull in, and the glibc that needs.

``pip install torch==2.11.0`` on Linux installs, beside torch's own wheel, what its Requires-Dist names for Linux
(``platform_system == "Linux"``): triton, cuda-toolkit and the nvidia-* runtime packages, cuda-bindings..., each a
wheel with its own platform tag. Where one needs a newer glibc than torch's wheel, or has no wheel for the
machine's Python, the command fails there although torch's own wheel fits. For each release in
``envs/releases/*.yaml`` (every one PyPI serves: 2.0.0 on) and each of its Linux wheels on PyPI (x86_64 and
aarch64, every CPython, the highest build number where a wheel was uploaded again), this reads the wheel's core
metadata, follows the requirements that hold on Linux and not on macOS (markers and extras evaluated by
``packaging``) to everything they pull in, and records for each package the lowest glibc that any of its wheels
installing there accepts (manylinux_2_27: 2.27; py3-none-any: any): the files pip would choose from, read from
the simple pages (PEP 691) a refresh reads (``PIP_INDEX_URL`` or PyPI), files of other projects left out, yanked
ones too unless the requirement pins their version exactly (PEP 592: pip takes those). A package reached
through another (nvidia-cublas through cuda-toolkit[cublas]) is followed from its newest version that installs
there; one that is pure Python throughout is left out, as it never decides a floor.

Core metadata is the wheel's ``.metadata`` file where the page announces one (PEP 658/714), else the METADATA
inside the wheel, read by byte ranges (the zip's end, its central directory, that one member; a torch wheel is
500 MB), as pip's lazy wheels do: the PyPI mirror these facts were first read from announced none.

    PYTHONPATH=. python envs/scripts/fetch_runtime_tags.py       # rewrites envs/runtime_tags.yaml

What an index serves is a stranger's: every read of the run shares one deadline (DEADLINE), a wheel is read at
most WHEEL_BYTES by ranges and its METADATA at most METADATA_BYTES once inflated (read incrementally: a small wheel
whose METADATA inflates to gigabytes is refused, not held in memory), and a file name, tag, Requires-Dist, byte
range or zip member that is not what it should be is one ERROR line and exit 1, the file left as it was. What is
written is data (pyyaml), checked against the file's schema before it replaces it.

Builds that live only on download.pytorch.org pin their own runtime packages: the file's ``builds:`` rows, each
recorded from a real install, are kept as they stand; install-cmd takes any other CUDA build to pull in what
the release's PyPI wheels do, and says so where that decides the answer.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import re
import textwrap
import time
import zipfile
import zlib
from collections import defaultdict
from dataclasses import dataclass
from email.parser import HeaderParser
from functools import cache
from pathlib import Path

from packaging.markers import UndefinedComparison
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import BuildTag, canonicalize_name
from packaging.version import Version

from kitbench import _files, _http, _reach
from kitbench.advice import indexes, releases, wheels
from kitbench.errors import NetworkError
from kitbench.records import manifest

import _shared

OUT = Path(__file__).resolve().parent.parent / "runtime_tags.yaml"
ARCHES = ("x86_64", "aarch64")
_JSON = "application/vnd.pypi.simple.v1+json"
_AHEAD = 2**16  # bytes read at once from a wheel: its zip's end record, or a small member with its header
_ANY = "any"  # the platform tag of a pure wheel
_SOMEWHERE = "x"  # a platform stand-in: which interpreter and ABI tags fit is asked apart from the platform
DEADLINE = 900.0  # seconds for every read of a run together (the facts workflow's job has 30 minutes)
WHEEL_BYTES = 16 * 2**20  # read from one wheel by ranges: its end, central directory and METADATA
METADATA_BYTES = 2**20  # a core metadata file, inflated (torch's is some 10 kB)
_CPYTHON = re.compile(r"cp3([0-9]{1,2})t?")  # the Python tags a row can name (environment() reads them)
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,15})-([0-9]{1,15})/([0-9]{1,15})")
HEADER = """\
What each torch release's Linux wheels on PyPI pull in (torch's Requires-Dist for Linux, followed to
everything it names), and the lowest glibc each package's wheels accept there: glibc is torch's own
wheel's tag floor, needs the highest of all (what the command as a whole needs), per arch and the
Pythons alike. A requirement's glibc: 2.27 from manylinux_2_27, any for a pure wheel, no wheel where
none installs; via: the package that pulls it in. Pure packages reached through another are left out.
releases: written by envs/scripts/fetch_runtime_tags.py; do not edit by hand. builds: what a build of
PyTorch's own index pulls in, as a real install of it recorded (its dist-info: torch's Requires-Dist,
each installed wheel's Tag lines), each row with its source; the script keeps them as they are. A
CUDA build not recorded there is taken to pull in what the release's PyPI wheels do, and install-cmd
says so when that decides the answer. Read by install-cmd only for a Linux answer with a known glibc:
a build whose runtime package needs a newer glibc than the machine's is passed over, naming it."""

Floor = tuple[int, ...] | None  # the lowest glibc a package's wheels accept: () for any, None for no wheel


class Unreadable(_shared.Refused):
    """A fact that cannot be read as it should be: the table is not written."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="nothing was written; look at what the index serves there")


class _Run:
    """When every read of this run must be done by (a ``time.monotonic()``): main sets it."""

    until = float("inf")


def _get(url: str, accept: str, byte_range: str | None = None) -> _http.Response:
    return _http.get(url, accept, until=_Run.until, byte_range=byte_range)


@dataclass(frozen=True)
class Wheel:
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    file: indexes.File


@dataclass(frozen=True)
class Pulled:
    name: str
    requirement: str  # name[extras]specifier, markers already decided for this Python
    via: str  # the package whose Requires-Dist named it first; "" for torch's own
    floor: Floor


@dataclass(frozen=True)
class Row:
    torch: str
    arch: str
    pythons: tuple[str, ...]
    glibc: tuple[int, ...]  # torch's own wheel's tag floor
    requires: tuple[Pulled, ...]

    @property
    def needs(self) -> tuple[int, ...]:
        return max([self.glibc, *(p.floor for p in self.requires if p.floor is not None)])


@cache
def project(name: str) -> tuple[Wheel, ...]:
    """The wheels ``name``'s simple page lists; another project's files and names that are no wheel's left out."""
    found = []
    for entry in indexes.page_files(_get(f"{indexes.pypi_index()}{name}/", _JSON)):
        parsed = _shared.wheel(entry.filename)
        if parsed is None:
            continue  # an sdist, or a file name no installer reads as a wheel
        project_name, version, build, tags = parsed
        if project_name == name:
            found.append(Wheel(version, build, tags, entry))
    return tuple(found)


class _Ranges(io.RawIOBase):
    """A wheel on an index as a seekable file read by byte ranges, for zipfile to read its end, its central
    directory and one member from, and nothing else."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url, self.read_bytes = url, 0
        self.start, _, self.size, self.kept = self._part(f"-{_AHEAD}", None)
        self.position = 0

    def _part(self, span: str, first_asked: int | None) -> tuple[int, int, int, bytes]:
        """The part of the file ``span`` asks for (from ``first_asked``; None: its end): its first and last byte,
        the whole's size, its bytes."""
        answer = _get(self.url, "*/*", byte_range=span)
        if answer.status != 206:
            raise Unreadable(
                f"{_reach.shown(self.url)} announces no core metadata and its server sends no parts of "
                f"it (answered {answer.status} to a byte range)"
            )
        sent = _CONTENT_RANGE.fullmatch(answer.content_range or "")
        first, last, size = (int(n) for n in sent.groups()) if sent else (0, -1, 0)
        if (
            not sent
            or not first <= last < size
            or last - first + 1 != len(answer.body)
            or (last != size - 1 if first_asked is None else first != first_asked)
        ):
            raise Unreadable(
                f"{_reach.shown(self.url)}: a part whose Content-Range does not say what was sent "
                f"({(answer.content_range or 'none')[:60]!r}, {len(answer.body):,} bytes)"
            )
        self.read_bytes += len(answer.body)
        if self.read_bytes > WHEEL_BYTES:
            raise Unreadable(f"{_reach.shown(self.url)}: over {WHEEL_BYTES // 2**20} MB read for its core metadata")
        return first, last, size, answer.body

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        position = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence] + offset
        if position < 0:
            raise OSError(f"a seek to {position} (the zip's records point before the file)")  # zipfile's own
        self.position = position
        return self.position

    def read(self, size: int = -1) -> bytes:
        want = self.size - self.position if size < 0 else min(size, self.size - self.position)
        if want <= 0:
            return b""
        if not self.start <= self.position <= self.position + want <= self.start + len(self.kept):
            end = min(self.size, self.position + max(want, _AHEAD)) - 1
            self.start, _, _, self.kept = self._part(f"{self.position}-{end}", self.position)
        data = self.kept[self.position - self.start : self.position - self.start + want]
        self.position += len(data)
        return data


def _metadata_in(wheel: Wheel) -> bytes:
    """The wheel's own .dist-info/METADATA, read by ranges and inflated at most METADATA_BYTES."""
    shown = wheel.file.filename
    try:
        with zipfile.ZipFile(_Ranges(wheel.file.url)) as archive:
            inside = [
                i
                for i in archive.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")
            ]
            if len(inside) != 1:
                raise Unreadable(f"{shown} holds {len(inside)} .dist-info/METADATA files")
            if inside[0].file_size > METADATA_BYTES:
                raise Unreadable(
                    f"{shown}: its METADATA inflates to {inside[0].file_size:,} bytes; core metadata is "
                    f"at most {METADATA_BYTES:,}"
                )
            with archive.open(inside[0]) as member:
                # No more than a byte past the cap is ever inflated, whatever the zip's records declare.
                data = member.read(METADATA_BYTES + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, UnicodeDecodeError) as bad:
        raise Unreadable(f"{shown} is not a zip file as served ({str(bad)[:120]})") from None
    except (NotImplementedError, RuntimeError) as bad:  # a compression method zipfile lacks, encryption
        raise Unreadable(f"{shown}: its METADATA cannot be read ({str(bad)[:120]})") from None
    if len(data) > METADATA_BYTES:
        raise Unreadable(
            f"{shown}: its METADATA inflates past {METADATA_BYTES:,} bytes; core metadata is not that large"
        )
    return data


@cache
def requires_dist(wheel: Wheel) -> tuple[str, ...]:
    """The wheel's Requires-Dist, each one packaging reads: from its PEP 658 .metadata where announced and served,
    else from the wheel."""
    data = None
    # Announced and not served (a 404): the wheel's own METADATA is the same file.
    with contextlib.suppress(NetworkError):
        data = _get(wheel.file.url + ".metadata", "*/*").body if wheel.file.metadata else None
    if data is not None and len(data) > METADATA_BYTES:
        raise Unreadable(
            f"{wheel.file.filename}.metadata is {len(data):,} bytes; core metadata is at most {METADATA_BYTES:,}"
        )
    data = _metadata_in(wheel) if data is None else data
    text = _files.decode(data, wheel.file.filename, "core metadata file", Unreadable)
    found = tuple(HeaderParser().parsestr(text).get_all("Requires-Dist") or ())
    for requirement in found:
        try:
            Requirement(requirement)
        except InvalidRequirement as bad:
            raise Unreadable(f"{wheel.file.filename}: a Requires-Dist that does not parse ({bad})") from None
    return tuple(str(r) for r in found)


def environment(python: str, arch: str, system: str = "Linux") -> dict[str, str]:
    """PEP 508's marker variables for CPython ``python`` (cp312, cp313t) on ``system``."""
    version = f"{python[2]}.{python[3:].rstrip('t')}"
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{version}.0",
        "os_name": "nt" if system == "Windows" else "posix",
        "platform_machine": arch,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": f"{version}.0",
        "python_version": version,
        "sys_platform": {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}[system],
        "extra": "",
    }


def applies(requirement: Requirement, env: dict[str, str], extras: frozenset[str] = frozenset()) -> bool:
    marker = requirement.marker
    try:
        return marker is None or any(marker.evaluate({**env, "extra": e}) for e in ("", *sorted(extras)))
    except UndefinedComparison as bad:  # python_version ~= "3": it parses, and no installer can decide it
        raise Unreadable(f"a Requires-Dist whose marker cannot be decided ({str(requirement)[:120]}: {bad})") from None


@cache
def _fitting(python: str) -> frozenset[Tag]:
    """The interpreter and ABI tags pip takes on this CPython, on the stand-in platform and on ``any``."""
    version = (int(python[2]), int(python[3:].rstrip("t")))
    own = f"cp{version[0]}{version[1]}"
    return frozenset(
        [
            *cpython_tags(version, [own + ("t" if python.endswith("t") else "")], [_SOMEWHERE]),
            *compatible_tags(version, own, [_SOMEWHERE]),
        ]
    )


def _tag_floor(tag: Tag, python: str, arch: str) -> Floor:
    """The glibc a file tagged ``tag`` needs on this CPython and arch: () for any; None where pip would not take it."""
    if Tag(tag.interpreter, tag.abi, _ANY if tag.platform == _ANY else _SOMEWHERE) not in _fitting(python):
        return None
    if tag.platform == _ANY:
        return ()
    platform = wheels.platform(tag.platform)
    fits = platform.os == "linux" and arch in platform.arches and platform.libc in (None, "glibc")
    return (platform.floor or ()) if fits else None


@cache
def installable(name: str, specifier: str, python: str, arch: str) -> tuple[tuple[Wheel, tuple[int, ...]], ...]:
    """The wheels of ``name`` pip may take for ``specifier`` on this CPython and arch, whatever its glibc, each
    with the lowest glibc it accepts."""
    spec = SpecifierSet(specifier)
    exact = any(s.operator in ("==", "===") and not s.version.endswith(".*") for s in spec)
    # Pre-releases only where the specifier names one or nothing else matches, as pip.
    versions = set(spec.filter({w.version for w in project(name)}))
    minor = (int(python[2]), int(python[3:].rstrip("t")))
    found = []
    for wheel in project(name):
        if (
            wheel.version not in versions
            or (wheel.file.yanked and not exact)
            or not wheels.python_allowed(wheel.file.requires_python, minor)
        ):
            continue
        floors = [f for t in wheel.tags for f in [_tag_floor(t, python, arch)] if f is not None]
        if floors:
            found.append((wheel, min(floors)))
    return tuple(found)


def shown(floor: Floor) -> str:
    return "no wheel" if floor is None else ".".join(map(str, floor)) or _ANY


@cache
def pulled(requires: tuple[str, ...], python: str, arch: str) -> tuple[Pulled, ...]:
    """Everything ``requires`` (torch's Linux requirements) pulls in on this CPython and arch, with its floor.
    A package named twice is asked for once, with both specifiers and every extra asked for."""
    env = environment(python, arch)
    wanted: dict[str, tuple[SpecifierSet, frozenset[str], str]] = {}
    queue = [(Requirement(r), "") for r in requires]
    while queue:
        requirement, via = queue.pop(0)
        name = canonicalize_name(requirement.name)
        if name == "torch":
            continue  # triton 2.0.0 requires torch: the wheel being installed, held to its release
        before = wanted.get(name)
        now = (
            (requirement.specifier & before[0], before[1] | requirement.extras, before[2])
            if before
            else (requirement.specifier, frozenset(requirement.extras), via)
        )
        if before and now[:2] == before[:2]:
            continue
        wanted[name] = now
        files = installable(name, str(now[0]), python, arch)
        if files:
            newest = max(files, key=lambda f: (f[0].version, f[0].build))[0]
            for text in requires_dist(newest):  # each one parses: requires_dist says so
                found = Requirement(text)
                if applies(found, env, now[1]):
                    queue.append((found, name))
    result = []
    for package, (spec, extras, via) in wanted.items():
        floors = [f for _, f in installable(package, str(spec), python, arch)]
        floor = min(floors) if floors else None
        if via and floor == ():
            continue  # pure Python, reached through another: never the floor
        asked = f"[{','.join(sorted(extras))}]" if extras else ""
        result.append(Pulled(package, f"{package}{asked}{spec}", via, floor))
    return tuple(result)


def torch_wheels(version: str) -> dict[tuple[str, str], tuple[Wheel, tuple[int, ...]]]:
    """(arch, Python tag) -> the torch wheel pip takes there, and its tag's glibc floor; where a release's wheel
    was uploaded again with a build number (2.10.0's -3- wheels), the highest."""
    chosen: dict[tuple[str, str], tuple[Wheel, tuple[int, ...]]] = {}
    for wheel in project("torch"):
        if str(wheel.version) != version or wheel.file.yanked:
            continue
        for tag in wheel.tags:
            platform = wheels.platform(tag.platform)
            arch = platform.arches[0] if platform.arches else ""
            if platform.os != "linux" or platform.libc != "glibc" or arch not in ARCHES:
                continue
            python = indexes.python_tag(tag.interpreter, tag.abi)
            if not _CPYTHON.fullmatch(python):
                raise Unreadable(
                    f"{wheel.file.filename}: a Python tag ({python}) that names no CPython 3 minor; "
                    "torch's Linux wheels are built per CPython (cp312, cp313t)"
                )
            key = (arch, python)
            if key not in chosen or wheel.build > chosen[key][0].build:
                chosen[key] = (wheel, platform.floor or ())
    return chosen


def rows(version: str) -> list[Row]:
    """One row per arch and group of Pythons whose torch wheel and everything it pulls in have the same floors."""
    groups: dict[tuple[str, tuple[int, ...], tuple[Pulled, ...]], list[str]] = defaultdict(list)
    found = torch_wheels(version)
    if not found:
        raise Unreadable(f"torch {version}: no Linux wheel on {_reach.shown(indexes.pypi_index())}")
    for (arch, python), (wheel, own) in sorted(found.items(), key=lambda i: (i[0][0], indexes.tag_key(i[0][1]))):
        here, mac = environment(python, arch), environment(python, arch, "Darwin")
        linux = tuple(
            r for r in requires_dist(wheel) if applies(Requirement(r), here) and not applies(Requirement(r), mac)
        )
        groups[arch, own, pulled(linux, python, arch)].append(python)
    return [Row(version, arch, tuple(pythons), own, deps) for (arch, own, deps), pythons in groups.items()]


def _data(row: Row) -> dict[str, object]:
    return {
        "torch": row.torch,
        "arch": row.arch,
        "pythons": " ".join(row.pythons),
        "glibc": shown(row.glibc),
        "needs": shown(row.needs),
        "requires": [
            {"requirement": dep.requirement, **({"via": dep.via} if dep.via else {}), "glibc": shown(dep.floor)}
            for dep in row.requires
        ],
    }


def _found(table: list[Row]) -> list[str]:
    """The header's account of where what torch pulls in needs a newer glibc than torch's own wheel's tag says."""
    raised: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[list[str], list[str]]] = {}
    for row in (r for r in table if r.needs != r.glibc):
        versions, names = raised.setdefault((row.arch, row.glibc, row.needs), ([], []))
        versions += [] if row.torch in versions else [row.torch]
        names += [d.name for d in row.requires if d.floor and d.floor > row.glibc and d.name not in names]
    if not raised:
        return ["Found: nothing any covered release pulls in needs a newer glibc than torch's own wheel's tag."]
    lines = [
        "Found: what torch pulls in needs a newer glibc than torch's own wheel's tag (for some or all of",
        "its Pythons; tags only: envs/index_tags.yaml says where torch's binaries need more than theirs) on",
    ]
    for (arch, own, needs), (versions, names) in raised.items():
        lines += textwrap.wrap(
            f"{arch}, torch {', '.join(versions)}: {shown(own)} -> {shown(needs)}, by {', '.join(names)}",
            108,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    return lines


def _kept_builds(out: Path) -> list[object]:
    """The ``builds:`` rows as they stand (each recorded from a real install, with its source), or none; the
    schema checks them again with what is written."""
    if not out.is_file():
        return []
    data, _ = manifest.parse(_files.read_text(out, manifest.MAX_BYTES, "manifest"), out)
    builds = data.get("builds", [])
    return list(builds) if isinstance(builds, list) else []


def main(versions: list[str] | None = None, out: Path = OUT, deadline: float = DEADLINE) -> int:
    _Run.until = time.monotonic() + deadline
    versions = versions or [rel.version for rel in list(releases.newest_first(derived=False))[::-1]]
    table = [row for version in versions for row in rows(version)]
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    data = {
        "source": f"{_reach.bare(indexes.pypi_index())}<project>/ (PEP 691 JSON) and each wheel's core metadata "
        "(PEP 658, else the METADATA in the wheel, read by byte ranges); yanked files left out unless "
        "pinned exactly",
        "read": today,
        "kind": "published",
        "releases": [_data(row) for row in table],
        "builds": _kept_builds(out),
    }
    header = "\n".join([HEADER, *_found(table)])
    _shared.write(out, _shared.dump(data, header, flow=True), "runtime_tags")
    print(f"wrote {out} ({len(versions)} releases, {len(table)} rows, read {today})")
    return 0


if __name__ == "__main__":
    _shared.run(main)
