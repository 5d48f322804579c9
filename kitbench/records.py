"""Run records: versioned JSON, written atomically, read defensively.

A run writes its record after every check with ``status: interrupted`` and
rewrites it with the final status at the end, so a run killed at any point
leaves a record saying so, holding whatever had finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kitbench.errors import RecordError

SCHEMA = "kitbench.run/1"
RESULTS_VARIABLE = "KITBENCH_RESULTS"
TARGET_VARIABLE = "KITBENCH_TARGET"
STATUSES = ("ok", "failed", "interrupted")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def results_root() -> Path:
    return Path(os.environ.get(RESULTS_VARIABLE) or "results")


def default_path(target: str | None = None) -> Path:
    """``results/<target>/<UTC timestamp>.json`` (``KITBENCH_RESULTS`` moves the root)."""
    name = target or os.environ.get(TARGET_VARIABLE) or "local"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return results_root() / name / f"{stamp}.json"


def ensure_writable(path: Path) -> None:
    """Fail before a long run, not after it, when the record cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".kitbench-probe-"):
            pass
    except OSError as exc:
        raise RecordError(f"cannot write the record to {path}: {exc.strerror or exc}",
                          hint="choose another --out, or set KITBENCH_RESULTS to a writable directory") from None
    if path.is_dir():
        raise RecordError(f"--out {path} is a directory", hint="give a file name such as run.json")


def write_atomic(path: Path, record: dict[str, Any]) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over it."""
    text = json.dumps(record, indent=2, sort_keys=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            # mkstemp makes the file private; a record is as readable as any file the user writes.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise RecordError(f"cannot write the record to {path}: {exc.strerror or exc}") from None


def read(path: Path) -> dict[str, Any]:
    """Load and sanity-check one record; every failure is a one-line RecordError."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordError(f"no such record: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read record {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not a complete JSON record (line {exc.lineno}: {exc.msg})",
                          hint="it may be truncated; kitbench writes records atomically, so another tool "
                               "or a copy cut it short") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise RecordError(f"{path} is not a kitbench run record (no 'schema' field)")
    if data["schema"] != SCHEMA:
        raise RecordError(f"{path} has schema {data['schema']!r}; this kitbench reads {SCHEMA!r}",
                          hint="use the kitbench version that wrote it")
    if data.get("status") not in STATUSES:
        raise RecordError(f"{path} has an unknown status {data.get('status')!r}")
    return data
