"""Run records: versioned strict JSON, claimed before the run, written atomically,
read defensively.

A run claims its record file exclusively before anything slow happens, writes
it with ``status: interrupted`` after every step and rewrites it with the final
status at the end, so a run stopped at any point leaves a record saying so.
Nothing that is not a kitbench record is ever replaced, and a record only with
``force``. Reading takes regular files only, up to ``MAX_BYTES``, and validates
them against ``kitbench/records/schemas/run.schema.json`` before returning one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from kitbench import _files
from kitbench.errors import OutputRefused, RecordError, RecordReadError, UsageError
from kitbench.records.types import RunRecord

SCHEMA = "kitbench.run/3"
# /2 adds optional fields only (environment.packages and .lock, replay_of), as /3 does (failure: what stopped
# a run, as data): older records read as they were.
READABLE = ("kitbench.run/1", "kitbench.run/2", SCHEMA)
RESULTS_VARIABLE = "KITBENCH_RESULTS"
TARGET_VARIABLE = "KITBENCH_TARGET"
STATUSES = ("ok", "failed", "interrupted", "diverged")
MAX_BYTES = 32 * 2**20  # far above any real record (a full run is about 60 KB)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def results_root() -> Path:
    return Path(os.environ.get(RESULTS_VARIABLE) or "results")


def check_name(name: str, what: str = "target name") -> str:
    """A name that becomes a directory under the results root: plain, never a path."""
    if not _PLAIN_NAME.fullmatch(name) or name in (".", ".."):
        raise UsageError(
            f"{what} {name[:80]!r} is not a plain name",
            hint="use letters, digits, '.', '_' and '-' (at most 64, not starting with a dot); "
            "it names a directory under the results root",
        )
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
    return RecordError(
        f"cannot write the record to {str(path)[:300]}: {exc.strerror or exc}",
        hint="choose another --out, or set KITBENCH_RESULTS to a writable directory",
    )


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
        _hold(out)
        try:
            try:
                _create_exclusive(out)
                return out
            except FileExistsError:
                pass
            _refuse_unless_replaceable(out, force)
            return out
        except BaseException:
            release(out)
            raise
    except OSError as exc:
        raise _write_error(out or results_root(), exc) from None


def _holder(out: Path) -> Path:
    return out.with_name(f".{out.name}.claim")


_HELD: dict[Path, int] = {}  # the claims this process holds: their open, locked descriptors


def _hold(out: Path) -> None:
    """One run at a time writes ``out``: an exclusive lock on a claim file beside it, taken before the
    record is looked at and given up by ``release``. Of two runs given the same --out (with --force or
    not), the second is refused here, so that both never say they wrote it. The lock is the kernel's
    (flock): it ends with the process however it ends, SIGKILL included, so no claim is ever stale.
    Where there is no flock (Windows), the claim is the file itself, created exclusively."""
    holder = _holder(out)
    try:
        import fcntl
    except ImportError:
        try:
            _create_exclusive(holder)
        except FileExistsError:
            raise _taken(out, holder) from None
        _HELD[holder] = -1
        return
    for _ in range(3):  # the claim file may be removed by its holder between our open and our lock
        fd = os.open(holder, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(holder).st_ino:  # still the file at that name: ours
                _HELD[holder] = fd
                return
        except BlockingIOError:
            os.close(fd)
            raise _taken(out, holder) from None
        except FileNotFoundError:
            pass
        os.close(fd)
    raise _taken(out, holder)


def _taken(out: Path, holder: Path) -> RecordError:
    return RecordError(
        f"--out {out} is being written by another run (it holds {holder.name})",
        hint="wait for that run, or give another --out",
    )


def release(out: Path) -> None:
    """End the claim ``claim`` made on an --out (nothing for a default name, unique by construction):
    the file is removed while still locked, so no other run can lock it in between."""
    holder = _holder(out)
    fd = _HELD.pop(holder, None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        holder.unlink()
    if fd >= 0:
        os.close(fd)


def _refuse_unless_replaceable(out: Path, force: bool) -> None:
    info = out.lstat()
    kind = (
        "a symlink"
        if stat.S_ISLNK(info.st_mode)
        else "a directory"
        if stat.S_ISDIR(info.st_mode)
        else None
        if stat.S_ISREG(info.st_mode)
        else "not a regular file (a device, FIFO or socket)"
    )
    if kind is not None:
        raise OutputRefused(
            f"--out {out} is {kind}; kitbench writes records only to regular files",
            hint="give a new file name such as run.json",
        )
    try:
        read(out)
    except RecordError:
        if info.st_size == 0:  # a claim a killed run left before its first write
            if force:
                return
            raise OutputRefused(
                f"--out {out} is an empty file (a run killed before its first write leaves its claimed record so)",
                hint="pass --force to replace it, or give a new file name",
            ) from None
        else:
            raise OutputRefused(
                f"--out {out} exists and is not a kitbench record; it is left as it is",
                hint="give a new file name such as run.json",
            ) from None
    if not force:
        raise OutputRefused(
            f"--out {out} already holds a kitbench record", hint="pass --force to replace it, or give a new file name"
        )


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


# Numbers a record may hold: no measurement, count or size kitbench writes comes near these, and any
# sum, product or difference of two of them stays a finite float (1e308 * 10 is an overflow, float(10**400)
# an OverflowError).
MAX_FLOAT = 1e100
MAX_INT = 2**63


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} overflows to infinity")
    return value


def _unsound_leaf(item: Any) -> str | None:
    if isinstance(item, float):
        return f"the number {item:g} is beyond {MAX_FLOAT:g}, which no record holds" if abs(item) > MAX_FLOAT else None
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate, which is not text"
        return None
    if isinstance(item, int) and not isinstance(item, bool) and abs(item) >= MAX_INT:
        return f"the whole number {str(item)[:24]}... is beyond 2**63, which no record holds"
    return None


def _unsound(value: Any) -> str | None:
    """Where ``value`` holds what no record holds, said with its JSON pointer: a number beyond MAX_FLOAT or
    MAX_INT, or a string (a key too) with a lone surrogate ("\\ud800" is valid JSON but no text: no
    encoder can write it). Leaves are checked in place (a loss curve of a million points is a list
    of floats, walked once without a path for each)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else None
        if children is None:
            found = _unsound_leaf(item)
            if found:
                return f"{where.lstrip('/') or '(top level)'}: {found}"
            continue
        for key, child in children:
            found = _unsound_leaf(key) if isinstance(key, str) else None
            if found:
                return f"{where}/(a key): {found}".lstrip("/")
            if isinstance(child, (dict, list)):
                stack.append((f"{where}/{key}", child))
                continue
            found = _unsound_leaf(child)
            if found:
                return f"{where}/{key}: {found}".lstrip("/")
    return None


def _text(data: bytes | str, path: Path | str) -> str:
    """The record's text, refusing with the cause what no JSON parser message would name truly: an empty
    file, one of NUL bytes, bytes that are not UTF-8 (json.loads would take UTF-16 and -32 bytes too)."""
    if not data:
        raise RecordReadError(
            f"{path} is empty (0 bytes)",
            hint="a kitbench run killed before its first write leaves its claimed record "
            "empty, as does a copy or another tool stopped short: run it again "
            "(`kitbench run --out` with --force reuses the name)",
        )
    nul = data.find(b"\0") if isinstance(data, bytes) else data.find("\0")
    if nul >= 0:
        only = not (data.strip(b"\0") if isinstance(data, bytes) else data.strip("\0"))
        raise RecordReadError(
            f"{path} holds {f'only NUL bytes ({len(data):,})' if only else 'NUL bytes'}"
            f"{'' if only else f' (the first at byte {nul:,})'}: a record is UTF-8 text, "
            "which has none",
            hint="a file whose contents never reached the disk (a system crash after it "
            "grew) reads back as NUL bytes, as does a preallocated one; kitbench writes "
            "records whole (fsync, then rename): run it again"
            if only
            else "it is not a kitbench record (UTF-16 or binary data?)",
        )
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")  # a byte-order mark, as json.loads took before
    except UnicodeDecodeError as exc:
        raise RecordReadError(
            f"{path} is not UTF-8 text (byte {exc.start:,} is 0x{data[exc.start]:02x})",
            hint="it is not a kitbench record; kitbench writes records as UTF-8",
        ) from None


GIVE_A_RECORD = "give a record kitbench run wrote (it prints each one's path; by default under results/)"
_NOT_KITBENCHS = "it was not written by kitbench or was edited since"


def parse(text: bytes | str, path: Path | str) -> RunRecord:
    """Parse and validate a record's text; every failure is one RecordReadError naming the field."""
    text = _text(text, path)
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise RecordReadError(
                f"{path} holds only whitespace, no JSON",
                hint="it is not a kitbench record; kitbench writes records whole",
            ) from None
        if exc.pos == len(text) - len(text.lstrip()):  # refused at its first character: never JSON
            raise RecordReadError(
                f"{path} is not JSON (line {exc.lineno}: {exc.msg})",
                hint=f"it is not a kitbench record, which is a JSON file; {GIVE_A_RECORD}",
            ) from None
        raise RecordReadError(
            f"{path} is not a complete JSON record (line {exc.lineno}: {exc.msg})",
            hint="it may be truncated; kitbench writes records atomically, so another tool or a copy cut it short",
        ) from None
    except ValueError as exc:
        raise RecordReadError(f"{path} is not strict JSON: {exc}", hint=_NOT_KITBENCHS) from None
    except RecursionError:
        raise RecordReadError(f"{path} is nested too deeply to be a kitbench record", hint=_NOT_KITBENCHS) from None
    if not isinstance(data, dict) or "schema" not in data:
        raise RecordReadError(
            f"{path} is not a kitbench run record (no 'schema' field)",
            hint=f"it is JSON of another kind (a fleet plan, probe or install-cmd JSON?); {GIVE_A_RECORD}",
        )
    if data["schema"] not in READABLE:
        raise RecordReadError(
            f"{path} has schema {str(data['schema'])[:80]!r}; this kitbench reads {' and '.join(map(repr, READABLE))}",
            hint="use the kitbench version that wrote it",
        )
    validate(data, path)
    unsound = _unsound(data)
    if unsound is not None:
        raise RecordReadError(f"{path}: field {unsound[:300]}", hint=_NOT_KITBENCHS)
    return cast(RunRecord, data)


def validate(data: dict[str, Any], path: Path | str = "record") -> None:
    """Check ``data`` against the run schema (/1 or /2); one line naming the field."""
    import fastjsonschema

    try:
        _validator()(data)
    except fastjsonschema.JsonSchemaValueException as error:
        field = "/".join(str(p) for p in error.path[1:]) or "(top level)"
        message = str(error.message).replace("data.", "", 1).replace("data ", "", 1)
        raise RecordReadError(
            f"{path}: field {field[:200]}: {message[:200]}",
            hint=f"the record does not match {SCHEMA}; it was not written by kitbench or was edited since",
        ) from None
    except RecursionError:
        raise RecordReadError(f"{path} is nested too deeply to be a kitbench record") from None


def _validator() -> Callable[[Any], Any]:
    from kitbench.records import schemas

    return schemas.validator("run")


def _unreadable(message: str) -> RecordReadError:
    """A record file refused before its bytes are read (none there, a FIFO, a device, a directory, too big)."""
    return RecordReadError(message, hint=GIVE_A_RECORD)


def read_hashed(path: Path) -> tuple[RunRecord, str]:
    """One record and the sha256 of the very bytes it was parsed from (read once: a file replaced
    meanwhile cannot lend its hash to other data)."""
    data = _files.read(path, MAX_BYTES, "record", _unreadable)
    return parse(data, path), hashlib.sha256(data).hexdigest()


def content_digest(record: RunRecord) -> str:
    """What a run is, whatever bytes carry it: the sha256 of its canonical JSON (keys sorted, compact), its
    ``run_id`` left out, so a re-indented copy, or one with its ``run_id`` removed, is the same run."""
    body = {k: v for k, v in record.items() if k != "run_id"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read(path: Path) -> RunRecord:
    """Load and validate one record; every failure is a one-line RecordReadError."""
    return read_hashed(path)[0]


def new_run_id() -> str:
    """A run's identity, carried by its record: a copy of the record is the same run, a replay a new one."""
    return secrets.token_hex(16)
