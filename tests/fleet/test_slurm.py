"""Slurm's commands: what scontrol, sacct and sinfo say, parsed, and their refusals in words (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitbench.errors import SlurmError, UsageError
from kitbench.fleet import pythons as fleet_pythons
from kitbench.fleet import slurm


def test_scontrol_records_parse_into_tasks() -> None:
    text = (
        "JobId=7 ArrayJobId=5 ArrayTaskId=2 JobName=x JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 "
        "NodeList=n3 Command=/a b\n"
        "JobId=5 ArrayJobId=5 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=1:0 NodeList=n1 "
        "TimeLimit=01:00:00\n"
        "JobId=6 ArrayJobId=5 ArrayTaskId=1 JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)\n"
    )
    tasks = slurm.parse_scontrol(text)
    assert [(t.index, t.state, t.exit_code, t.node, t.reason) for t in tasks] == [
        (0, "COMPLETED", 1, "n1", None),
        (1, "PENDING", None, None, "Resources"),
        (2, "TIMEOUT", 0, "n3", "TimeLimit"),
    ]
    assert tasks[2].signal == 15 and tasks[2].done and not tasks[1].done
    assert (tasks[0].time_limit_s, tasks[1].time_limit_s) == (3600, None)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("5:30", 330),
        ("2:00:00", 7200),
        ("1-2", 93600),
        ("1-0:30", 88200),
        ("1-00:00:05", 86405),
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("", None),
    ],
)
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert slurm.duration_s(text) == seconds


def _node_text(resources: Path) -> str:
    return (resources / "slurm" / "scontrol-show-node-oneliner-22.05.8.txt").read_text()


def test_node_arches_from_scontrol_and_a_foreign_node_is_refused(resources: Path) -> None:
    text = _node_text(resources)
    assert slurm.parse_node_arches(text) == {"n1": "x86_64", "n2": "x86_64", "n3": "x86_64"}
    fleet_pythons.refuse_foreign(slurm.parse_node_arches(text), "amd64", "the image t")  # Docker's name for it
    # The same record as a Grace (aarch64) n3 and an unregistered n2 would report it.
    mixed = text.replace("NodeName=n3 Arch=x86_64", "NodeName=n3 Arch=aarch64").replace(
        "NodeName=n2 Arch=x86_64", "NodeName=n2 Arch=(null)"
    )
    arches = slurm.parse_node_arches(mixed)
    assert arches == {"n1": "x86_64", "n2": None, "n3": "aarch64"}
    with pytest.raises(UsageError) as caught:
        fleet_pythons.refuse_foreign(arches, "x86_64", "cpu's environment (/shared/.nox/cpu/bin/python)")
    assert caught.value.message == (
        "cpu's environment (/shared/.nox/cpu/bin/python) is built for x86_64, but these nodes are not: n3 aarch64"
    )
    assert caught.value.hint and "venv target" in caught.value.hint
    fleet_pythons.refuse_foreign(arches, None, "an image of unknown architecture")  # nothing to check against
    assert fleet_pythons.by_arch(arches) == {"x86_64": ["n1", "n2"], "aarch64": ["n3"]}
    assert fleet_pythons.describe_arches(arches) == "architectures: x86_64 (n1, n2); aarch64 (n3)"


def test_sacct_json_parses_into_tasks() -> None:
    text = json.dumps(
        {
            "jobs": [
                {
                    "array": {"task_id": 1},
                    "state": {"current": "NODE_FAIL", "reason": "None"},
                    "exit_code": {"return_code": 0, "signal": {"signal_id": 9}},
                    "nodes": "n2",
                }
            ]
        }
    )
    (task,) = slurm.parse_sacct(text)
    assert (task.index, task.state, task.node, task.signal) == (1, "NODE_FAIL", "n2", 9)


def test_slurm_refusals_are_translated() -> None:
    for stderr, words in (
        ("sbatch: error: Batch job submission failed: Invalid qos specification", "the QOS"),
        (
            "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
            "the account",
        ),
        ("sinfo: error: Unable to contact slurm controller (connect failure)", "cannot reach a Slurm controller"),
    ):
        error = slurm._translate("sbatch", stderr)
        assert isinstance(error, SlurmError) and words in error.message and error.hint
    # Unknown words: the first line is the message, the rest the hint; nothing was printed "above".
    error = slurm._translate("sbatch", "sbatch: error: something new\nsbatch: error: and why\n")
    assert (error.message, error.hint) == (
        "sbatch failed: sbatch: error: something new",
        "Slurm went on: sbatch: error: and why",
    )
    assert slurm._translate("squeue", "squeue: odd").hint == (
        "that is all squeue said; scontrol ping shows whether the controller answers"
    )
