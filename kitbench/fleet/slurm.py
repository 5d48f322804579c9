"""Slurm, driven by its own commands (sbatch, scontrol, squeue, sacct, scancel, sinfo).

Argument lists only, never a shell. Every failure is a ``SlurmError`` with one
line: Slurm's own refusal, translated where it has a known cause. Accounting
(slurmdbd) is optional: without it task states come from the controller, which
keeps finished jobs for ``MinJobAge`` seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from kitbench import _proc
from kitbench._numbers import is_whole
from kitbench.errors import SlurmError

TERMINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
)
_TIMEOUT_S = 60


@dataclass(frozen=True)
class Node:
    name: str
    partitions: tuple[str, ...]
    gres: str  # "(null)" where none
    features: str  # "(null)" where none
    state: str  # idle, mixed, allocated, down, drained, ...

    @property
    def usable(self) -> bool:
        return not any(word in self.state for word in ("down", "drain", "fail", "unknown", "maint", "power"))


@dataclass(frozen=True)
class TaskState:
    index: int
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    exit_code: int | None  # the task's own exit status; None until it ends
    signal: int | None
    node: str | None
    reason: str | None  # why it is pending or ended (Slurm's Reason)
    time_limit_s: float | None = None  # the job's TimeLimit; None where unlimited or not told

    @property
    def done(self) -> bool:
        return self.state in TERMINAL


_KNOWN = (
    (
        re.compile(
            r"Could not establish a configuration source|Unable to contact slurm controller|"
            r"Connection refused|Socket timed out|Zero Bytes were transmitted",
            re.I,
        ),
        "cannot reach a Slurm controller",
        "check SLURM_CONF and that slurmctld is running (sinfo should answer)",
    ),
    (
        re.compile(r"invalid partition specified: (\S+)|Partition (\S+) not found|Invalid partition name", re.I),
        "Slurm refused the partition{0}",
        "list the partitions with: sinfo --summarize",
    ),
    (
        re.compile(r"Invalid feature specification", re.I),
        "Slurm refused the constraint: no node has those features",
        "list each node's features with: sinfo --Node --format='%N %f'",
    ),
    (
        re.compile(r"Invalid generic resource \(gres\) specification", re.I),
        "Slurm refused the --gres request",
        "list each node's GRES with: sinfo --Node --format='%N %G'",
    ),
    (
        re.compile(r"Invalid account or account/partition combination", re.I),
        "Slurm refused the account",
        "check --account against: sacctmgr show assoc user=$USER",
    ),
    (re.compile(r"Invalid qos specification", re.I), "Slurm refused the QOS", "check --qos with: sacctmgr show qos"),
    (
        re.compile(r"Requested time limit is invalid|Invalid time limit", re.I),
        "Slurm refused the time limit",
        "use minutes or [D-]HH:MM:SS, within the partition's MaxTime",
    ),
    (
        re.compile(r"Requested node configuration is not available", re.I),
        "no node of this partition can satisfy the request",
        "compare --gres and --constraint with: sinfo --Node --long",
    ),
)


def _translate(command: str, stderr: str) -> SlurmError:
    text = stderr.strip()
    for pattern, message, hint in _KNOWN:
        match = pattern.search(text)
        if match:
            named = next((g for g in match.groups() if g), None)
            detail = f" {named!r}" if named else ""
            return SlurmError(message.format(detail), hint=hint, command=command, stderr=text)
    lines = [line.strip()[:300] for line in text.splitlines() if line.strip()] or ["no output"]
    # Only the first line is on the ERROR line and nothing of Slurm's was printed: the hint
    # carries the rest, never a pointer to output that is not there.
    hint = (
        "Slurm went on: " + " | ".join(lines[1:4])
        if len(lines) > 1
        else f"that is all {command} said; scontrol ping shows whether the controller answers"
    )
    return SlurmError(f"{command} failed: {lines[0]}", hint=hint, command=command, stderr=text)


def run(args: Sequence[str], timeout: float = _TIMEOUT_S) -> str:
    """Run one Slurm command; its stdout, or a translated SlurmError."""
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        # Slurm's commands would retry for a minute before saying so.
        raise SlurmError(
            f"SLURM_CONF={conf} does not exist",
            hint="point SLURM_CONF at the cluster's slurm.conf, or unset it to use the default",
            command=args[0],
        )
    if shutil.which(args[0]) is None:
        raise SlurmError(
            f"{args[0]} is not on PATH: this machine is not a Slurm submit host",
            hint="run kitbench fleet on a cluster's login node (where sbatch works)",
            command=args[0],
        )
    try:
        done = _proc.run(args, timeout)
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{args[0]} did not answer within {timeout:.0f} s", hint="is slurmctld overloaded or down?", command=args[0]
        ) from None
    except OSError as exc:
        raise SlurmError(f"cannot run {args[0]}: {exc.strerror or exc}", command=args[0]) from None
    if done.returncode != 0:
        raise _translate(args[0], done.stderr or done.stdout)
    return done.stdout


def nodes(partition: str | None = None) -> list[Node]:
    """Every node (of ``partition``), once, with its partitions, GRES, features and state."""
    args = ["sinfo", "--Node", "--noheader", "--format=%N|%P|%G|%f|%t"]
    if partition:
        args += ["--partition", partition]
    found: dict[str, Node] = {}
    for line in run(args).splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        name, part, gres, features, state = parts
        part = part.rstrip("*")
        old = found.get(name)
        found[name] = Node(name, (*(old.partitions if old else ()), part), gres, features, state)
    if partition and not found:
        run(["scontrol", "show", "partition", partition])  # Slurm's own refusal of an unknown partition
    return [found[n] for n in sorted(found, key=_natural)]


def _natural(name: str) -> list[int | str]:
    return [int(p) if is_whole(p) else p for p in re.split(r"([0-9]+)", name)]


def submit_held(script: str) -> str:
    """``sbatch --parsable --hold SCRIPT``: the job id (held so its tasks can be pinned first)."""
    out = run(["sbatch", "--parsable", "--hold", script]).strip()
    job = out.split(";")[0]
    if not is_whole(job):
        raise SlurmError(f"sbatch answered {out[:80]!r}, not a job id", command="sbatch")
    return job


def pin(job: str, index: int, node: str) -> None:
    """Pin one task of a held array to one node: the array stays one job, each task on its node."""
    run(["scontrol", "update", f"JobId={job}_{index}", f"NodeList={node}"])


def release(job: str) -> None:
    run(["scontrol", "release", job])


def cancel(job: str) -> None:
    run(["scancel", job])


_FIELD = re.compile(r"(?:^|\s)(ArrayTaskId|JobState|Reason|ExitCode|NodeList|TimeLimit)=(\S*)")


def parse_scontrol(text: str) -> list[TaskState]:
    """Tasks from ``scontrol show job --oneliner`` (one record per line)."""
    found = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobState" not in fields:
            continue
        # A job that is no array (one job over several nodes) is its own task 0. The still-pending
        # rest of an array shows as "0-2": each task is pinned, so none is left.
        fields.setdefault("ArrayTaskId", "0")
        if not is_whole(fields["ArrayTaskId"]):
            continue
        code, _, sig = fields.get("ExitCode", "0:0").partition(":")
        state = fields.get("JobState", "UNKNOWN")
        node = fields.get("NodeList")
        reason = fields.get("Reason")
        found.append(
            TaskState(
                int(fields["ArrayTaskId"]),
                state,
                int(code) if state in TERMINAL else None,
                int(sig) if is_whole(sig) and int(sig) else None,
                None if node in (None, "(null)", "") else node,
                None if reason in (None, "None") else reason,
                duration_s(fields.get("TimeLimit", "")),
            )
        )
    return sorted(found, key=lambda t: t.index)


_DURATION = re.compile(r"(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?")


def duration_s(text: str) -> float | None:
    """Slurm's time format (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds; None for
    UNLIMITED, INFINITE and anything else it is not."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return None
    days, first, second, third = (int(g) if g else None for g in match.groups())
    assert first is not None
    if days is not None:  # D-H[:M[:S]]
        return float(((days * 24 + first) * 60 + (second or 0)) * 60 + (third or 0))
    if third is not None:  # H:M:S
        return float((first * 60 + (second or 0)) * 60 + third)
    return float(first * 60 + (second or 0))  # M or M:S


def parse_node_arches(text: str) -> dict[str, str | None]:
    """Each node's architecture from ``scontrol show node --oneliner``; None where Slurm
    does not know it (a node whose slurmd never registered shows ``Arch=(null)``)."""
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(?:^|\s)(NodeName|Arch)=(\S*)", line))
        if "NodeName" in fields:
            arch = fields.get("Arch")
            found[fields["NodeName"]] = None if arch in (None, "", "(null)", "N/A") else arch
    return found


def node_arches(names: Sequence[str]) -> dict[str, str | None]:
    """The architecture of each named node, as its slurmd reported it."""
    return parse_node_arches(run(["scontrol", "show", "node", "--oneliner", ",".join(names)]))


def parse_sacct(text: str) -> list[TaskState]:
    """Tasks from ``sacct --json``, where accounting keeps them after the controller forgets."""
    found = []
    for job in json.loads(text).get("jobs", []):
        array = job.get("array", {})
        task = array.get("task_id")
        if not isinstance(task, int):
            continue
        state = job.get("state", {}).get("current", "UNKNOWN")
        exit_code = job.get("exit_code", {})
        found.append(
            TaskState(
                task,
                str(state),
                exit_code.get("return_code"),
                (exit_code.get("signal") or {}).get("signal_id"),
                job.get("nodes") or None,
                job.get("state", {}).get("reason"),
            )
        )
    return sorted(found, key=lambda t: t.index)


def tasks(job: str) -> list[TaskState]:
    """The state of every task of an array: from the controller while it remembers the job,
    else from accounting where it exists; empty when neither knows it."""
    try:
        return parse_scontrol(run(["scontrol", "show", "job", "--oneliner", job]))
    except SlurmError as error:
        if "Invalid job id" not in (error.stderr or ""):
            raise
    try:
        return parse_sacct(run(["sacct", "--json", "--jobs", job]))
    except SlurmError:
        return []  # accounting is optional; the tasks' own files say the rest
