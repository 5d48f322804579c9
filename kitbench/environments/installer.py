"""One installer for every environment kitbench builds: the nox sessions (venv and conda), the
image build, replay and the fleet (which builds through the nox sessions).

Where packages come from (:class:`Sources`): the torch family (``locks.FAMILY``: torch,
torchvision, torchaudio, triton, pytorch-triton*, and the runtime packages only
PyTorch's index carries for a build) from the target's PyTorch index (``whl/cpu``,
``whl/cu126``, ...), every other name from PyPI or the user's configured index,
even where PyTorch's index lists a version of it (it copies numpy, sympy, jinja2
and more at versions of its own choosing, often old ones). Each installer is told
so in its own documented way:

* uv: the PyTorch index as an *explicit* index (``[[tool.uv.index]] explicit = true``)
  that only the family's names are sourced from (``[tool.uv.sources]``), in a
  generated ``pyproject.toml`` installed with ``uv pip install -r``. uv's
  ``--torch-backend`` does the same for download.pytorch.org, but its URLs are fixed:
  a mirror or stand-in of PyTorch's index (``KITBENCH_PYTORCH_INDEX``) cannot be
  given to it, and one mechanism serves both.
* pip has no per-package index: the PyTorch index is an ``--extra-index-url`` beside
  the user's ``index-url``, as pytorch.org's instructions give it. pip then takes the
  best version of each name from either; the pins (``name==version``) fix which
  version, and a lock's hashes fix which file (README, design notes).

What is installed: the target's lock (``envs/locks/pylock.<target>-<platform>.toml``,
PEP 751) where it has a usable one, every file hash-checked and nothing resolved; uv
reads the lock itself (``uv pip install -r pylock.toml``, each file from the URL the
lock names), pip gets it as hash-pinned requirement lines (``--no-deps --require-hashes``),
as does uv where the files must come from elsewhere than the lock's URLs (an override,
a mirror of PyTorch's index). Where no lock fits, the pins are resolved in one command.

Nothing here runs an installer: it answers with files and arguments that the
caller runs in its own way (nox's ``session.install``, a subprocess, a Dockerfile).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kitbench.environments import locks, targets
from kitbench.environments.locks import LOCK_VARIABLE, LOCK_WHY_VARIABLE, lock_path
from kitbench.environments.targets import Target

PYTORCH_INDEX_VARIABLE = targets.PYTORCH_INDEX_VARIABLE
OVERRIDE_VARIABLE = "KITBENCH_INDEX_OVERRIDE"  # set by the sessions: the override in force, for the record


@dataclass(frozen=True)
class Sources:
    """Where an install looks: ``torch`` (the target's PyTorch index; None where the target's
    packages all come from the default) for the torch family, ``default`` (None: the installer's
    configured default, PyPI unless the user set another) for the rest. ``configured``:
    ``KITBENCH_INDEX_URL=default``, the user's own pip or uv configuration decides everything.
    ``override``: the ``KITBENCH_INDEX_URL`` in force, if any (its credentials removed)."""

    torch: str | None
    default: str | None
    configured: bool = False
    override: str | None = None

    def describe(self) -> str:
        if self.configured:
            return "the configured index (pip.conf / uv.toml)"
        rest = _shown(self.default) if self.default else "PyPI"
        return f"{_shown(self.torch)} for the torch family, {rest} for the rest" if self.torch else rest


def _shown(url: str | None) -> str:
    from kitbench import _reach

    return _reach.shown(url) if url else ""


def sources(target: Target, os_name: str) -> Sources:
    """The target's indexes on ``os_name``, or the override's (``KITBENCH_INDEX_URL``) for everything."""
    return around(target.declared_index(os_name))


def around(torch_index: str | None) -> Sources:
    """``torch_index`` (a target's PyTorch index) for the family, unless ``KITBENCH_INDEX_URL`` is in
    force: then its index, or the user's configuration (``default``), for everything."""
    override = os.environ.get(targets.INDEX_VARIABLE)
    if override:
        shown = "default" if override == "default" else _shown(override)
        return Sources(None, None, True, shown) if override == "default" else Sources(None, override, False, shown)
    return Sources(torch_index, None)


def override_warning(target: Target, chosen: Sources) -> str | None:
    """What a session says once under ``KITBENCH_INDEX_URL``: the target may get another build than it names."""
    if chosen.override is None:
        return None
    return (
        f"{targets.INDEX_VARIABLE}={chosen.override}: every package, torch included, comes from "
        f"{chosen.describe()}, not from {target.name}'s index; it may serve another build than "
        f"{target.compute} (PyPI's torch is a CUDA build on Linux and Windows), and the record says so "
        "(environment.index_override)"
    )


def choose(target: Target, platform: str) -> tuple[Path | None, str | None]:
    """The lock to install from, or None and why (for the record). A lock is refused on load when it is
    not a lock of this target's build (``locks.check_build``)."""
    path = lock_path(target, platform)
    if not path.is_file():
        return None, (
            f"no lock for {target.name} on {platform}: a lock is committed only where it was resolved "
            "against the files its users get (nox -s lock, where PyTorch's index answers)"
        )
    found = locks.read(path)
    locks.check_build(found, target)
    return path, None


def requirements(lock: Path) -> list[str]:
    """The lock as hash-pinned requirement lines (``name==version --hash=sha256:...``), which uv and
    pip both install from any index that serves those files."""
    found = locks.read(lock)
    return [
        f"{name}=={version}" + "".join(f" --hash={h}" for h in hashes)
        for (name, version), hashes in sorted(found.hashes.items())
    ]


@dataclass(frozen=True)
class Install:
    """One install of a target's suite: requirement lines (a lock's, hash-pinned; else the pins, resolved
    in one go), where from, and what the run's record says of it (``KITBENCH_LOCK`` or ``KITBENCH_LOCK_WHY``,
    and the override in force). ``lock``: a lock its installer may read as it is (PEP 751)."""

    requirements: list[str]
    hashed: bool
    sources: Sources
    record: dict[str, str]
    what: str
    lock: Path | None = None

    def files(self, tool: str) -> dict[str, str]:
        """The files the install reads (name -> text), to be written into one folder."""
        if tool == "uv" and self._reads_lock():
            return {}
        if tool == "uv" and not self.hashed and self.sources.torch:
            return {"pyproject.toml": self._pyproject()}
        return {"requirements.txt": "".join(f"{line}\n" for line in self.requirements)}

    def args(self, tool: str, folder: str, *, compiled: bool = False) -> list[str]:
        """The arguments after ``uv pip install`` or ``pip install``, the files of :meth:`files` in ``folder``
        (a path where the installer runs). No URL: the indexes are in :meth:`env` (a URL may carry a token,
        and nox logs every command it runs). ``compiled``: uv compiles the bytecode at install, as pip does
        unasked, for an environment that starts many processes: where nothing may write bytecode
        (PYTHONDONTWRITEBYTECODE, a read-only environment) each of them compiles torch and torchvision's modules
        again; the figures are in docs/design.md."""
        first = ["--compile-bytecode"] if compiled and tool == "uv" else []
        if tool == "uv" and self.lock is not None and self._reads_lock():
            return [*first, "-r", str(self.lock)]
        if tool == "uv" and not self.hashed and self.sources.torch:
            return [*first, "-r", f"{folder}/pyproject.toml"]
        hashed = ["--no-deps", "--require-hashes"] if self.hashed else []
        return [*first, *hashed, "-r", f"{folder}/requirements.txt"]

    def env(self, tool: str) -> dict[str, str]:
        """The indexes, as the installer's own environment variables: the default (the override's) and, for a
        hash-pinned set, the PyTorch index beside it, each file from whichever serves it (the hash says what it
        is). uv's resolved installs name the PyTorch index in their pyproject.toml, scoped to the family."""
        default = (
            {"UV_DEFAULT_INDEX" if tool == "uv" else "PIP_INDEX_URL": self.sources.default}
            if self.sources.default
            else {}
        )
        if not self.sources.torch or (tool == "uv" and (self._reads_lock() or not self.hashed)):
            return default
        if tool == "uv":
            return {**default, "UV_INDEX": self.sources.torch, "UV_INDEX_STRATEGY": "unsafe-best-match"}
        return {**default, "PIP_EXTRA_INDEX_URL": self.sources.torch}

    def pip_conf(self) -> str:
        """:meth:`env` for pip as a pip.conf (what an image's build reads, not a build argument its history keeps)."""
        keys = {"PIP_INDEX_URL": "index-url", "PIP_EXTRA_INDEX_URL": "extra-index-url"}
        found = self.env("pip")
        return "[global]\n" + "".join(f"{keys[k]} = {v}\n" for k, v in found.items()) if found else ""

    def write(self, folder: Path, tool: str, *, compiled: bool = False) -> list[str]:
        """Write :meth:`files` into ``folder`` and answer :meth:`args` for it."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.files(tool).items():
            (folder / name).write_text(text)
        return self.args(tool, str(folder), compiled=compiled)

    def _reads_lock(self) -> bool:
        """uv installs the lock's files from the URLs it names: not where another index must serve them."""
        return self.lock is not None and self.sources.override is None and not os.environ.get(PYTORCH_INDEX_VARIABLE)

    def _pyproject(self) -> str:
        """The requirements as a project uv installs: the family from the PyTorch index only."""
        return locks.scoped_project(self.requirements, locks.family(self.requirements), self.sources.torch)


def record_of(chosen: Sources, record: dict[str, str]) -> dict[str, str]:
    return {**record, **({OVERRIDE_VARIABLE: chosen.override} if chosen.override else {})}


def suite(target: Target, platform: str, os_name: str) -> Install:
    """The target's environment on ``platform``: its lock, else its pins."""
    chosen = sources(target, os_name)
    lock, why = choose(target, platform)
    if lock is None:
        # A build's runtime that only PyTorch's index carries is named, so that it is sourced from there too.
        return Install(
            [*target.pins(), *locks.companions(chosen.torch)],
            False,
            chosen,
            record_of(chosen, {LOCK_WHY_VARIABLE: why or ""}),
            f"no usable lock ({why}): resolving the pins from {chosen.describe()}",
        )
    return Install(
        requirements(lock),
        True,
        chosen,
        record_of(chosen, {LOCK_VARIABLE: str(lock)}),
        f"{lock.name}, hash-checked, from {chosen.describe()}",
        lock=lock,
    )
