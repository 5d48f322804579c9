"""How this kitbench was installed, and how to add a package to the Python it runs in, in that installer's words.

A pipx or ``uv tool`` environment has no pip a user would reach: ``pip install X`` lands in another Python, and
each tool has its own verb for adding to its environment (``pipx inject``, ``uv tool install --with``). A plain
venv or a system Python takes ``python -m pip install``, with the interpreter named (``pip`` on the path may
belong to another), or ``uv pip install --python`` where the venv was made by uv, without pip. Every hint that
installs something is worded here, once, from what :func:`installed` found.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

Tool = Literal["pipx", "uv tool", "pip", "uv pip"]

# What a missing module is part of, and what installs it: kitbench's extras (pyproject.toml's
# optional-dependencies) by the import name a ModuleNotFoundError gives.
EXTRAS = {"matplotlib": "matplotlib", "docker": "docker"}
TORCH = frozenset({"torch", "torchvision", "numpy"})
# Dependencies of kitbench that only `kitbench project` imports: missing where kitbench was installed without its
# dependencies (a pinned environment whose lock predates them).
PROJECT = ("tomlkit", "packaging")
OPTIONAL = TORCH | EXTRAS.keys() | set(PROJECT)

_RECEIPT_LIMIT = 1 << 20  # a uv receipt is a few lines; a huge one is not uv's
_SOURCE_KEYS = ("directory", "editable", "path", "git", "url")  # how uv's receipt names where a tool came from


class Installed(NamedTuple):
    """How kitbench was installed: the tool, the Python it runs in, pipx's name for its venv or what ``uv tool``
    must reinstall it from, and for ``uv tool`` what with (uv replaces the tool's whole environment: an earlier
    ``--with`` is kept only by naming it again)."""

    tool: Tool
    python: str
    source: str = "kitbench"
    withs: tuple[str, ...] = ()


def installed(prefix: str | None = None, executable: str | None = None) -> Installed:
    """How the Python at ``prefix`` (this one's, by default) was made: pipx leaves ``pipx_metadata.json`` in
    its venvs, ``uv tool`` a ``uv-receipt.toml``; any other venv or system Python is pip's, or uv pip's where
    the venv has no pip script (uv's venvs, nox's uv backend)."""
    root = Path(sys.prefix if prefix is None else prefix)
    # An embedding program may leave sys.executable empty: a command needs some Python to name.
    python = (sys.executable if executable is None else executable) or "python3"
    if (root / "pipx_metadata.json").is_file():
        # pipx names a venv after its app, with the suffix of `pipx install --suffix`: inject takes that name.
        return Installed("pipx", python, root.name)
    receipt = root / "uv-receipt.toml"
    if receipt.is_file():
        return _uv_tool(receipt, python)
    scripts = Path(python).parent
    in_venv = (root / "pyvenv.cfg").is_file()
    # importlib's find_spec("pip") would set off setuptools' distutils shim; pip's script beside the
    # interpreter tells. A system Python is assumed to have pip's module (`-m pip` says so if not).
    has_pip = not in_venv or any((scripts / name).exists() for name in ("pip", "pip3", "pip.exe"))
    return Installed("pip" if has_pip else "uv pip", python)


def _uv_tool(receipt: Path, python: str) -> Installed:
    """The source kitbench was installed from and the packages added beside it, as uv's receipt records them
    (``[tool] requirements = [{ name = "kitbench", directory = "..." }, { name = "matplotlib" }]``); a receipt
    that does not read as one gives the plain ``uv tool install kitbench`` form."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover -- Python 3.10
        import tomli as tomllib
    try:
        with receipt.open("rb") as file:
            data = file.read(_RECEIPT_LIMIT + 1)
        if len(data) > _RECEIPT_LIMIT:
            return Installed("uv tool", python)
        requirements = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("requirements", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return Installed("uv tool", python)
    source, withs = "kitbench", []
    for entry in requirements if isinstance(requirements, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        specifier = entry.get("specifier") if isinstance(entry.get("specifier"), str) else ""
        if entry["name"] == "kitbench":
            found = next((entry[k] for k in _SOURCE_KEYS if isinstance(entry.get(k), str)), None)
            source = found or f"kitbench{specifier}"
        else:
            withs.append(f"{entry['name']}{specifier}")
    return Installed("uv tool", python, source, tuple(withs))


def add_command(packages: Sequence[str], index_url: str | None = None, how: Installed | None = None) -> str:
    """The one command that adds ``packages`` (requirements, e.g. ``torch==2.14.1``) to the Python kitbench runs
    in, from ``index_url`` in place of the default index where given, as the tool that installed it takes it."""
    import shlex  # not on install-cmd's path, which imports this module (docs/architecture.md, "Start-up")

    how = installed() if how is None else how
    names = [shlex.quote(p) for p in packages]
    python = shlex.quote(how.python)
    if how.tool == "pipx":
        index = [f"--index-url {shlex.quote(index_url)}"] if index_url else []
        return " ".join(["pipx inject", shlex.quote(how.source), *names, *index])
    if how.tool == "uv tool":
        # uv's first index that has a name is the only one it takes that name from, and PyTorch's index mirrors
        # torch's dependencies at old versions: the best match across both finds the pins.
        index = [f"--index {shlex.quote(index_url)} --index-strategy unsafe-best-match"] if index_url else []
        withs = [f"--with {shlex.quote(w)}" for w in dict.fromkeys((*how.withs, *packages))]
        return " ".join(["uv tool install", *withs, *index, shlex.quote(how.source)])
    index = [f"--index-url {shlex.quote(index_url)}"] if index_url else []
    installer = f"{python} -m pip install" if how.tool == "pip" else f"uv pip install --python {python}"
    return " ".join([installer, *names, *index])


def where(how: Installed | None = None) -> str:
    """The environment :func:`add_command` installs into, in words."""
    how = installed() if how is None else how
    return {"pipx": "kitbench's pipx environment", "uv tool": "kitbench's uv tool environment"}.get(
        how.tool, f"the Python kitbench runs in ({how.python})"
    )


def optional_hint(
    module: str, answer: tuple[Sequence[str], str | None] | None = None, how: Installed | None = None
) -> str:
    """How to get ``module`` (one of :data:`OPTIONAL`) where kitbench runs. torch's family: ``answer``, the
    packages and index install-cmd answers for this machine, where known (a bare ``pip install torch`` gets
    PyPI's default build, a CUDA one on Linux whatever the machine has); else the way to install that answer."""
    how = installed() if how is None else how
    if module in EXTRAS:
        return add_command([EXTRAS[module]], how=how)
    if module in PROJECT:
        return (
            f"{add_command(list(PROJECT), how=how)} (dependencies of kitbench that this Python was installed without)"
        )
    if answer is not None:
        install = (
            f"install this machine's build (install-cmd's answer) into {where(how)}: {add_command(*answer, how=how)}"
        )
    else:
        install = (
            f"install torch into {where(how)} with the packages and index `kitbench install-cmd` prints: "
            f"{add_command(['PACKAGES'], 'URL', how)}"
        )
    return (
        f"{install}; or run it in a target's pinned environment: `nox -s cpu -- ARGS` "
        f"(`nox -R -s cpu -- ARGS` reuses it)"
    )
