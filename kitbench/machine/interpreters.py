"""Which Python X.Y this machine has, looked for where people keep them: PATH, pyenv's versions, uv's
managed Pythons, the usual prefixes and conda's environments.

A candidate counts only once it has run and said its version: a pyenv shim on PATH exists whether or
not its Python is installed, and a file named python3.12 may be any Python (or none).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

PREFIXES = ("/usr/bin", "/usr/local/bin", "/opt/homebrew/bin", "/opt/local/bin")
CONDA_HOMES = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda")
_ASK = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
ASK_TIMEOUT_S = 10.0


class Found(NamedTuple):
    path: Path
    version: str  # X.Y.Z, as it said when run
    where: str  # where it was found: "PATH", "pyenv", "uv", "/usr/bin", "conda"


class Search(NamedTuple):
    found: Found | None
    looked: tuple[str, ...]  # every place asked, in order (for a message)
    refused: tuple[str, ...]  # candidates that ran and were not X.Y, or did not run: path and why


def pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def _candidates(version: str, uv: str | None) -> Iterator[tuple[str, Path]]:
    name = f"python{version}"
    on_path = shutil.which(name)
    yield "PATH", Path(on_path) if on_path else Path()
    for folder in sorted((pyenv_root() / "versions").glob(f"{version}*"), reverse=True):  # the newest patch first
        yield "pyenv", folder / "bin" / name
    if uv is not None:
        yield "uv", _uv_find(uv, version)
    for prefix in PREFIXES:
        yield prefix, Path(prefix) / name
    homes = [Path(os.environ["CONDA_PREFIX"])] if os.environ.get("CONDA_PREFIX") else []
    homes += [Path.home() / home for home in CONDA_HOMES]
    for home in homes:
        for env in [home, *sorted((home / "envs").glob("*"))]:
            yield "conda", env / "bin" / name


def _uv_find(uv: str, version: str) -> Path:
    """uv's own answer (its managed Pythons and the ones it finds), never downloading one."""
    from kitbench import _proc

    try:
        done = _proc.run([uv, "python", "find", "--no-python-downloads", version], ASK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return Path()
    line = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return Path(line[0]) if line else Path()


def version_of(path: Path) -> str | None:
    """X.Y.Z as ``path`` says when run, or None where it does not run or says something else."""
    from kitbench import _proc

    try:
        done = _proc.run([str(path), "-c", _ASK], ASK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    said = done.stdout.strip()
    parts = said.split(".")
    return said if done.returncode == 0 and len(parts) == 3 and all(p.isdigit() for p in parts) else None


def find(version: str, uv: str | None = None) -> Search:
    """The first Python ``version`` (X.Y) that runs and says so, in the order of ``_candidates``."""
    looked = ("PATH", f"pyenv ({pyenv_root()})", *(["uv's Pythons"] if uv else []), *PREFIXES, "conda's environments")
    refused: list[str] = []
    seen: set[Path] = set()
    for where, path in _candidates(version, uv):
        if path == Path() or not path.is_file() or path in seen:
            continue
        seen.add(path)
        said = version_of(path)
        if said is not None and said.split(".")[:2] == version.split("."):
            return Search(Found(path, said, where), looked, tuple(refused))
        refused.append(f"{path}: {f'Python {said}' if said else 'did not run'}")
    return Search(None, looked, tuple(refused))
