"""The one way kitbench writes a file: records, plots, fleet plans and scripts.

Rules (those of ``run --out``, for every file): a symlink, directory, device or
FIFO at the path is refused, never followed or replaced; an existing regular
file is replaced only with ``replace`` (the caller's ``--force``, or a file the
caller already owns, such as a record it claimed) or when ``ours`` says kitbench wrote
it (a report page, checked again just before the rename); the bytes go to a temporary
file beside the target, are fsynced, then moved into place in one rename, so a
full disk or a kill leaves either the old file or the new one, never half of
one, and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from kitbench.errors import OutputRefused, RecordError


def _refused(path: Path, why: str, hint: str) -> OutputRefused:
    return OutputRefused(f"will not write {str(path)[:300]}: {why}", hint=hint)


def check_target(path: Path, replace: bool = False, ours: Callable[[Path], bool] | None = None) -> None:
    """Refuse, before any work, a path ``write`` would refuse (one line, never an OSError)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _refused(path, exc.strerror or str(exc), "choose another file name") from None
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        raise _refused(path, "it is a symlink; kitbench never writes through one", "give a new file name")
    if stat.S_ISDIR(mode):
        raise _refused(path, "it is a directory", "give a file name inside it")
    if not stat.S_ISREG(mode):
        raise _refused(path, "it is not a regular file (a device, FIFO or socket)", "give a new file name")
    if not replace and info.st_size > 0 and not (ours is not None and ours(path)):
        raise _refused(path, "a file is already there" + (", not one kitbench wrote" if ours else "")
                       + "; it is left as it is", "pass --force to replace it, or give a new file name")


def write(path: Path, data: bytes | str, replace: bool = False, what: str = "",
          ours: Callable[[Path], bool] | None = None) -> None:
    """Write ``data`` to ``path`` atomically under the rules above; failures are one RecordError."""
    payload = data.encode() if isinstance(data, str) else data
    check_target(path, replace, ours)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        # mkstemp makes the file private; what kitbench writes is as readable as any file the user writes.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        check_target(path, replace, ours)     # again, just before: what appeared meanwhile is not replaced either
        os.replace(tmp, path)
        tmp = None
        with contextlib.suppress(OSError):
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except OSError as exc:
        raise RecordError(f"cannot write {what + ' to ' if what else ''}{str(path)[:300]}: {exc.strerror or exc}",
                          hint="nothing was changed there; free some space or choose a writable place") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
