"""The one way kitbench runs a program and reads what it says: bounded and decoded defensively.

A program kitbench asks (nvidia-smi, sinfo, git, torchrun) may be fake, broken or hostile: it may
print gigabytes, invalid UTF-8 or no newline ever, or never end. Here its output is read as bytes,
kept up to ``max_bytes`` per stream (the rest is read and dropped, so the program never blocks on a
full pipe), decoded with invalid bytes replaced, and the program is stopped at ``timeout`` (its
whole session, or by the caller's ``stop``) before ``TimeoutExpired`` is raised. A caller that shows
progress gets the last stream's lines as they come (``on_line``), each decoded and cut at ``MAX_LINE``.

One program is fed rather than asked, and is run beside this: ``tar -x`` unpacking an image's export
(``rebuild/images.py``), whose input is a stream of gigabytes and whose output is files.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

MAX_BYTES = 1 << 20  # per stream: far above any answer kitbench parses, or any log tail it shows
MAX_LINE = 4096  # bytes of one streamed line: a progress line, not a program's whole output


class Done(NamedTuple):  # not a dataclass: "Start-up" in docs/architecture.md (the probe runs nvidia-smi)
    returncode: int
    stdout: str
    stderr: str  # empty with merge=True: stderr went to stdout
    truncated: bool  # more was said than kept


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    killpg = getattr(os, "killpg", None)
    if killpg is None:  # Windows (probe's nvidia-smi runs there): no sessions, the program itself is ended
        with contextlib.suppress(OSError):
            proc.kill()
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def terminate(grace_s: float) -> Callable[[subprocess.Popen[bytes]], None]:
    """A ``stop`` for a program that cleans up after itself (another kitbench): SIGTERM to its session,
    ``grace_s`` to finish, then SIGKILL to whatever of the session is left."""

    def stop(proc: subprocess.Popen[bytes]) -> None:
        killpg = getattr(os, "killpg", None)
        if killpg is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace_s)
        _kill_session(proc)  # the group too: a child of the program may outlive it

    return stop


class _Lines:
    """Complete lines out of chunks, each cut at MAX_LINE bytes (the rest of a longer line is dropped)."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit, self.partial, self.cut = emit, bytearray(), False

    def feed(self, chunk: bytes) -> None:
        *done, rest = chunk.split(b"\n")
        for piece in done:
            self._line(piece)
            self.partial.clear()
            self.cut = False
        if not self.cut:
            self.partial += rest
            if len(self.partial) >= MAX_LINE:  # no newline for a long time: shown cut, the rest dropped
                self.emit(self.partial[:MAX_LINE].decode(errors="replace") + " [...]")
                self.partial.clear()
                self.cut = True

    def _line(self, piece: bytes) -> None:
        if self.cut:
            return
        line = bytes(self.partial + piece)
        self.emit(line[:MAX_LINE].decode(errors="replace").rstrip("\r") + (" [...]" if len(line) > MAX_LINE else ""))

    def close(self) -> None:
        if self.partial and not self.cut:
            self.emit(self.partial.decode(errors="replace").rstrip("\r"))
        self.partial.clear()


def run(
    argv: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    merge: bool = False,
    max_bytes: int = MAX_BYTES,
    stop: Callable[[subprocess.Popen[bytes]], None] = _kill_session,
    on_line: Callable[[str], None] | None = None,
    tail: bool = False,
    cut: bool = False,
    cwd: str | os.PathLike[str] | None = None,
) -> Done:
    """Run ``argv`` in a session of its own; OSError if it cannot start, TimeoutExpired after ``stop``.

    ``stop`` also runs when the caller is interrupted (KeyboardInterrupt, SIGTERM raised as one), so
    nothing started here outlives kitbench. ``on_line`` gets each line of stderr (of stdout with
    ``merge``) as it arrives; what it raises stops the program too. ``tail`` keeps each stream's last
    ``max_bytes``, not its first (where a program says why it failed at the end, as uv and pip do).
    ``cut`` stops the program as soon as it says more than ``max_bytes`` (a short answer was expected).
    ``cwd``: the folder it runs in (a relative path in ``argv`` is found there too, as Popen finds it)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    kept: dict[int, bytearray] = {}
    truncated = False
    deadline = time.monotonic() + timeout
    streamed = proc.stdout if merge else proc.stderr
    lines = _Lines(on_line) if on_line is not None else None
    try:
        with selectors.DefaultSelector() as selector:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    kept[stream.fileno()] = bytearray()
                    selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(list(argv), timeout)
                for key, _ in selector.select(min(left, 1.0)):
                    chunk = os.read(key.fd, 1 << 16)
                    shown = lines if key.fileobj is streamed else None
                    if not chunk:
                        selector.unregister(key.fileobj)
                        if shown is not None:
                            shown.close()
                        continue
                    if shown is not None:
                        shown.feed(chunk)
                    buffer = kept[key.fd]
                    if tail:
                        buffer += chunk[-max_bytes:]
                        truncated |= len(buffer) > max_bytes
                        del buffer[: max(len(buffer) - max_bytes, 0)]
                        continue
                    room = max_bytes - len(buffer)
                    truncated |= len(chunk) > room
                    buffer += chunk[: max(room, 0)]
                if cut and truncated:
                    stop(proc)
                    break
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except BaseException:
        stop(proc)
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    values = list(kept.values())  # stdout first, then stderr: the order they were registered in
    return Done(
        proc.returncode,
        values[0].decode(errors="replace"),
        values[1].decode(errors="replace") if len(values) > 1 else "",
        truncated,
    )
