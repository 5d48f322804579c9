"""Replay a record: rebuild its environment here, run the same checks, verify the two.

What to rebuild is ``planning``'s. The environment is built with uv (``uv venv --python X.Y``, then
``uv pip install --no-deps`` of exactly the recorded set, hash-checked where the record carries the
lock's hashes), or with ``python3.X -m venv`` and pip where uv is absent. It is built in a temporary
directory beside the cache entry and renamed into place only when complete, so an interrupted replay
leaves nothing half-built; an identical plan reuses the cached environment. The kitbench that runs is
this one (on PYTHONPATH): the replay checks the environment, with today's code, and says so.

A container record is replayed in its image: the very image where this engine still has the recorded
id, else the target's image rebuilt (as ``kitbench container`` builds it).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kitbench import _files
from kitbench.environments import installer, targets
from kitbench.errors import RecordError, ReplayError, clean
from kitbench.machine.probe import Probe
from kitbench.reading.verify import Comparison
from kitbench.rebuild.planning import Plan, plan
from kitbench.records import record as records
from kitbench.records.types import RunRecord

CACHE_VARIABLE = "KITBENCH_REPLAY_CACHE"
Log = Callable[[str], None]
INSTALL_TIMEOUT_S = 3600.0      # uv or pip: torch's wheels over a slow link take minutes, never an hour
RUN_TIMEOUT_S = 3600.0          # the replayed run: at least this, or 10 times what the record's run took
_GRACE_S = 15.0                 # the replayed kitbench stops its own children (DDP ranks) on SIGTERM first
_PINNED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")
_UV_MARKS = "\u00d7\u2570\u2500\u25b6 "          # the box-drawing uv puts before its reasons
_PACKAGE = Path(__file__).resolve().parent.parent          # this kitbench package
_OFFLINE = ("lookup address", "dns error", "name resolution", "network is unreachable", "client error (connect)")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or _files.cache_dir() / "replay")



def _check_data(root: Path) -> None:
    """MNIST whole and sound in this user's data, before the build: the replayed run gets it with
    --offline, so a missing file is "cannot rebuild" now, never a "not reproduced" an hour later."""
    from kitbench.errors import DataError
    from kitbench.suite import data

    try:
        data.verify(root)
    except DataError as missing:
        raise ReplayError(f"cannot rebuild the run: {missing.message}",
                          hint="a replay reads MNIST from KITBENCH_DATA or the cache, never from a path the record "
                               "names: `kitbench run --check mnist --limit 1` downloads it there once; nothing "
                               "was built") from None



def _uv() -> str | None:
    return shutil.which("uv")


def _call(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    """uv, pip or venv through kitbench._proc: output bounded and decoded, an hour at most, its session
    killed when kitbench is interrupted (the build's folder is then removed by ``build``)."""
    from kitbench import _proc

    try:
        done = _proc.run(command, INSTALL_TIMEOUT_S, tail=True,      # the reason comes last
                         env={**os.environ, **env} if env else None)
    except OSError as exc:
        raise ReplayError(f"{what}: cannot start {Path(command[0]).name}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise ReplayError(f"{what}: {Path(command[0]).name} did not finish within {INSTALL_TIMEOUT_S:.0f} s and "
                          "was stopped", hint="a slow or unanswering index: try again, or set KITBENCH_INDEX_URL"
                          ) from None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        # uv's reason ("Because there is no version of numpy==0.0.999 ...") over its headline, and
        # over the "hint:" uv prints last (for a Python it cannot provide: "retry on a newer uv").
        telling = ("ecause", "mismatch", "not found", "No matching", "No interpreter")
        # Offline, the deepest cause says so ("failed to lookup address information"), not the headline.
        offline = next((line for line in reversed(lines) if any(word in line.lower() for word in _OFFLINE)), None)
        why = offline or next((line for line in lines if any(word in line for word in telling)),
                              lines[-1] if lines else "")
        if "==" not in why and any("hash" in line.lower() for line in lines):
            # pip's hash refusal ends "Got 4721f391...": the package is on an earlier line of its own.
            named = next((m[0] for line in lines if (m := _PINNED.search(line))), None)
            why = f"{named}: {why}" if named else why
        raise ReplayError(f"{what}: {clean(why.lstrip(_UV_MARKS).strip().removeprefix('error: ')[:300])}")


def build(chosen: Plan, log: Log, root: Path | None = None) -> Path:
    """The environment's interpreter: reused when this plan was built before, else built anew
    into a temporary directory that becomes the cache entry only once complete."""
    root = root or cache_root()
    final = root / chosen.key
    inner = "Scripts/python.exe" if sys.platform == "win32" else "bin/python"    # a venv's interpreter
    python = final / inner
    if python.exists():
        log(f"reusing {final}")
        return python
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{chosen.key}.", dir=root))
    try:
        staged = building / "venv"
        tool = "uv" if (uv := _uv()) is not None else "pip"
        # The target's PyTorch index for the torch family, PyPI (or the user's index) for the rest, as the
        # nox sessions install: every pin exact (no dependency of its own) where the record lists them all.
        hashed = bool(chosen.requirements) and all(" --hash=" in line for line in chosen.requirements)
        install = installer.Install(chosen.requirements, hashed, installer.around(chosen.index), {}, "")
        args = install.write(building / "install", tool)
        deps = ["--no-deps"] if chosen.exact and not hashed else []
        log(f"building {len(chosen.requirements)} pins for Python {chosen.python} into {final}")
        if uv is not None:
            try:        # uv fetches a Python it lacks; offline, one try says so (its retries took 10 s)
                _call([uv, "venv", "--quiet", "--relocatable", "--python", chosen.python, str(staged)],
                      f"no Python {chosen.python} here", env={"UV_HTTP_RETRIES": "0"})
            except ReplayError as failed:
                raise _no_python(chosen, failed.message) from None
            _call([uv, "pip", "install", "--quiet", "--python", str(staged / inner), *deps, *args],
                  "cannot install the recorded versions", install.env(tool))
        else:
            interpreter = shutil.which(f"python{chosen.python}")
            if interpreter is None:
                raise _no_python(chosen, f"no Python {chosen.python} here (no python{chosen.python} on PATH, "
                                         "and no uv to provide one)")
            try:        # a pyenv shim is on PATH whether or not its Python is selected
                _call([interpreter, "-m", "venv", str(staged)], f"no working Python {chosen.python} here: "
                      f"python{chosen.python} on PATH says")
            except ReplayError as failed:
                raise _no_python(chosen, failed.message) from None
            _call([str(staged / inner), "-m", "pip", "install", "--quiet", *deps, *args],
                  "cannot install the recorded versions", install.env(tool))
        # Run as `python -m`, a venv survives the move (its console scripts' shebangs would not).
        try:
            os.replace(staged, final)
        except OSError:
            if not python.exists():
                raise
            log(f"another replay built {final} meanwhile: reusing it")     # the same plan, the same pins
        return python
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _no_python(chosen: Plan, said: str) -> ReplayError:
    """The Python a record needs, missing here: which one, how to get one, and whether a download
    failed only because this machine is offline; before anything is installed."""
    version, full = chosen.python, chosen.record["environment"]["python"]
    offline = any(word in said.lower() for word in _OFFLINE)
    why = said.removeprefix(f"no Python {version} here: ").removeprefix("cause: ")
    message = (f"no Python {version} here, and uv cannot download one: this machine is offline ({why[-160:]})"
               if offline else said)
    return ReplayError(message, hint=f"the record ran on Python {full}: install a Python {version}, with uv "
                                     f"(`uv python install {version}`, where the internet is reachable) or "
                                     f"the system's packages (e.g. `apt install python{version}-venv`), "
                                     "then replay again; nothing was built")


@dataclass
class Outcome:
    record: Path
    verdict: str                  # reproduced | not reproduced | both diverged
    reproduced: bool
    first_divergence: str | None
    differences: list[str]        # the environment diff: packages, hardware, settings
    notes: list[str]
    compared: list[Comparison] = field(default_factory=list)     # the availability and moves checks' quantities
    not_compared: list[str] = field(default_factory=list)
    mnist: list[Comparison] = field(default_factory=list)        # verify's, on the MNIST runs


def default_out(source: Path) -> Path:
    return records.results_root() / "replay" / f"{source.stem}-replay-{records.utc_now()[:19].replace(':', '')}.json"


def _link_package(folder: Path) -> None:
    """``folder`` holds this kitbench package and nothing else, for PYTHONPATH. The folder above the
    package will not do: for an installed kitbench it is the caller's site-packages, whose torch, numpy
    (everything) would come before the rebuilt environment's. A link where the OS allows one (a checkout
    still finds its envs/ through the resolved path), else a copy (a wheel's package ships its envs)."""
    try:
        (folder / "kitbench").symlink_to(_PACKAGE, target_is_directory=True)
    except OSError:
        shutil.copytree(_PACKAGE, folder / "kitbench", ignore=shutil.ignore_patterns("__pycache__"))


def _run_limit(record: RunRecord) -> float:
    from datetime import datetime

    try:
        ended, started = (str(record.get(key) or "").replace("Z", "+00:00") for key in ("ended_at", "started_at"))
        took = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):     # an interrupted record has no end; a naive and an aware time don't subtract
        took = 0.0
    return max(RUN_TIMEOUT_S, min(10 * took, 7 * 86400.0))


def run(chosen: Plan, python: Path, out: Path, log: Log) -> RunRecord:
    """The recorded checks with the recorded options, in the rebuilt environment; the new record
    names the one it replays."""
    from kitbench import _proc

    with tempfile.TemporaryDirectory(prefix="kitbench-path.") as kit:
        _link_package(Path(kit))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [kit, os.environ.get("PYTHONPATH")])),
               "KITBENCH_LOCK_WHY": f"replay of {chosen.source} (plan {chosen.key})",
               # the override the venv was built under, as a session's record says it
               **installer.record_of(installer.around(chosen.index), {})}
        if chosen.target:
            env["KITBENCH_TARGET"] = chosen.target
        out.parent.mkdir(parents=True, exist_ok=True)
        data = ["--data", str(chosen.data), "--offline"] if chosen.data is not None else []
        command = [str(python), "-m", "kitbench", "run", *chosen.run_args, *data, "--out", str(out)]
        log("running: kitbench run " + " ".join([*chosen.run_args, *data, "--out", str(out)]))
        limit = _run_limit(chosen.record)
        # Its progress (stderr) shown as it comes, escaped; its tables (stdout) are not replay's output.
        # On an interruption it gets SIGTERM first: it stops its own DDP ranks, whatever their session.
        try:
            _proc.run(command, limit, env=env, stop=_proc.terminate(_GRACE_S), on_line=lambda line: log(clean(line)))
        except OSError as exc:
            raise ReplayError(f"cannot start the rebuilt environment's Python: {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise ReplayError(f"the replayed run did not finish within {limit:.0f} s and was stopped",
                              hint="the limit is 10 times the record's own run, an hour at least") from None
    if not out.is_file():
        raise ReplayError(f"the replayed run wrote no record at {out}")
    record = records.read(out)
    stamped = {**record, "replay_of": {"path": str(chosen.source), "sha256": chosen.sha256}}
    records.write_atomic(out, stamped)
    return records.read(out)


def run_container(chosen: Plan, out: Path, log: Log) -> RunRecord:
    """The recorded checks in the recorded image (or the target's rebuilt one); the record the
    container writes under the results folder is moved to ``out``, naming the one it replays."""
    from kitbench import _files
    from kitbench.rebuild import containers, images

    assert chosen.target is not None and chosen.image is not None
    _files.check_target(out)            # refused now, not after minutes of building
    target = targets.get(chosen.target)
    found = images.existing(chosen.image_id, chosen.image, target) if chosen.image_id else None
    if found is not None:
        log(f"reusing the recorded image {found.tag} ({found.image_id[:19]})")
        result = found
    else:
        log(f"the recorded image {chosen.image} ({str(chosen.image_id)[:19]}) is not here: building {target.name}'s")
        result = images.build(target, log)
        chosen.notes.append(f"the record's image ({str(chosen.image_id)[:19]}) is not on this machine: rebuilt as "
                            f"{result.image_id[:19]}")
    name = f"replay-{secrets.token_hex(6)}.json"
    written = records.results_root() / target.name / name
    args = [*chosen.run_args, "--out", f"{containers.RESULTS_INSIDE}/{target.name}/{name}"]
    log("running in the container: kitbench run " + " ".join(args))
    containers.run(target, result, args, log)
    if not written.is_file():
        raise ReplayError(f"the replayed run wrote no record at {written}")
    record = records.read(written)
    out.parent.mkdir(parents=True, exist_ok=True)
    _files.write(out, records.to_json({**record, "replay_of": {"path": str(chosen.source), "sha256": chosen.sha256}}),
                 what="the record")
    written.unlink()
    log(f"the record moved to {out}, naming the one it replays")
    return records.read(out)


def check(chosen: Plan, new: RunRecord, out: Path) -> Outcome:
    """verify's verdict on the MNIST runs, and the availability and moves checks compared beside it (a record
    without MNIST runs is verified by those alone). A rerun that failed before the checks it repeats, or a
    pair verify cannot compare, is "cannot rebuild" (exit 2), never a verdict on numbers nobody compared."""
    from kitbench.errors import UsageError
    from kitbench.reading import verify_checks
    from kitbench.reading.envdiff import diff
    from kitbench.reading.verify import verify

    old = chosen.record
    trained = bool(old["checks"].get("mnist", {}).get("runs"))
    reran = bool(new["checks"].get("mnist", {}).get("runs")) if trained else bool(new["checks"])
    if new["status"] == "failed" and not reran:
        raise ReplayError(f"cannot rebuild the run: the replayed run failed before "
                          f"{'its MNIST runs' if trained else 'its checks'}: "
                          f"{str(new.get('error') or 'no reason recorded')[:300]} ({out})",
                          hint="the rebuilt environment is cached; nothing was compared")
    # This kitbench runs from its source (no metadata in the venv): said in the notes, not as a package gone.
    # A replay is built from the record, not from a target's manifest: the manifest's hash is not the run's.
    new_env = new["environment"]
    differences = [line for line in diff(old["environment"], new_env) if not line.startswith("package kitbench:")
                   and not (line.startswith("manifest_sha256:") and new_env.get("manifest_sha256") is None)]
    compared, not_compared = verify_checks.compare(old, new, same_hardware=chosen.missing is None)
    verdict, first, mnist_compared = "reproduced", None, []
    reference = old
    if trained and chosen.missing is not None:
        # Without the record's GPU its GPU runs have no partner: its CPU runs are compared by verify's rules
        # and the GPU's are said not compared; a record of GPU runs alone is compared across devices.
        runs = old["checks"]["mnist"].get("runs", [])
        here = [r for r in runs if r["device"] == "cpu"]
        if here and len(here) < len(runs):
            reference = {**old, "checks": {**old["checks"], "mnist": {**old["checks"]["mnist"], "runs": here}}}
            not_compared.append(f"the record's {len(runs) - len(here)} MNIST runs on {chosen.missing} (not here)")
    if trained:
        try:
            mnist = verify(reference, new)
        except UsageError as refused:
            if chosen.missing is None:
                raise ReplayError(f"the replayed run cannot be compared with the record: {refused.message} ({out})",
                                  hint=refused.hint) from None
            not_compared.append(f"MNIST's runs: {refused.message} (the record's ran on {chosen.missing})")
        else:
            verdict, first, mnist_compared = mnist.verdict, mnist.first_divergence, mnist.comparisons
            # verify leaves these checks out; compared above, by verify_checks.
            not_compared = [line for line in mnist.not_compared
                            if "availability and moves" not in line and not line.startswith("the ddp check")
                            ] + not_compared
    else:
        not_compared.append("MNIST (the record has no MNIST runs)")
    if not compared and not mnist_compared:
        raise ReplayError(f"the replayed run shares nothing comparable with the record ({out})",
                          hint="the rebuilt environment is cached; nothing was compared")
    if verdict == "reproduced":
        differing = next((c for c in compared if not c.equal), None)
        if differing is not None:
            verdict, first = "not reproduced", f"{differing.quantity}: {differing.detail}"
    reproduced = verdict == "reproduced"
    if reproduced and chosen.missing is not None:
        verdict = f"reproduced what a machine without {chosen.missing} can show"
    return Outcome(out, verdict, reproduced, first, differences, chosen.notes, compared, not_compared, mnist_compared)


def out_path(given: str | None, source: Path) -> Path:
    """Where the replayed record goes: ``given`` as a file, or inside it when it names a directory."""
    default = default_out(source)
    return _files.destination(given, default.name, ReplayError) if given is not None else default


def replay(source: Path, given: str | None, machine: Probe, log: Log) -> Outcome:
    """``given`` is --out as typed: a trailing separator is kept to mean a directory."""
    chosen = plan(source, machine)
    if chosen.here is not None:
        log(chosen.here)
    out = out_path(given, source)
    try:        # a symlink, device or file at --out: refused now, not after the build; exit 2, not "differs"
        _files.check_target(out)
    except RecordError as refused:
        raise ReplayError(refused.message, hint="give another --out (replay never replaces a file)") from None
    if chosen.image is not None:
        return check(chosen, run_container(chosen, out, log), out)
    if chosen.data is not None:
        _check_data(chosen.data)
    try:
        python = build(chosen, log)
    except OSError as failed:       # the cache: a file where its folder should be, a full or read-only disk
        raise ReplayError(f"cannot rebuild the run: the replay cache {cache_root()}: "
                          f"{failed.strerror or failed}",
                          hint=f"set {CACHE_VARIABLE} to a writable directory") from None
    return check(chosen, run(chosen, python, out, log), out)

