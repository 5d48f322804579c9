"""The fleet: install advice and the suite on every node of a Slurm cluster, by Slurm itself.

One job array, one task per node (or per distinct GRES or feature set). The
array is submitted held, each task is pinned to its node (``scontrol update
JobId=J_i NodeList=...``), then released: Slurm runs and schedules everything,
kitbench only renders the job script, watches the tasks and gathers what they
wrote to ``results/fleet/<jobid>/<node>.*`` on shared storage.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from kitbench import __version__, _files
from kitbench._numbers import is_whole
from kitbench.errors import Interrupted, KitbenchError, SlurmError, Terminated, UsageError
from kitbench.fleet import slurm
from kitbench.records import record as records
from kitbench.records.types import RunRecord

PER = ("node", "gres", "feature")
_TAIL = 8
_OK_VERDICTS = ("reproduced", "reference", "n/a: no MNIST run to compare")


@dataclass(frozen=True)
class SlurmOptions:
    """Slurm's own options, passed through as ``#SBATCH`` lines of the job script."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gres: str | None = None
    constraint: str | None = None
    qos: str | None = None
    extra: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        named = [(f"--{key}", value) for key, value in (
            ("partition", self.partition), ("account", self.account), ("time", self.time), ("gres", self.gres),
            ("constraint", self.constraint), ("qos", self.qos)) if value is not None]
        out = []
        for flag, value in named:
            _check_word(flag, value)
            if flag == "--time":
                _check_time(value)
            out.append(f"#SBATCH {flag}={value}")
        for extra in self.extra:
            _check_word("--sbatch-arg", extra)
            if not extra.startswith("-"):
                raise UsageError(f"--sbatch-arg {extra!r} is not an sbatch option", hint="e.g. --sbatch-arg=--mem=4G")
            out.append(f"#SBATCH {extra}")
        return out

    def srun_args(self) -> list[str]:
        """The same choices for a single ``srun`` step (an environment's build): where and on whose account,
        not what the suite's tasks ask for (GPUs, extra sbatch options)."""
        return [f"--{key}={value}" for key, value in (
            ("partition", self.partition), ("account", self.account), ("time", self.time), ("qos", self.qos))
            if value is not None]


def _check_word(flag: str, value: str) -> None:
    if not value or any(c in value for c in "\n\r\0") or len(value) > 256:
        raise UsageError(f"{flag} {value[:40]!r} cannot be an sbatch option value",
                         hint="one line, no control characters, at most 256 characters")


# sbatch's --time formats (its man page): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds; and no limit at all. sbatch would refuse any other
# only after Slurm was asked for nodes, and a job never submitted is the cheaper place to say so.
_TIME = re.compile(r"[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|unlimited|infinite", re.IGNORECASE)


def _check_time(value: str) -> None:
    if not _TIME.fullmatch(value):
        raise UsageError(f"--time {value[:40]!r} is not a Slurm time limit",
                         hint="minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, "
                              "days-hours:minutes:seconds or UNLIMITED, e.g. --time 30 or --time 1-12:00:00")


@dataclass(frozen=True)
class Plan:
    action: str                         # probe | run
    per: str
    nodes: tuple[str, ...]              # task i runs on nodes[i]
    script: str
    results: Path                       # results/fleet (shared storage)
    target: str | None = None
    span: bool = False                  # one job across the nodes (DDP), not an array

    def summary(self) -> dict[str, Any]:
        """What gather needs to read the job back: saved beside its results, shown with them."""
        return {"action": self.action, "per": self.per, "target": self.target, "nodes": list(self.nodes),
                "span": self.span}


@dataclass
class TaskResult:
    index: int
    node: str
    state: str                          # Slurm's: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    exit_code: int | None
    reason: str | None = None
    record: RunRecord | None = None     # fleet run
    record_path: Path | None = None
    probe: dict[str, Any] | None = None     # fleet probe
    install: dict[str, Any] | None = None
    error: str | None = None            # why the task's output is missing or unreadable
    stderr_tail: list[str] = field(default_factory=list)
    verdict: str | None = None          # --verify: reference | reproduced | not reproduced: ... | ...

    @property
    def ok(self) -> bool:
        if self.state != "COMPLETED" or self.exit_code not in (0, None) or self.error:
            return False
        if self.record is not None and self.record["status"] != "ok":
            return False
        return self.verdict is None or self.verdict in _OK_VERDICTS


def choose(nodes: Sequence[slurm.Node], per: str, constraint: str | None = None) -> list[slurm.Node]:
    """The usable nodes that stand for the cluster: each, or one per distinct GRES or feature set."""
    if per not in PER:
        raise UsageError(f"unknown --per {per!r}", hint=f"choose one of: {', '.join(PER)}")
    usable = [n for n in nodes if n.usable]
    if constraint and re.fullmatch(r"[\w.-]+(&[\w.-]+)*", constraint):
        # A plain AND of features can be matched here; anything richer is Slurm's to resolve, and so is
        # a constraint no node meets: its refusal is the clearest answer.
        wanted = set(constraint.split("&"))
        usable = [n for n in usable if wanted <= set(n.features.split(","))] or usable
    if per == "node":
        return usable
    seen: dict[str, slurm.Node] = {}
    for node in usable:
        seen.setdefault(node.gres if per == "gres" else node.features, node)
    return list(seen.values())


def _template() -> str:
    return resources.files("kitbench.fleet").joinpath("templates/fleet-job.sh").read_text()


def render(action: str, per: str, nodes: Sequence[str], results: Path, command: str,
           options: SlurmOptions, environment: dict[str, str], span: bool = False) -> str:
    """The job script, from the one template; every value is quoted for the shell. An array
    (a task per node) unless ``span``: then one job over every node, one srun task per node."""
    if span:
        shape = f"one job over {len(nodes)} nodes, one srun task per node, joined by torchrun's c10d rendezvous"
        layout = (f"#SBATCH --nodes={len(nodes)}\n#SBATCH --nodelist={','.join(nodes)}\n"
                  "#SBATCH --ntasks-per-node=1")
        # The rendezvous lives on the first node, at the address Slurm knows it by; the port follows the job.
        prologue = ('head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
                    'head_addr=$(scontrol show node "$head" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')\n'
                    'port=$((29500 + SLURM_JOB_ID % 1000))')
    else:
        shape = (f"one Slurm array task per {per} ({len(nodes)} tasks); kitbench pins\n# task i to node i of the "
                 "list below after submitting the array held, then releases it")
        layout = f"#SBATCH --array=0-{len(nodes) - 1}\n#SBATCH --ntasks=1"
        prologue = ""
    values = {
        "action": action, "shape": shape, "layout": layout, "prologue": prologue,
        "log_name": "%j_0" if span else "%A_%a",
        "plan": " ".join(f"{i}={n}" for i, n in enumerate(nodes)), "version": __version__,
        "logs": str(results / "logs"), "results": shlex.quote(str(results)),
        "sbatch_lines": "\n".join(options.lines()),
        "environment": "\n".join(f"export {k}={shlex.quote(v)}" for k, v in environment.items()),
        "command": command,
    }
    if any(c.isspace() for c in str(results)):
        raise UsageError(f"the results root {results} has a space in it, which #SBATCH --output cannot carry",
                         hint="set KITBENCH_RESULTS to a path without spaces")
    return re.sub(r"{{(\w+)}}", lambda m: values[m.group(1)], _template())


def _python(python: Path) -> str:
    return shlex.quote(str(python))


def plan_probe(nodes: Sequence[str], per: str, options: SlurmOptions, pythons: dict[str, Path],
               install_args: Sequence[str] = ()) -> Plan:
    results = fleet_root()
    dispatch = arch_dispatch({arch: str(p) for arch, p in pythons.items()}) if len(pythons) > 1 else ""
    py = '"$py"' if dispatch else _python(next(iter(pythons.values())))
    extra = " ".join(shlex.quote(a) for a in install_args)
    command = (f'{dispatch}{py} -m kitbench probe --json > "$out/$node.probe.json" && '
               f'{py} -m kitbench install-cmd --json {extra} > "$out/$node.install.json"').replace("  ", " ")
    return Plan("probe", per, tuple(nodes), render("probe", per, nodes, results, command, options, {}), results)


def spans_nodes(run_args: Sequence[str]) -> bool:
    """Whether the suite asked for is one run across nodes (the DDP check), not one per node."""
    return any(a == "ddp" and i and run_args[i - 1] == "--check" for i, a in enumerate(run_args)) or \
        "--check=ddp" in run_args


def plan_run(nodes: Sequence[str], per: str, options: SlurmOptions, target: str, manifest_sha256: str,
             command_prefix: Sequence[str], run_args: Sequence[str], environment: dict[str, str],
             record_dir: str = "$out", pythons: dict[str, str] | None = None) -> Plan:
    """``command_prefix`` runs Python in the target's environment: a venv's python, or
    ``srun --container...`` and the image's; ``record_dir`` is where the shared results
    folder of this job is seen from there. With ``--check ddp`` the job spans the nodes:
    ``srun`` starts one kitbench per node and torchrun's rendezvous joins them."""
    results = fleet_root()
    span = spans_nodes(run_args) and len(nodes) > 1
    args = " ".join(shlex.quote(a) for a in run_args)
    # Two architectures: each node picks the environment built for its own (``pythons``, by uname -m).
    dispatch = arch_dispatch(pythons) if pythons and len(pythons) > 1 else ""
    prefix = '"$py"' if dispatch else " ".join(shlex.quote(p) for p in command_prefix)
    if span:
        # Each node's task writes its own record and exit status, named by the node it runs on.
        inner = (f'{dispatch}{prefix} -m kitbench run --force --out "$0/$SLURMD_NODENAME.json" --nnodes '
                 f'"$SLURM_NNODES" --rdzv-endpoint "$1" {args}; code=$?; echo "$code" > "$2/$SLURMD_NODENAME.exit"; '
                 'exit "$code"')
        command = (f'srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(inner)} '
                   f'"{record_dir}" "$head_addr:$port" "$out"')
    else:
        # --force: a task Slurm requeues replaces its own earlier record, nothing else.
        command = f'{dispatch}{prefix} -m kitbench run --force --out "{record_dir}/$node.json" {args}'.rstrip()
    env = {"KITBENCH_TARGET": target, "KITBENCH_MANIFEST_SHA256": manifest_sha256, **environment}
    script = render("run", per, nodes, results, command, options, env, span=span)
    return Plan("run", per, tuple(nodes), script, results, target, span)


def fleet_root() -> Path:
    return (records.results_root() / "fleet").resolve()


def submit(plan: Plan) -> str:
    """Write the job script beside the logs, submit it held, pin each task, release: the job id."""
    logs = plan.results / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        script = logs / f"{stamp}-{plan.action}.sh"
    except OSError as exc:
        raise KitbenchError(f"cannot write the job script under {logs}: {exc.strerror or exc}",
                            hint="KITBENCH_RESULTS must be a writable directory on storage every node shares"
                            ) from None
    _files.write(script, plan.script)
    job = slurm.submit_held(str(script))
    try:
        for index, node in enumerate(() if plan.span else plan.nodes):
            slurm.pin(job, index, node)
        _write_plan(job, plan, script)
        slurm.release(job)
    except BaseException:
        _cancel_quietly(job)
        raise
    return job


def _write_plan(job: str, plan: Plan, script: Path) -> None:
    folder = plan.results / job
    folder.mkdir(parents=True, exist_ok=True)
    _files.write(folder / "fleet.json", json.dumps(
        {"job": job, **plan.summary(), "script": str(script), "submitted_at": records.utc_now()}, indent=2) + "\n")


def _cancel_quietly(job: str) -> None:
    with contextlib.suppress(SlurmError):
        slurm.cancel(job)


WAIT_GRACE_S = 600.0       # beyond the job's time limit: the queue, and the last files reaching shared storage
POLL_MAX_S = 30.0


def wait(job: str, count: int, on_change: Callable[[slurm.TaskState], None], poll_s: float = 1.0,
         clock: Callable[[], float] = time.monotonic, timeout_s: float | None = None,
         sleep: Callable[[float], None] = time.sleep) -> list[slurm.TaskState]:
    """Poll the array until every task has ended, reporting each change of state.

    Polls back off from ``poll_s`` to ``POLL_MAX_S`` while nothing changes. The wait is
    bounded by ``timeout_s``, else by the job's own time limit plus ``WAIT_GRACE_S``; past
    it the job is left running and ``SlurmError`` says how to gather it later. Ctrl-C or
    SIGTERM cancels the array (scancel) and raises ``Interrupted``; the records that
    finished stay where they are."""
    seen: dict[int, str] = {}
    started = clock()
    delay = poll_s
    try:
        while True:
            states = slurm.tasks(job)
            changed = False
            for task in states:
                if seen.get(task.index) != task.state:
                    seen[task.index] = task.state
                    changed = True
                    on_change(task)
            if len(states) >= count and all(t.done for t in states):
                return states
            if not states and seen:
                return states       # forgotten by the controller, no accounting: the files say the rest
            limit = timeout_s
            if limit is None:
                limit = next((t.time_limit_s + WAIT_GRACE_S for t in states if t.time_limit_s is not None), None)
            waited = clock() - started
            if limit is not None and waited >= limit:
                raise SlurmError(f"job {job} has not finished after {waited:.0f} s"
                                 f"{' (--timeout)' if timeout_s is not None else ' (its time limit and a margin)'}; "
                                 "it is left running", hint=f"kitbench fleet gather {job} once it ends; scancel {job} "
                                 "stops it", command="fleet run")
            delay = poll_s if changed else min(delay * 2, POLL_MAX_S)
            sleep(delay if limit is None else max(0.0, min(delay, limit - waited)))
    except KeyboardInterrupt as stop:
        _cancel_quietly(job)
        code = Terminated.exit_code if isinstance(stop, Terminated) else 130
        raise Interrupted(f"interrupted: job {job} cancelled (scancel); finished records are kept",
                          hint=f"kitbench fleet gather {job} shows what finished", exit_code=code) from None


_ARCH_NAMES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
# ELF e_machine values of the architectures PyTorch publishes wheels for.
_ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64", 0x15: "ppc64le", 0x16: "s390x"}


def arch_name(arch: str) -> str:
    """One name per architecture: Docker's amd64/arm64 are the kernel's x86_64/aarch64."""
    return _ARCH_NAMES.get(arch.lower(), arch.lower())


def executable_arch(path: Path) -> str | None:
    """The architecture an ELF executable (a venv's python) was built for; None if not ELF."""
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
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
        raise UsageError(f"{what} is built for {arch_name(shipped)}, but these nodes are not: {named}",
                         hint="an image runs on one architecture: leave them out (--partition, --constraint), or "
                              "run a venv target (cpu, rocm, xpu), whose environment kitbench builds on each")


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
            raise UsageError(f"{flag} is given twice without an architecture",
                             hint=f"one plain {flag} PATH, and {flag} ARCH=PATH for each other architecture")
    return plain, named


def arch_dispatch(pythons: dict[str, str]) -> str:
    """Shell that sets ``$py`` to this node's environment by ``uname -m``, or ends the task in words:
    one job for a cluster of two architectures, each node running the environment built for it."""
    cases = " ".join(f"{arch}) py={shlex.quote(python)};;" for arch, python in sorted(pythons.items()))
    return (f'case "$(uname -m)" in {cases} *) echo "kitbench: no environment built for $(uname -m) '
            f'(built: {", ".join(sorted(pythons))})" >&2; exit 3;; esac; ')


def load_plan(job: str) -> dict[str, Any]:
    if not is_whole(job):
        raise UsageError(f"{job[:40]!r} is not a Slurm job id", hint="e.g. kitbench fleet gather 1234")
    path = fleet_root() / job / "fleet.json"
    try:
        plan: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"no fleet job {job} under {fleet_root()}",
                         hint="run gather with the KITBENCH_RESULTS the job was submitted with") from None
    except (OSError, ValueError) as exc:
        raise KitbenchError(f"{path} is unreadable: {exc}") from None
    return plan


def gather(job: str, states: Sequence[slurm.TaskState] | None = None, verify: bool = False,
           reference: str | None = None) -> tuple[dict[str, Any], list[TaskResult]]:
    """Every task of ``job`` as a row: Slurm's state and exit code, what the task wrote, the
    tail of its stderr where it failed; with ``verify``, each record against the reference's."""
    plan = load_plan(job)
    known = {t.index: t for t in (states if states is not None else slurm.tasks(job))}
    folder = fleet_root() / job
    rows = []
    for index, node in enumerate(plan["nodes"]):
        task = known.get(0 if plan.get("span") else index)
        exit_file = folder / f"{node}.exit"
        code = task.exit_code if task is not None and not plan.get("span") else None
        if code is None and exit_file.is_file():
            text = exit_file.read_text().strip()
            code = int(text) if is_whole(text) else None
        state = task.state if task is not None else ("COMPLETED" if code == 0 else "FAILED" if code is not None
                                                     else "UNKNOWN")
        row = TaskResult(index, node, state, code, task.reason if task else None)
        if plan["action"] == "probe":
            row.probe, row.error = _json_file(folder / f"{node}.probe.json")
            row.install, install_error = _json_file(folder / f"{node}.install.json")
            row.error = row.error or install_error
        else:
            row.record_path = folder / f"{node}.json"
            try:
                row.record = records.read(row.record_path)
            except KitbenchError as error:
                row.error = error.message
        if not (state == "COMPLETED" and code == 0) or row.error:
            row.stderr_tail = _tail(fleet_root() / "logs" / f"{job}_{0 if plan.get('span') else index}.err")
        rows.append(row)
    if verify and plan["action"] == "run":
        _verify(rows, reference)
    return plan, rows


def write_report(job: str, rows: Sequence[TaskResult]) -> Path | None:
    """The job's report, ``report.html`` beside its records, when any task wrote one
    (unreadable ones are listed on the page with why)."""
    from kitbench.reading import report

    written = [str(r.record_path) for r in rows if r.record_path is not None and r.record_path.is_file()]
    if not any(r.record is not None for r in rows):
        return None
    out = fleet_root() / job / "report.html"
    report.write(out, report.build(written).text)
    return out


def _json_file(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, f"{path.name} was not written"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror}"
    try:
        data = json.loads(text)
    except ValueError:
        return None, f"{path.name} is not JSON"
    return (data, None) if isinstance(data, dict) else (None, f"{path.name} is not a JSON object")


def _tail(path: Path) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line[:300] for line in lines if line.strip()][-_TAIL:]


def _verify(rows: list[TaskResult], reference: str | None) -> None:
    """Each node's record against the reference node's, with ``kitbench verify``'s rules."""
    from kitbench.reading.verify import verify

    candidates = [r for r in rows if r.record is not None]
    ref = next((r for r in candidates if r.node == reference), None) if reference else \
        next((r for r in candidates if r.record and r.record["status"] == "ok"), None)
    if reference and ref is None:
        raise UsageError(f"--reference {reference!r} has no record in this job",
                         hint=f"nodes with records: {', '.join(r.node for r in candidates) or 'none'}")
    for row in rows:
        if row.record is None or ref is None or ref.record is None:
            row.verdict = "no record" if row.record is None else "no reference"
        elif row is ref:
            row.verdict = "reference"
        else:
            if not (ref.record["checks"].get("mnist", {}).get("runs") and
                    row.record["checks"].get("mnist", {}).get("runs")):
                row.verdict = "n/a: no MNIST run to compare"
                continue
            try:
                verdict = verify(ref.record, row.record)
            except KitbenchError as error:
                row.verdict = f"cannot compare: {error.message}"
                continue
            row.verdict = verdict.verdict if verdict.reproduced else f"{verdict.verdict}: {verdict.first_divergence}"


def majority_notes(rows: Sequence[TaskResult]) -> list[str]:
    """What sets a node apart from most of the fleet: an older driver, a GPU no build of the
    release fits, a different build than most nodes take."""
    probed = [r for r in rows if r.probe is not None and r.install is not None]
    notes: list[str] = []
    drivers = Counter(r.probe.get("driver") for r in probed if r.probe and r.probe.get("driver"))
    computes = Counter(r.install.get("compute") for r in probed if r.install)
    common_driver = drivers.most_common(1)[0][0] if drivers else None
    common_compute = computes.most_common(1)[0][0] if computes else None
    for row in probed:
        assert row.probe is not None and row.install is not None
        driver, compute = row.probe.get("driver"), row.install.get("compute")
        if driver and common_driver and driver != common_driver and _older(driver, common_driver):
            notes.append(f"{row.node}: driver {driver} is older than most nodes' {common_driver}")
        if row.probe.get("gpus") and compute == "cpu":
            why = (row.install.get("reasons") or ["no build fits"])[-1]
            notes.append(f"{row.node}: has GPUs, but no build of torch {row.install.get('release')} runs on them "
                         f"({why})")
        elif common_compute and compute != common_compute and len(probed) > 1:
            notes.append(f"{row.node}: needs {compute} where most nodes take {common_compute}")
    return notes


def _older(a: str, b: str) -> bool:
    from kitbench.machine.versions import parse_driver

    try:
        return parse_driver(a) < parse_driver(b)
    except KitbenchError:
        return False


def _runnable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:         # ENAMETOOLONG and the like: no Python there either
        return False


def venv_folder(target: str, venv: Path | None) -> Path:
    """Where a venv target's environment is: ``venv`` as given, which must hold a Python, else the
    checkout's ``.nox/<target>``. Asks neither Slurm nor nox: a bad ``--venv`` is said before either."""
    from kitbench.records import manifest

    if venv is not None:
        if not _runnable(venv / "bin" / "python"):
            raise UsageError(f"--venv {venv}: no Python there ({venv / 'bin' / 'python'} is not an executable file)",
                             hint="--venv names a virtual environment with torch and kitbench, on storage every "
                                  f"node shares; or leave it out to use the checkout's .nox/{target}")
        return venv
    checkout = manifest.checkout_root()
    if checkout is None:
        raise UsageError(f"kitbench runs from an installed wheel: say where {target}'s environment is",
                         hint="--venv PATH (a venv with torch and kitbench, on storage every node shares)")
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
        raise UsageError(f"--python {python}: no such executable" + (f" ({found})" if found != python else ""),
                         hint="give a Python interpreter (or a virtual environment's folder) on storage every node "
                              "shares; without --python the one running kitbench is used")
    return found.absolute()


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


def venv_pythons(target: str, venvs: Sequence[str], arches: dict[str, str | None], options: SlurmOptions,
                 log: Callable[[str], None], build: bool = True) -> dict[str, Path]:
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
        raise UsageError(f"{flag} {arch}={path}: no {arch} Python there" + (f" ({python} is {shipped})" if shipped
                                                                            else ""),
                         hint=f"name a Python (or virtual environment) built on a {arch} node, on shared storage")
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
            raise UsageError(f"the Python {local} is built for {local_arch}, but these nodes are not: "
                             f"{', '.join(nodes)} {arch}",
                             hint=f"--python {arch}=PATH: a Python with kitbench built on a {arch} node, on storage "
                                  "every node shares (the probe needs no torch); or leave them out (--partition)")
        found[arch] = python
    return found


def _foreign_python(target: str, arch: str, node: str, options: SlurmOptions, log: Callable[[str], None],
                    build: bool) -> Path:
    from kitbench.records import manifest

    checkout = manifest.checkout_root()
    if checkout is None:
        raise UsageError(f"the nodes include {arch} ones ({node}, ...) and kitbench runs from an installed wheel",
                         hint=f"--venv {arch}=PATH: a {arch} environment with torch and kitbench on shared storage")
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
        slurm.run(["srun", f"--nodelist={node}", "--nodes=1", "--ntasks=1", *options.srun_args(), "python3", "-m",
                   "nox", "--envdir", str(envdir), "-s", target, "--install-only", "-f", str(checkout / "noxfile.py")],
                  timeout=_BUILD_TIMEOUT_S)
    except SlurmError as failed:
        raise KitbenchError(f"building {target}'s {arch} environment on {node} failed: {failed.message}",
                            hint=f"the {arch} nodes need python3 with nox (pipx install nox); or build it there "
                                 f"yourself and pass --venv {arch}=PATH") from None
    if executable_arch(python) != arch:
        raise KitbenchError(f"the environment built on {node} is not {arch}: {python} is "
                            f"{executable_arch(python) or 'missing'}",
                            hint=f"pass --venv {arch}=PATH, an environment built on a {arch} node")
    return python.absolute()


_BUILD_TIMEOUT_S = 3600.0       # torch and its CUDA wheels, on a node's first build


def _build_with_nox(checkout: Path, target: str, log: Callable[[str], None]) -> None:
    import subprocess

    command = [sys.executable, "-m", "nox", "-s", target, "--install-only", "-f", str(checkout / "noxfile.py")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log(line.rstrip())
    if proc.returncode != 0:
        raise KitbenchError(f"nox -s {target} --install-only failed (exit {proc.returncode})",
                            hint="see its output above; python3 -m pip install nox if nox is missing")
