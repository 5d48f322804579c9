"""Run records: versioned strict JSON, claimed before the run, written atomically,
read defensively.

A run claims its record file exclusively before anything slow happens, writes
it with ``status: interrupted`` after every step and rewrites it with the final
status at the end, so a run stopped at any point leaves a record saying so.
Nothing that is not a kitbench record is ever replaced, and a record only with
``force``. Reading takes regular files only, up to ``MAX_BYTES``, and validates
them against ``kitbench/schemas/run.schema.json`` before returning one.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import stat
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any, cast

from kitbench import _files
from kitbench._types import RunRecord
from kitbench.errors import OutputRefused, RecordError, RecordReadError, UsageError

SCHEMA = "kitbench.run/2"
# /2 adds optional fields only (environment.packages and .lock, replay_of): /1 records read as they were.
READABLE = ("kitbench.run/1", SCHEMA)
RESULTS_VARIABLE = "KITBENCH_RESULTS"
TARGET_VARIABLE = "KITBENCH_TARGET"
STATUSES = ("ok", "failed", "interrupted", "diverged")
MAX_BYTES = 32 * 2**20          # far above any real record (a full run is about 60 KB)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def results_root() -> Path:
    return Path(os.environ.get(RESULTS_VARIABLE) or "results")


def check_name(name: str, what: str = "target name") -> str:
    """A name that becomes a directory under the results root: plain, never a path."""
    if not _PLAIN_NAME.fullmatch(name) or name in (".", ".."):
        raise UsageError(f"{what} {name[:80]!r} is not a plain name",
                         hint="use letters, digits, '.', '_' and '-' (at most 64, not starting with a dot); "
                              "it names a directory under the results root")
    return name


def target_name(target: str | None = None) -> str:
    return check_name(target or os.environ.get(TARGET_VARIABLE) or "local")


def _default_name() -> str:
    # The time sorts; the random part keeps two runs started in the same second apart.
    return f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}.json"


def _create_exclusive(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    os.close(fd)


def _write_error(path: Path, exc: OSError) -> RecordError:
    return RecordError(f"cannot write the record to {str(path)[:300]}: {exc.strerror or exc}",
                       hint="choose another --out, or set KITBENCH_RESULTS to a writable directory")


def claim(out: Path | None, force: bool = False, target: str | None = None) -> Path:
    """Create the record's file before the run, so that no other run or file is clobbered.

    With no ``out``, a new name under ``results/<target>/``, created exclusively.
    An existing ``out`` is replaced only if it is a regular file holding a kitbench
    record and ``force`` is set; anything else there (a directory, a device, a FIFO,
    a symlink, a file with other content) is refused.
    """
    try:
        if out is None:
            folder = results_root() / target_name(target)
            folder.mkdir(parents=True, exist_ok=True)
            while True:
                path = folder / _default_name()
                try:
                    _create_exclusive(path)
                    return path
                except FileExistsError:
                    continue
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            _create_exclusive(out)
            return out
        except FileExistsError:
            pass
        _refuse_unless_replaceable(out, force)
        return out
    except OSError as exc:
        raise _write_error(out or results_root(), exc) from None


def _refuse_unless_replaceable(out: Path, force: bool) -> None:
    info = out.lstat()
    kind = ("a symlink" if stat.S_ISLNK(info.st_mode) else "a directory" if stat.S_ISDIR(info.st_mode)
            else None if stat.S_ISREG(info.st_mode) else "not a regular file (a device, FIFO or socket)")
    if kind is not None:
        raise OutputRefused(f"--out {out} is {kind}; kitbench writes records only to regular files",
                          hint="give a new file name such as run.json")
    try:
        read(out)
    except RecordError:
        if info.st_size == 0:       # a claim a killed run left before its first write
            if force:
                return
            raise OutputRefused(f"--out {out} is an empty file (a run killed before its first write leaves "
                              "its claimed record so)", hint="pass --force to replace it, or give a new file "
                                                             "name") from None
        else:
            raise OutputRefused(f"--out {out} exists and is not a kitbench record; it is left as it is",
                              hint="give a new file name such as run.json") from None
    if not force:
        raise OutputRefused(f"--out {out} already holds a kitbench record",
                          hint="pass --force to replace it, or give a new file name")


def _finite(value: Any, where: str, found: list[str]) -> Any:
    """The value with every NaN or infinity replaced by None, each one's place noted."""
    if isinstance(value, float) and not math.isfinite(value):
        found.append(where)
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{where}/{k}", found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{where}/{i}", found) for i, v in enumerate(value)]
    return value


def to_json(record: Mapping[str, object]) -> str:
    """Strict JSON (no NaN or Infinity tokens): non-finite numbers become null and
    ``nonfinite`` lists where they were, as JSON pointers."""
    found: list[str] = []
    clean = _finite({k: v for k, v in record.items() if k != "nonfinite"}, "", found)
    if found:
        clean["nonfinite"] = found
    return json.dumps(clean, indent=2, allow_nan=False) + "\n"


def write_atomic(path: Path, record: Mapping[str, object]) -> None:
    """Rewrite a claimed record: temporary file beside it, fsync, rename (kitbench._files)."""
    _files.write(path, to_json(record), replace=True, what="the record")


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most ``MAX_BYTES``; FIFOs and devices are refused
    before a single byte is read (opening non-blocking, then checking what was opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise RecordReadError(f"no such record: {path}") from None
    except OSError as exc:
        raise RecordReadError(f"cannot read record {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RecordReadError(f"{path} is not a regular file; kitbench reads records only from files")
        if info.st_size > MAX_BYTES:
            raise RecordReadError(f"{path} is {info.st_size:,} bytes; a kitbench record is at most {MAX_BYTES:,}")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise RecordReadError(f"cannot read record {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise RecordReadError(f"{path} grew past {MAX_BYTES:,} bytes while being read")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: with a duplicate, which value is "the" value depends on the reader."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {twice[:80]!r} appears twice in one object")
    return data


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} overflows to infinity")
    return value


def _text(data: bytes | str, path: Path | str) -> str:
    """The record's text, refusing with the cause what no JSON parser message would name truly: an empty
    file, one of NUL bytes, bytes that are not UTF-8 (json.loads would take UTF-16 and -32 bytes too)."""
    if not data:
        raise RecordReadError(f"{path} is empty (0 bytes)",
                              hint="a kitbench run killed before its first write leaves its claimed record "
                                   "empty, as does a copy or another tool stopped short: run it again "
                                   "(`kitbench run --out` with --force reuses the name)")
    nul = data.find(b"\0") if isinstance(data, bytes) else data.find("\0")
    if nul >= 0:
        only = not (data.strip(b"\0") if isinstance(data, bytes) else data.strip("\0"))
        raise RecordReadError(f"{path} holds {f'only NUL bytes ({len(data):,})' if only else 'NUL bytes'}"
                              f"{'' if only else f' (the first at byte {nul:,})'}: a record is UTF-8 text, "
                              "which has none",
                              hint="a file whose contents never reached the disk (a system crash after it "
                                   "grew) reads back as NUL bytes, as does a preallocated one; kitbench writes "
                                   "records whole (fsync, then rename): run it again" if only else
                                   "it is not a kitbench record (UTF-16 or binary data?)")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")     # a byte-order mark, as json.loads took before
    except UnicodeDecodeError as exc:
        raise RecordReadError(f"{path} is not UTF-8 text (byte {exc.start:,} is 0x{data[exc.start]:02x})",
                              hint="it is not a kitbench record; kitbench writes records as UTF-8") from None


def parse(text: bytes | str, path: Path | str) -> RunRecord:
    """Parse and validate a record's text; every failure is one RecordReadError naming the field."""
    text = _text(text, path)
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys,
                          parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise RecordReadError(f"{path} holds only whitespace, no JSON",
                                  hint="it is not a kitbench record; kitbench writes records whole") from None
        raise RecordReadError(f"{path} is not a complete JSON record (line {exc.lineno}: {exc.msg})",
                              hint="it may be truncated; kitbench writes records atomically, so another tool "
                                   "or a copy cut it short") from None
    except ValueError as exc:
        raise RecordReadError(f"{path} is not strict JSON: {exc}") from None
    except RecursionError:
        raise RecordReadError(f"{path} is nested too deeply to be a kitbench record") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise RecordReadError(f"{path} is not a kitbench run record (no 'schema' field)")
    if data["schema"] not in READABLE:
        raise RecordReadError(f"{path} has schema {str(data['schema'])[:80]!r}; this kitbench reads "
                              f"{' and '.join(map(repr, READABLE))}",
                              hint="use the kitbench version that wrote it")
    validate(data, path)
    return cast(RunRecord, data)


def validate(data: dict[str, Any], path: Path | str = "record") -> None:
    """Check ``data`` against the run schema (/1 or /2); one line naming the field."""
    import fastjsonschema

    try:
        _validator()(data)
    except fastjsonschema.JsonSchemaValueException as error:
        field = "/".join(str(p) for p in error.path[1:]) or "(top level)"
        message = str(error.message).replace("data.", "", 1).replace("data ", "", 1)
        raise RecordReadError(f"{path}: field {field[:200]}: {message[:200]}",
                              hint=f"the record does not match {SCHEMA}; it was not written by kitbench "
                                   "or was edited since") from None
    except RecursionError:
        raise RecordReadError(f"{path} is nested too deeply to be a kitbench record") from None


@cache
def _validator() -> Callable[[Any], Any]:
    from kitbench import schemas

    return schemas.validator("run")


def read(path: Path) -> RunRecord:
    """Load and validate one record; every failure is a one-line RecordReadError."""
    return parse(_read_bounded(path), path)
