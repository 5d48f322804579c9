"""The records a reading command is given: files, directories and globs found, each record read,
and one run given twice refused.

A record that cannot be read is kept, with its error, when other records could be read, so one
bad file never hides the rest; when nothing can be read, the first error is raised.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kitbench.errors import RecordError, RecordReadError
from kitbench.records import record as records
from kitbench.records.types import RunRecord


@dataclass
class Loaded:
    path: Path
    record: RunRecord | None
    sha256: str = ""  # of the very bytes the record was parsed from
    error: str | None = None
    hint: str | None = None  # the error's: raised again when no record could be read


GIVE_RECORDS = "give run records or directories holding them (kitbench run writes them under results/)"
_RECORD_HEAD = re.compile(rb'"schema"\s*:\s*"kitbench\.run/')
_HEAD_BYTES = 4096  # the writer puts "schema" first; a record's opening bytes name it


def is_record(path: Path) -> bool:
    """Whether a file opens as a run record (of any version, whole or cut short) by its
    first bytes: a cheap test for files found in a directory, beside fleet plans, probe
    and install JSON, and the files of exported OCI bundles."""
    try:  # non-blocking: a FIFO swapped in for the file is read as empty, never waited on
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return True  # unreadable: kept, so its row says why
    try:
        return _RECORD_HEAD.search(os.read(fd, _HEAD_BYTES)) is not None
    except OSError:
        return True
    finally:
        os.close(fd)


def expand(inputs: Sequence[str], skipped: list[Path] | None = None) -> list[Path]:
    """Files, directories (their run records, recursively) and globs, in a stable order.
    A directory's other *.json files are appended to ``skipped``; a file named outright
    is taken as it is, so a non-record there is an error."""
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            inside = sorted(path.rglob("*.json"))
            runs = [p for p in inside if p.is_file() and is_record(p)]
            if not runs:
                others = f" ({len(inside)} other *.json files)" if inside else ""
                raise RecordError(f"no run records in directory {path}{others}", hint=GIVE_RECORDS)
            found += runs
            if skipped is not None:
                kept = set(runs)  # 5,000 records: a list here made this quadratic
                skipped += [p for p in inside if p not in kept]
        elif path.exists():
            found.append(path)
        else:
            matches = _glob(item)
            if not matches:
                raise RecordError(f"no such record, directory or match: {item}", hint=GIVE_RECORDS)
            found += matches
    return found


def _glob(pattern: str) -> list[Path]:
    """The files ``pattern`` matches (``**`` any depth), in order, never through a symlinked directory
    (glob.glob's ``**`` follows them: a link to a parent loops until the path is too long)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    base = Path(*parts[:fixed]) if fixed else Path()
    if fixed == len(parts):
        return [base] if base.exists() else []
    try:
        return sorted(base.glob(str(Path(*parts[fixed:])))) if base.is_dir() else []
    except (OSError, ValueError):
        return []


def load(inputs: Sequence[str], skipped: list[Path] | None = None) -> list[Loaded]:
    """Every record ``expand`` finds, read; one that cannot be read is kept with its error."""
    loaded = []
    for path in expand(inputs, skipped):
        try:
            loaded.append(Loaded(path, *records.read_hashed(path)))
        except RecordError as error:
            loaded.append(Loaded(path, None, error=error.message, hint=error.hint))
    if not any(item.record for item in loaded):
        first = loaded[0]
        raise RecordError(first.error or f"{first.path} is unreadable", hint=first.hint)
    refuse_same_run(loaded)
    return loaded


def refuse_same_run(loaded: Sequence[Loaded]) -> None:
    """Refuse two records that are one run: the same file (by path, a symlink or a hard link), the same
    bytes (a copy), the same run id (a copy rewritten), or, where either lacks a run id, the same content
    however written (re-indented, keys reordered, its run id removed: ``records.content_digest``). Two
    records with their own run ids are two runs. A run is never its own reproduction, nor counted twice on a
    page (exit 2, as for records that cannot be compared)."""
    seen: dict[object, Path] = {}
    contents: dict[str, tuple[Path | None, Path | None]] = {}  # its first record, its first without a run id
    without_id = any(item.record is not None and not item.record.get("run_id") for item in loaded)
    for item in loaded:
        if item.record is None:
            continue
        try:
            info = os.stat(item.path)
            keys: list[tuple[object, ...]] = [("file", info.st_dev, info.st_ino)]
        except OSError:
            keys = []
        run_id = item.record.get("run_id")
        keys += [("bytes", item.sha256)] + ([("id", run_id)] if run_id else [])
        for key in keys:
            if key in seen:
                _refuse(
                    seen[key],
                    item.path,
                    {
                        "file": "are the same file",
                        "bytes": "hold the same bytes (a copy)",
                        "id": "carry the same run id (one run, copied)",
                    }[str(key[0])],
                )
            seen[key] = item.path
        if not without_id:
            continue
        # Content decides where a run id cannot: a record without one is the same run as any with its content.
        content = records.content_digest(item.record)
        first, first_without_id = contents.get(content, (None, None))
        twin = first if not run_id else first_without_id
        if twin is not None:
            _refuse(twin, item.path, "hold the same run (the same content however written, and at most one run id)")
        contents[content] = (first or item.path, first_without_id or (None if run_id else item.path))


def _refuse(first: Path, then: Path, how: str) -> None:
    raise RecordReadError(
        f"{str(first)[:200]} and {str(then)[:200]} {how}: one run, not two",
        hint="a run is never its own reproduction: compare it with another run (kitbench replay makes one)",
    )
