"""kitbench.fleet.results: a job's files are read as strangers' files are, through kitbench._files: a FIFO, a
device or a file without end is one error line at once, never a hang, a MemoryError or a traceback."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kitbench._cli import main

PLAN = {"job": "7", "action": "run", "per": "node", "target": "cpu", "nodes": ["n1", "n2"], "span": False}


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # no controller: the job's files say the rest
    folder = tmp_path / "fleet" / "7"
    folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize("plan", ["fifo", "/dev/zero", "big", "not a plan", "a node is a path"])
def test_a_plan_that_is_no_plan_is_one_error_line_at_once(
    plan: str, job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = job / "fleet.json"
    if plan == "fifo":
        os.mkfifo(path)  # nothing ever writes it: a reader that opens it blocking waits forever
    elif plan == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif plan == "big":
        with path.open("wb") as handle:
            handle.truncate(64 * 2**20)  # sparse: no disk used
    elif plan == "not a plan":
        path.write_text("[1, 2, 3]")
    else:
        path.write_text(json.dumps({**PLAN, "nodes": ["../../etc/passwd"]}))
    started = time.monotonic()
    assert main(["fleet", "gather", "7"]) == 1
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "Traceback" not in err and str(path) in err


def test_a_nodes_files_that_are_no_files_are_said_per_node(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (job / "fleet.json").write_text(json.dumps({**PLAN, "action": "probe"}))
    os.mkfifo(job / "n1.probe.json")
    (job / "n1.exit").symlink_to("/dev/zero")
    os.mkfifo(job / "n2.exit")
    (job / "n2.probe.json").write_text("{}")
    (job / "n2.install.json").write_text("{}")
    logs = job.parent / "logs"
    logs.mkdir()
    os.mkfifo(logs / "7_0.err")
    started = time.monotonic()
    assert main(["fleet", "gather", "7", "--json"]) == 1
    assert time.monotonic() - started < 5
    out, err = capsys.readouterr()
    tasks = json.loads(out)["tasks"]
    assert "Traceback" not in err and [t["exit_code"] for t in tasks] == [None, None]
    assert "n1.probe.json is not a regular file" in tasks[0]["error"] and tasks[1]["error"] is None
