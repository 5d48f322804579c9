"""The one way kitbench reads and writes a file: records, locks, manifests, plots, fleet plans, scripts.

Reading (``read``, ``read_text``, ``read_part``): a regular file only, opened non-blocking and checked with fstat
before a byte is read, so a FIFO or a device (``/dev/zero``) is refused at once instead of hanging
or filling memory; at most ``limit`` bytes (a file that grows past it while read is refused too);
text decoded as strict UTF-8. Every failure is one error of the caller's class, naming the file.

Writing: the rules below.

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
from collections.abc import Callable
from pathlib import Path

from kitbench.errors import KitbenchError, OutputRefused, RecordError

CACHE_VARIABLE = "KITBENCH_CACHE"


def cache_dir() -> Path:
    """The one folder of everything kitbench keeps for later (compiled validators, manifests, the fact cache,
    MNIST, replayed environments): ``KITBENCH_CACHE``, else ``$XDG_CACHE_HOME/kitbench``, else
    ``~/.cache/kitbench``; read at each call."""
    given = os.environ.get(CACHE_VARIABLE)
    if given:
        return Path(given).expanduser()  # a quoted ~ reaches here unexpanded
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kitbench"


ReadError = Callable[..., KitbenchError]


def read(path: Path, limit: int, what: str = "file", error: ReadError = KitbenchError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, under the rules above."""
    return _read(path, limit, what, error, None)


def read_part(path: Path, size: int, what: str = "file", error: ReadError = KitbenchError, end: bool = False) -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (its last, with ``end``: a log's tail, an
    executable's header), under the rules above but for its length, which may be any."""
    return _read(path, size, what, error, "end" if end else "start")


def _read(path: Path, limit: int, what: str, error: ReadError, part: str | None) -> bytes:
    shown = str(path)[:300]
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"no such {what}: {shown}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{shown} is not a regular file; kitbench reads {what}s only from files (not a FIFO, "
                "device or directory)"
            )
        if part is None and info.st_size > limit:
            raise error(f"{shown} is {info.st_size:,} bytes; a {what} is at most {limit:,}")
        if part == "end":
            os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        if part is not None:
            return b"".join(chunks)[:limit] if part == "start" else b"".join(chunks)[-limit:]
        raise error(f"{shown} grew past {limit:,} bytes while being read; a {what} is at most {limit:,}")
    return b"".join(chunks)


def decode(data: bytes, path: Path | str, what: str = "file", error: ReadError = KitbenchError) -> str:
    """``data`` as strict UTF-8 (a lone surrogate's bytes included: Python's codec refuses them)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{str(path)[:300]} is not UTF-8 text (byte {exc.start:,} is 0x{data[exc.start]:02x}); a {what} is"
        ) from None


def read_text(path: Path, limit: int, what: str = "file", error: ReadError = KitbenchError) -> str:
    return decode(read(path, limit, what, error), path, what, error)


def destination(given: str, default_name: str, error: ReadError = RecordError) -> Path:
    """An output path as typed: a directory (one that exists, or any path ending in a separator) gets
    ``default_name`` inside it; one ending in a separator that is not there is refused, never made into
    a file of that name (``Path("dir/")`` is ``dir``)."""
    path = Path(given)
    if path.is_dir():
        return path / default_name
    if given.endswith(("/", os.sep)):
        raise error(f"{given[:300]} names a directory, and there is none", hint="create it first, or give a file name")
    return path


Stamp = tuple[str, int, int, int, int]


def stamp(path: Path) -> Stamp:
    """What a cache of a file's contents is keyed by, so that it never outlives the file: the path, which file
    is there (device and inode, whatever a relative path was relative to), when and how large it was written
    (one rewritten in place or replaced, or another KITBENCH_ENVS, is another key). A file that cannot be
    stat'ed reads as zeros; its reader says why."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except OSError:
        return name, 0, 0, 0, 0
    return name, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size


def read_small(path: Path) -> str | None:
    """A small text file the kernel or a driver keeps (sysfs, procfs, cgroups): its text, undecodable bytes
    replaced, or None where it cannot be read. A probe reports what it finds; it never fails on one file."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


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
        raise _refused(
            path,
            "a file is already there" + (", not one kitbench wrote" if ours else "") + "; it is left as it is",
            "pass --force to replace it, or give a new file name",
        )


def write(
    path: Path, data: bytes | str, replace: bool = False, what: str = "", ours: Callable[[Path], bool] | None = None
) -> None:
    """Write ``data`` to ``path`` atomically under the rules above; failures are one RecordError."""
    import tempfile  # here: the readers above are on install-cmd's start-up path, writing is not

    payload = data.encode() if isinstance(data, str) else data
    check_target(path, replace, ours)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        # mkstemp makes the file private; what kitbench writes is as readable as any file the user writes.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        check_target(path, replace, ours)  # again, just before: what appeared meanwhile is not replaced either
        os.replace(tmp, path)
        tmp = None
        with contextlib.suppress(OSError):
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except OSError as exc:
        raise RecordError(
            f"cannot write {what + ' to ' if what else ''}{str(path)[:300]}: {exc.strerror or exc}",
            hint="nothing was changed there; free some space or choose a writable place",
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
