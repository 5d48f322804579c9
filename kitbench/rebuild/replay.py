"""Replay a record: rebuild its environment here, run the same checks, verify the two.

What to rebuild is ``planning``'s. The environment is built with uv (``uv venv --python X.Y``, then
``uv pip install --no-deps`` of exactly the recorded set: the lines that carry the lock's hashes in one
install, hash-checked, the others in another), or with ``python3.X -m venv`` and pip where uv is absent.
It is built in a temporary directory beside the cache entry and renamed into place only when complete, so
an interrupted replay leaves nothing half-built; an identical plan reuses the cached environment. The
kitbench that runs is this one (on PYTHONPATH): the replay checks the environment, with today's code, and
says so.

A container record is replayed in its image: the very image where this engine still has the recorded
id, else the target's image rebuilt (as ``kitbench container`` builds it).
"""

from __future__ import annotations

import contextlib
import json
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
from typing import NamedTuple

from kitbench import _files, _reach
from kitbench.environments import installer, targets
from kitbench.errors import RecordError, ReplayError, clean
from kitbench.machine import interpreters
from kitbench.machine.probe import Probe
from kitbench.reading.verify import Comparison
from kitbench.rebuild.planning import Plan, plan
from kitbench.records import record as records
from kitbench.records.types import RunRecord

CACHE_VARIABLE = "KITBENCH_REPLAY_CACHE"
Log = Callable[[str], None]
INSTALL_TIMEOUT_S = 3600.0  # uv or pip: torch's wheels over a slow link take minutes, never an hour
RUN_TIMEOUT_S = 3600.0  # the replayed run: at least this, or 10 times what the record's run took
_GRACE_S = 15.0  # the replayed kitbench stops its own children (DDP ranks) on SIGTERM first
_PINNED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")
_UV_MARKS = "\u00d7\u2570\u2500\u25b6 "  # the box-drawing uv puts before its reasons
_PACKAGE = Path(__file__).resolve().parent.parent  # this kitbench package
COMPLETE = "kitbench-complete.json"  # written last into a cached environment: it is whole


def cache_root() -> Path:
    """``KITBENCH_REPLAY_CACHE``, else ``replay/`` in kitbench's cache (``KITBENCH_CACHE``, else
    ``$XDG_CACHE_HOME/kitbench``, else ``~/.cache/kitbench``)."""
    return Path(os.environ.get(CACHE_VARIABLE) or _files.cache_dir() / "replay")


def _check_data(root: Path) -> None:
    """MNIST whole and sound in this user's data, before the build: the replayed run gets it with
    --offline, so a missing file is "cannot rebuild" now, never a "not reproduced" an hour later."""
    from kitbench.errors import DataError
    from kitbench.suite import data

    try:
        data.verify(root)
    except DataError as missing:
        raise ReplayError(
            f"cannot rebuild the run: {missing.message}",
            hint="a replay reads MNIST from KITBENCH_DATA or the cache, never from a path the record "
            "names: `kitbench run --check mnist --limit 1` downloads it there once; nothing "
            "was built",
        ) from None


def _uv() -> str | None:
    return shutil.which("uv")


class _Reach(NamedTuple):
    """What a network failure of an install is told with: what the record knows, the indexes it reads."""

    known: _reach.Known
    urls: tuple[str, ...]


def _call(command: list[str], what: str, env: dict[str, str] | None = None, reach: _Reach | None = None) -> None:
    """uv, pip or venv through kitbench._proc: output bounded and decoded, an hour at most, its session
    killed when kitbench is interrupted (the build's folder is then removed by ``build``). A failure to
    reach a host is said by ``_reach``, naming the host (from the output, else the first of ``reach``'s
    indexes that does not resolve) and what gets past it."""
    from kitbench import _proc

    try:
        done = _proc.run(
            command,
            INSTALL_TIMEOUT_S,
            tail=True,  # the reason comes last
            env={**os.environ, **env} if env else None,
        )
    except OSError as exc:
        raise ReplayError(f"{what}: cannot start {Path(command[0]).name}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise ReplayError(
            f"{what}: {Path(command[0]).name} did not finish within {INSTALL_TIMEOUT_S:.0f} s and was stopped",
            hint="a slow or unanswering index: try again, or set KITBENCH_INDEX_URL",
        ) from None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        cause = _reach.network_cause(done.stderr)
        host = _reach.host_in(done.stderr) if cause is not None else None
        if cause is not None and reach is not None:
            unresolved = _reach.first_unresolved(reach.urls) if host is None else None
            host = host or (unresolved[0] if unresolved else None)
            if host is not None:
                raise _reach.unreachable(host, clean(cause), what, reach.known, ReplayError)
        # uv's reason ("Because there is no version of numpy==0.0.999 ...") over its headline, and
        # over the "hint:" uv prints last (for a Python it cannot provide: "retry on a newer uv").
        telling = ("ecause", "mismatch", "not found", "No matching", "No interpreter")
        why = cause or next(
            (line for line in lines if any(word in line for word in telling)), lines[-1] if lines else ""
        )
        if "==" not in why and any("hash" in line.lower() for line in lines):
            # pip's hash refusal ends "Got 4721f391...": the package is on an earlier line of its own.
            named = next((m[0] for line in lines if (m := _PINNED.search(line))), None)
            why = f"{named}: {why}" if named else why
        failed = ReplayError(f"{what}: {clean(why.lstrip(_UV_MARKS).strip().removeprefix('error: ')[:300])}")
        failed.host = host
        raise failed


def _recorded_index(record: RunRecord) -> str | None:
    """The record's index_override, where it is an index URL (or ``default``): a record's words reach the hint."""
    from kitbench._http import checked
    from kitbench._reach import shown
    from kitbench.errors import UsageError

    found = record["environment"].get("index_override")
    if not isinstance(found, str) or found == "default":
        return found if isinstance(found, str) else None
    try:
        return shown(checked(found, "the record's index_override"))
    except UsageError:
        return None


def key(chosen: Plan) -> str:
    """The cached environment's name: a digest of what is installed and from where (the interpreter's X.Y,
    every pinned line with its hashes, the indexes in force now), so that identical pins share one venv."""
    import hashlib

    sources = installer.around(chosen.index)
    # "split": the hashed lines installed hash-checked apart from the others; a venv built before, when one
    # unhashed line turned every hash off, is not this plan's.
    text = json.dumps(
        [chosen.python, chosen.requirements, chosen.exact, sources.torch, sources.default, sources.configured, "split"]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build(chosen: Plan, log: Log, root: Path | None = None) -> Path:
    """The environment's interpreter: reused when this plan was built before (its ``COMPLETE`` file, written
    last, is there), else built anew into a temporary directory that becomes the cache entry only once complete."""
    root = root or cache_root()
    tool = "uv" if (uv := _uv()) is not None else "pip"
    # The target's PyTorch index for the torch family, PyPI (or the user's index) for the rest, as the
    # nox sessions install: every pin exact (no dependency of its own) where the record lists them all.
    # Hash checking is all or nothing per install (pip turns it on for every line when one has a hash):
    # the hashed lines are one install, with --require-hashes, the unhashed another.
    hashed = [line for line in chosen.requirements if " --hash=" in line]
    plain = [line for line in chosen.requirements if " --hash=" not in line]
    sources = installer.around(chosen.index)
    installs = [
        installer.Install(lines, checked, sources, {}, "")
        for lines, checked in ((hashed, True), (plain, False))
        if lines
    ]
    final = root / key(chosen)
    inner = "Scripts/python.exe" if sys.platform == "win32" else "bin/python"  # a venv's interpreter
    python = final / inner
    if (final / COMPLETE).is_file() and python.exists():
        log(f"reusing {final}")
        return python
    reach = _Reach(
        _reach.Known(recorded=_recorded_index(chosen.record), again=f"kitbench replay {chosen.source}"),
        tuple(url for url in (sources.torch, sources.default) if url),
    )
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        staged = building / "venv"
        log(
            f"building {len(chosen.requirements)} pins for Python {chosen.python} into {final}"
            + (f" ({len(hashed)} hash-checked)" if hashed else "")
        )
        search = _python(chosen, uv, log)
        found = search.found
        if found is None and uv is None:
            raise _no_python(chosen, ReplayError("no uv to provide one"), search)
        base = str(found.path) if found is not None else chosen.python  # a bare X.Y: uv provides one
        if uv is not None:
            venv = [uv, "venv", "--quiet", "--relocatable", "--python", base, str(staged)]
            installing = [uv, "pip", "install", "--quiet", "--python", str(staged / inner)]
        else:
            venv = [base, "-m", "venv", str(staged)]
            installing = [str(staged / inner), "-m", "pip", "install", "--quiet"]
        if found is None:
            try:  # uv fetches a Python it lacks; offline, one try says so (its retries took 10 s)
                _call(venv, f"no Python {chosen.python} here", env={"UV_HTTP_RETRIES": "0"})
            except ReplayError as failed:
                raise _no_python(chosen, failed, search) from None
        else:
            _call(venv, f"cannot make an environment with {found.path} (Python {found.version}, {found.where})")
        unresolved = _reach.first_unresolved(reach.urls)  # said in seconds, not after the installer's retries
        if unresolved is not None:
            raise _reach.unreachable(
                unresolved[0], unresolved[1], "cannot install the recorded versions", reach.known, ReplayError
            )
        for n, install in enumerate(installs):
            _call(
                [*installing, *_install_args(chosen, install, building / f"install{n}", tool)],
                "cannot install the recorded versions",
                install.env(tool),
                reach,
            )
        (staged / COMPLETE).write_text(
            json.dumps(
                {"python": chosen.python, "requirements": chosen.requirements, "sources": sources.describe()}, indent=1
            )
            + "\n"
        )
        # Run as `python -m`, a venv survives the move (its console scripts' shebangs would not).
        _settle(staged, final, log)
        return python
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _install_args(chosen: Plan, install: installer.Install, folder: Path, tool: str) -> list[str]:
    """The arguments of one install, its files written into ``folder``: a hashed install brings its own
    --no-deps; the record's exact set takes no dependency of its own either way."""
    args = install.write(folder, tool)
    return ["--no-deps", *args] if chosen.exact and not install.hashed else args


def _settle(staged: Path, final: Path, log: Log) -> None:
    """``staged`` (complete) into ``final``: where an incomplete one is in the way (an interrupted build of an
    older kitbench, a folder half deleted), it is moved aside and removed; where another replay finished the same
    plan meanwhile, that one is kept."""
    if final.exists() and not (final / COMPLETE).is_file():
        aside = final.with_name(f".{final.name}.incomplete.{secrets.token_hex(3)}")
        with contextlib.suppress(OSError):
            os.replace(final, aside)
            log(f"{final} was not complete: rebuilt")
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(staged, final)
    except OSError:
        if not (final / COMPLETE).is_file():
            raise
        log(f"another replay built {final} meanwhile: reusing it")  # the same plan, the same pins


def _python(chosen: Plan, uv: str | None, log: Log) -> interpreters.Search:
    """A Python of the record's X.Y where people keep them (kitbench.machine.interpreters), said when found."""
    search = interpreters.find(chosen.python, uv)
    if search.found is not None:
        log(f"Python {search.found.version}: {search.found.path} ({search.found.where})")
    return search


def _no_python(chosen: Plan, failed: ReplayError, search: interpreters.Search) -> ReplayError:
    """The Python a record needs, missing here: where it was looked for, why uv could not provide one (which
    host it could not reach, where that was the cause), and how to get one; before anything is installed."""
    version, full = chosen.python, chosen.record["environment"]["python"]
    why = failed.message.removeprefix(f"no Python {version} here: ").removeprefix("cause: ")
    if failed.host is not None:  # _call names the host only where the network was the cause
        why = f"uv could not download one: cannot reach {failed.host} ({why})"
    return ReplayError(
        f"no Python {version} here: looked in {', '.join(search.looked)}; {why}"[:800],
        hint=f"the record ran on Python {full}: install a Python {version}, with uv "
        f"(`uv python install {version}`, where {failed.host or 'its download host'} is "
        f"reachable), pyenv (`pyenv install {version}`) or the system's packages (e.g. "
        f"`apt install python{version}-venv`), then replay again; nothing was built",
    )


@dataclass
class Outcome:
    record: Path
    verdict: str  # reproduced | not reproduced | both diverged
    reproduced: bool
    first_divergence: str | None
    differences: list[str]  # the environment diff: packages, hardware, settings
    notes: list[str]
    compared: list[Comparison] = field(default_factory=list)  # the availability and moves checks' quantities
    not_compared: list[str] = field(default_factory=list)
    mnist: list[Comparison] = field(default_factory=list)  # verify's, on the MNIST runs


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
    except (TypeError, ValueError):  # an interrupted record has no end; a naive and an aware time don't subtract
        took = 0.0
    return max(RUN_TIMEOUT_S, min(10 * took, 7 * 86400.0))


def run(chosen: Plan, python: Path, out: Path, log: Log) -> RunRecord:
    """The recorded checks with the recorded options, in the rebuilt environment; the new record
    names the one it replays."""
    from kitbench import _proc

    with tempfile.TemporaryDirectory(prefix="kitbench-path.") as kit:
        _link_package(Path(kit))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [kit, os.environ.get("PYTHONPATH")])),
            "KITBENCH_LOCK_WHY": f"replay of {chosen.source} (environment {key(chosen)})",
            # the override the venv was built under, as a session's record says it
            **installer.record_of(installer.around(chosen.index), {}),
        }
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
            raise ReplayError(
                f"the replayed run did not finish within {limit:.0f} s and was stopped",
                hint="the limit is 10 times the record's own run, an hour at least",
            ) from None
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
    _files.check_target(out)  # refused now, not after minutes of building
    target = targets.get(chosen.target)
    found = images.existing(chosen.image_id, chosen.image, target) if chosen.image_id else None
    if found is not None:
        log(f"reusing the recorded image {found.tag} ({found.image_id[:19]})")
        result = found
    else:
        log(f"the recorded image {chosen.image} ({str(chosen.image_id)[:19]}) is not here: building {target.name}'s")
        result = images.build(target, log)
        chosen.notes.append(
            f"the record's image ({str(chosen.image_id)[:19]}) is not on this machine: rebuilt as "
            f"{result.image_id[:19]}"
        )
    name = f"replay-{secrets.token_hex(6)}.json"
    written = records.results_root() / target.name / name
    args = [*chosen.run_args, "--out", f"{containers.RESULTS_INSIDE}/{target.name}/{name}"]
    log("running in the container: kitbench run " + " ".join(args))
    containers.run(target, result, args, log)
    if not written.is_file():
        raise ReplayError(f"the replayed run wrote no record at {written}")
    record = records.read(written)
    out.parent.mkdir(parents=True, exist_ok=True)
    _files.write(
        out,
        records.to_json({**record, "replay_of": {"path": str(chosen.source), "sha256": chosen.sha256}}),
        what="the record",
    )
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
        raise ReplayError(
            f"cannot rebuild the run: the replayed run failed before "
            f"{'its MNIST runs' if trained else 'its checks'}: "
            f"{str(new.get('error') or 'no reason recorded')[:300]} ({out})",
            hint="the rebuilt environment is cached; nothing was compared",
        )
    # This kitbench runs from its source (no metadata in the venv): said in the notes, not as a package gone.
    # A replay is built from the record, not from a target's manifest: the manifest's hash is not the run's.
    new_env = new["environment"]
    differences = [
        line
        for line in diff(old["environment"], new_env)
        if not line.startswith("package kitbench:")
        and not (line.startswith("manifest_sha256:") and new_env.get("manifest_sha256") is None)
    ]
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
                raise ReplayError(
                    f"the replayed run cannot be compared with the record: {refused.message} ({out})", hint=refused.hint
                ) from None
            not_compared.append(f"MNIST's runs: {refused.message} (the record's ran on {chosen.missing})")
        else:
            verdict, first, mnist_compared = mnist.verdict, mnist.first_divergence, mnist.comparisons
            # verify leaves these checks out; compared above, by verify_checks.
            not_compared = [
                line
                for line in mnist.not_compared
                if "availability and moves" not in line and not line.startswith("the ddp check")
            ] + not_compared
    else:
        not_compared.append("MNIST (the record has no MNIST runs)")
    if not compared and not mnist_compared:
        raise ReplayError(
            f"the replayed run shares nothing comparable with the record ({out})",
            hint="the rebuilt environment is cached; nothing was compared",
        )
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


def replay(source: Path, given: str | None, machine: Probe, log: Log, local_by_name: bool = False) -> Outcome:
    """``given`` is --out as typed: a trailing separator is kept to mean a directory; ``local_by_name``:
    planning's."""
    chosen = plan(source, machine, local_by_name)
    if chosen.here is not None:
        log(chosen.here)
    out = out_path(given, source)
    try:  # a symlink, device or file at --out: refused now, not after the build; exit 2, not "differs"
        _files.check_target(out)
    except RecordError as refused:
        raise ReplayError(refused.message, hint="give another --out (replay never replaces a file)") from None
    if chosen.image is not None:
        return check(chosen, run_container(chosen, out, log), out)
    if chosen.data is not None:
        _check_data(chosen.data)
    try:
        python = build(chosen, log)
    except OSError as failed:  # the cache: a file where its folder should be, a full or read-only disk
        raise ReplayError(
            f"cannot rebuild the run: the replay cache {cache_root()}: {failed.strerror or failed}",
            hint=f"set {CACHE_VARIABLE} to a writable directory",
        ) from None
    return check(chosen, run(chosen, python, out, log), out)
