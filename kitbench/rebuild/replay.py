"""Replay a record: rebuild its environment here, run the same checks, verify the two.

Planning runs on a bare Python (no torch): the record names every distribution
(``environment.packages``, kitbench.run/2) or, for a /1 record, torch and
torchvision, the rest coming from the target's pins. The environment is built
with uv (``uv venv --python X.Y``, then ``uv pip install --no-deps`` of exactly
the recorded set, hash-checked where the record carries the lock's hashes), or
with ``python3.X -m venv`` and pip where uv is absent. It is built in a temporary
directory beside the cache entry and renamed into place only when complete, so
an interrupted replay leaves nothing half-built; an identical plan reuses the
cached environment. The kitbench that runs is this one (on PYTHONPATH): the
replay checks the environment, with today's code, and says so.

A container record is replayed in its image: the very image where this engine still
has the recorded id, else the target's image rebuilt (as ``kitbench container``
builds it), provided the target still pins the recorded torch and torchvision.
"""

from __future__ import annotations

import hashlib
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

from kitbench import _files
from kitbench.environments import installer, targets
from kitbench.environments.locks import normalize
from kitbench.errors import KitbenchError, RecordError, ReplayError, clean
from kitbench.machine.probe import Probe
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


@dataclass
class Plan:
    source: Path
    sha256: str
    record: RunRecord
    python: str                        # X.Y
    requirements: list[str]            # requirement lines (with --hash where known)
    exact: bool                        # the whole recorded set, installed without resolving
    index: str | None
    target: str | None
    run_args: list[str]
    notes: list[str] = field(default_factory=list)   # what is not rebuilt exactly, said
    image: str | None = None           # a container record: the image it ran in, and its id
    image_id: str | None = None
    data: Path | None = None           # MNIST: this user's own (KITBENCH_DATA or the cache), never the record's

    @property
    def key(self) -> str:
        text = json.dumps([self.python, self.requirements, self.exact, self.index])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "kitbench" / "replay")


# The run options a replay takes from a record: what changes what is measured, and nothing else. Never a
# path (--data, --out), a host (--rdzv-endpoint) or how the result was shown (--json): a record chooses
# none of them. (option, Namespace attribute): flags and repeated options as run takes them.
_TAKEN = (("--check", "checks"), ("--device", "device"), ("--quick", "quick"), ("--model", "models"),
          ("--loop", "loops"), ("--epochs", "epochs"), ("--batch-size", "batch_size"), ("--sweep", "sweep"),
          ("--seed", "seed"), ("--threads", "threads"), ("--limit", "limit"), ("--lr", "lr"),
          ("--deterministic", "deterministic"), ("--nproc", "nproc"), ("--ddp-timeout", "ddp_timeout"))
_DEVICE = re.compile(r"auto|cpu|mps|(cuda|xpu)(:[0-9]{1,3})?")


def _run_args(path: Path, argv: list[str]) -> tuple[list[str], list[str]]:
    """The record's command line read as ``kitbench run``'s own parser reads it (abbreviations such as
    ``--forc`` or ``--ou=x`` included), then rebuilt from ``_TAKEN`` alone; with notes on what a
    multi-node run loses. A command line that parser refuses is refused here, before anything is built."""
    from kitbench.errors import UsageError
    from kitbench.suite import runargs

    try:        # as run itself would refuse it, after an hour of building
        given = runargs.parse(argv[1:] if argv[:1] == ["run"] else list(argv))
    except UsageError as refused:
        raise ReplayError(f"{path}'s command line is not one this kitbench's run takes: {refused.message[:200]}",
                          hint="it was not written by this kitbench or was edited since; nothing was built"
                          ) from None
    if not _DEVICE.fullmatch(given.device):
        raise ReplayError(f"{path}'s command line names the device {given.device[:40]!r}, which is none kitbench "
                          "runs on", hint="it was not written by kitbench or was edited since; nothing was built")
    default = runargs.parse([])
    kept: list[str] = []
    for option, attribute in _TAKEN:
        value = getattr(given, attribute)
        if value == getattr(default, attribute):
            continue
        if isinstance(value, bool):
            kept.append(option)
        elif isinstance(value, list):
            for item in value:
                kept += [option, str(item)]
        else:
            kept += [option, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
    notes = []
    if given.nnodes is not None or given.rdzv_endpoint is not None:
        notes.append(f"the record's DDP ran across {given.nnodes or 'several'} nodes through a rendezvous "
                     "(--nnodes, --rdzv-endpoint): that part cannot be rebuilt from a record, which never chooses "
                     "a host; DDP is replayed standalone on this machine")
    return kept, notes


def _data_root() -> Path:
    from kitbench.suite import data

    return data.default_root()


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


def plan(path: Path, machine: Probe) -> Plan:
    """What to rebuild, from the record alone (and the target's manifest for a /1 record)."""
    record, sha256 = records.read_hashed(path)
    env = record["environment"]
    _check_fields(path, record)
    if not record["checks"].get("mnist", {}).get("runs"):
        raise ReplayError(f"{path} holds no MNIST runs: a replay is verified by comparing them, and there is "
                          "nothing to compare", hint="replay a record of `kitbench run --check mnist`; "
                                                     "nothing was built")
    run_args, notes = _run_args(path, record["argv"])
    python = ".".join(env["python"].split(".")[:2])
    target_name = env.get("target")
    try:
        target = targets.get(target_name) if target_name else None
    except KitbenchError:
        target = None
    if env.get("image"):
        return _container_plan(path, sha256, record, target, machine, run_args, notes)
    here, there = f"{machine.os}-{machine.arch}", f"{env['os']}-{env['arch']}"
    same_platform = here == there
    if not same_platform:
        if target is not None and not any(h.os == machine.os and machine.arch in h.arch for h in target.hosts):
            raise ReplayError(f"the record ran on {there} with target {target.name}, which does not run on {here}",
                              hint=f"replay it on a {there} host")
        notes.append(f"platforms differ: the record ran on {there}, this is {here}; the recorded versions of "
                     "torch, torchvision and the suite's pins are rebuilt, their dependencies resolved for here")
    index = target.index_for(machine.os) if target is not None else None
    packages = env.get("packages")
    if packages is not None and same_platform:
        pins = [p for p in packages if normalize(p["name"]) != "kitbench"]
        local = [p["name"] for p in pins if str(p.get("source") or "").startswith("file:")]
        if local:
            raise ReplayError(f"the record's {', '.join(local[:3])} came from a local path on its machine; "
                              "no index serves it")
        hashed = all(p.get("hashes") for p in pins)
        requirements = [f"{p['name']}=={p['version']}" + "".join(f" --hash={h}" for h in p.get("hashes", []))
                        for p in pins]
        if not hashed:
            missing = sum(1 for p in pins if not p.get("hashes"))
            notes.append(f"{missing} of {len(pins)} packages carry no hash (no lock, or not in the lock that "
                         "built the environment): pinned by version only")
            requirements = [line.split(" --hash=")[0] for line in requirements]
        exact = True
    else:
        wanted = {"torch": env.get("torch"), "torchvision": env.get("torchvision")}
        if packages is not None:
            wanted.update({normalize(p["name"]): p["version"] for p in packages})
        # What the record does not name, the suite's pins give (said in the notes).
        pinned = dict(r.split("==", 1) for r in targets.suite_requirements(python))
        requirements = []
        for name in ["torch", "torchvision", *pinned]:
            version = str(wanted.get(normalize(name)) or pinned.get(name) or "")
            if not version or version.startswith("unusable"):
                continue
            if "+" in version:
                notes.append(f"{name} {version}: the build tag comes from the index; pinned as "
                             f"{version.partition('+')[0]}")
                version = version.partition("+")[0]
            requirements.append(f"{name}=={version}")
        if packages is None:
            notes.append(f"{record['schema']} records name only torch and torchvision: the suite's pins "
                         "(envs/suite.yaml) and their resolved dependencies stand in for the rest")
        exact = False
    if env.get("kitbench") or env.get("git_revision"):
        notes.append(f"kitbench: this one runs the checks (the record's: {env.get('kitbench')}, "
                     f"git {str(env.get('git_revision') or 'unknown')[:12]})")
    checks = {run_args[i + 1] for i, word in enumerate(run_args) if word == "--check"}
    trains = not checks or bool(checks & {"mnist", "ddp"})       # run's default checks include MNIST
    return Plan(path, sha256, record, python, requirements, exact, index, target_name, run_args, notes,
                data=_data_root() if trains else None)


# What a record may name: it becomes a line of a requirements file, an argument or a message, where a
# newline or an option ("--index-url ...", "http://host/evil.tar.gz") would be obeyed, not installed.
# PEP 508 names; PEP 440 versions in their normal form, with a local label (the build tag, "+cu130").
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_N = r"[0-9]{1,12}"
_VERSION = re.compile(rf"({_N}!)?{_N}(\.{_N}){{0,7}}((a|b|rc){_N})?(\.post{_N})?(\.dev{_N})?"
                      r"(\+[A-Za-z0-9]{1,32}(\.[A-Za-z0-9]{1,32}){0,7})?")
_HASH = re.compile(r"(sha256|sha384|sha512):[0-9a-f]{64,128}")
_PYTHON = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9A-Za-z+]{1,16})?")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")       # a target, an OS, an architecture
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/-]{0,199}(:[A-Za-z0-9._-]{1,128})?")
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def _check_fields(path: Path, record: RunRecord) -> None:
    """Refuse a record any of whose fields that reach a command line, a file or a message is not a plain
    one: the one place a record's words are checked before a replay uses them."""
    env = record["environment"]
    bad = [f"python {env['python']!r}"] if not _PYTHON.fullmatch(env["python"]) else []
    for key in ("target", "os", "arch"):
        value = env.get(key)
        bad += [f"{key} {value!r}"] if value is not None and not _PLAIN.fullmatch(str(value)) else []
    for key in ("torch", "torchvision"):
        value = env.get(key)
        # A /1 record says "unusable: <why>" where torch would not import: no version, never installed.
        if isinstance(value, str) and not value.startswith("unusable") and not _VERSION.fullmatch(value):
            bad.append(f"{key} version {value!r}")
    for key, pattern in (("image", _IMAGE), ("image_id", _IMAGE_ID)):
        value = env.get(key)
        bad += [f"{key} {value!r}"] if value is not None and not pattern.fullmatch(str(value)) else []
    for package in env.get("packages") or []:
        bad += [f"package {package['name']!r}"] if not _NAME.fullmatch(package["name"]) else []
        bad += [f"{package['name']!r} version {package['version']!r}"] if not _VERSION.fullmatch(
            package["version"]) else []
        bad += [f"{package['name']!r} hash {h!r}" for h in package.get("hashes", []) if not _HASH.fullmatch(h)]
    if bad:
        raise ReplayError(f"{path} names {bad[0][:120]}, which no index serves"
                          + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
                          hint="it was not written by kitbench or was edited since; nothing was built")


def _container_plan(path: Path, sha256: str, record: RunRecord, target: targets.Target | None,
                    machine: Probe, run_args: list[str], notes: list[str]) -> Plan:
    env = record["environment"]
    image = str(env.get("image"))
    if target is None or target.kind != "docker":
        raise ReplayError(f"{path} ran in the image {image} of target {env.get('target')!r}, which is not a docker "
                          "target of this kitbench",
                          hint="replay it with the kitbench revision that wrote it (environment.git_revision)")
    here, there = f"{machine.os}-{machine.arch}", f"{env['os']}-{env['arch']}"
    if here != there:
        raise ReplayError(f"the record ran in a {there} container, this is {here}",
                          hint=f"replay it on a {there} host with Docker")
    for name, pinned in (("torch", target.torch), ("torchvision", target.torchvision)):
        had = str(env.get(name) or "").partition("+")[0]
        if had != pinned.partition("+")[0]:
            raise ReplayError(f"target {target.name} pins {name} {pinned} now; the record's image had {had}: "
                              "a rebuilt image would not be the record's",
                              hint="replay it with the kitbench revision that wrote it (environment.git_revision), "
                                   "or on the machine that still has its image")
    if env.get("manifest_sha256") not in (None, target.sha256):
        notes.append(f"target {target.name}'s manifest changed since the record (sha256 "
                     f"{str(env.get('manifest_sha256'))[:12]} -> {target.sha256[:12]}): a rebuilt image follows "
                     "today's, with the same torch and torchvision")
    python = ".".join(env["python"].split(".")[:2])
    return Plan(path, sha256, record, python, [], True, target.index_for("linux"), target.name,
                run_args, notes, image=image, image_id=env.get("image_id"))


def _uv() -> str | None:
    return shutil.which("uv")


def _call(command: list[str], what: str) -> None:
    """uv, pip or venv through kitbench._proc: output bounded and decoded, an hour at most, its session
    killed when kitbench is interrupted (the build's folder is then removed by ``build``)."""
    from kitbench import _proc

    try:
        done = _proc.run(command, INSTALL_TIMEOUT_S, tail=True)      # the reason comes last
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
        why = next((line for line in lines if any(word in line for word in telling)), lines[-1] if lines else "")
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
        requirements = building / "requirements.txt"
        requirements.write_text("\n".join(chosen.requirements) + "\n")
        deps = ["--no-deps"] if chosen.exact else []
        hashed = bool(chosen.requirements) and all(" --hash=" in line for line in chosen.requirements)
        if hashed:
            deps.append("--require-hashes")     # every pin carries the lock's hashes: none may go unchecked
        uv = _uv()
        # The target's PyTorch index for the torch family, PyPI (or the user's index) for the rest, as the
        # nox sessions install; a hashed set installs from whichever index has each file.
        index = installer.index_args("uv" if uv is not None else "pip", installer.around(chosen.index), hashed)
        log(f"building {len(chosen.requirements)} pins for Python {chosen.python} into {final}")
        if uv is not None:
            _call([uv, "venv", "--quiet", "--relocatable", "--python", chosen.python, str(staged)],
                  f"no Python {chosen.python} here")
            _call([uv, "pip", "install", "--quiet", "--python", str(staged / inner), *index, *deps,
                   "-r", str(requirements)], "cannot install the recorded versions")
        else:
            interpreter = shutil.which(f"python{chosen.python}")
            if interpreter is None:
                raise ReplayError(f"no Python {chosen.python} here (and no uv to provide one)")
            _call([interpreter, "-m", "venv", str(staged)], f"cannot make a Python {chosen.python} venv")
            _call([str(staged / inner), "-m", "pip", "install", "--quiet", *index, *deps,
                   "-r", str(requirements)], "cannot install the recorded versions")
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


@dataclass
class Outcome:
    record: Path
    verdict: str                  # reproduced | not reproduced | both diverged
    reproduced: bool
    first_divergence: str | None
    differences: list[str]        # the environment diff: packages, hardware, settings
    notes: list[str]


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
               "KITBENCH_LOCK_WHY": f"replay of {chosen.source} (plan {chosen.key})"}
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
    from kitbench.rebuild import containers

    assert chosen.target is not None and chosen.image is not None
    _files.check_target(out)            # refused now, not after minutes of building
    target = targets.get(chosen.target)
    found = containers.existing(chosen.image_id, chosen.image, target) if chosen.image_id else None
    if found is not None:
        log(f"reusing the recorded image {found.tag} ({found.image_id[:19]})")
        result = found
    else:
        log(f"the recorded image {chosen.image} ({str(chosen.image_id)[:19]}) is not here: building {target.name}'s")
        result = containers.build(target, log)
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
    """verify's verdict, the only one: a rerun that failed before its MNIST runs, or a pair verify
    cannot compare, is "cannot rebuild" (exit 2), never a verdict on numbers nobody compared."""
    from kitbench.errors import UsageError
    from kitbench.reading.envdiff import diff
    from kitbench.reading.verify import verify

    old = chosen.record
    if new["status"] == "failed" and not new["checks"].get("mnist", {}).get("runs"):
        raise ReplayError(f"cannot rebuild the run: the replayed run failed before its MNIST runs: "
                          f"{str(new.get('error') or 'no reason recorded')[:300]} ({out})",
                          hint="the rebuilt environment is cached; nothing was compared")
    # This kitbench runs from its source (no metadata in the venv): said in the notes, not as a package gone.
    differences = [line for line in diff(old["environment"], new["environment"])
                   if not line.startswith("package kitbench:")]
    try:
        verdict = verify(old, new)
    except UsageError as refused:
        raise ReplayError(f"the replayed run cannot be compared with the record: {refused.message} ({out})",
                          hint=refused.hint) from None
    return Outcome(out, verdict.verdict, verdict.reproduced, verdict.first_divergence, differences, chosen.notes)


def out_path(given: str | None, source: Path) -> Path:
    """Where the replayed record goes: ``given`` as a file, or inside it when it names a directory."""
    default = default_out(source)
    return _files.destination(given, default.name, ReplayError) if given is not None else default


def replay(source: Path, given: str | None, machine: Probe, log: Log) -> Outcome:
    """``given`` is --out as typed: a trailing separator is kept to mean a directory."""
    chosen = plan(source, machine)
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
