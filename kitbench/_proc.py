"""The one way kitbench runs a program and reads what it says: bounded and decoded defensively.

A program kitbench asks (nvidia-smi, sinfo, git, torchrun) may be fake, broken or hostile: it may
print gigabytes, invalid UTF-8 or no newline ever, or never end. Here its output is read as bytes,
kept up to ``max_bytes`` per stream (the rest is read and dropped, so the program never blocks on a
full pipe), decoded with invalid bytes replaced, and the program is stopped at ``timeout`` (its
whole session, or by the caller's ``stop``) before ``TimeoutExpired`` is raised.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

MAX_BYTES = 1 << 20         # per stream: far above any answer kitbench parses, or any log tail it shows


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str             # empty with merge=True: stderr went to stdout
    truncated: bool         # more was said than kept


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    killpg = getattr(os, "killpg", None)
    if killpg is None:      # Windows (probe's nvidia-smi runs there): no sessions, the program itself is ended
        with contextlib.suppress(OSError):
            proc.kill()
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, merge: bool = False,
        max_bytes: int = MAX_BYTES, stop: Callable[[subprocess.Popen[bytes]], None] = _kill_session) -> Done:
    """Run ``argv`` in a session of its own; OSError if it cannot start, TimeoutExpired after ``stop``.

    ``stop`` also runs when the caller is interrupted (KeyboardInterrupt, SIGTERM raised as one), so
    nothing started here outlives kitbench."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                            env=dict(env) if env is not None else None, start_new_session=True)
    kept: dict[int, bytearray] = {}
    truncated = False
    deadline = time.monotonic() + timeout
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
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    buffer = kept[key.fd]
                    room = max_bytes - len(buffer)
                    truncated |= len(chunk) > room
                    buffer += chunk[:max(room, 0)]
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except BaseException:
        stop(proc)
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    values = list(kept.values())        # stdout first, then stderr: the order they were registered in
    return Done(proc.returncode, values[0].decode(errors="replace"),
                values[1].decode(errors="replace") if len(values) > 1 else "", truncated)
