"""The records a reading command is given: found in directories and globs, read, a run given twice refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kitbench.errors import RecordError
from kitbench.reading import inputs

KEPT = Path(__file__).resolve().parents[2] / "docs" / "records"


def test_nothing_readable_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no run records"):
        inputs.load([str(tmp_path / "empty")])
    bad = tmp_path / "v9.json"
    bad.write_text(json.dumps({"schema": "kitbench.run/9", "status": "ok"}))
    with pytest.raises(RecordError, match=r"has schema 'kitbench\.run/9'"):
        inputs.load([str(bad)])


def test_a_results_directory_skips_what_is_not_a_run_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    results = tmp_path / "results"
    (results / "cpu").mkdir(parents=True)
    kept = KEPT / "h100-fnn.json"
    shutil.copy(kept, results / "cpu" / "a.json")
    (results / "cpu" / "cut.json").write_text(kept.read_text()[:200])  # a record cut short: still a row
    fleet = results / "fleet" / "41"
    (fleet / "bundle" / "cuda126").mkdir(parents=True)
    for command, name in ((["probe", "--json"], "n1.probe.json"), (["install-cmd", "--json"], "n1.install.json")):
        assert main(command) == 0  # what a fleet probe job writes beside its plan, by the real commands
        (fleet / name).write_text(capsys.readouterr().out)
    (fleet / "fleet.json").write_text(json.dumps({"job": "41", "kind": "probe", "nodes": ["n1"]}))
    (fleet / "bundle" / "cuda126" / "config.json").write_text(json.dumps({"ociVersion": "1.0.2", "process": {}}))
    skipped: list[Path] = []
    loaded = inputs.load([str(results)], skipped)
    assert [(p.path.name, p.error is None) for p in loaded] == [("a.json", True), ("cut.json", False)]
    assert sorted(p.name for p in skipped) == ["config.json", "fleet.json", "n1.install.json", "n1.probe.json"]
    assert main(["compare", str(results), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert "a.json" in out and "probe" not in out and "unreadable" in out  # only the cut record
    assert err.startswith("note: skipped 4 *.json file(s) that are not run records")
    # A file named outright is taken as asked: a non-record there is an error, not a silent skip.
    with pytest.raises(RecordError, match="not a kitbench run record"):
        inputs.load([str(fleet / "fleet.json")])


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "copy", "same run id"])
def test_a_run_is_never_its_own_reproduction(how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """verify of a record against itself, however disguised, is a refusal (exit 2), never "reproduced";
    compare refuses to list one run twice."""
    from kitbench._cli import main

    one = tmp_path / "one.json"
    data = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / "cpu-bench-fnn.json").read_text())
    one.write_text(json.dumps({**data, "run_id": "a" * 32}))
    two = tmp_path / "two.json"
    if how == "same path":
        two = one
    elif how == "symlink":
        two.symlink_to(one)
    elif how == "hard link":
        os.link(one, two)
    elif how == "copy":
        two.write_bytes(one.read_bytes())
    else:
        two.write_text(json.dumps({**data, "run_id": "a" * 32, "started_at": "2026-11-26T00:00:00+00:00"}))
    for command in (
        ["verify", str(one), str(two)],
        ["verify", "--json", str(one), str(two)],
        ["compare", str(one), str(two)],
    ):
        assert main(command) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("ERROR: ") and "one run, not two" in err and "reproduced" not in err


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("cpu-bench-fnn.json", lambda data: data),  # kitbench.run/1: no run id
        ("h200-suite.json", lambda data: {k: v for k, v in data.items() if k != "run_id"}),  # /2, its id removed
    ],
)
def test_a_run_is_the_same_run_however_its_json_is_written(
    name: str, change: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sameness by content, not bytes: a re-indented copy with its keys reordered (and a /2 record's run id
    removed) is the run itself; exit 2, one line, never "reproduced"."""
    from kitbench._cli import main

    source = Path(__file__).resolve().parents[2] / "docs" / "records" / name
    data = json.loads(source.read_text())
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(change(data), indent=7, sort_keys=True))
    assert copy.read_bytes() != source.read_bytes()
    for command in (
        ["verify", str(source), str(copy)],
        ["verify", str(copy), str(source)],
        ["compare", str(source), str(copy)],
    ):
        assert main(command) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 2 and "reproduced" not in err
        assert "hold the same run (the same content however written, and at most one run id): one run, not two" in err
