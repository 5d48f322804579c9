"""The releases install-cmd covers, and the commands pytorch.org publishes for each, exact to its text.

Release data comes from ``envs/releases/*.yaml`` (each series names the page
its commands were taken from); the rules that turn it into commands are the
ones pytorch.org's two pages follow, and the departures the pages make from
their own rules are kept verbatim as ``quirks``. The releases only the user's fact
cache knows are added, marked unverified. Nothing here imports torch.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from kitbench import _files
from kitbench.advice import facts, vendors
from kitbench.errors import ManifestError, SelectionError
from kitbench.machine.builds import build, page_order
from kitbench.machine.probe import Probe
from kitbench.machine.versions import version_tuple
from kitbench.records import manifest

_MAC = "mac"  # the quirk key of macOS commands


class Evidence(NamedTuple):
    """What says one build of a release exists: the source's kind (``KINDS``), the source, what would confirm it
    (where it is not answerable), and the platforms it is limited to (empty: every one its kind of build has)."""

    build: str
    kind: str
    source: str
    confirm: str = ""
    platforms: tuple[str, ...] = ()
    # False: a build pytorch.org's pages never showed (cu129 of 2.9 to 2.13), answered by default only where its
    # kernel list is on record: nothing but the wheel says which GPUs it serves.
    selector: bool = True
    also: str = ""  # a second source, or one that disagrees


_AHEAD = 1 << 31  # above every release's major version, for nightly's key


class Release(NamedTuple):
    """One release as install-cmd answers it. A named tuple, not a dataclass: as immutable, and much cheaper
    to define, which install-cmd's start-up pays on every run."""

    version: str
    torchvision: str
    torchaudio: str | None  # None: no torchaudio was released with it
    wheels: tuple[str, ...]
    conda: tuple[str, ...]
    series: str
    pypi_linux: str
    pinned_pypi_without_index: bool
    macos_x86_64: bool
    aarch64_cuda: bool
    selector_torchaudio: bool
    kernels: dict[str, tuple[str, ...]]
    quirks: dict[tuple[str, str], str]
    source: str
    unverified: dict[str, str]  # format -> why its commands could not be checked against pytorch.org's text
    own_index: str = ""  # the index pattern; empty: envs/pytorch.yaml's
    # Per build, the evidence it exists (envs/releases' provenance rows). A build without a row rests on the
    # series' pinned_source, pytorch.org's page: docs.
    evidence: tuple[Evidence, ...] = ()
    selector_aarch64_cell: bool = False  # Start Locally's plain-PyPI CUDA cell names an aarch64 command too
    # The Linux aarch64 (SBSA) builds' lists, where recorded (never mutated: a named tuple's default is shared).
    kernels_aarch64: dict[str, tuple[str, ...]] = {}  # noqa: RUF012
    # The builds PyTorch's index lists of this release (the fact cache's listing), XPU's included; None: not read.
    listed: tuple[str, ...] | None = None
    # (build, the places it has wheels: linux-x86_64) for each build the listing has and envs/releases/ lacks.
    unnamed: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def provenance(self, compute: str, platform: str = "") -> Evidence:
        """What ``compute`` of this release rests on (on ``platform``, ``os-arch``, where its rows differ by
        platform): its kind, its source and what would confirm it. MPS is the macOS wheel's, the CPU build's."""
        wheel = "cpu" if compute == "mps" else compute
        found = next(
            (
                row
                for row in self.evidence
                if row.build == wheel and (not platform or not row.platforms or platform in row.platforms)
            ),
            None,
        )
        if found is not None:
            return found
        return Evidence(
            wheel, "docs", self.source, "a listing, a lock or the release branch's build matrix naming this build"
        )

    def answerable(self, compute: str, platform: str = "") -> bool:
        """Whether a default answer may name ``compute`` on ``platform``: its evidence is an artifact, code or
        the release notes, and a build off pytorch.org's pages has its kernel list on record there."""
        evidence = self.provenance(compute, platform)
        if evidence.kind not in manifest.ANSWERABLE:
            return False
        return evidence.selector or compute in (self.kernels_aarch64 if platform.endswith("-aarch64") else self.kernels)

    @property
    def nightly(self) -> bool:
        return self.version == "nightly"

    @property
    def key(self) -> tuple[int, ...]:
        """The release's place in time: nightly builds are ahead of every release (their versions are the next
        release's ``.dev`` ones), which is where pip and uv order them too."""
        if self.nightly:
            return (_AHEAD,)
        return tuple(int(p) for p in self.version.split("."))


def _pytorch() -> _files.Stamp:
    return _files.stamp(manifest.envs_dir() / "pytorch.yaml")


@cache
def _pytorch_data(source: _files.Stamp) -> dict[str, Any]:
    data: dict[str, Any] = manifest.load(Path(source[0]), "pytorch").data
    return data


def index_pattern() -> str:
    pattern: str = _pytorch_data(_pytorch())["index"]
    return pattern


class MpsFloor(NamedTuple):
    """The macOS MPS needs in a release, the kind of source that says so and the source; ``conflicts``: what
    says otherwise, where the floor rests on docs or an inference alone."""

    macos: str
    kind: str
    source: str
    conflicts: str = ""


def mps_macos(rel: Release) -> MpsFloor | None:
    """The macOS MPS needs in ``rel``; None where none is recorded."""
    return mps_floor(rel.version if not rel.nightly else "99")


def mps_floor(version: str) -> MpsFloor | None:
    """The macOS MPS needs in torch ``version`` (an installed one's too: its local part is ignored); None where
    none is recorded."""
    key = version_tuple(version.partition("+")[0])
    found = next((row for row in _pytorch_data(_pytorch()).get("mps", ()) if version_tuple(row["since"]) <= key), None)
    return MpsFloor(found["macos"], found["kind"], found["source"], found.get("conflicts", "")) if found else None


def nightly() -> Release:
    return _nightly(_pytorch())


@cache
def _nightly(source: _files.Stamp) -> Release:
    data = _pytorch_data(source)["nightly"]
    why = (
        f"nightly builds change daily; this is their Start Locally matrix as of {data['as_of']} "
        f"(torch {data['version']} then), from {data['source']}"
    )
    return Release(
        version="nightly",
        torchvision="",
        torchaudio=None,
        wheels=tuple(data["wheels"]),
        conda=(),
        series="nightly",
        pypi_linux="",
        pinned_pypi_without_index=False,
        macos_x86_64=False,
        aarch64_cuda=data.get("aarch64_cuda", False),
        selector_torchaudio=False,
        kernels={},
        quirks={},
        source=data["source"],
        unverified={"selector": why},
        own_index=data["index"],
        evidence=tuple(Evidence(c, "code", data["source"]) for c in (*data["wheels"], "xpu")),
    )


def _series_paths() -> list[Path]:
    """The release manifests (one per series, named after it), newest series first."""
    directory = manifest.envs_dir() / "releases"
    if not directory.is_dir():
        raise ManifestError(
            directory, "no such manifest directory", hint=f"set {manifest.ENVS_VARIABLE} to the kit's envs/ directory"
        )
    paths = sorted(directory.glob("*.yaml"), key=lambda p: _series_key(p), reverse=True)
    if not paths:
        raise ManifestError(directory, "no release manifest", hint="envs/releases/<X.Y>.yaml, one per series")
    return paths


def _series_key(path: Path) -> tuple[int, ...]:
    if not re.fullmatch(r"[0-9]+\.[0-9]+", path.stem):
        raise ManifestError(
            path,
            "a release manifest is named after its series",
            hint="name it envs/releases/<X.Y>.yaml, e.g. 2.14.yaml",
        )
    return version_tuple(path.stem)


def _series(path: Path) -> tuple[Release, ...]:
    """One series' releases, oldest first, each as PyTorch's index lists it where the user's fact cache
    has read that (kitbench facts refresh). install-cmd reads only the series its answer needs."""
    return _series_listed(_files.stamp(path), _files.stamp(facts.cache_dir() / "releases.json"))


@cache
def _series_listed(source: _files.Stamp, cache_source: _files.Stamp) -> tuple[Release, ...]:  # cache_source: a key
    where, listed = facts.listing()
    return tuple(
        _as_listed(rel, listed[rel.version], where) if rel.version in listed else rel for rel in _series_read(source)
    )


def _as_listed(rel: Release, builds: dict[str, tuple[str, ...]], where: str) -> Release:
    """``rel`` with the builds the index lists and no other: a build it lists rests on the listing (an artifact:
    the census row it had becomes its ``also``), one it does not list is not answered; one it lists that
    envs/releases/ lacks exists where the listing has its wheels (``unnamed``), off pytorch.org's pages, so a
    default answer takes it only once its kernel list is on record. XPU's builds, which envs/vendors.yaml
    gives, are checked too."""
    unnamed = tuple((c, places) for c, places in builds.items() if c not in rel.wheels and c != "xpu")
    wheels = sorted([c for c in rel.wheels if c in builds] + [c for c, _ in unnamed], key=page_order)
    listing = f"the listing of {where}"
    evidence = tuple(
        row._replace(kind="artifact", source=listing, confirm="", also=row.source)
        for row in rel.evidence
        if row.build in builds
    )
    evidence += tuple(Evidence(c, "artifact", listing, platforms=places, selector=False) for c, places in unnamed)
    return rel._replace(wheels=tuple(wheels), evidence=evidence, listed=tuple(builds), unnamed=unnamed)


@cache
def _series_read(source: _files.Stamp) -> tuple[Release, ...]:
    path = Path(source[0])
    data = manifest.load(path, "release").data
    if data["series"] != path.stem:
        raise ManifestError(
            path,
            f"series {data['series']!r} in a file named {path.name}",
            hint="name each release manifest after its series",
        )
    quirks: dict[tuple[str, str, str], str] = {
        (q["release"], q["package"], q["compute"]): q["command"] for q in data.get("quirks", ())
    }

    def kernels(version: str, platform: str) -> dict[str, tuple[str, ...]]:
        return {
            k["compute"]: tuple(k["arches"])
            for k in data.get("kernels", ())
            if k.get("platform", "x86_64") == platform and version in k.get("releases", [version])
        }

    def evidence(version: str) -> tuple[Evidence, ...]:
        return tuple(
            Evidence(
                c,
                p["kind"],
                p["source"],
                p.get("confirm", ""),
                tuple(p.get("platforms", ())),
                p.get("selector", True),
                p.get("also", ""),
            )
            for p in data.get("provenance", ())
            if version in p.get("releases", [version])
            for c in p["builds"]
        )

    found = [
        Release(
            version=entry["version"],
            torchvision=entry["torchvision"],
            torchaudio=entry.get("torchaudio"),
            wheels=tuple(entry["wheels"]),
            conda=tuple(entry.get("conda", ())),
            series=data["series"],
            pypi_linux=data["pypi"]["linux"],
            pinned_pypi_without_index=data.get("pinned_pypi_without_index", False),
            macos_x86_64=data["macos_x86_64"],
            aarch64_cuda=data.get("aarch64_cuda", False),
            selector_torchaudio=data.get("selector_torchaudio", True),
            kernels=kernels(entry["version"], "x86_64"),
            kernels_aarch64=kernels(entry["version"], "aarch64"),
            quirks={(p, c): cmd for (r, p, c), cmd in quirks.items() if r == entry["version"]},
            source=data["pinned_source"],
            unverified=data.get("unverified", {}),
            selector_aarch64_cell=entry.get("selector_aarch64_cell", False),
            evidence=evidence(entry["version"]),
        )
        for entry in data["releases"]
    ]
    return tuple(sorted(found, key=lambda r: r.key))


def newest_first(derived: bool = True) -> Iterator[Release]:
    """Every covered release, newest first, each series read only when reached; with ``derived``,
    the releases the user's fact cache adds (kitbench facts refresh) among them."""
    extra = _derived() if derived else []
    for path in _series_paths():
        for rel in reversed(_series(path)):
            while extra and extra[0].key > rel.key:
                yield extra.pop(0)
            yield rel
    yield from extra


def _derived() -> list[Release]:
    """The cache's releases that envs/releases/ lacks, newest first, as Releases answered from the facts alone:
    their index's builds, every command naming PyTorch's index but on macOS (which CUDA build plain PyPI
    serves is not derived), no conda, and marked unverified."""
    found = []
    for rel in facts.derived():
        path = manifest.envs_dir() / "releases" / f"{'.'.join(rel.version.split('.')[:2])}.yaml"
        if path.is_file() and any(r.version == rel.version for r in _series(path)):
            continue
        found.append(
            Release(
                version=rel.version,
                torchvision=rel.torchvision,
                torchaudio=rel.torchaudio,
                wheels=rel.computes,
                conda=(),
                series=".".join(rel.version.split(".")[:2]),
                pypi_linux="",
                pinned_pypi_without_index=False,
                macos_x86_64=rel.macos_x86_64,
                aarch64_cuda=rel.aarch64_cuda,
                selector_torchaudio=False,
                kernels={},
                quirks={},
                source=rel.note,
                unverified={"pinned": rel.note, "selector": rel.note},
                evidence=tuple(
                    Evidence(c, "artifact", rel.note) for c in (*rel.computes, *(("xpu",) if rel.xpu else ()))
                ),
                listed=(*rel.computes, *(("xpu",) if rel.xpu else ())),
            )
        )
    return found


def releases() -> dict[str, Release]:
    """Every covered release, oldest first (reads every series)."""
    return {r.version: r for r in reversed(list(newest_first()))}


def release(spec: str) -> Release:
    if spec == "stable":
        return next(newest_first())
    if spec == "nightly":
        return nightly()
    path = manifest.envs_dir() / "releases" / f"{'.'.join(spec.split('.')[:2])}.yaml"
    if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", spec) and path.is_file():
        found = next((r for r in _series(path) if r.version == spec), None)
        if found is not None:
            return found
    found = next((r for r in _derived() if r.version == spec), None)
    if found is not None:
        return found
    known = releases()
    covered = f"{next(iter(known))} .. {list(known)[-1]}"
    raise SelectionError(f"unknown release {spec!r}", hint=f"covered releases: {covered}, 'stable' or 'nightly'")


def computes(rel: Release, os: str, arch: str, package: str) -> list[str]:
    """The compute platforms published for this release, OS, chip and package, in the page's order."""
    if package == "conda":
        if not rel.conda:
            return []
        if os == "macos":
            return _mac(rel, arch)
        return [c for c in rel.conda if not (os == "linux" and arch == "aarch64" and c != "cpu")]
    if os == "macos":
        return _mac(rel, arch)
    found = [c for c in rel.wheels if not (os == "windows" and build(c).kind == "rocm") and _on(rel, c, os, arch)]
    if arch == "aarch64":
        # aarch64 CUDA builds are Linux's (SBSA, Grace); Windows on Arm has the CPU build only.
        found = [c for c in found if c == "cpu" or (os == "linux" and rel.aarch64_cuda and build(c).kind == "cuda")]
    return found


def _on(rel: Release, compute: str, os: str, arch: str) -> bool:
    """Whether ``compute`` of ``rel`` has wheels for ``os`` on ``arch``: some builds were made for some
    platforms only (2.13.0's cu129 for Linux, a build the listing alone names where it has wheels)."""
    rows = [row for row in rel.evidence if row.build == compute]
    return not rows or any(not row.platforms or f"{os}-{arch}" in row.platforms for row in rows)


def answerable(rel: Release, found: list[str], os: str, arch: str) -> list[str]:
    """The builds among ``found`` a default answer may name on ``os`` and ``arch`` (``Release.answerable``)."""
    return [c for c in found if rel.answerable(c, f"{os}-{arch}")]


def unrecorded(rel: Release, compute: str) -> bool:
    """Whether ``compute`` is a CUDA build of ``rel`` that the index lists, envs/releases/ lacks, and whose kernel
    list is not on record: it exists, and is answered when named, never by default."""
    return build(compute).kind == "cuda" and compute in dict(rel.unnamed) and compute not in rel.kernels


def _mac_ok(rel: Release, arch: str) -> bool:
    return arch == "arm64" or rel.macos_x86_64


def _mac(rel: Release, arch: str) -> list[str]:
    # One macOS wheel serves both: pytorch.org's "Default" (CPU) command installs the build that carries MPS.
    return (["mps", "cpu"] if arch == "arm64" else ["cpu"]) if _mac_ok(rel, arch) else []


def _index(rel: Release, compute: str) -> str:
    return (rel.own_index or index_pattern()).format(compute=compute)


def _pypi_compute(rel: Release, os: str) -> str:
    """What a plain `pip install torch` gets on ``os``."""
    return rel.pypi_linux if os == "linux" else "cpu"


class Command(NamedTuple):
    """An install command: its text, the packages it pins ((name, version); none in the selector's form or
    conda's) and the index it installs them from (None: PyPI, or conda's channels)."""

    text: str
    pins: tuple[tuple[str, str], ...]
    index_url: str | None


def command(rel: Release, os: str, package: str, compute: str, fmt: str, only: tuple[str, ...] = ()) -> Command:
    """The published command for one cell of the selector (or previous-versions page). ``only``: the packages a
    platform only PyTorch's index serves has wheels of (Windows on Arm), which pytorch.org has no cell for: their
    pinned form, from that index."""
    if package == "conda":
        return Command(_conda(rel, os, compute, fmt, build(compute).cuda), (), None)
    installer = {"pip": "pip3 install" if fmt == "selector" else "pip install", "uv": "uv pip install"}[package]
    pins = _pins(rel, fmt, only)
    names = " ".join(f"{name}=={version}" for name, version in pins) or (
        "torch torchvision torchaudio" if rel.selector_torchaudio else "torch torchvision"
    )
    index = _index(rel, compute)
    if only:
        return Command(f"{installer} {names} --index-url {index}", pins, index)
    if rel.nightly:
        # Nightly wheels live only on their own index, as pre-releases.
        installer += " --pre"
        plain = False
    elif fmt == "selector":
        plain = os == "macos" or compute == _pypi_compute(rel, os)
    else:
        # The previous-versions page shares one block between Linux and Windows.
        plain = os == "macos" or (rel.pinned_pypi_without_index and compute == rel.pypi_linux)
    text = f"{installer} {names}" + ("" if plain else f" --index-url {index}")
    if fmt == "selector" and plain and os == "linux" and package == "pip" and rel.selector_aarch64_cell:
        # Verbatim, markup included: plain PyPI serves this CUDA build on x86_64 only.
        return Command(
            f"For Linux x86 use:<br />{text}<br /><br />For Linux Aarch64:<br />{text} --index-url {index}", pins, None
        )
    if fmt == "pinned" and package == "pip":
        text = rel.quirks.get(("pip", _MAC if os == "macos" else compute), text)
    return Command(text, pins, None if plain else index)


def _pins(rel: Release, fmt: str, only: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The packages the command pins: none in the selector's form (it names no version)."""
    if fmt == "selector" and not only:
        return ()
    pins = {"torch": rel.version, "torchvision": rel.torchvision, "torchaudio": rel.torchaudio}
    return tuple((name, version) for name in only or pins for version in [pins[name]] if version)


def _conda(rel: Release, os: str, compute: str, fmt: str, cuda: tuple[int, int] | None) -> str:
    if fmt == "selector":
        if os == "macos":
            return "conda install pytorch::pytorch torchvision torchaudio -c pytorch"
        names = "pytorch torchvision torchaudio"
    else:
        names = f"pytorch=={rel.version} torchvision=={rel.torchvision} torchaudio=={rel.torchaudio}"
        if os == "macos":
            return rel.quirks.get(("conda", _MAC), f"conda install {names} -c pytorch")
    if cuda is not None:
        text = f"conda install {names} pytorch-cuda={cuda[0]}.{cuda[1]} -c pytorch -c nvidia"
    else:
        text = f"conda install {names} cpuonly -c pytorch"
    return rel.quirks.get(("conda", compute), text) if fmt == "pinned" else text


def xpu_builds(rel: Release, os: str, arch: str, package: str) -> list[str]:
    """["xpu"] where this release has an XPU build here; Start Locally does not list it, so computes() doesn't."""
    listed = rel.listed is None or "xpu" in rel.listed  # as every build: what the index lists, where read
    return ["xpu"] if package != "conda" and listed and vendors.load().xpu(rel.version, os, arch) else []


def kernels(rel: Release, machine: Probe, compute: str) -> tuple[str, ...] | None:
    # x86_64's lists are Windows' too (RELEASE.md's matrix gives them one row); aarch64 builds carry other
    # architectures (sm_110, no sm_75), recorded apart.
    return (rel.kernels_aarch64 if machine.arch == "aarch64" else rel.kernels).get(compute)


def earlier_kernels(version: str, compute: str) -> tuple[str, tuple[str, ...]] | None:
    """The recorded kernel list of ``compute`` in the newest release older than ``version`` that has one."""
    for older in newest_first(derived=False):
        if older.key < release(version).key and compute in older.kernels:
            return older.version, older.kernels[compute]
    return None
