"""kitbench report: pages built from the kept H100, H200 and CPU records and from a real CPU run,
hostile text, bad inputs, 5,000 records and safe writing (the renderers' own tests: test_report_html,
test_report_markdown)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kitbench._cli import main
from kitbench.errors import RecordReadError, UsageError
from kitbench.fleet import results as fleet
from kitbench.reading import report
from kitbench.records import record as records

KEPT = Path(__file__).resolve().parents[2] / "docs" / "records"
# The kept records' charts: transfers (H100, two H200 sessions), 8 loss curves, 2 sweeps, DDP efficiency
# and all-reduce (CPU VM, two H200 sessions)
KEPT_CHARTS = 3 + 8 + 2 + 6
EVERY_SECTION = ["machines", "availability", "transfers", "mnist", "sweep", "ddp", "environments", "records"]


def _hostile(tmp_path: Path) -> Path:
    data = json.loads((KEPT / "h100-fnn.json").read_text())
    data["argv"] = ["run", "--out", "<script>alert(1)</script>|x`y`\nz\x1b[31m&amp;"]
    data["environment"]["cpu"] = "Evil | <b>CPU</b>"
    records.validate(data)
    out = tmp_path / "<i>hostile|`.json"
    out.write_text(json.dumps(data))
    return out


def test_kept_records_give_every_section_with_numbers_from_them() -> None:
    built = report.build([str(KEPT)])
    assert built.sections == EVERY_SECTION
    assert built.records == len(list(KEPT.glob("*.json"))) == 13 and built.unreadable == 0
    page = built.text
    assert page.startswith(report.MARKER)
    h100 = json.loads((KEPT / "h100-cnn.json").read_text())["checks"]["mnist"]["speedups"]
    tutorial = next(s for s in h100 if s["loop"] == "tutorial")
    assert f"{tutorial['cpu_epoch_s'] / tutorial['device_epoch_s']:.2f}x" in page  # machines: speedup
    assert "53.77" in page and "54.41" in page  # transfers: the H100's H2D and D2H pinned peaks
    assert "55.36" in page and "55.15" in page  # and the H200's
    assert "32%" in page and "51%" in page  # DDP efficiencies at two ranks
    allreduce = json.loads((KEPT / "cpu-bench-ddp.json").read_text())["checks"]["ddp"]["runs"][0]["allreduce"]
    best = max(allreduce, key=lambda b: b["busbw_gb_s"])  # all-reduce peak, in a table as well as drawn
    assert f"<td>{best['busbw_gb_s']:.2f}</td><td>{best['bytes'] / 1024:,.0f} KiB</td>" in page
    graphed = json.loads((KEPT / "cpu-bench-cnn.json").read_text())["checks"]["mnist"]["runs"][2]
    assert f"<td>{graphed['capture_s']:.2f} s</td>" in page  # one-time compile cost, apart from the epoch
    for name in ("cpu-bench-sweep.json", "h100-fnn.json"):
        assert hashlib.sha256((KEPT / name).read_bytes()).hexdigest() in page
    assert page.count("<svg") == KEPT_CHARTS
    assert "torch: 2.14.1+cu130" not in page  # the environments table is by field, not prose
    # Self-contained: nothing that a browser would fetch, and no script.
    assert not re.search(r"<script|<link|@import|url\(|src=|href=\"(?!#)", page, re.I)


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    path = _hostile(tmp_path)
    page = report.build([str(path)]).text
    assert "<script>" not in page and "<b>" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x`y` z" in page
    assert "&amp;amp;" in page
    assert "&lt;i&gt;hostile|`.json" in page and "<i>" not in page
    md = report.build([str(path)], "markdown").text
    lines = md.splitlines()
    for at, line in enumerate(lines):
        if line.startswith("|---"):  # every row of a table has as many unescaped bars as its header
            header = lines[at - 1].count(" | ")
            for row in lines[at + 1 :]:
                if not row.startswith("| "):
                    break
                assert len(re.findall(r"(?<!\\)\|", row)) == header + 2, row
    assert "<script>" not in md and "\\|x\\`y\\` z" in md and "Evil \\| &lt;b&gt;CPU&lt;/b&gt;" in md
    assert "&lt;i&gt;hostile\\|\\`.json" in md


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_controls_from_a_record_reach_no_page_raw(fmt: str, tmp_path: Path) -> None:
    """ESC, C1, line separators and bidi overrides in a model name (drawn in a chart's legend and
    title) and a device (a table cell) are data: no page carries one raw."""
    data = json.loads((KEPT / "cpu-bench-fnn.json").read_text())
    hostile = "x\x1b]0;title\x07\x9b31m\u202egpj.exe\u2028y\u2066"
    data["device"] = f"cpu{hostile}"
    for run in data["checks"]["mnist"]["runs"]:
        run["model"] = f"{run['model']}{hostile}"
    records.validate(data)
    (tmp_path / "r.json").write_text(json.dumps(data))
    out = tmp_path / f"page.{'md' if fmt == 'markdown' else 'html'}"
    assert main(["report", str(tmp_path / "r.json"), "--format", fmt, "-o", str(out)]) == 0
    page = out.read_text()
    assert "gpj.exe" in page
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", page)


def test_a_real_cpu_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results" / "run.json"
    assert (
        main(["run", "--device", "cpu", "--quick", "--check", "availability", "--check", "moves", "--out", str(out)])
        == 0
    )
    (tmp_path / "results" / "plan.json").write_text("{}")  # a fleet plan beside it is skipped
    capsys.readouterr()
    page = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "results"), "-o", str(page)]) == 0
    printed = capsys.readouterr()
    assert f"report: {page} (1 records" in printed.out and "skipped 1" in printed.err
    text = page.read_text()
    for section in ("machines", "availability", "transfers", "records"):
        assert f'<section id="{section}">' in text
    assert "run.json (quick)" in text and "<svg" in text
    assert "1 other *.json files skipped" in text
    record = records.read(out)
    transfers = record["checks"]["moves"]["transfers"]  # on a CPU: host copies
    first = [
        t for t in transfers if (t["direction"], t["memory"]) == (transfers[0]["direction"], transfers[0]["memory"])
    ]
    assert f"<td>{max(t['gb_per_s'] for t in first):.2f}</td>" in text


def test_a_failed_record_is_a_row_marked_failed_with_its_reason(tmp_path: Path) -> None:
    data = json.loads((KEPT / "h100-fnn.json").read_text())
    (tmp_path / "ok.json").write_text(json.dumps(data))
    data["status"], data["error"] = "failed", "CUDA error: out of memory\n(one line in the table)"
    (tmp_path / "oom.json").write_text(json.dumps(data))
    data["status"], data["error"] = "interrupted", None
    data["checks"]["mnist"]["status"], data["checks"]["mnist"]["summary"] = "failed", "stopped by SIGTERM"
    (tmp_path / "stopped.json").write_text(json.dumps(data))
    page = report.build([str(tmp_path)]).text
    machines = page[page.index('<section id="machines">') : page.index("</section>", page.index('id="machines"'))]
    assert machines.count("<tr>") == 1 + 3  # the header, and a row each: a failure is never folded into ok
    assert '<td class="w">failed: CUDA error: out of memory (one line in the table)</td>' in machines
    assert '<td class="w">interrupted: mnist: stopped by SIGTERM</td>' in machines
    assert "<td>ok</td>" in machines


def _section(page: str, key: str) -> str:
    start = page.index(f'<section id="{key}">')
    return page[start : page.index("</section>", start)]


def test_a_failed_record_comes_after_those_that_finished_never_first(tmp_path: Path) -> None:
    """A run that could not get MNIST, named first (its file sorts first, as the earliest run's does)."""
    data = json.loads((KEPT / "h100-fnn.json").read_text())
    (tmp_path / "b-ok.json").write_text(json.dumps(data))
    data["run_id"] = "0" * 32
    data["status"], data["error"], data["checks"] = "failed", "no MNIST at /data (4 of 4 raw files missing)", {}
    data["options"]["offline"] = False  # a field to differ in: the environments table shows both
    (tmp_path / "a-failed.json").write_text(json.dumps(data))
    page = report.build([str(tmp_path)]).text
    machines = _section(page, "machines")
    assert machines.index("b-ok.json") < machines.index("a-failed.json")
    header = _section(page, "environments").split("</tr>")[0]
    assert header.index("b-ok.json") < header.index("a-failed.json")


def test_one_machine_shows_one_gpu_memory_on_every_row() -> None:
    """Only h100-fnn.json ran the availability check, which measures the GPU's memory (81,079 MiB through
    torch); h100-cnn.json's row showed RAM alone. Both rows now show the one H100's."""
    machines = _section(report.build([str(KEPT)]).text, "machines")
    rows = [row for row in machines.split("<tr>") if "H100" in row]
    assert len(rows) == 2 and all("126 GiB RAM, 79 GiB GPU" in row for row in rows), rows


def test_a_sweep_accuracy_far_below_its_models_best_is_marked_low() -> None:
    """h200-sweep.json: fnn reached 0.783 at batch 16 and 0.2478 at batch 1024 (8 optimizer steps)."""
    sweep = _section(report.build([str(KEPT)]).text, "sweep")
    assert "0.2478 (low: fnn reached 0.78 in this record; 8 optimizer steps)" in sweep
    assert ">0.7454<" in sweep and ">0.4397<" in sweep  # above half the best: not marked


def test_ddp_on_the_cpu_when_a_gpu_was_asked_says_why() -> None:
    ddp = _section(report.build([str(KEPT)]).text, "ddp")
    assert "h200-ddp.json: asked for --device cuda, DDP ran gloo on the CPU: multi-GPU (NCCL): skipped: 1 device" in ddp
    assert "cpu-bench-ddp.json: asked" not in ddp  # auto on a machine without a GPU: nothing to explain


def test_hashes_in_the_environments_table_are_shortened() -> None:
    env = _section(report.build([str(KEPT)]).text, "environments")
    assert "387a0a0cda95\u2026" in env and "387a0a0cda95dbe39547" not in env  # cpu-bench's manifest_sha256


def test_quick_and_full_runs_are_marked_where_they_meet(tmp_path: Path) -> None:
    data = json.loads((KEPT / "h100-fnn.json").read_text())
    (tmp_path / "full.json").write_text(json.dumps(data))
    data["options"]["quick"] = True
    (tmp_path / "quick.json").write_text(json.dumps(data))
    page = report.build([str(tmp_path)]).text
    assert "quick.json (quick)" in page and "full.json (quick)" not in page
    assert "option quick" in page  # the environments table says the runs differ in it


def test_environments_show_each_package_and_setting_that_differs(tmp_path: Path) -> None:
    data = json.loads((KEPT / "h100-fnn.json").read_text())
    data["schema"] = "kitbench.run/2"
    data["environment"]["packages"] = [
        {"name": "numpy", "version": "2.4.6", "hashes": ["sha256:" + "a" * 64]},
        {"name": "Torch_Vision", "version": "0.29.1"},
    ]
    data["environment"]["settings"] = {"OMP_NUM_THREADS": None, "cudnn_benchmark": False}
    (tmp_path / "a.json").write_text(json.dumps(data))
    data["environment"]["packages"][0]["version"] = "2.4.5"
    data["environment"]["settings"]["OMP_NUM_THREADS"] = "1"
    (tmp_path / "b.json").write_text(json.dumps(data))
    page = report.build([str(tmp_path)]).text
    env = page[page.index('<section id="environments">') : page.index('<section id="records">')]
    assert "<td>package numpy</td><td>2.4.6</td><td>2.4.5</td>" in env
    assert "<td>settings.OMP_NUM_THREADS</td><td>-</td><td>1</td>" in env
    assert "torch-vision" not in env and "sha256:" not in env and "{" not in env  # only what differs, by field
    shutil.copy(KEPT / "h100-cnn.json", tmp_path)  # a /1 record lists no packages: none compared
    page = report.build([str(tmp_path)]).text
    assert "package numpy" not in page and "Packages are not compared" in page


def test_the_page_needs_no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as without the [plots] extra: import fails
    page = report.build([str(KEPT)]).text
    assert page.count("<svg") == KEPT_CHARTS and "kitbench[plots]" not in page


def test_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: no run records in directory") and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()
    v9 = tmp_path / "mixed" / "v9.json"
    v9.parent.mkdir()
    v9.write_text(json.dumps({"schema": "kitbench.run/9", "status": "ok"}))
    with pytest.raises(RecordReadError, match=r"kitbench\.run/9"):
        report.build([str(v9)])
    (tmp_path / "mixed" / "cut.json").write_text((KEPT / "h100-fnn.json").read_text()[:3000])
    shutil.copy(KEPT / "cpu-bench-ddp.json", tmp_path / "mixed")
    built = report.build([str(tmp_path / "mixed")])
    assert built.records == 3 and built.unreadable == 2
    assert "v9.json" in built.text and "unreadable: " in built.text and "2 unreadable" in built.text
    with pytest.raises(UsageError, match="unknown format"):
        report.build([str(KEPT)], "pdf")


def test_writing_is_atomic_and_refuses_what_is_not_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.html"
    other.write_text("my notes")
    assert main(["report", str(KEPT), "-o", str(other)]) == 2  # refused up front: a usage error, as --plot's
    assert "not one kitbench wrote" in capsys.readouterr().err and other.read_text() == "my notes"
    assert main(["report", str(KEPT), "-o", str(other), "--force"]) == 0
    assert other.read_text().startswith(report.MARKER)
    assert main(["report", str(KEPT), "-o", str(other), "--format", "markdown"]) == 0  # a report: replaced
    assert other.read_text().startswith(report.MARKER + "\n# kitbench report")
    link = tmp_path / "link.html"
    link.symlink_to(other)
    assert main(["report", str(KEPT), "-o", str(link), "--force"]) == 2
    assert "symlink" in capsys.readouterr().err and link.is_symlink()
    (tmp_path / "dir.html").mkdir()  # a folder: the page goes inside it, under the default name
    assert main(["report", str(KEPT), "-o", str(tmp_path / "dir.html")]) == 0
    assert [p.name for p in (tmp_path / "dir.html").iterdir()] == ["report.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.html", "link.html", "notes.html"]  # no temp left
    os.mkfifo(tmp_path / "fifo.html")  # refused, never opened (no reader would ever come)
    assert main(["report", str(KEPT), "-o", str(tmp_path / "fifo.html")]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_a_full_disk_keeps_the_old_page_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page goes through kitbench._files.write: a temporary file, fsynced, renamed; ENOSPC is exit 1."""
    page = tmp_path / "report.html"
    assert main(["report", str(KEPT), "-o", str(page)]) == 0
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["report", str(KEPT), "-o", str(page), "--format", "markdown"]) == 0 and synced
    assert page.read_text().startswith(report.MARKER + "\n# kitbench")
    before = page.read_bytes()

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    assert main(["report", str(KEPT), "-o", str(page)]) == 1
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert page.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_fleet_job_s_report_is_written_beside_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, another_run: Callable[[Path, Path], Path]
) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    job = tmp_path / "fleet" / "42"
    job.mkdir(parents=True)
    rows = []
    for index, node in enumerate(["n1", "n2"]):
        another_run(KEPT / "h100-fnn.json", job / f"{node}.json")
        rows.append(
            fleet.TaskResult(
                index, node, "COMPLETED", 0, record=records.read(job / f"{node}.json"), record_path=job / f"{node}.json"
            )
        )
    rows.append(fleet.TaskResult(2, "n3", "FAILED", 1, record_path=job / "n3.json", error="n3.json was not written"))
    path = fleet.write_report("42", rows)
    assert path == job / "report.html"
    page = path.read_text()
    assert "n1.json" in page and "n2.json" in page and "reproduced 1/1" in page
    assert fleet.write_report("43", rows[2:]) is None  # nothing written: no page


def test_fleet_gather_writes_the_report_and_prints_its_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    another_run: Callable[[Path, Path], Path],
) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # no controller: the tasks' files say the rest
    job = tmp_path / "fleet" / "7"
    job.mkdir(parents=True)
    (job / "fleet.json").write_text(
        json.dumps({"job": "7", "action": "run", "per": "node", "target": "cpu", "nodes": ["n1", "n2"], "span": False})
    )
    for node in ("n1", "n2"):
        another_run(KEPT / "cpu-bench-fnn.json", job / f"{node}.json")
        (job / f"{node}.exit").write_text("0\n")
    assert main(["fleet", "gather", "7", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"]  # stdout stays the JSON
    assert captured.err.splitlines()[-1] == f"report: {job / 'report.html'}"
    page = (job / "report.html").read_text()
    assert "n1.json" in page and "n2.json" in page and "reproduced 1/1" in page


def test_5000_records_build_in_seconds_and_stay_small(tmp_path: Path) -> None:
    one = json.loads((KEPT / "h100-fnn.json").read_text())
    for i in range(5000):  # 5,000 runs with the same numbers: each its own run id
        (tmp_path / f"r{i:04}.json").write_text(json.dumps({**one, "run_id": f"{i:032x}"}))
    started, cpu = time.perf_counter(), time.process_time()
    built = report.build([str(tmp_path)])
    cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - started
    assert built.records == 5000
    assert cpu_s < 20, f"{cpu_s:.1f} s of CPU for 5,000 records"  # about 4 s here; the wall time waits on I/O
    assert len(built.text) < 1_000_000, f"{len(built.text):,} bytes"
    assert "the first 200 of 5,000 rows are shown" in built.text
    assert "charts for the first 12 of 5,000 records" in built.text
    assert "reproduced 4999/4999" in built.text  # one machine row, every copy verified against the first
    print(f"5,000 records: {cpu_s:.1f} s CPU, {wall_s:.1f} s wall, {len(built.text):,} bytes")


def test_copies_of_one_run_are_refused_not_counted_as_reproductions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a.json", "b.json", "c.json"):
        shutil.copy(KEPT / "h100-fnn.json", tmp_path / name)
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "page.html")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "hold the same bytes (a copy): one run, not two" in err and "reproduced" not in err
    assert not (tmp_path / "page.html").exists()


def test_a_fifo_or_a_symlinked_loop_among_the_inputs_never_hangs_the_report(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    (folder / "deep").mkdir(parents=True)
    shutil.copy(KEPT / "h100-fnn.json", folder / "deep" / "run.json")
    os.mkfifo(folder / "pipe.json")
    (folder / "deep" / "loop").symlink_to(folder, target_is_directory=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kitbench",
            "report",
            str(folder / "**" / "*.json"),
            "-o",
            str(tmp_path / "page.md"),
            "--format",
            "markdown",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "2 records; 1 unreadable" in (tmp_path / "page.md").read_text()  # the FIFO's row says why
    assert "not a regular file" in (tmp_path / "page.md").read_text()


def test_each_hash_is_of_the_bytes_the_page_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file replaced while the page is built: its row keeps the hash of the version that was read."""
    path = tmp_path / "r.json"
    shutil.copy(KEPT / "h100-fnn.json", path)
    first = hashlib.sha256(path.read_bytes()).hexdigest()
    read = records.read_hashed

    def then_replaced(where: Path) -> tuple[records.RunRecord, str]:
        found = read(where)
        path.write_text(path.read_text().replace('"ok"', '"failed"', 1))
        return found

    monkeypatch.setattr(records, "read_hashed", then_replaced)
    page = report.build([str(path)], "markdown").text
    assert first in page and hashlib.sha256(path.read_bytes()).hexdigest() not in page


def test_out_naming_a_directory_puts_the_page_inside_it_or_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = str(KEPT / "h100-fnn.json")
    (tmp_path / "pages").mkdir()
    assert main(["report", record, "-o", str(tmp_path / "pages") + "/"]) == 0
    assert (tmp_path / "pages" / "report.html").is_file()
    assert main(["report", record, "-o", str(tmp_path / "nowhere") + "/", "--format", "markdown"]) == 2
    assert "names a directory, and there is none" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_file_names_are_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(KEPT / "h100-fnn.json", folder / "run.json")
    (folder / "\x1b]0;pwned\x07.json").write_text("{}")  # not a record: skipped, and named
    assert main(["report", str(folder), "-o", str(tmp_path / "p.html")]) == 0
    out, err = capsys.readouterr()
    assert "pwned" in err and not any(c in out + err for c in "\x1b\x07")
