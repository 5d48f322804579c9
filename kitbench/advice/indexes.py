"""Reading the indexes themselves into the fact cache (``kitbench facts refresh``), so advice keeps up with releases.

``refresh`` reads, for torch, torchvision and torchaudio, two sources, and keeps each in its own file under
``facts/`` of kitbench's cache folder (``kitbench._files.cache_dir``; JSON, with the URL and the date it was read):

* ``pypi-<package>.json``: the simple API where pip reads it (``PIP_INDEX_URL``, pip.conf's ``index-url``,
  else PyPI), in its JSON form (PEP 691): releases, wheel tags, Requires-Python, upload dates, yanked
  files left out (pip skips them);
* ``pytorch-<package>.json``: PyTorch's own ``whl/<package>/`` (``KITBENCH_PYTORCH_INDEX``, else the tree
  ``envs/pytorch.yaml`` names), PEP 503 HTML or PEP 691 JSON: it lists every build of every compute
  platform (``torch-2.15.0+cu132-...``), so one page per package says which releases carry which builds.

torchvision and torchaudio are paired with torch from their own requirements (PEP 658 ``.metadata``,
``Requires-Dist: torch==X``) where the index serves them, else by upload date. From those files
``releases.json`` is derived: the releases, in the form install-cmd reads (``kitbench.advice.facts``), so that
its start-up reads one small file and imports none of this (urllib, ssl, html.parser).
Validators (ETag, Last-Modified) make a refresh that finds nothing new one small request per source.
"""

from __future__ import annotations

import datetime
import html.parser
import itertools
import json
import os
import re
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kitbench import _files, _http, _reach
from kitbench.advice import facts, vendors, wheels
from kitbench.advice.facts import read_json
from kitbench.errors import NetworkError, UsageError
from kitbench.machine import drivers
from kitbench.machine.builds import build, page_order
from kitbench.records import manifest

PACKAGES = ("torch", "torchvision", "torchaudio")
PYPI = "https://pypi.org/simple/"
PYTORCH_VARIABLE = "KITBENCH_PYTORCH_INDEX"
_JSON = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_FINAL = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_REQUIRES_TORCH = re.compile(r"^Requires-Dist:\s*torch\s*\(?\s*==\s*([0-9.]+)", re.MULTILINE)
_PAIRED_WITHIN = datetime.timedelta(days=3)  # torchvision/torchaudio are uploaded with their torch
_TAG = re.compile(r"[A-Za-z0-9_]{1,80}(-abi3)?")  # a wheel's Python and platform tags (PEP 425)
_METADATA_PER_REFRESH = 3  # .metadata files read per package and refresh: the newest unpaired versions


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str  # without the local label
    local: str  # cu128, rocm7.2, cpu, xpu; "" for none
    pythons: tuple[str, ...]  # cp310, cp313t (free-threaded), py3
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class Source:
    kind: str  # pypi | pytorch
    package: str
    url: str

    @property
    def file(self) -> str:
        return f"{self.kind}-{self.package}.json"


def python_tag(interpreter: str, abi: str) -> str:
    # cp310-cp310 and cp310-none (2.6.0's macOS wheels) both install on CPython 3.10; cp313-cp313t only
    # free-threaded; cp39-abi3 on every default CPython from 3.9 (the stable ABI), so it keeps its abi.
    if abi == "abi3":
        return f"{interpreter}-abi3"
    return interpreter + ("t" if abi.endswith("t") else "")


def parse_wheel(filename: str) -> Wheel | None:
    """PEP 427's ``name-version(-build)?-python-abi-platform.whl`` as packaging reads it (the name as it is: a
    percent sign is no escape here, and decoding one could smuggle a ``-`` or a quote into a tag); None for
    anything else (a name with a space or a control character too)."""
    if not filename.isprintable() or " " in filename:  # packaging would strip these around a version
        return None
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    pythons = {python_tag(tag.interpreter, tag.abi) for tag in tags}
    return Wheel(
        name,
        version.public,
        version.local or "",
        tuple(sorted(pythons, key=tag_key)),
        tuple(sorted({tag.platform for tag in tags})),
    )


def tag_key(tag: str) -> tuple[int, str]:
    digits = re.match(r"cp([0-9]+)", tag)
    return int(digits.group(1)) if digits else 0, tag


# --- where the sources are -------------------------------------------------------------------------------------


def pypi_index() -> str:
    from kitbench._pipconf import pip_configuration

    url = (pip_configuration().get("index-url") or [PYPI])[0]
    given_as = "PIP_INDEX_URL" if os.environ.get("PIP_INDEX_URL") else "pip's configured index-url"
    return _http.checked(url, given_as).rstrip("/") + "/"


def pytorch_index() -> str:
    """The ``whl/`` tree: ``KITBENCH_PYTORCH_INDEX``, else the one envs/pytorch.yaml's pattern names."""
    url = os.environ.get(PYTORCH_VARIABLE)
    if not url:
        pattern: str = manifest.load(manifest.envs_dir() / "pytorch.yaml", "pytorch").data["index"]
        url = pattern.split("{compute}")[0]
    return _http.checked(url, PYTORCH_VARIABLE).rstrip("/") + "/"


def sources(packages: tuple[str, ...] = PACKAGES) -> list[Source]:
    pypi, pytorch = pypi_index(), pytorch_index()
    return [
        Source(kind, package, base + package + "/")
        for kind, base in (("pypi", pypi), ("pytorch", pytorch))
        for package in packages
    ]


# --- reading an index page --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class File:
    filename: str
    url: str
    requires_python: str
    yanked: bool
    metadata: bool  # PEP 658: url + ".metadata" serves the wheel's METADATA
    uploaded: str  # ISO 8601, or "" where the index does not say (PEP 503 HTML)


MAX_DEPTH = 16  # a PEP 691 page nests four deep; deeper is not an index, and json.loads would recurse
MAX_FILES = 200_000  # torch's page on PyTorch's index lists some 20,000 files
_OTHER_BYTES = bytes(b for b in range(256) if b not in b"[]{}")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _file(
    base: str, filename: object, href: object, requires_python: object, yanked: bool, metadata: bool, uploaded: object
) -> File:
    """One entry of a page as a typed fact, or ValueError saying what of it does not parse."""
    if not isinstance(filename, str) or not isinstance(href, str) or not 0 < len(filename) <= 300:
        raise ValueError("an entry without a file name and URL")
    url = urllib.parse.urljoin(base, href.split("#")[0])
    if any(c.isspace() or ord(c) < 32 or 127 <= ord(c) < 160 for c in url) or len(url) > 2000:
        raise ValueError(f"a file URL with a space or a control character ({filename[:80]})")
    if urllib.parse.urlsplit(url).scheme.lower() not in _http.SCHEMES:
        raise ValueError(f"a file URL that is not http(s) ({filename[:80]})")  # file:///dev/stdin is not a wheel
    if requires_python is None:
        requires_python = ""
    if not isinstance(requires_python, str) or (
        requires_python and not re.fullmatch(facts.REQUIRES_PYTHON, requires_python)
    ):
        raise ValueError(f"a Requires-Python that does not parse ({str(requires_python)[:40]!r})")
    when = facts.moment(uploaded) if uploaded else None
    if uploaded and when is None:
        raise ValueError(f"an upload-time that is not a date with its time zone ({str(uploaded)[:40]!r})")
    return File(
        filename, url, requires_python, yanked, metadata, when.isoformat().replace("+00:00", "Z") if when else ""
    )


class _Anchors(html.parser.HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.files: list[File] = []
        self.dropped: list[str] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None and len(self._text) < 100:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != "a" or self._open is None:
            return
        attrs, self._open = self._open, None
        href = attrs.get("href") or ""
        name = "".join(self._text).strip() or urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1])
        try:
            self.files.append(
                _file(
                    self.base,
                    name,
                    href,
                    attrs.get("data-requires-python"),
                    "data-yanked" in attrs,
                    any(k in attrs for k in ("data-core-metadata", "data-dist-info-metadata")),
                    "",
                )
            )
        except ValueError as bad:
            self.dropped.append(str(bad))


def _depth(body: bytes) -> int:
    """How deep a JSON text nests, counted without recursion (brackets inside strings are text)."""
    brackets = _STRING.sub(b"", body).translate(None, _OTHER_BYTES)
    return max(itertools.accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


def page_files(answer: _http.Response, dropped: list[str] | None = None) -> list[File]:
    """The files of a project page, PEP 691 JSON or PEP 503 HTML, as the server chose to answer. The page is a
    stranger's: one that is not a page at all (not JSON, nested past MAX_DEPTH, more than MAX_FILES files) is a
    NetworkError; an entry of it that does not parse is left out, and said in ``dropped``."""
    dropped = [] if dropped is None else dropped
    if answer.content_type.split(";")[0].strip() == _JSON:
        try:
            if _depth(answer.body) > MAX_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_DEPTH}")
            entries = json.loads(answer.body)["files"]
            if not isinstance(entries, list) or len(entries) > MAX_FILES:
                raise ValueError(f"its files are not a list of at most {MAX_FILES:,}")
        except (ValueError, KeyError, TypeError) as bad:
            raise NetworkError(
                f"{_reach.host(answer.url)} served a malformed PEP 691 page for "
                f"{_reach.shown(answer.url)}: {str(bad)[:200]}"
            ) from None
        files = []
        for entry in entries:
            try:
                if not isinstance(entry, dict):
                    raise ValueError("an entry that is not an object")
                files.append(
                    _file(
                        answer.url,
                        entry.get("filename"),
                        entry.get("url"),
                        entry.get("requires-python"),
                        bool(entry.get("yanked")),
                        bool(entry.get("core-metadata") or entry.get("dist-info-metadata")),
                        entry.get("upload-time"),
                    )
                )
            except ValueError as bad:
                dropped.append(str(bad))
        return files
    parser = _Anchors(answer.url)
    try:
        # A marked section (<![CDATA[, <![if) is no part of PEP 503, and html.parser fails on one it does not know.
        parser.feed(answer.body.decode("utf-8", "replace").replace("<![", "&lt;!["))
        parser.close()
    except (AssertionError, ValueError) as bad:
        dropped.append(f"HTML that does not parse past {len(parser.files):,} files ({str(bad)[:80]})")
    if len(parser.files) > MAX_FILES:
        raise NetworkError(
            f"{_reach.host(answer.url)} listed more than {MAX_FILES:,} files in "
            f"{_reach.shown(answer.url)}; no index page is that long"
        )
    dropped.extend(parser.dropped)
    return parser.files


def read_page(url: str) -> list[File]:
    """The files of one project page, read as a refresh reads it, whatever local labels their versions carry (the
    fact scripts read wheels a refresh leaves out: torchvision's Windows Arm64 builds were labelled with a git hash)."""
    return page_files(_http.get(url, _ACCEPT))


def summarize(files: list[File], package: str, dropped: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """version -> its Requires-Python values, first upload, builds (local label -> platform -> Python tags)
    and one wheel's metadata URL; yanked files and other projects' files are left out, and so are wheels
    whose version, build label or tags are not in a form kitbench.advice.facts reads (said in ``dropped``)."""
    found: dict[str, dict[str, Any]] = {}
    builds: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for entry in files:
        wheel = parse_wheel(entry.filename)
        if wheel is None and entry.filename.endswith(".whl") and not entry.yanked and dropped is not None:
            dropped.append(f"a wheel name that does not parse ({entry.filename[:80]})")
        if wheel is None or entry.yanked or wheel.name != package:
            continue
        if wheel is None or not (
            re.fullmatch(facts.INDEX_VERSION, wheel.version)
            and (not wheel.local or re.fullmatch(facts.BUILD_LABEL, wheel.local))
            and all(map(_TAG.fullmatch, wheel.pythons + wheel.platforms))
        ):
            if dropped is not None:
                dropped.append(f"a wheel whose version, build or tags kitbench does not know ({entry.filename[:80]})")
            continue
        release = found.setdefault(wheel.version, {"requires_python": [], "uploaded": "", "metadata": None})
        if entry.requires_python and entry.requires_python not in release["requires_python"]:
            release["requires_python"].append(entry.requires_python)
        if entry.uploaded and (not release["uploaded"] or entry.uploaded < release["uploaded"]):
            release["uploaded"] = entry.uploaded
        if entry.metadata and release["metadata"] is None:
            release["metadata"] = entry.url + ".metadata"
        for platform in wheel.platforms:
            builds[wheel.version, wheel.local][platform].update(wheel.pythons)
    for (version, local), platforms in builds.items():
        found[version].setdefault("builds", {})[local] = {
            p: " ".join(sorted(tags, key=tag_key)) for p, tags in sorted(platforms.items())
        }
    return found


# --- refresh --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    source: Source
    status: int  # 200 or 304
    seconds: float
    releases: int
    notes: tuple[str, ...] = ()  # what of the page was left out, and why


class RefreshFailed(NetworkError):
    """A refresh that could not read every source: what the others gave was written, and the releases derived
    from it, so that ``read`` (the sources refreshed) and ``unread`` (those of a host that did not answer) say
    exactly what the facts now rest on."""

    def __init__(self, error: NetworkError, read: list[Outcome], unread: list[Source]) -> None:
        super().__init__(error.message, error.hint)
        self.read, self.unread = read, unread


REFRESH_DEADLINE = 60.0  # seconds for a whole refresh, every page and .metadata file together


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _pairs(
    releases: dict[str, dict[str, Any]], known: dict[str, str], get: Callable[[str], bytes], notes: list[str]
) -> dict[str, str]:
    """version -> the torch it requires, from .metadata where served: the newest few unknown versions per refresh."""
    pairs = dict(known)
    unknown = sorted(
        (v for v, r in releases.items() if v not in pairs and r["metadata"] and _FINAL.match(v)),
        key=Version,
        reverse=True,
    )[:_METADATA_PER_REFRESH]
    for version in unknown:
        try:
            text = get(releases[version]["metadata"]).decode("utf-8", "replace")
        except NetworkError as error:
            # One wheel's metadata missing is no reason to lose the page: pairing falls back to dates.
            notes.append(f"the metadata of {version} was not read ({error.message})")
            continue
        match = _REQUIRES_TORCH.search(text)
        if match and re.fullmatch(facts.INDEX_VERSION, match.group(1)):
            pairs[version] = match.group(1)
    return pairs


def refresh_source(source: Source, folder: Path, until: float | None = None) -> Outcome:
    """Read one source (conditionally on what the cache holds), by ``until`` (a ``time.monotonic()``) where
    given, and write its file atomically: only facts in the forms kitbench.advice.facts reads."""
    path = folder / source.file
    previous = _source_facts(read_json(path))
    same = previous is not None and previous.get("url") == _reach.bare(source.url)  # never a token on disk
    started = time.monotonic()
    answer = _http.get(
        source.url,
        _ACCEPT,
        etag=previous.get("etag") if same and previous else None,
        last_modified=previous.get("last_modified") if same and previous else None,
        until=until,
    )
    notes: list[str] = []
    if answer.status == 304 and previous is not None:
        data = dict(previous, checked=_now())
    else:
        dropped: list[str] = []
        releases = summarize(page_files(answer, dropped), source.package, dropped)
        if dropped:
            notes.append(
                f"{_reach.shown(source.url)}: {len(dropped):,} entries left out, which do not parse "
                f"(the first: {dropped[0]})"
            )
        known = previous.get("requires", {}) if same and previous else {}
        requires = (
            _pairs(releases, known, lambda url: _http.get(url, "*/*", until=until).body, notes)
            if source.package != "torch"
            else {}
        )
        for release in releases.values():  # read with the index's credentials; written without them
            release["metadata"] = release["metadata"] and _reach.bare(release["metadata"])
        data = {
            "url": _reach.bare(source.url),
            "read": _now(),
            "checked": _now(),
            "etag": answer.etag,
            "last_modified": answer.last_modified,
            "releases": releases,
            "requires": requires,
        }
    _files.write(path, json.dumps(data, sort_keys=True), replace=True, what="index facts")
    return Outcome(source, answer.status, time.monotonic() - started, len(data["releases"]), tuple(notes))


def _source_facts(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """A source's file as read back, holding only the releases in the forms a refresh writes: one written by
    an older kitbench, or edited, loses what does not fit, never the answer."""
    if data is None or not isinstance(data.get("releases"), dict):
        return None

    def fits(version: str, release: Any) -> bool:
        return (
            re.fullmatch(facts.INDEX_VERSION, version) is not None
            and isinstance(release, dict)
            and all(
                isinstance(r, str) and re.fullmatch(facts.REQUIRES_PYTHON, r)
                for r in release.get("requires_python", [])
            )
            and (not release.get("uploaded") or facts.moment(release["uploaded"]) is not None)
            and all(
                (not label or re.fullmatch(facts.BUILD_LABEL, label))
                and isinstance(tags, dict)
                and all(isinstance(t, str) and _TAG.fullmatch(p) for p, t in tags.items())
                for label, tags in (release.get("builds") or {}).items()
            )
        )

    requires = data.get("requires")
    return dict(
        data,
        releases={v: r for v, r in data["releases"].items() if fits(v, r)},
        requires={v: t for v, t in requires.items() if isinstance(t, str) and re.fullmatch(facts.INDEX_VERSION, t)}
        if isinstance(requires, dict)
        else {},
    )


def refresh(packages: tuple[str, ...] = PACKAGES, done: Callable[[Outcome], None] = lambda _: None) -> list[Outcome]:
    """Read every source (``done`` is told of each), write each file, then derive ``releases.json``, all
    within REFRESH_DEADLINE. A host that cannot be reached is tried once, not once per package: what the
    others gave is kept, then its NetworkError is raised."""
    until = time.monotonic() + REFRESH_DEADLINE
    every = sources(packages)  # every URL parsed before anything is read
    folder = facts.cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create the facts cache {folder}: {exc.strerror or exc}",
            hint="set KITBENCH_CACHE to a writable folder",
        ) from None
    outcomes: list[Outcome] = []
    failed: dict[str, NetworkError] = {}
    for source in every:
        host = _reach.host(source.url)
        if host in failed:
            continue
        try:
            outcomes.append(refresh_source(source, folder, until))
            done(outcomes[-1])
        except NetworkError as error:
            failed[host] = error
    write_releases(folder)
    if failed:
        errors = list(failed.values())
        raise RefreshFailed(
            NetworkError("; ".join(e.message for e in errors), hint=errors[0].hint),
            outcomes,
            [s for s in every if _reach.host(s.url) in failed],
        )
    return outcomes


# --- deriving releases ----------------------------------------------------------------------------------------


def _baked() -> set[str]:
    return {
        entry["version"]
        for m in manifest.iter_manifests(manifest.envs_dir() / "releases", "release")
        for entry in m.data["releases"]
    }


def _pair(
    torch: str, candidates: dict[str, dict[str, Any]], requires: dict[str, str], uploaded: str
) -> tuple[str, str] | None:
    """The torchvision (or torchaudio) released with ``torch``, and how that is known."""
    by_metadata = [v for v, t in requires.items() if t == torch]
    if by_metadata:
        return max(by_metadata, key=Version), "its Requires-Dist (PEP 658 metadata)"
    if not uploaded:
        return None
    when = datetime.datetime.fromisoformat(uploaded.replace("Z", "+00:00"))
    near = [
        (abs(datetime.datetime.fromisoformat(r["uploaded"].replace("Z", "+00:00")) - when), v)
        for v, r in candidates.items()
        if r.get("uploaded") and _FINAL.match(v)
    ]
    near = [(gap, v) for gap, v in near if gap <= _PAIRED_WITHIN]
    return (min(near)[1], "upload date") if near else None


def _refusal(compute: str) -> str | None:
    cuda = build(compute).cuda
    if cuda is not None:
        text = f"{cuda[0]}.{cuda[1]}"
        table = drivers.load()
        if table.requirement(text).floor is None or table.oldest_arch(text) is None:
            return (
                f"{compute}: envs/drivers.yaml has no driver floor or oldest GPU architecture for CUDA {text}, "
                "so which machines it runs on is not known"
            )
    elif build(compute).kind == "rocm" and vendors.load().rocm_arches(compute) is None:
        return f"{compute}: envs/vendors.yaml has no gfx list for {compute}, so which GPUs it runs on is not known"
    return None


def derive(files: dict[str, dict[str, Any]], baked: set[str]) -> list[dict[str, Any]]:
    """The releases PyTorch's index holds and ``baked`` lacks, newest first, from the source files
    (``files``: file name -> its data)."""

    def releases(kind: str, package: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = (files.get(f"{kind}-{package}.json") or {}).get("releases", {})
        return found

    def requires(package: str) -> dict[str, str]:
        return {
            **(files.get(f"pytorch-{package}.json") or {}).get("requires", {}),
            **(files.get(f"pypi-{package}.json") or {}).get("requires", {}),
        }

    index = files.get("pytorch-torch.json") or {}
    found = []
    final = {v: e for v, e in index.get("releases", {}).items() if _FINAL.match(v)}
    for version, entry in sorted(final.items(), key=lambda i: Version(i[0]), reverse=True):
        if version in baked or Version(version) < Version("2"):
            continue
        pypi = releases("pypi", "torch").get(version, {})
        uploaded = pypi.get("uploaded") or entry.get("uploaded", "")
        paired = {}
        for package in ("torchvision", "torchaudio"):
            candidates = {**releases("pytorch", package), **releases("pypi", package)}
            paired[package] = _pair(version, candidates, requires(package), uploaded)
        if paired["torchvision"] is None:
            continue  # install-cmd names torch with its torchvision: without one there is no answer
        vision = paired["torchvision"][0]
        wheels = {
            "torch": _wheel_facts(pypi, entry),
            "torchvision": _wheel_facts(
                releases("pypi", "torchvision").get(vision, {}), releases("pytorch", "torchvision").get(vision, {})
            ),
        }
        audio = paired["torchaudio"]
        if audio:
            heard = _wheel_facts(
                releases("pypi", "torchaudio").get(audio[0], {}), releases("pytorch", "torchaudio").get(audio[0], {})
            )
            if len(heard) > 1:  # its wheels are checked as torchvision's are, where any was read
                wheels["torchaudio"] = heard
        builds = entry.get("builds", {})
        offered = sorted(
            {label or "cpu" for label in builds if build(label).kind in ("cuda", "rocm", "cpu") or not label},
            key=page_order,
        )
        platforms = [p for tags in builds.values() for p in tags] + list((pypi.get("builds") or {}).get("", {}))
        found.append(
            {
                "version": version,
                "torchvision": vision,
                "torchaudio": audio[0] if audio else None,
                "computes": [c for c in offered if _refusal(c) is None],
                "refused": [why for c in offered for why in [_refusal(c)] if why],
                "xpu": any(build(label).kind == "xpu" for label in builds),
                "macos_x86_64": any(p.startswith("macosx") and p.endswith(("x86_64", "universal2")) for p in platforms),
                "aarch64_cuda": any(
                    p.endswith("aarch64") for label, tags in builds.items() if build(label).kind == "cuda" for p in tags
                ),
                "wheels": wheels,
                "paired": paired["torchvision"][1],
                "index": index.get("url", ""),
                "read": index.get("read", ""),
                **_wheels_from(files, pypi, index),
            }
        )
    return found


def listed(files: dict[str, dict[str, Any]], baked: set[str]) -> dict[str, Any]:
    """The builds PyTorch's index lists for each release ``baked`` covers, each with the places (``linux-x86_64``)
    it has wheels for: the truth for those builds (a build the index does not list is not answered, whatever
    envs/releases/ says; one it lists that they lack exists), and where and when it was read. XPU's builds too;
    a build envs/ has no driver or GPU-architecture facts for is left out, as ``derive`` leaves it out."""
    index = files.get("pytorch-torch.json") or {}
    found: dict[str, dict[str, list[str]]] = {}
    for version, entry in index.get("releases", {}).items():
        if version not in baked:
            continue
        places: dict[str, set[str]] = defaultdict(set)  # no label and "+cpu" are one build: cpu
        for label, tags in entry.get("builds", {}).items():
            if (build(label).kind in ("cuda", "rocm", "cpu", "xpu") or not label) and _refusal(label or "cpu") is None:
                places[label or "cpu"].update(
                    f"{p.os}-{arch}"
                    for tag in tags
                    for p in [wheels.platform(tag)]
                    if p.os != "unknown"
                    for arch in p.arches
                )
        # Listed with no build envs/ can answer, a release is listed all the same: it has no build to answer.
        found[version] = {compute: sorted(places[compute]) for compute in sorted(places, key=page_order)}
    return {"index": index.get("url", ""), "read": index.get("read", ""), "releases": found}


def _wheels_from(files: dict[str, dict[str, Any]], pypi: dict[str, Any], index: dict[str, Any]) -> dict[str, str]:
    source = files.get("pypi-torch.json", {}) if pypi.get("builds") else index
    return {"wheels_from": source.get("url", ""), "wheels_read": source.get("read", "")}


def _wheel_facts(pypi: dict[str, Any], index: dict[str, Any]) -> dict[str, str]:
    """PyPI's wheels of one release in wheels.yaml's form; where PyPI lacks it, the index's builds together."""
    requires = (pypi.get("requires_python") or index.get("requires_python") or [""])[0]
    platforms: dict[str, set[str]] = defaultdict(set)
    for builds in [{"": pypi["builds"][""]}] if (pypi.get("builds") or {}).get("") else [index.get("builds", {})]:
        for tags in builds.values():
            for platform, pythons in tags.items():
                platforms[platform].update(pythons.split())
    return {"requires_python": requires, **{p: " ".join(sorted(t, key=tag_key)) for p, t in sorted(platforms.items())}}


def write_releases(folder: Path) -> None:
    files = {
        path.name: data for path in sorted(folder.glob("*-*.json")) for data in [_source_facts(read_json(path))] if data
    }
    checked = min((d.get("checked", "") for d in files.values()), default="")
    data = {
        "format": facts.FORMAT,
        "checked": checked,
        "tried": _now(),
        "sources": sorted(str(d.get("url", "")) for d in files.values()),
        "releases": [entry for entry in derive(files, _baked()) if facts.readable(entry)],
        "listed": listed(files, _baked()),
    }
    _files.write(folder / "releases.json", json.dumps(data, sort_keys=True), replace=True, what="release facts")
    facts.reload()
