"""Watching a job: the poll backs off, and the wait is bounded."""

from __future__ import annotations

import pytest

from kitbench.errors import SlurmError
from kitbench.fleet import runner, slurm


def _states(*states: str, limit: float | None = None) -> list[slurm.TaskState]:
    return [
        slurm.TaskState(i, state, 0 if state == "COMPLETED" else None, None, None, None, limit)
        for i, state in enumerate(states)
    ]


def test_wait_backs_off_and_resets_on_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    polls = iter([_states("PENDING")] * 8 + [_states("RUNNING")] * 3 + [_states("COMPLETED")])
    monkeypatch.setattr(slurm, "tasks", lambda job: next(polls))
    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    seen: list[str] = []
    final = runner.wait("5", 1, lambda t: seen.append(t.state), clock=lambda: now[0], sleep=sleep)
    assert [t.state for t in final] == ["COMPLETED"] and seen == ["PENDING", "RUNNING", "COMPLETED"]
    assert slept == [1, 2, 4, 8, 16, 30, 30, 30, 1, 2, 4]


def test_wait_is_bounded_by_the_job_time_limit_or_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "tasks", lambda job: _states("RUNNING", limit=60.0))
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(SlurmError) as caught:
        runner.wait("5", 1, lambda t: None, clock=lambda: now[0], sleep=sleep)
    assert now[0] == 60 + runner.WAIT_GRACE_S
    assert caught.value.message == (
        "job 5 has not finished after 660 s (its time limit and a margin); it is left running"
    )
    assert caught.value.hint == "kitbench fleet gather 5 once it ends; scancel 5 stops it"
    now[0] = 0.0
    with pytest.raises(SlurmError, match=r"after 45 s \(--timeout\)"):
        runner.wait("5", 1, lambda t: None, clock=lambda: now[0], sleep=sleep, timeout_s=45)


def test_a_task_held_after_a_failed_launch_ends_the_wait_once_the_rest_have_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """slurmd that cannot launch a step (here: its socket's path past 108 bytes) has Slurm requeue the task held;
    with no time limit the wait was endless. Recorded from this repository's 3-node cluster."""
    line = (
        "JobId=4 ArrayJobId=4 ArrayTaskId={i} JobName=kitbench-run JobState=PENDING "
        "Reason=launch_failed_requeued_held Dependency=(null) Requeue=1 Restarts=1 ExitCode=0:0 TimeLimit=UNLIMITED "
        "NodeList=(null) ReqNodeList=n{n}"
    )
    held = slurm.parse_scontrol("\n".join(line.format(i=i, n=i + 1) for i in (1, 2)))
    assert [(t.state, t.reason, t.time_limit_s) for t in held] == [("PENDING", "launch_failed_requeued_held", None)] * 2
    running = slurm.TaskState(0, "RUNNING", None, None, "n1", None)
    ended = slurm.TaskState(0, "COMPLETED", 0, None, "n1", None)
    polls = iter([[running, *held], [running, *held], [ended, *held]])
    monkeypatch.setattr(slurm, "tasks", lambda job: next(polls))
    with pytest.raises(SlurmError) as caught:
        runner.wait("4", 3, lambda t: None, sleep=lambda s: None)
    assert caught.value.message == (
        "job 4 cannot end: Slurm held tasks 1, 2 after their launch failed (launch_failed_requeued_held); "
        "it is left held"
    )
    assert caught.value.hint == (
        "slurmd's log on the node says why; once mended, scontrol release 4 and kitbench fleet gather 4 (or scancel 4)"
    )
    with pytest.raises(StopIteration):  # every poll was taken: it waited for task 0 to end
        next(polls)
