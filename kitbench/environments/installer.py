"""One installer for every environment kitbench builds: the nox sessions (venv and conda), the
image build, replay and the fleet (which builds through the nox sessions).

Where packages come from (:class:`Sources`): a target's PyTorch index
(``whl/cpu``, ``whl/cu126``, ...) for the torch family, PyPI or the user's
configured index for the rest, as a user of uv or pip gets them. uv is given the
PyTorch index with ``--index`` (its first-index strategy takes a package from the
first index that has it, so rich and pyyaml, absent there, come from PyPI); pip
gets it with ``--extra-index-url``, keeping the user's own ``index-url``.

What is installed: the target's lock (``envs/locks/pylock.<target>-<platform>.toml``,
PEP 751), every file hash-checked and nothing resolved (``--no-deps``). A lock
names packages and hashes, not hosts, so the same lock installs through any index
that serves those files: the target's, a mirror (``KITBENCH_INDEX_URL``), or the
user's own configuration (``KITBENCH_INDEX_URL=default``). Where no lock fits,
torch, torchvision and the suite's pins are resolved in one command, the same way.

Nothing here runs an installer: it answers with commands (argument lists) that the
caller runs in its own way (nox's ``session.install``, a subprocess, a Dockerfile).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kitbench._pipconf import pip_configuration
from kitbench.environments import locks, targets
from kitbench.environments.locks import LOCK_VARIABLE, LOCK_WHY_VARIABLE, lock_path
from kitbench.environments.targets import Target

PYTORCH_INDEX_VARIABLE = targets.PYTORCH_INDEX_VARIABLE
# uv reads its index from these (https://docs.astral.sh/uv/reference/environment/) or from uv.toml.
_UV_INDEX_VARIABLES = ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS")
# An index setting at the top of a uv.toml (Python 3.10 has no TOML parser: the keys are enough).
_UV_INDEX_SETTING = re.compile(r"^\s*(?:(?:index-url|default-index|extra-index-url|find-links)\s*=|\[\[index\]\])",
                               re.MULTILINE)


@dataclass(frozen=True)
class Sources:
    """Where an install looks: ``torch`` (the target's PyTorch index; None where the target's
    packages all come from the default) before ``default`` (None: the installer's configured
    default, PyPI unless the user set another). ``configured``: ``KITBENCH_INDEX_URL=default``,
    the user's own pip or uv configuration decides everything."""

    torch: str | None
    default: str | None
    configured: bool = False

    def describe(self) -> str:
        if self.configured:
            return "the configured index (pip.conf / uv.toml)"
        rest = self.default or "PyPI"
        return f"{self.torch} for the torch family, {rest} for the rest" if self.torch else rest


def sources(target: Target, os_name: str) -> Sources:
    """The target's indexes on ``os_name``, or the override's (``KITBENCH_INDEX_URL``) for everything."""
    return around(target.declared_index(os_name))


def around(torch_index: str | None) -> Sources:
    """``torch_index`` (a target's PyTorch index) before the default, unless ``KITBENCH_INDEX_URL`` is in
    force: then its index, or the user's configuration (``default``), for everything."""
    override = os.environ.get(targets.INDEX_VARIABLE)
    if override:
        return Sources(None, None, configured=True) if override == "default" else Sources(None, override)
    return Sources(torch_index, None)


def choose(target: Target, platform: str, os_name: str) -> tuple[Path | None, str | None]:
    """The lock to install from, or None and why (for the record).

    A lock resolved against a stand-in of the target's index (PyPI's torch wheels under
    PyTorch's layout, where the real index was out of reach) holds other builds than the
    real index serves: it installs under an override or a stand-in (``KITBENCH_PYTORCH_INDEX``),
    not from the real index."""
    path = lock_path(target, platform)
    if not path.is_file():
        return None, f"no lock for {target.name} on {platform} (nox -s lock)"
    found = locks.read(path)
    real = target.index.get(os_name) not in (None, targets.PYPI)
    if found.stand_in and real and not os.environ.get(targets.INDEX_VARIABLE) \
            and not os.environ.get(PYTORCH_INDEX_VARIABLE):
        return None, (f"{path.name} was resolved against a stand-in of {target.index[os_name]}, whose builds "
                      f"differ from the real index's: resolve it on a machine that reaches it (nox -s lock)")
    return path, None


def requirements(lock: Path) -> list[str]:
    """The lock as hash-pinned requirement lines (``name==version --hash=sha256:...``), which uv and
    pip both install from any index that serves those files."""
    found = locks.read(lock)
    return [f"{name}=={version}" + "".join(f" --hash={h}" for h in hashes)
            for (name, version), hashes in sorted(found.hashes.items())]


def uv_index_args(chosen: Sources, hashed: bool) -> list[str]:
    """uv's index options. A hash-checked install may take each file from whichever index has it
    (``unsafe-best-match``): the hash, not the host, says what the file is."""
    if chosen.configured:
        args = [] if _uv_configured() else _pip_configuration_for_uv()
    else:
        args = [*(["--default-index", chosen.default] if chosen.default else []),
                *(["--index", chosen.torch] if chosen.torch else [])]
    if hashed and "--index" in args and "--index-strategy" not in args:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def pip_index_args(chosen: Sources) -> list[str]:
    """pip's: the PyTorch index beside the user's ``index-url`` (or the override's), as pytorch.org's
    ``--extra-index-url`` instructions give it; under ``default``, pip reads its own configuration."""
    return [*(["--index-url", chosen.default] if chosen.default else []),
            *(["--extra-index-url", chosen.torch] if chosen.torch else [])]


def index_args(tool: str, chosen: Sources, hashed: bool) -> list[str]:
    """``uv``'s or ``pip``'s index options for ``chosen``."""
    return uv_index_args(chosen, hashed) if tool == "uv" else pip_index_args(chosen)


def _uv_configured() -> bool:
    """Whether uv has an index of its own configuration (environment or uv.toml): then it is uv's to read."""
    if any(os.environ.get(name) for name in _UV_INDEX_VARIABLES):
        return True
    if os.environ.get("UV_NO_CONFIG"):
        return False
    for path in _uv_config_files():
        try:
            text = path.read_text()
        except OSError:
            continue
        if _UV_INDEX_SETTING.search(text):
            return True
    return False


def _uv_config_files() -> list[Path]:
    if os.environ.get("UV_CONFIG_FILE"):
        return [Path(os.environ["UV_CONFIG_FILE"])]
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    system = [Path(d) / "uv" / "uv.toml" for d in (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")]
    return [Path.cwd() / "uv.toml", home / "uv" / "uv.toml", *system, Path("/etc/uv/uv.toml")]


def _pip_configuration_for_uv() -> list[str]:
    """pip's configured indexes as uv options, for a user who configured pip and not uv: one
    configuration, obeyed by both. pip takes the best version across all its indexes: so does uv here."""
    pip = pip_configuration()
    args = [*(["--default-index", pip["index-url"][0]] if pip.get("index-url") else [])]
    for url in pip.get("extra-index-url", []):
        args += ["--index", url]
    for place in pip.get("find-links", []):
        args += ["--find-links", place]
    if pip.get("extra-index-url"):
        args += ["--index-strategy", "unsafe-best-match"]
    return args


@dataclass(frozen=True)
class Install:
    """One install of a target's suite: requirement lines (a lock's, hash-pinned; else the pins, resolved
    in one go), where from, and what the run's record says of it (``KITBENCH_LOCK`` or ``KITBENCH_LOCK_WHY``)."""

    requirements: list[str]
    hashed: bool
    sources: Sources
    record: dict[str, str]
    what: str

    def args(self, tool: str, requirements_file: str) -> list[str]:
        """The arguments after ``uv pip install`` or ``pip install``; a lock's set is installed as it
        is, hash-checked, nothing resolved."""
        return [*index_args(tool, self.sources, self.hashed),
                *(["--no-deps", "--require-hashes"] if self.hashed else []), "-r", requirements_file]

    def write(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.requirements) + "\n")
        return str(path)


def suite(target: Target, platform: str, os_name: str) -> Install:
    """The target's environment on ``platform``: its lock, else its pins."""
    chosen = sources(target, os_name)
    lock, why = choose(target, platform, os_name)
    if lock is None:
        return Install(target.pins(), False, chosen, {LOCK_WHY_VARIABLE: why or ""},
                       f"no usable lock ({why}): resolving the pins from {chosen.describe()}")
    return Install(requirements(lock), True, chosen, {LOCK_VARIABLE: str(lock)},
                   f"{lock.name}, hash-checked, from {chosen.describe()}")
