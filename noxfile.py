# /// script
# requires-python = ">=3.10"
# # What the noxfile imports (kitbench's light dependencies), the docker SDK for the image targets,
# # and uv, which builds the sessions' environments and provides a Python the host lacks.
# # nox installs these into .nox/_nox_script_mode when the Python running it lacks them
# # (`pipx run nox`, `uvx nox`); kept in step with pyproject.toml by tests/test_targets.py.
# dependencies = [
#     "nox>=2025.5",
#     "uv>=0.5",
#     "pyyaml>=6",
#     "fastjsonschema>=2.19",
#     "packaging>=24",
#     "typing_extensions>=4.6; python_version < '3.11'",
#     "tomli>=1.1; python_version < '3.11'",
#     "tomlkit>=0.15",
#     "docker>=7",
# ]
# ///
"""One session per pinned environment in envs/targets/, plus tests, lint and bench.

Adding envs/targets/<name>.yaml adds a session `nox -s <name>`; nothing here
names a version. Arguments after `--` go to `kitbench run`, e.g.
`nox -s cpu -- --quick --check mnist`.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

try:
    from kitbench.environments import installer, locks, preflight, targets
    from kitbench.environments.targets import Target
    from kitbench.errors import KitbenchError
    from kitbench.machine import probe
    from kitbench.records import manifest
    from kitbench.suite import data
except ImportError as missing:  # kitbench's light dependencies live where nox runs
    raise SystemExit(
        f"ERROR: noxfile: {missing}\nhint: run nox so that it reads the noxfile's inline "
        "dependencies (pipx run nox, or uvx nox), or install them beside nox: "
        "python3 -m pip install -e '.[docker]' nox uv"
    ) from None

nox.needs_version = ">=2025.5"  # inline script metadata, and uv-provided interpreters
nox.options.sessions = ["lint", "tests"]
# uv builds a torch venv about four times as fast as pip (measured here: 18 s against 96 s,
# cold); virtualenv and pip where uv is not installed. Hash-locked installs work with both.
_VENV_BACKEND = "uv|virtualenv"
nox.options.error_on_missing_interpreters = True


@functools.cache
def _machine() -> probe.Probe:
    """This host, probed once per nox run (the probe may call nvidia-smi)."""
    return probe.probe()


def _dev_requirements(group: str) -> list[str]:
    found: list[str] = manifest.load(manifest.envs_dir() / "suite.yaml", "suite").data[group]
    return found


def _platform(python: str) -> str:
    machine = _machine()
    return f"{machine.os}-{machine.arch}-py{python}"


def _install_suite(session: nox.Session, target: Target, *, compiled: bool = False) -> dict[str, str]:
    """The target's environment as kitbench.environments.installer plans it (its lock, hash-checked; else its pins
    resolved), then kitbench itself, its bytecode compiled where the session starts many torch processes
    (``compiled``). Returns what the record says about it (the lock, or why none)."""
    os_name = _machine().os
    targets.check_index(target, os_name)
    plan = _plan(session, target, os_name)
    tool = "uv" if session.venv_backend == "uv" else "pip"
    session.install(*plan.write(Path(session.create_tmp()) / target.name, tool, compiled=compiled), env=plan.env(tool))
    session.install("--no-deps", "-e", str(ROOT))
    _check_build(session, target)
    return plan.record


def _plan(session: nox.Session, target: Target, os_name: str) -> installer.Install:
    """The target's install as the installer plans it, said once (and the override's warning, once)."""
    plan = installer.suite(target, _platform(target.python), os_name)
    session.log(plan.what)
    warning = installer.override_warning(target, plan.sources)
    if warning:
        session.warn(warning)
    return plan


def _check_build(session: nox.Session, target: Target, python: str = "python") -> None:
    """Say whether the torch just installed is the build the target names: an index override
    can put a CUDA build in a "CPU-only" environment, and nothing else would tell."""
    found = session.run(
        python,
        "-c",
        "import torch; print(torch.__version__); print(torch.version.cuda or '')",
        silent=True,
        external=python != "python",
    )
    if found is None:  # --install-only: nothing was run
        return
    version, _, cuda = str(found).strip().partition("\n")
    check = targets.check_build(target, version, cuda.strip() or None, _machine().os)
    if check.matches:
        session.log(f"{target.name}: {check.got}, the {target.compute} build the target names")
    else:
        session.warn(
            f"{target.name} names a {target.compute} build but got {check.got}: {check.cause}; "
            "the record says build_matches_target: false"
        )


def _kit_errors(body: Callable[[nox.Session], None]) -> Callable[[nox.Session], None]:
    """A session body whose kitbench errors end the session with their one line, not a traceback."""

    @functools.wraps(body)
    def session(session: nox.Session) -> None:
        try:
            body(session)
        except KitbenchError as error:
            session.error(f"{error.message}" + (f" ({error.hint})" if error.hint else ""))

    return session


def _preflight(session: nox.Session, target: Target) -> None:
    for note in preflight.check(target, _machine()):
        session.warn(note)
    mnist = data.ahead()
    if mnist:
        session.warn(mnist)


def _suite_env(target: Target, lock: dict[str, str] | None = None) -> dict[str, str]:
    return {"KITBENCH_TARGET": target.name, "KITBENCH_MANIFEST_SHA256": target.sha256, **(lock or {})}


def _venv_session(target: Target) -> Callable[[nox.Session], None]:
    def session(session: nox.Session) -> None:
        _preflight(session, target)
        lock = _install_suite(session, target)
        session.run("python", "-m", "kitbench", "run", *session.posargs, env=_suite_env(target, lock))

    return session


def _docker_session(target: Target) -> Callable[[nox.Session], None]:
    def session(session: nox.Session) -> None:
        _preflight(session, target)
        session.run(sys.executable, "-m", "kitbench", "container", target.name, "--", *session.posargs, external=True)

    return session


def _conda_session(target: Target) -> Callable[[nox.Session], None]:
    def session(session: nox.Session) -> None:
        _preflight(session, target)
        assert target.environment is not None
        tool = next(t for t in preflight.CONDA_TOOLS if shutil.which(t))
        prefix = ROOT / ".nox" / target.name
        session.run(
            tool,
            "env",
            "update" if prefix.exists() else "create",
            "--prefix",
            str(prefix),
            "--file",
            str(target.environment),
            external=True,
        )
        python = str(prefix / "bin" / "python")
        targets.check_index(target, "macos")
        plan = _plan(session, target, "macos")
        session.run(
            python,
            "-m",
            "pip",
            "install",
            *plan.write(Path(session.create_tmp()) / target.name, "pip"),
            env=plan.env("pip"),
            external=True,
        )
        session.run(python, "-m", "pip", "install", "--no-deps", "-e", str(ROOT), external=True)
        _check_build(session, target, python)
        chosen = plan.record
        session.run(python, "-m", "kitbench", "run", *session.posargs, env=_suite_env(target, chosen), external=True)

    return session


_FACTORIES = {"venv": _venv_session, "docker": _docker_session, "conda": _conda_session}


def _register(target: Target) -> None:
    func = _kit_errors(_FACTORIES[target.kind](target))
    func.__doc__ = target.description
    func.__name__ = target.name
    # Only venv targets let nox build the environment; docker and conda ones
    # build their own after pre-flight, so a host without conda or docker gets
    # kitbench's one-line reason rather than a failure inside nox.
    python = target.python if target.kind == "venv" else None
    nox.session(name=target.name, python=python, venv_backend=_VENV_BACKEND if target.kind == "venv" else "none")(func)


def _fail(error: KitbenchError) -> NoReturn:
    """One line and the hint, as the kitbench CLI prints them: nox would show a traceback."""
    raise SystemExit(f"ERROR: {error.message}" + (f"\nhint: {error.hint}" if error.hint else ""))


try:
    for _target in targets.load_all().values():
        _register(_target)
    _CPU_PYTHON = targets.get("cpu").python
except KitbenchError as _error:
    _fail(_error)


@nox.session(python=_CPU_PYTHON, venv_backend=_VENV_BACKEND)
@_kit_errors
def tests(session: nox.Session) -> None:
    """Run the test suite against the cpu target's pinned torch."""
    _install_suite(session, targets.get("cpu"), compiled=True)
    session.install(*_dev_requirements("dev"))
    # On every core, a module (or the modules sharing a session fixture) whole on one worker: tests/conftest.py.
    # What is given after -- comes last, so -n 0 there runs them in one process.
    session.run("pytest", "--numprocesses=auto", "--dist=loadgroup", *session.posargs)


@nox.session(python=_CPU_PYTHON, venv_backend=_VENV_BACKEND)
@_kit_errors
def lint(session: nox.Session) -> None:
    """ruff (format and lint) and mypy over kitbench, its tests, this file and the fact scripts (envs/scripts),
    against the cpu target's torch (mypy checks the calls into it)."""
    _install_suite(session, targets.get("cpu"))
    session.install(*_dev_requirements("dev"), *_dev_requirements("lint"))
    session.run("ruff", "format", "--check", "kitbench", "tests", "noxfile.py", "envs/scripts")
    session.run("ruff", "check", "kitbench", "tests", "noxfile.py", "envs/scripts")
    session.run("mypy")


@nox.session(python=_CPU_PYTHON, venv_backend=_VENV_BACKEND)
@_kit_errors
def lock(session: nox.Session) -> None:
    """PEP 751 locks (envs/locks/pylock.*.toml) of every target and host, where its index answers.

    A pair whose index is out of reach, or whose resolution is not the target's build, is skipped
    and said why; its last lock stays as it was."""
    session.install(*_dev_requirements("lock"))

    def log(outcome: locks.Outcome) -> None:
        if outcome.path is not None:
            session.log(f"{outcome.target} {outcome.platform}: wrote {outcome.path.relative_to(ROOT)}")
        else:
            session.warn(f"{outcome.target} {outcome.platform}: skipped, {outcome.skipped}")

    locks.lock_all(str(Path(session.bin) / "uv"), locks.where, log)


@nox.session(python=_CPU_PYTHON, venv_backend=_VENV_BACKEND)
@_kit_errors
def bench(session: nox.Session) -> None:
    """The MNIST benchmark (loops, batch-size sweep, DDP scaling); records in results/bench/.

    The three loops side by side (fnn over 3 epochs, cnn for one), the batch-size sweep and its
    crossover, and DDP's scaling."""
    target = targets.get("cpu")
    lock = _install_suite(session, target, compiled=True)
    env = {**_suite_env(target, lock), "KITBENCH_TARGET": "bench"}
    common = ["python", "-m", "kitbench", "run", "--check", "mnist"]
    loops = ["--loop", "tutorial", "--loop", "resident", "--loop", "graphed"]
    session.run(*common, *loops, "--model", "fnn", "--epochs", "3", *session.posargs, env=env)
    session.run(*common, *loops, "--model", "cnn", "--epochs", "1", *session.posargs, env=env)
    session.run(
        *common,
        "--sweep",
        "--loop",
        "resident",
        "--loop",
        "graphed",
        "--model",
        "fnn",
        "--model",
        "cnn",
        *session.posargs,
        env=env,
    )
    session.run(
        "python",
        "-m",
        "kitbench",
        "run",
        "--check",
        "ddp",
        "--model",
        "fnn",
        "--model",
        "cnn",
        *session.posargs,
        env=env,
    )
    folder = Path(os.environ.get("KITBENCH_RESULTS") or "results") / "bench"
    session.run("python", "-m", "kitbench", "report", str(folder), "-o", str(folder / "report.html"), env=env)
