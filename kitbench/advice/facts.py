"""The wheel and build facts install-cmd answers from beyond the baked ones: the user's cache of the indexes.

``kitbench.advice.indexes`` fills ``$XDG_CACHE_HOME/kitbench/facts/`` (``kitbench facts refresh``): one file per
source, and ``releases.json`` derived from them, the releases in the form install-cmd reads. This module
is what install-cmd imports: it reads that one small file, and only when it exists (a stat otherwise),
so start-up does not grow; nothing here touches the network. A release that ``envs/releases/`` covers is
answered from there (its commands are checked against pytorch.org's); the rest are answered from these
facts and marked so. A CUDA or ROCm build envs/ has no driver or GPU-architecture facts for is left out,
with the reason, never guessed (decided when the cache is written: install-cmd reads no more YAML for it).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kitbench import _files
from kitbench.errors import KitbenchError, ManifestError, UsageError

MAX_AGE_VARIABLE = "KITBENCH_FACTS_MAX_AGE"
STALE_DAYS = 60
FORMAT = 1          # of releases.json: one written in another form is refused, never misread


@dataclass(frozen=True)
class Derived:
    """A release known only from the cache, in the terms selector.Release and wheels.Wheels need."""

    version: str
    torchvision: str
    torchaudio: str | None
    computes: tuple[str, ...]       # the builds install-cmd may offer, in pytorch.org's order
    refused: tuple[str, ...]        # builds left out, each with the reason
    macos_x86_64: bool
    aarch64_cuda: bool
    wheels: dict[str, dict[str, str]]   # package -> {requires_python, platform tag: Python tags}
    note: str                       # what the answer rests on: index, date, how the packages were paired
    origin: dict[str, str]          # index, read, wheels_from, wheels_read: where builds and tags were read, when


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kitbench" / "facts"


MAX_BYTES = 8 * 2**20       # the largest cache file kitbench writes is tens of kB; more is not ours


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_files.read(path, MAX_BYTES, "fact cache"))
    except (KitbenchError, ValueError):
        return None         # absent, or not ours to trust: read afresh
    return data if isinstance(data, dict) else None


# What an index can name, and nothing a shell would read as more than a word: every field of the cache
# that reaches the command users `eval` must have one of these forms, or the cache is refused.
_VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){1,3}")
_COMPUTE = re.compile(r"cpu|xpu|cu[0-9]{2,4}|rocm[0-9]{1,2}(\.[0-9]{1,2}){0,2}")


def _checked(entry: dict[str, Any]) -> dict[str, Any]:
    versions = [entry["version"], entry["torchvision"], *([entry["torchaudio"]] if entry["torchaudio"] else [])]
    computes = entry["computes"]
    if not (all(isinstance(v, str) and _VERSION.fullmatch(v) for v in versions) and isinstance(computes, list)
            and all(isinstance(c, str) and _COMPUTE.fullmatch(c) for c in computes)):
        raise TypeError("a field the command would carry is not in an index's form")
    return entry


@cache
def _load(source: _files.Stamp) -> dict[str, Any]:
    return read_json(Path(source[0])) or {}


def reload() -> None:
    """Forget what was read: the cache was just rewritten."""
    _load.cache_clear()


def cached() -> dict[str, Any]:
    """releases.json, or {} where there is none: a stat, no read, for a user who never refreshed."""
    path = cache_dir() / "releases.json"
    if not path.is_file():
        return {}
    data = _load(_files.stamp(path))
    if data.get("format") != FORMAT:
        raise _unreadable(path)
    return data


def _unreadable(path: Path) -> ManifestError:
    return ManifestError(path, "not the fact cache this kitbench writes",
                         hint="`kitbench facts refresh` rewrites it (offline too, from the files beside it)")


def derived() -> list[Derived]:
    """The releases known only from the cache, newest first."""
    try:
        return _derived(cached().get("releases", []))
    except (KeyError, TypeError, AttributeError):
        raise _unreadable(cache_dir() / "releases.json") from None


def _derived(entries: list[dict[str, Any]]) -> list[Derived]:
    found = []
    for entry in map(_checked, entries):
        note = (f"torch {entry['version']} is not in envs/releases/: its builds are derived from {entry['index']} "
                f"as read on {entry['read'][:10]}, not copied from pytorch.org; torchvision {entry['torchvision']} "
                f"is paired by {entry['paired']}")
        if entry["refused"]:
            note += "; left out: " + "; ".join(entry["refused"])
        found.append(Derived(entry["version"], entry["torchvision"], entry["torchaudio"], tuple(entry["computes"]),
                             tuple(entry["refused"]), entry["macos_x86_64"], entry["aarch64_cuda"], entry["wheels"],
                             note, {k: entry[k] for k in ("index", "read", "wheels_from", "wheels_read")}))
    return found


def listed() -> tuple[str, dict[str, tuple[str, ...]]]:
    """Where and when PyTorch's index was read, and the builds it lists for each release envs/releases/ covers
    ({} without a cache, or one written before these were recorded)."""
    try:
        found = cached().get("listed") or {}
        where = f"{found['index']} as read on {found['read'][:10]}" if found else ""
        builds = {version: tuple(computes) for version, computes in found.get("releases", {}).items()}
        if not all(_VERSION.fullmatch(v) and all(isinstance(c, str) and _COMPUTE.fullmatch(c) for c in cs)
                   for v, cs in builds.items()):
            raise TypeError("a listed build is not in an index's form")
    except (KeyError, TypeError, AttributeError):
        raise _unreadable(cache_dir() / "releases.json") from None
    return where, builds


def checked() -> datetime.datetime | None:
    """When the cache was last confirmed against its sources; None without one."""
    text = cached().get("checked")
    return datetime.datetime.fromisoformat(text) if text else None


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
    tried = cached().get("tried")
    when = max(filter(None, (checked(), datetime.datetime.fromisoformat(tried) if tried else None)), default=None)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return when is None or (now - when).total_seconds() > seconds


def stale_note(baked_read: str, now: datetime.datetime | None = None) -> str | None:
    """One note when the newest facts in use (baked or cached) are older than STALE_DAYS."""
    baked = datetime.datetime.fromisoformat(baked_read).replace(tzinfo=datetime.timezone.utc)
    newest = max(filter(None, (baked, checked())))
    age = ((now or datetime.datetime.now(datetime.timezone.utc)) - newest).days
    if age <= STALE_DAYS:
        return None
    return (f"the wheel and build facts are {age} days old (read {newest.date().isoformat()}): releases since may "
            "be missing; `kitbench facts refresh` (or install-cmd --refresh) reads them from the indexes")
