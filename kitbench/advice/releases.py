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

_MAC = "mac"          # the quirk key of macOS commands


class Release(NamedTuple):
    """One release as install-cmd answers it. A named tuple, not a dataclass: as immutable, and much cheaper
    to define, which install-cmd's start-up pays on every run."""

    version: str
    torchvision: str
    torchaudio: str | None      # None: no torchaudio was released with it
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
    own_index: str = ""         # the index pattern; empty: envs/pytorch.yaml's
    # build -> (where it was read, what would confirm it) for each build known only by inference (a nightly or
    # test matrix, a neighbour): the default answer never rests on one. A build absent here is published.
    inferred: tuple[tuple[str, str, str], ...] = ()
    selector_aarch64_cell: bool = False     # Start Locally's plain-PyPI CUDA cell names an aarch64 command too
    sources: tuple[tuple[str, str], ...] = ()   # (build, where it was read), where not the series' pinned_source
    # The builds PyTorch's index lists of this release (the fact cache's listing), XPU's included; None: not read.
    listed: tuple[str, ...] | None = None
    # (build, the places it has wheels: linux-x86_64) for each build the listing has and envs/releases/ lacks.
    unnamed: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def provenance(self, compute: str) -> tuple[str, str, str]:
        """Whether ``compute`` of this release is published or inferred, where that was read, and (inferred)
        what would confirm it."""
        found = next((row for row in self.inferred if row[0] == compute), None)
        if found:
            return "inferred", found[1], found[2]
        return "published", next((s for c, s in self.sources if c == compute), self.source), ""

    @property
    def nightly(self) -> bool:
        return self.version == "nightly"

    @property
    def key(self) -> tuple[int, ...]:
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



def mps_macos(rel: Release) -> tuple[str, str] | None:
    """The macOS MPS needs in ``rel`` and where that was read; None where none is recorded."""
    key = rel.key if not rel.nightly else (99,)
    found = next((row for row in _pytorch_data(_pytorch()).get("mps", ()) if version_tuple(row["since"]) <= key), None)
    return (found["macos"], found["source"]) if found else None



def nightly() -> Release:
    return _nightly(_pytorch())



@cache
def _nightly(source: _files.Stamp) -> Release:
    data = _pytorch_data(source)["nightly"]
    why = (f"nightly builds change daily; this is their Start Locally matrix as of {data['as_of']} "
           f"(torch {data['version']} then), from {data['source']}")
    return Release(version="nightly", torchvision="", torchaudio=None, wheels=tuple(data["wheels"]), conda=(),
                   series="nightly", pypi_linux="", pinned_pypi_without_index=False, macos_x86_64=False,
                   aarch64_cuda=data.get("aarch64_cuda", False), selector_torchaudio=False, kernels={}, quirks={},
                   source=data["source"], unverified={"selector": why}, own_index=data["index"])



def _series_paths() -> list[Path]:
    """The release manifests (one per series, named after it), newest series first."""
    directory = manifest.envs_dir() / "releases"
    if not directory.is_dir():
        raise ManifestError(directory, "no such manifest directory",
                            hint=f"set {manifest.ENVS_VARIABLE} to the kit's envs/ directory")
    paths = sorted(directory.glob("*.yaml"), key=lambda p: _series_key(p), reverse=True)
    if not paths:
        raise ManifestError(directory, "no release manifest", hint="envs/releases/<X.Y>.yaml, one per series")
    return paths



def _series_key(path: Path) -> tuple[int, ...]:
    if not re.fullmatch(r"[0-9]+\.[0-9]+", path.stem):
        raise ManifestError(path, "a release manifest is named after its series",
                            hint="name it envs/releases/<X.Y>.yaml, e.g. 2.14.yaml")
    return version_tuple(path.stem)



def _series(path: Path) -> tuple[Release, ...]:
    """One series' releases, oldest first, each as PyTorch's index lists it where the user's fact cache
    has read that (kitbench facts refresh). install-cmd reads only the series its answer needs."""
    return _series_listed(_files.stamp(path), _files.stamp(facts.cache_dir() / "releases.json"))



@cache
def _series_listed(source: _files.Stamp, cache_source: _files.Stamp) -> tuple[Release, ...]:  # cache_source: a key
    where, listed = facts.listing()
    return tuple(_as_listed(rel, listed[rel.version], where) if rel.version in listed else rel
                 for rel in _series_read(source))



def _as_listed(rel: Release, builds: dict[str, tuple[str, ...]], where: str) -> Release:
    """``rel`` with the builds the index lists and no other: a build it lists is published (the listing is
    its source), one it does not list is not answered; one it lists that envs/releases/ lacks exists, where
    the listing has its wheels (``unnamed``). XPU's builds, which envs/vendors.yaml gives, are checked too."""
    unnamed = tuple((c, places) for c, places in builds.items() if c not in rel.wheels and c != "xpu")
    wheels = sorted([c for c in rel.wheels if c in builds] + [c for c, _ in unnamed], key=page_order)
    return rel._replace(wheels=tuple(wheels),
                        inferred=tuple(row for row in rel.inferred if row[0] not in builds),
                        sources=tuple((c, f"the listing of {where}") for c in wheels),
                        listed=tuple(builds), unnamed=unnamed)



@cache
def _series_read(source: _files.Stamp) -> tuple[Release, ...]:
    path = Path(source[0])
    data = manifest.load(path, "release").data
    if data["series"] != path.stem:
        raise ManifestError(path, f"series {data['series']!r} in a file named {path.name}",
                            hint="name each release manifest after its series")
    quirks: dict[tuple[str, str, str], str] = {
        (q["release"], q["package"], q["compute"]): q["command"] for q in data.get("quirks", ())}
    kernels = {k["compute"]: tuple(k["arches"]) for k in data.get("kernels", ())}

    def provenance(version: str, kind: str) -> list[dict[str, Any]]:
        return [p for p in data.get("provenance", ()) if p["kind"] == kind and version in p.get("releases", [version])]
    found = [Release(
        version=entry["version"], torchvision=entry["torchvision"], torchaudio=entry.get("torchaudio"),
        wheels=tuple(entry["wheels"]), conda=tuple(entry.get("conda", ())), series=data["series"],
        pypi_linux=data["pypi"]["linux"],
        pinned_pypi_without_index=data.get("pinned_pypi_without_index", False),
        macos_x86_64=data["macos_x86_64"], aarch64_cuda=data.get("aarch64_cuda", False),
        selector_torchaudio=data.get("selector_torchaudio", True), kernels=kernels,
        quirks={(p, c): cmd for (r, p, c), cmd in quirks.items() if r == entry["version"]},
        source=data["pinned_source"], unverified=data.get("unverified", {}),
        selector_aarch64_cell=entry.get("selector_aarch64_cell", False),
        inferred=tuple((c, p["source"], p["confirm"]) for p in provenance(entry["version"], "inferred")
                       for c in p["builds"]),
        sources=tuple((c, p["source"]) for p in provenance(entry["version"], "published") for c in p["builds"]))
        for entry in data["releases"]]
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
        found.append(Release(
            version=rel.version, torchvision=rel.torchvision, torchaudio=rel.torchaudio, wheels=rel.computes,
            conda=(), series=".".join(rel.version.split(".")[:2]), pypi_linux="", pinned_pypi_without_index=False,
            macos_x86_64=rel.macos_x86_64, aarch64_cuda=rel.aarch64_cuda, selector_torchaudio=False, kernels={},
            quirks={}, source=rel.note, unverified={"pinned": rel.note, "selector": rel.note},
            listed=(*rel.computes, *(("xpu",) if rel.xpu else ()))))
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
    places = dict(rel.unnamed)
    found = [c for c in rel.wheels if not (os == "windows" and build(c).kind == "rocm")
             and (c not in places or f"{os}-{arch}" in places[c])]
    if arch == "aarch64":
        # aarch64 CUDA builds are Linux's (SBSA, Grace); Windows on Arm has the CPU build only.
        found = [c for c in found if c == "cpu" or (os == "linux" and rel.aarch64_cuda and build(c).kind == "cuda")]
    return found



def published(rel: Release, found: list[str]) -> list[str]:
    """The builds among ``found`` that ``rel`` has published: what a default answer may name (not one known by
    inference, nor a CUDA build only the index's listing names whose kernel list is not on record)."""
    return [c for c in found if not any(row[0] == c for row in rel.inferred) and not unrecorded(rel, c)]



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



def command(rel: Release, os: str, package: str, compute: str, fmt: str, only: tuple[str, ...] = ()) -> str:
    """The published command for one cell of the selector (or previous-versions page). ``only``: the packages a
    platform only PyTorch's index serves has wheels of (Windows on Arm), which pytorch.org has no cell for: their
    pinned form, from that index."""
    cuda = build(compute).cuda
    if package == "conda":
        return _conda(rel, os, compute, fmt, cuda)
    installer = {"pip": "pip3 install" if fmt == "selector" else "pip install", "uv": "uv pip install"}[package]
    names = _names(rel, fmt, only)
    if only:
        return f"{installer} {names} --index-url {_index(rel, compute)}"
    if rel.nightly:
        # Nightly wheels live only on their own index, as pre-releases.
        installer += " --pre"
        plain = False
    elif fmt == "selector":
        plain = os == "macos" or compute == _pypi_compute(rel, os)
    else:
        # The previous-versions page shares one block between Linux and Windows.
        plain = os == "macos" or (rel.pinned_pypi_without_index and compute == rel.pypi_linux)
    text = f"{installer} {names}" + ("" if plain else f" --index-url {_index(rel, compute)}")
    if fmt == "selector" and plain and os == "linux" and package == "pip" and rel.selector_aarch64_cell:
        # Verbatim, markup included: plain PyPI serves this CUDA build on x86_64 only.
        return (f"For Linux x86 use:<br />{text}<br /><br />For Linux Aarch64:<br />{text} "
                f"--index-url {_index(rel, compute)}")
    if fmt == "pinned" and package == "pip":
        return rel.quirks.get(("pip", _MAC if os == "macos" else compute), text)
    return text



def _names(rel: Release, fmt: str, only: tuple[str, ...] = ()) -> str:
    if fmt == "selector" and not only:
        return "torch torchvision torchaudio" if rel.selector_torchaudio else "torch torchvision"
    pins = {"torch": rel.version, "torchvision": rel.torchvision, "torchaudio": rel.torchaudio}
    return " ".join(f"{name}=={pins[name]}" for name in only or pins if pins[name])



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
    listed = rel.listed is None or "xpu" in rel.listed       # as every build: what the index lists, where read
    return ["xpu"] if package != "conda" and listed and vendors.load().xpu(rel.version, os, arch) else []



def kernels(rel: Release, machine: Probe, compute: str) -> tuple[str, ...] | None:
    # The lists were read from x86_64 wheels; aarch64 builds carry other architectures (sm_110, no sm_75).
    return rel.kernels.get(compute) if machine.arch == "x86_64" else None



def earlier_kernels(version: str, compute: str) -> tuple[str, tuple[str, ...]] | None:
    """The recorded kernel list of ``compute`` in the newest release older than ``version`` that has one."""
    for older in newest_first(derived=False):
        if (version == "nightly" or older.key < release(version).key) and compute in older.kernels:
            return older.version, older.kernels[compute]
    return None
