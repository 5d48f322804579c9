"""The one exception hierarchy of kitbench.

The library raises these and never prints or exits; ``kitbench._cli`` turns
them into ``ERROR: ...`` plus a ``hint:`` line and the exit code carried here.
"""

from __future__ import annotations

import re
from pathlib import Path

# C0 and C1 controls, DEL, and the Unicode ones that move or reorder what a terminal shows (line and
# paragraph separators, bidirectional overrides): text from a record or a node's log is data.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """``text`` with every control character shown escaped (``\\x1b``, ``\\n``) and any lone surrogate as
    ``\\ud800``: one line that every encoder writes, nothing executed."""
    shown = _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text))
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


class KitbenchError(Exception):
    """Base class: a one-line message, an optional hint, an exit code."""

    exit_code = 1
    host: str | None = None  # a host that could not be reached, where that is the cause (kitbench._reach)

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(KitbenchError):
    """Bad command-line input (unknown choice, out-of-range number)."""

    exit_code = 2


class ManifestError(KitbenchError):
    """A file in envs/ is missing, unparsable or does not match its schema."""

    def __init__(self, path: Path | str, message: str, line: int | None = None, hint: str | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}", hint)
        self.path = Path(path)
        self.line = line


class DeviceUnavailableError(KitbenchError):
    """The requested device cannot be used here; ``reason`` says why."""

    def __init__(self, device: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"device {device!r} is not usable here: {reason}", hint)
        self.device = device
        self.reason = reason


class DataError(KitbenchError):
    """The MNIST data is missing, incomplete or fails its checksums."""


class RecordError(KitbenchError):
    """A run record cannot be written or read."""


class OutputRefused(RecordError):
    """A file kitbench was told to write is refused before any work (it exists, is a directory, a
    symlink...): bad input, exit 2, as every command's refused output path is."""

    exit_code = 2


class RecordReadError(RecordError):
    """An input record is unreadable or malformed: nothing can be compared (exit 2)."""

    exit_code = 2


class MissingDependency(KitbenchError):
    """An optional part of kitbench is not installed; the hint says how to get it."""

    def __init__(self, module: str, purpose: str, hint: str) -> None:
        super().__init__(f"{purpose} needs {module}, which is not installed in this Python", hint)
        self.module = module


class SelectionError(KitbenchError):
    """No published PyTorch build matches the asked-for combination."""

    exit_code = 2


class PreflightError(KitbenchError):
    """A target cannot be built or run on this host; ``alternative`` may fit."""

    def __init__(self, target: str, reason: str, alternative: str | None = None) -> None:
        hint = f"try: nox -s {alternative}" if alternative else None
        super().__init__(f"target {target!r} cannot run on this host: {reason}", hint)
        self.target = target
        self.reason = reason
        self.alternative = alternative


class ContainerError(KitbenchError):
    """Building or running a target's image failed; the message is decoded."""


class SlurmError(KitbenchError):
    """A Slurm command refused or failed; ``stderr`` keeps Slurm's own words."""

    def __init__(self, message: str, hint: str | None = None, command: str = "", stderr: str = "") -> None:
        super().__init__(message, hint)
        self.command = command
        self.stderr = stderr


class Interrupted(KitbenchError):
    """The run was stopped by SIGINT (exit 130) or SIGTERM (exit 143); a partial record was kept."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 130) -> None:
        super().__init__(message, hint)
        self.exit_code = exit_code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be so one handler keeps the record for both."""

    exit_code = 143


class ReplayError(KitbenchError):
    """A record's environment cannot be rebuilt here (exit 2): a version no reachable index serves,
    another OS or architecture the target does not run on, a Python this machine cannot provide."""

    exit_code = 2


class NetworkError(KitbenchError):
    """An index could not be read (unreachable host, timeout, an HTTP error); the message names the host."""
