"""Which Python runs kitbench on each node: the nodes' architectures, the interpreter or venv given
for each, or a venv target's environment built once (here with nox, or through Slurm on a node of
another architecture), refused before Slurm runs anything where a node could not run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kitbench import _files, _proc
from kitbench.errors import KitbenchError, SlurmError, UsageError
from kitbench.fleet import slurm
from kitbench.fleet.jobscript import SlurmOptions

# An environment's build downloads torch and its GPU libraries (gigabytes for a CUDA target) and
# installs them: many minutes on a fast link, most of an hour on a slow one or a busy node. Past
# this, a build is hung (a stalled download, an index that never answers), not slow.
BUILD_TIMEOUT_S = 3600.0

_ARCH_NAMES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
# ELF e_machine values of the architectures PyTorch publishes wheels for.
_ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64", 0x15: "ppc64le", 0x16: "s390x"}


def arch_name(arch: str) -> str:
    """One name per architecture: Docker's amd64/arm64 are the kernel's x86_64/aarch64."""
    return _ARCH_NAMES.get(arch.lower(), arch.lower())


def executable_arch(path: Path) -> str | None:
    """The architecture an ELF executable (a venv's python) was built for; None if not ELF."""
    try:
        header = _files.read_part(path, 20, "executable")
    except KitbenchError:
        return None
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return _ELF_MACHINES.get(machine, f"ELF machine {machine:#x}")


def refuse_foreign(arches: dict[str, str | None], shipped: str | None, what: str) -> None:
    """Refuse nodes whose architecture differs from the one ``what`` (a venv's Python, an
    image) was built for: every task on them would fail at its first instruction."""
    if shipped is None:
        return
    foreign: dict[str, list[str]] = {}
    for node, arch in arches.items():
        if arch is not None and arch_name(arch) != arch_name(shipped):
            foreign.setdefault(arch_name(arch), []).append(node)
    if foreign:
        named = "; ".join(f"{', '.join(nodes)} {arch}" for arch, nodes in sorted(foreign.items()))
        raise UsageError(
            f"{what} is built for {arch_name(shipped)}, but these nodes are not: {named}",
            hint="an image runs on one architecture: leave them out (--partition, --constraint), or "
            "run a venv target (cpu, rocm, xpu), whose environment kitbench builds on each",
        )


def by_arch(arches: dict[str, str | None]) -> dict[str, list[str]]:
    """Nodes grouped by architecture, one name each (aarch64, x86_64); a node that reported none is
    grouped with the first architecture seen, where its task fails in words if it differs."""
    groups: dict[str, list[str]] = {}
    for node, arch in arches.items():
        if arch is not None:
            groups.setdefault(arch_name(arch), []).append(node)
    for node, arch in arches.items():
        if arch is None:
            groups.setdefault(next(iter(groups), "unknown"), []).append(node)
    return groups


def per_arch(values: Sequence[str], flag: str) -> tuple[Path | None, dict[str, Path]]:
    """``--venv PATH`` or ``--venv ARCH=PATH`` (repeatable): the plain one, and one per architecture."""
    plain: Path | None = None
    named: dict[str, Path] = {}
    for value in values:
        arch, sep, path = value.partition("=")
        if sep and re.fullmatch(r"[A-Za-z0-9_]{1,16}", arch):
            if arch_name(arch) in named:
                raise UsageError(f"{flag} names {arch_name(arch)} twice", hint=f"one {flag} {arch}=PATH each")
            named[arch_name(arch)] = Path(path)
        elif plain is None:
            plain = Path(value)
        else:
            raise UsageError(
                f"{flag} is given twice without an architecture",
                hint=f"one plain {flag} PATH, and {flag} ARCH=PATH for each other architecture",
            )
    return plain, named


def _runnable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:  # ENAMETOOLONG and the like: no Python there either
        return False


def venv_folder(target: str, venv: Path | None) -> Path:
    """Where a venv target's environment is: ``venv`` as given, which must hold a Python, else the
    checkout's ``.nox/<target>``. Asks neither Slurm nor nox: a bad ``--venv`` is said before either."""
    from kitbench.records import manifest

    if venv is not None:
        if not _runnable(venv / "bin" / "python"):
            raise UsageError(
                f"--venv {venv}: no Python there ({venv / 'bin' / 'python'} is not an executable file)",
                hint="--venv names a virtual environment with torch and kitbench, on storage every "
                f"node shares; or leave it out to use the checkout's .nox/{target}",
            )
        return venv
    checkout = manifest.checkout_root()
    if checkout is None:
        raise UsageError(
            f"kitbench runs from an installed wheel: say where {target}'s environment is",
            hint="--venv PATH (a venv with torch and kitbench, on storage every node shares)",
        )
    return checkout / ".nox" / target


def probe_python(python: Path | None) -> Path:
    """The Python that runs ``kitbench probe`` on the nodes: this one, or ``--python`` (an interpreter or a
    virtual environment's folder, as install-cmd's is), which must run here too: the nodes see the same path."""
    if python is None:
        return Path(sys.executable).absolute()
    try:
        found = python / "bin" / "python" if python.is_dir() else python
    except OSError:
        found = python
    if not _runnable(found):
        raise UsageError(
            f"--python {python}: no such executable" + (f" ({found})" if found != python else ""),
            hint="give a Python interpreter (or a virtual environment's folder) on storage every node "
            "shares; without --python the one running kitbench is used",
        )
    return found.absolute()


def probe_given(values: Sequence[str]) -> dict[str | None, Path]:
    """``--python [ARCH=]PATH`` (repeatable) as the Pythons that probe the nodes: one per architecture
    named, and the plain one (``None``: this one unless given)."""
    plain, named = per_arch(values, "--python")
    return {**{arch: given_python(path, arch, "--python") for arch, path in named.items()}, None: probe_python(plain)}


def venv_python(target: str, venv: Path | None, log: Callable[[str], None], build: bool = True) -> Path:
    """The Python of a venv target's environment on shared storage: ``venv`` as given, else the
    checkout's ``.nox/<target>``, built once with ``nox -s <target> --install-only`` if missing
    (a dry run, ``build=False``, names the Python it would build and builds nothing)."""
    from kitbench.records import manifest

    given = venv is not None
    venv = venv_folder(target, venv)
    checkout = manifest.checkout_root()
    if not given and checkout is not None and not (venv / "bin" / "python").exists():
        if not build:
            log(f"dry run: {target}'s environment would be built in {venv} (nox -s {target} --install-only)")
            return (venv / "bin" / "python").absolute()
        log(f"building {target}'s environment once, in {venv} (nox -s {target} --install-only)")
        _build_with_nox(checkout, target, log)
    python = venv / "bin" / "python"
    if not python.exists():
        raise UsageError(f"no Python in {venv}", hint=f"build it first: nox -s {target} --install-only")
    return python.absolute()


def venv_pythons(
    target: str,
    venvs: Sequence[str],
    arches: dict[str, str | None],
    options: SlurmOptions,
    log: Callable[[str], None],
    build: bool = True,
) -> dict[str, Path]:
    """A venv target's Python for each architecture among the nodes. The plain ``--venv`` (default: the
    checkout's ``.nox/<target>``) serves the architecture it is built for; another is ``--venv ARCH=PATH``,
    else built once through Slurm itself on a node of that architecture, into the shared checkout's
    ``.nox/<arch>/<target>`` (reused while its Python is of that architecture)."""
    plain, named = per_arch(venvs, "--venv")
    found: dict[str, Path] = {}
    local: Path | None = None
    for arch, nodes in by_arch(arches).items():
        if arch in named:
            found[arch] = given_python(named[arch], arch)
            continue
        if local is None:
            local = venv_python(target, plain, log, build=build)
        if arch in (executable_arch(local) or arch_name(os.uname().machine), "unknown"):
            found[arch] = local
        else:
            found[arch] = _foreign_python(target, arch, nodes[0], options, log, build)
    return found


def given_python(path: Path, arch: str, flag: str = "--venv") -> Path:
    """``ARCH=PATH``'s Python (an interpreter, or a virtual environment's folder), which must be of that
    architecture: it runs there, not here."""
    try:
        python = path / "bin" / "python" if path.is_dir() else path
    except OSError:
        python = path
    shipped = executable_arch(python)
    if not _runnable(python) or (shipped is not None and shipped != arch):
        raise UsageError(
            f"{flag} {arch}={path}: no {arch} Python there" + (f" ({python} is {shipped})" if shipped else ""),
            hint=f"name a Python (or virtual environment) built on a {arch} node, on shared storage",
        )
    return python.absolute()


def describe_arches(arches: dict[str, str | None]) -> str:
    return "architectures: " + "; ".join(f"{arch} ({', '.join(nodes)})" for arch, nodes in by_arch(arches).items())


def probe_pythons(given: dict[str | None, Path], arches: dict[str, str | None]) -> dict[str, Path]:
    """The Python that probes each architecture's nodes: ``--python ARCH=PATH``, else the plain one
    (``given[None]``) where it is of that architecture; a node it cannot run on is refused before Slurm runs."""
    local = given[None]
    local_arch = executable_arch(local) or arch_name(os.uname().machine)
    found: dict[str, Path] = {}
    for arch, nodes in by_arch(arches).items():
        python = given.get(arch) or (local if arch in (local_arch, "unknown") else None)
        if python is None:
            raise UsageError(
                f"the Python {local} is built for {local_arch}, but these nodes are not: {', '.join(nodes)} {arch}",
                hint=f"--python {arch}=PATH: a Python with kitbench built on a {arch} node, on storage "
                "every node shares (the probe needs no torch); or leave them out (--partition)",
            )
        found[arch] = python
    return found


def _foreign_python(
    target: str, arch: str, node: str, options: SlurmOptions, log: Callable[[str], None], build: bool
) -> Path:
    from kitbench.records import manifest

    checkout = manifest.checkout_root()
    if checkout is None:
        raise UsageError(
            f"the nodes include {arch} ones ({node}, ...) and kitbench runs from an installed wheel",
            hint=f"--venv {arch}=PATH: a {arch} environment with torch and kitbench on shared storage",
        )
    envdir = checkout / ".nox" / arch
    python = envdir / target / "bin" / "python"
    if executable_arch(python) == arch:
        return python.absolute()
    if not build:
        log(f"dry run: {target}'s {arch} environment would be built on {node}, in {envdir / target}")
        return python.absolute()
    log(f"building {target}'s {arch} environment once, on {node} (srun), in {envdir / target}")
    # python3 and nox on the node, as the README's Quickstart needs on any machine; the noxfile does the rest.
    try:
        slurm.run(
            [
                "srun",
                f"--nodelist={node}",
                "--nodes=1",
                "--ntasks=1",
                *options.srun_args(),
                "python3",
                "-m",
                "nox",
                "--envdir",
                str(envdir),
                "-s",
                target,
                "--install-only",
                "-f",
                str(checkout / "noxfile.py"),
            ],
            timeout=BUILD_TIMEOUT_S,
        )
    except SlurmError as failed:
        doing = f"building {target}'s {arch} environment on {node} failed"
        _unreachable(f"{failed.message}\n{failed.stderr}", doing)
        raise KitbenchError(
            f"{doing}: {failed.message}",
            hint=f"the {arch} nodes need python3 with nox (pipx install nox); or build it there "
            f"yourself and pass --venv {arch}=PATH",
        ) from None
    if executable_arch(python) != arch:
        raise KitbenchError(
            f"the environment built on {node} is not {arch}: {python} is {executable_arch(python) or 'missing'}",
            hint=f"pass --venv {arch}=PATH, an environment built on a {arch} node",
        )
    return python.absolute()


def _build_with_nox(checkout: Path, target: str, log: Callable[[str], None]) -> None:
    """``nox -s <target> --install-only`` here, its output shown line by line as it builds."""
    command = [sys.executable, "-m", "nox", "-s", target, "--install-only", "-f", str(checkout / "noxfile.py")]
    try:
        done = _proc.run(command, BUILD_TIMEOUT_S, merge=True, tail=True, on_line=lambda line: log(line.rstrip()))
    except subprocess.TimeoutExpired:
        raise KitbenchError(
            f"nox -s {target} --install-only did not finish in {BUILD_TIMEOUT_S / 60:.0f} minutes and was stopped",
            hint=f"build it yourself (nox -s {target} --install-only, which reuses what it downloaded) and run again",
        ) from None
    except OSError as exc:
        raise KitbenchError(f"cannot start nox: {exc.strerror or exc}", hint="python3 -m pip install nox") from None
    if done.returncode != 0:
        _unreachable(done.stdout, f"nox -s {target} --install-only failed")
        raise KitbenchError(
            f"nox -s {target} --install-only failed (exit {done.returncode})",
            hint="see its output above; python3 -m pip install nox if nox is missing",
        )


def _unreachable(said: str, doing: str) -> None:
    """A build that failed because an index was out of reach is said as every such failure is (kitbench._reach):
    the host, the cause, and what gets past it, which the build's own output names only among its lines."""
    from kitbench import _reach

    cause = _reach.network_cause(said)
    host = _reach.host_in(said) if cause is not None else None
    if cause is not None and host is not None:
        raise _reach.unreachable(host, cause, doing, _reach.Known(), KitbenchError)
