"""What a fleet job's tasks wrote, gathered: one row per task (Slurm's state, the record or the
probe's answers, the tail of a failed task's stderr), verified against a reference node, and what
sets a node apart from most of the fleet.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kitbench import _files
from kitbench._numbers import is_whole
from kitbench.errors import KitbenchError, UsageError
from kitbench.fleet import slurm
from kitbench.fleet.jobscript import fleet_root
from kitbench.reading.verify import verify
from kitbench.records import record as records
from kitbench.records.types import RunRecord

_TAIL = 8
_TAIL_BYTES = 64 * 1024  # a log's last lines: enough for _TAIL of them, however long the log
_MAX_BYTES = 4 * 2**20  # a plan, a probe or an install JSON is a few kB; more is not a node's
_OK_VERDICTS = ("reproduced", "reference", "n/a: no MNIST run to compare")


@dataclass
class TaskResult:
    index: int
    node: str
    state: str  # Slurm's: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    exit_code: int | None
    reason: str | None = None
    record: RunRecord | None = None  # fleet run
    record_path: Path | None = None
    probe: dict[str, Any] | None = None  # fleet probe
    install: dict[str, Any] | None = None
    error: str | None = None  # why the task's output is missing or unreadable
    stderr_tail: list[str] = field(default_factory=list)
    verdict: str | None = None  # --verify: reference | reproduced | not reproduced: ... | ...

    @property
    def ok(self) -> bool:
        if self.state != "COMPLETED" or self.exit_code not in (0, None) or self.error:
            return False
        if self.record is not None and self.record["status"] != "ok":
            return False
        return self.verdict is None or self.verdict in _OK_VERDICTS


def load_plan(job: str) -> dict[str, Any]:
    if not is_whole(job):
        raise UsageError(f"{job[:40]!r} is not a Slurm job id", hint="e.g. kitbench fleet gather 1234")
    path = fleet_root() / job / "fleet.json"
    if not path.exists() and not path.is_symlink():
        raise UsageError(
            f"no fleet job {job} under {fleet_root()}",
            hint="run gather with the KITBENCH_RESULTS the job was submitted with",
        )
    try:
        plan = json.loads(_files.read_text(path, _MAX_BYTES, "fleet plan"))
    except ValueError as exc:
        raise KitbenchError(f"{path} is unreadable: {str(exc)[:200]}") from None
    if not (
        isinstance(plan, dict)
        and isinstance(plan.get("nodes"), list)
        and plan.get("action") in ("run", "probe")
        and all(isinstance(n, str) and n and "/" not in n and n not in (".", "..") for n in plan["nodes"])
    ):
        raise KitbenchError(f"{path} is not a fleet plan kitbench writes (a job, its action and its nodes)")
    return plan


def gather(
    job: str, states: Sequence[slurm.TaskState] | None = None, verify: bool = False, reference: str | None = None
) -> tuple[dict[str, Any], list[TaskResult]]:
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
            try:
                text = _files.read_part(exit_file, 32, "exit code").decode("ascii", "replace").strip()
            except KitbenchError:
                text = ""
            code = int(text) if is_whole(text) else None
        state = (
            task.state
            if task is not None
            else ("COMPLETED" if code == 0 else "FAILED" if code is not None else "UNKNOWN")
        )
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
    if not path.exists() and not path.is_symlink():
        return None, f"{path.name} was not written"
    try:
        text = _files.read_text(path, _MAX_BYTES, "node's JSON file")
    except KitbenchError as error:
        return None, error.message
    try:
        data = json.loads(text)
    except ValueError:
        return None, f"{path.name} is not JSON"
    return (data, None) if isinstance(data, dict) else (None, f"{path.name} is not a JSON object")


def _tail(path: Path) -> list[str]:
    try:
        lines = _files.read_part(path, _TAIL_BYTES, "log", end=True).decode("utf-8", "replace").splitlines()
    except KitbenchError:
        return []
    return [line[:300] for line in lines if line.strip()][-_TAIL:]


def _verify(rows: list[TaskResult], reference: str | None) -> None:
    """Each node's record against the reference node's, with ``kitbench verify``'s rules."""
    candidates = [r for r in rows if r.record is not None]
    ref = (
        next((r for r in candidates if r.node == reference), None)
        if reference
        else next((r for r in candidates if r.record and r.record["status"] == "ok"), None)
    )
    if reference and ref is None:
        raise UsageError(
            f"--reference {reference!r} has no record in this job",
            hint=f"nodes with records: {', '.join(r.node for r in candidates) or 'none'}",
        )
    for row in rows:
        if row.record is None or ref is None or ref.record is None:
            row.verdict = "no record" if row.record is None else "no reference"
        elif row is ref:
            row.verdict = "reference"
        else:
            if not (
                ref.record["checks"].get("mnist", {}).get("runs") and row.record["checks"].get("mnist", {}).get("runs")
            ):
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
            notes.append(
                f"{row.node}: has GPUs, but no build of torch {row.install.get('release')} runs on them ({why})"
            )
        elif common_compute and compute != common_compute and len(probed) > 1:
            notes.append(f"{row.node}: needs {compute} where most nodes take {common_compute}")
    return notes


def _older(a: str, b: str) -> bool:
    from kitbench.machine.versions import parse_driver

    try:
        return parse_driver(a) < parse_driver(b)
    except KitbenchError:
        return False
