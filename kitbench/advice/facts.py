"""The wheel and build facts install-cmd answers from beyond the baked ones: the user's cache of the indexes.

``kitbench.advice.indexes`` fills ``facts/`` in kitbench's cache folder (``kitbench facts refresh``): one file per
source, and ``releases.json`` derived from them, the releases in the form install-cmd reads. This module
is what install-cmd imports: it reads that one small file, and only when it exists (a stat otherwise),
so start-up does not grow; nothing here touches the network. A release that ``envs/releases/`` covers is
answered from there (its commands are checked against pytorch.org's); the rest are answered from these
facts and marked so. A CUDA or ROCm build envs/ has no driver or GPU-architecture facts for is left out,
with the reason, never guessed (decided when the cache is written: install-cmd reads no more YAML for it).
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import datetime
import os
import re
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from kitbench import _files
from kitbench.errors import KitbenchError, UsageError
from kitbench.machine.builds import page_order

MAX_AGE_VARIABLE = "KITBENCH_FACTS_MAX_AGE"
STALE_DAYS = 60
FORMAT = 2  # of releases.json: one written in another form is refused, never misread


class Derived(NamedTuple):
    """A release known only from the cache, in the terms selector.Release and wheels.Wheels need (a named tuple:
    "Start-up" in docs/architecture.md)."""

    version: str
    torchvision: str
    torchaudio: str | None
    computes: tuple[str, ...]  # the builds install-cmd may offer, in pytorch.org's order
    refused: tuple[str, ...]  # builds left out, each with the reason
    macos_x86_64: bool
    aarch64_cuda: bool
    xpu: bool  # the index lists an XPU build of it
    wheels: dict[str, dict[str, str]]  # package -> {requires_python, platform tag: Python tags}
    note: str  # what the answer rests on: index, date, how the packages were paired
    origin: dict[str, str]  # index, read, wheels_from, wheels_read: where builds and tags were read, when


def cache_dir() -> Path:
    return _files.cache_dir() / "facts"


MAX_BYTES = 8 * 2**20  # the largest cache file kitbench writes is tens of kB; more is not ours


def read_json(path: Path) -> dict[str, Any] | None:
    import json  # here: install-cmd reads a cache only after a refresh

    try:
        data = json.loads(_files.read(path, MAX_BYTES, "fact cache"))
    except (KitbenchError, ValueError):
        return None  # absent, or not ours to trust: read afresh
    return data if isinstance(data, dict) else None


# What an index can name, and nothing a shell would read as more than a word: every field of the cache
# that reaches the command users `eval` must have one of these forms, or its release is left out. Patterns, not
# compiled: re compiles each once, when first matched, and install-cmd reads a cache only after a refresh.
_VERSION = r"[0-9]{1,4}(\.[0-9]{1,4}){1,3}"
_COMPUTE = r"cpu|xpu|cu[0-9]{2,4}|rocm[0-9]{1,2}(\.[0-9]{1,2}){0,2}"
# The forms a refresh accepts from an index before it writes them (kitbench.advice.indexes), so that what it
# writes this module can always read: a PEP 440 version as indexes write them, a build label (the local part of
# a version: ``+cu128``), a Requires-Python (PEP 440 specifiers, each a comparison and a version).
INDEX_VERSION = r"[0-9]{1,8}(\.[0-9]{1,8}){0,5}((a|b|rc)[0-9]{1,8})?(\.post[0-9]{1,8})?(\.dev[0-9]{1,8})?"
BUILD_LABEL = _COMPUTE
REQUIRES_PYTHON = (
    r"\s*(~=|===|==|!=|<=|>=|<|>)\s*[0-9]{1,4}(\.[0-9]{1,4}){0,3}(\.\*)?"
    r"(\s*,\s*(~=|===|==|!=|<=|>=|<|>)\s*[0-9]{1,4}(\.[0-9]{1,4}){0,3}(\.\*)?){0,15}\s*"
)


def moment(text: object) -> datetime.datetime | None:
    """An index's or the cache's ISO 8601 time with its zone (``Z`` or an offset), in UTC; None for anything else
    (a time without a zone cannot be compared with one that has it)."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(datetime.timezone.utc) if when.tzinfo is not None else None


def _checked(entry: dict[str, Any]) -> dict[str, Any]:
    versions = [entry["version"], entry["torchvision"], *([entry["torchaudio"]] if entry["torchaudio"] else [])]
    computes = entry["computes"]
    requires = [tags.get("requires_python") for tags in entry["wheels"].values()]
    if not (
        all(isinstance(v, str) and re.fullmatch(_VERSION, v) for v in versions)
        and isinstance(computes, list)
        and all(isinstance(c, str) and re.fullmatch(_COMPUTE, c) for c in computes)
        and all(isinstance(r, str) and (not r or re.fullmatch(REQUIRES_PYTHON, r)) for r in requires)
        and all(isinstance(t, str) for tags in entry["wheels"].values() for t in tags.values())
        and isinstance(entry["refused"], list)
        and all(isinstance(w, str) for w in entry["refused"])
        and all(isinstance(entry[k], str) for k in ("index", "read", "wheels_from", "wheels_read", "paired"))
    ):
        raise TypeError("a field the command would carry is not in an index's form")
    return entry


def readable(entry: dict[str, Any]) -> bool:
    """Whether install-cmd can take ``entry`` (a release of releases.json): a refresh writes no other."""
    try:
        _derived(_checked(entry))
    except (KeyError, TypeError, AttributeError):
        return False
    return True


class Listing(NamedTuple):
    """What PyTorch's index lists of the releases envs/releases/ covers: where and when it was read, and each
    release's builds (XPU's included), each with the places it has wheels for (``linux-x86_64``)."""

    where: str
    releases: dict[str, dict[str, tuple[str, ...]]]


class _Cache(NamedTuple):
    data: dict[str, Any]  # releases.json, or {} where it is not this kitbench's
    derived: tuple[Derived, ...]
    notes: tuple[str, ...]  # what was left out of it, and why
    listing: Listing = Listing("", {})


@cache
def _load(source: _files.Stamp) -> _Cache:
    data = read_json(Path(source[0])) or {}
    if data.get("format") != FORMAT or not isinstance(data.get("releases"), list):
        return _Cache(
            {},
            (),
            (
                f"{source[0]} is not the fact cache this kitbench writes, so it was left unread; "
                "`kitbench facts refresh` rewrites it",
            ),
        )
    found, left_out = [], []
    for entry in data["releases"]:
        try:
            found.append(_derived(_checked(entry)))
        except (KeyError, TypeError, AttributeError):
            left_out.append(str(entry.get("version", "?") if isinstance(entry, dict) else "?")[:40])
    notes: tuple[str, ...] = (
        (
            f"{source[0]}: left out {len(left_out)} release(s) whose facts are not in the form a refresh writes "
            f"({', '.join(left_out[:3])}); `kitbench facts refresh` rewrites it",
        )
        if left_out
        else ()
    )
    try:
        listing = _listing(data.get("listed") or {})
    except (KeyError, TypeError, AttributeError):
        listing = Listing("", {})
        notes += (
            f"{source[0]}: left out the builds PyTorch's index lists, which are not in the form a refresh "
            "writes; `kitbench facts refresh` rewrites it",
        )
    return _Cache(data, tuple(found), notes, listing)


_PLACE = r"(linux|windows|macos)-(x86_64|aarch64|arm64)"


def _listing(found: dict[str, Any]) -> Listing:
    where = f"{found['index']} as read on {found['read'][:10]}" if found else ""
    # In pytorch.org's order (ROCm's, CUDA's, each oldest first, then the rest): JSON's keys are written sorted.
    releases = {
        version: {compute: tuple(builds[compute]) for compute in sorted(builds, key=page_order)}
        for version, builds in found.get("releases", {}).items()
    }
    if not isinstance(where, str) or not all(
        re.fullmatch(_VERSION, v)
        and all(
            isinstance(c, str)
            and re.fullmatch(_COMPUTE, c)
            and all(isinstance(p, str) and re.fullmatch(_PLACE, p) for p in ps)
            for c, ps in builds.items()
        )
        for v, builds in releases.items()
    ):
        raise TypeError("a listed build is not in an index's form")
    return Listing(where, releases)


def reload() -> None:
    """Forget what was read: the cache was just rewritten."""
    _load.cache_clear()


def _read() -> _Cache:
    path = cache_dir() / "releases.json"
    if not path.is_file():
        return _Cache({}, (), ())
    return _load(_files.stamp(path))


def cached() -> dict[str, Any]:
    """releases.json, or {} where there is none or it is not this kitbench's: a stat, no read, for a user who
    never refreshed."""
    return _read().data


def derived() -> list[Derived]:
    """The releases known only from the cache, newest first; those not in the form a refresh writes left out."""
    return list(_read().derived)


def notes() -> list[str]:
    """What install-cmd says of the cache: what of it was left out, and why."""
    return list(_read().notes)


def _derived(entry: dict[str, Any]) -> Derived:
    note = (
        f"torch {entry['version']} is not in envs/releases/: its builds are derived from {entry['index']} "
        f"as read on {entry['read'][:10]}, not copied from pytorch.org; torchvision {entry['torchvision']} "
        f"is paired by {entry['paired']}"
    )
    if entry["refused"]:
        note += "; left out: " + "; ".join(entry["refused"])
    return Derived(
        entry["version"],
        entry["torchvision"],
        entry["torchaudio"],
        tuple(entry["computes"]),
        tuple(entry["refused"]),
        bool(entry["macos_x86_64"]),
        bool(entry["aarch64_cuda"]),
        bool(entry["xpu"]),
        entry["wheels"],
        note,
        {k: entry[k] for k in ("index", "read", "wheels_from", "wheels_read")},
    )


def listing() -> Listing:
    """What PyTorch's index lists of each release envs/releases/ covers (nothing without a cache, or with one
    whose listing does not read)."""
    return _read().listing


def listed() -> tuple[str, dict[str, tuple[str, ...]]]:
    """Where and when PyTorch's index was read, and the builds it lists for each release envs/releases/ covers
    that their ``wheels:`` name (XPU's, which envs/vendors.yaml gives, left out)."""
    found = listing()
    return found.where, {version: tuple(c for c in builds if c != "xpu") for version, builds in found.releases.items()}


def checked() -> datetime.datetime | None:
    """When the cache was last confirmed against its sources; None without one."""
    return moment(cached().get("checked"))


def _seconds(text: str) -> float:
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", text)
    if match is None:
        raise UsageError(f"malformed {MAX_AGE_VARIABLE} {text!r}", hint="a number of seconds, or with s, m, h, d: 7d")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def due(now: datetime.datetime | None = None) -> bool:
    """Whether install-cmd should refresh by itself: only when KITBENCH_FACTS_MAX_AGE says so and the
    cache is older than that (or absent). A refresh that failed counts as one tried: offline, install-cmd
    does not wait on an unreachable index every time it runs, only once per that age."""
    limit = os.environ.get(MAX_AGE_VARIABLE)
    if not limit:
        return False
    seconds = _seconds(limit)
    when = max(filter(None, (checked(), moment(cached().get("tried")))), default=None)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return when is None or (now - when).total_seconds() > seconds


def stale_note(baked_read: str, now: datetime.datetime | None = None) -> str | None:
    """One note when the newest facts in use (baked or cached) are older than STALE_DAYS."""
    baked = datetime.datetime.fromisoformat(baked_read).replace(tzinfo=datetime.timezone.utc)
    newest = max(filter(None, (baked, checked())))
    age = ((now or datetime.datetime.now(datetime.timezone.utc)) - newest).days
    if age <= STALE_DAYS:
        return None
    return (
        f"the wheel and build facts are {age} days old (read {newest.date().isoformat()}): releases since may "
        "be missing; `kitbench facts refresh` (or install-cmd --refresh) reads them from the indexes"
    )
