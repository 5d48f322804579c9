"""Progress in logs: a line when a phase starts and one at least every 10 s while it runs."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import ClassVar

import pytest

from kitbench import _ui


def test_log_progress_prints_a_line_every_ten_seconds() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = _ui.LogProgress(clock=lambda: now[0], out=out)
    progress.start("fnn/tutorial on cpu: epoch 1/1", total=938)
    for _ in range(938):
        now[0] += 0.05  # a 47 s epoch, a step every 50 ms
        progress.advance()
    progress.done()
    lines = out.getvalue().splitlines()
    assert lines[0] == "... fnn/tutorial on cpu: epoch 1/1"
    assert lines[1] == "... fnn/tutorial on cpu: epoch 1/1: 200/938 after 10 s"
    assert len(lines) == 1 + 4  # 10, 20, 30 and 40 s
    assert all(line.startswith("... fnn/tutorial") for line in lines)


def test_without_a_terminal_progress_is_plain_lines() -> None:
    assert isinstance(_ui.progress(), _ui.LogProgress)  # pytest captures stderr: not a terminal


def test_tables_without_rich_are_aligned_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_ui, "_rich_console", lambda stderr=False: None)
    _ui.table("checks", ("check", "status"), [("availability", "ok"), ("mnist", "failed")])
    out = capsys.readouterr().out
    assert out.splitlines() == ["checks", "check         status", "availability  ok", "mnist         failed"]


def test_a_build_that_is_not_the_targets_is_said_in_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from kitbench.records import record as records

    path = Path(__file__).resolve().parent.parent / "docs" / "records" / "cpu-bench-fnn.json"
    record = records.read(path)
    _ui.run_summary(record, str(path))
    assert "build_matches_target" not in capsys.readouterr().out
    # A CUDA wheel where the cpu target asked for a CPU one (an index override did it).
    changed = json.loads(path.read_text())
    changed["environment"].update(target="cpu", build_matches_target=False, torch="2.9.1+cu128", cuda="12.8")
    _ui.run_summary(records.parse(json.dumps(changed), path), str(path))
    assert (
        "  build_matches_target: false: target cpu names a cpu build, this torch is 2.9.1+cu128 (CUDA 12.8): "
        "the numbers are not the target's"
    ) in capsys.readouterr().out.splitlines()


def test_a_ddp_efficiency_above_100_percent_is_flagged_in_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    monkeypatch.setattr(_ui, "_rich_console", lambda stderr=False: None)
    path = Path(__file__).resolve().parent.parent / "docs" / "records" / "cpu-bench-ddp.json"
    ddp = json.loads(path.read_text())["checks"]["ddp"]
    row = ddp["runs"][0]["scaling"][-1]
    row.update(efficiency=5.6, efficiency_noise=True)  # the load changed between world sizes
    _ui._ddp_summary(ddp)
    assert re.search(r"\b560% \(noise\)", capsys.readouterr().out)


def test_a_phase_that_blocks_without_advancing_still_says_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(_ui, "LOG_EVERY_S", 0.1)
    out = io.StringIO()
    progress = _ui.LogProgress(out=out)
    progress.start("fnn/graphed on cpu: compiling or capturing the step (a one-time cost)")
    time.sleep(0.55)  # torch.compile blocks: no advance() is called
    progress.done()
    time.sleep(0.25)  # nothing after done()
    lines = out.getvalue().splitlines()
    assert lines[0] == "... fnn/graphed on cpu: compiling or capturing the step (a one-time cost)"
    beats = lines[1:]
    assert 2 <= len(beats) <= 6, lines
    assert all(
        b.startswith("... fnn/graphed on cpu: compiling or capturing the step (a one-time cost): still running after ")
        for b in beats
    )


def test_a_slow_step_gets_one_line_per_period_not_a_heartbeat_and_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps longer than the period: the heartbeat speaks inside a step, and the step ending just after is
    no reason for a second line (it was two lines every 10 s, one of each kind)."""
    import time

    monkeypatch.setattr(_ui, "LOG_EVERY_S", 0.2)

    class Stamped(io.StringIO):
        times: ClassVar[list[float]] = []

        def write(self, text: str) -> int:
            if text.strip():
                self.times.append(time.monotonic())
            return super().write(text)

    out = Stamped()
    progress = _ui.LogProgress(out=out)
    progress.start("ddp: world size 2", total=4)
    for _ in range(4):
        time.sleep(0.25)
        progress.advance()
    progress.done()
    gaps = [b - a for a, b in zip(out.times[1:], out.times[2:], strict=False)]
    assert len(out.times) >= 3 and all(gap >= 0.19 for gap in gaps), (out.getvalue(), gaps)


def test_a_heartbeat_waits_a_whole_period_after_each_line() -> None:
    import time

    from kitbench.heartbeat import Heartbeat

    said: list[float] = []
    with Heartbeat(said.append, every=0.5) as beat:
        for _ in range(6):
            time.sleep(0.1)
            beat.beat()  # a line every 0.1 s: no heartbeat needed
        assert said == []
        time.sleep(1.2)
    assert 1 <= len(said) <= 3 and said == sorted(said) and said[0] >= 1.1


HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\r\n| forged | row |\u202eatad\x9b"


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_text_from_records_never_reaches_the_terminal_raw(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from kitbench._cli import main

    source = Path(__file__).resolve().parents[1] / "docs" / "records" / "cpu-bench-fnn.json"
    data = json.loads(source.read_text())
    data["environment"]["cpu"] = HOSTILE
    data["target"] = "t"
    data["checks"]["mnist"]["summary"] = HOSTILE
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert main(["compare", str(source), str(path), "--format", fmt]) == 0
    out = capsys.readouterr().out.replace("\r\n", "\n")  # csv's own line ends
    assert not any(c in out for c in "\x1b\x07\r\x9b\u202e"), ascii(out)
    assert "\\x1b]0;pwned" in out
    if fmt == "markdown":
        rows = [line for line in out.splitlines() if line.startswith("|")]
        cells = [len(re.findall(r"(?<!\\)\|", r)) for r in rows]
        assert len(rows) == 4 and len(set(cells)) == 1, cells
    if fmt == "csv":
        assert len(out.splitlines()) >= 3 and all("forged" not in line.split(",")[0] for line in out.splitlines())


@pytest.mark.parametrize(
    "formula",
    ['=HYPERLINK("http://127.0.0.1:9/x","open")', "@SUM(A1:A9)", "+1+cmd|' /C calc'!A0", "-2+3", "\t=1", "\r=1"],
)
def test_a_csv_cell_never_starts_as_a_formula(tmp_path: Path, formula: str, capsys: pytest.CaptureFixture[str]) -> None:
    """OWASP's CSV injection advice: a cell from a record that a spreadsheet would read as a formula gets a
    leading ' (https://owasp.org/www-community/attacks/CSV_Injection)."""
    import csv
    import json

    from kitbench._cli import main

    source = Path(__file__).resolve().parents[1] / "docs" / "records" / "cpu-bench-fnn.json"
    data = json.loads(source.read_text())
    data["environment"]["cpu"] = formula
    data["target"] = "t"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert main(["compare", str(source), str(path), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3
    for row in rows[1:]:
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) and cell != "-" for cell in row), row
    # A tab or CR is escaped first (\\t: text), as on the terminal; a formula's first character is kept, quoted.
    shown = formula.replace("\t", "\\t").replace("\r", "\\r")
    assert any(cell.startswith(("'" if formula[0] in "=+-@" else "") + shown) for cell in rows[2]), rows[2]


def test_records_are_named_below_the_folder_they_share() -> None:
    from kitbench._ui import record_names

    assert record_names(["results/cpu/a.json", "results/cuda126/b.json"]) == (
        "results/",
        ["cpu/a.json", "cuda126/b.json"],
    )
    assert record_names(["docs/records/a.json"]) == ("docs/records/", ["a.json"])
    assert record_names(["a.json", "b.json"]) == ("", ["a.json", "b.json"])  # the current folder: no title
    assert record_names(["/tmp/a.json", "b.json"]) == ("", ["/tmp/a.json", "b.json"])  # absolute and relative
    assert record_names(["d/\x1b[31m.json"]) == ("d/", ["\\x1b[31m.json"])  # a name is data, shown escaped


def test_a_table_is_fitted_by_cutting_its_widest_column_in_the_middle() -> None:
    from kitbench._ui import fit

    rows = [["x" * 50 + "-end", "short", "1.00"], ["b", "also short", "2.00"]]
    fitted = fit(["record", "what", "s"], rows, 40)
    assert sum(max(len(r[i]) for r in fitted) for i in range(3)) + 3 * 2 <= 40
    assert fitted[0][0].endswith("-end") and "…" in fitted[0][0] and fitted[1] == rows[1]
    # Nothing to cut below a column's floor (its header, or 8): the table is then as narrow as it goes.
    assert fit(["a", "b"], [["123456789", "123456789"]], 5) == [["123…6789", "123…6789"]]
