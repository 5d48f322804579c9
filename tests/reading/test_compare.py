"""compare's rows and the compare command, on records made by really running the suite on the CPU."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from kitbench.reading import compare, inputs
from kitbench.records import record as records


@pytest.mark.integration
def test_rows_and_environment_diff(runs: dict[str, Path]) -> None:
    table = compare.rows(inputs.load([str(runs["a"]), str(runs["b"])]))
    assert [r.status for r in table] == ["ok", "ok"]
    assert table[0].mnist == "fnn/resident"
    assert table[0].cpu_epoch_s and table[0].accel_epoch_s is None and table[0].speedup is None
    assert table[1].differs == []


@pytest.mark.integration
def test_the_baseline_is_the_first_ok_record(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed run's environment may be half known (torch None): it is never what the others are measured from."""
    failed = json.loads(runs["a"].read_text())
    failed["status"], failed["environment"]["torch"] = "failed", None
    failed["run_id"] = records.new_run_id()  # another run, not a copy of the same one
    (tmp_path / "0-failed.json").write_text(json.dumps(failed))
    shutil.copy(runs["a"], tmp_path / "1-ok.json")
    table = compare.rows(inputs.load([str(tmp_path / "0-failed.json"), str(tmp_path / "1-ok.json")]))
    assert [(r.status, r.baseline) for r in table] == [("failed", False), ("ok", True)]
    assert table[1].differs == [] and any(c.quantity == "torch" and c.after is None for c in table[0].differs)
    from kitbench._cli import main

    assert main(["compare", str(tmp_path / "0-failed.json"), str(tmp_path / "1-ok.json"), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "baseline (the first ok record): 1-ok.json; 1 other record compared with it, " in out
    assert "\n  torch: " in out and " -> None in 1 of 1: 0-failed.json\n" in out


DOCS_RECORDS = Path(__file__).resolve().parents[2] / "docs" / "records"


def test_the_differences_from_the_baseline_are_grouped() -> None:
    """docs/records: 12 records against the first, most differing alike; each difference is one group."""
    table = compare.rows(inputs.load([str(DOCS_RECORDS)]))
    found = compare.differences(table)
    assert found.baseline == str(DOCS_RECORDS / "cpu-bench-cnn.json") and found.compared == 12
    torch = [g for g in found.groups if g.quantity == "torch"]
    assert [(g.before, g.after, len(g.paths)) for g in torch] == [("2.14.1+cu130", "2.11.0+cu130", 9)]
    gpus = {tuple(g.after) for g in found.groups if g.quantity == "gpus"}  # type: ignore[arg-type]
    assert gpus == {("NVIDIA H100 80GB HBM3",), ("NVIDIA H200",)}
    # Every record's every difference is in exactly one group.
    assert sum(len(g.paths) for g in found.groups) == sum(len(r.differs) for r in table)


@pytest.mark.parametrize("rich", [True, False])
def test_compare_of_the_docs_records_fits_160_columns_with_a_record_column(
    rich: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's complaint: 433 characters wide, H200 rows that read alike, 99 "differs" lines."""
    from kitbench import _ui
    from kitbench._cli import main

    if not rich:  # the plain table a Python without rich gets
        monkeypatch.setattr(_ui, "_rich_console", lambda stderr=False: None)

    assert main(["compare", str(DOCS_RECORDS)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 160, max(lines, key=len)
    names = sorted(p.name for p in DOCS_RECORDS.glob("*.json"))
    for name in names:  # in both tables, at the start of a row
        assert sum(line.startswith(name + " ") for line in lines) == 2, name
    assert "differs from the baseline" not in out
    groups = [line for line in lines if line.startswith("  ") and " of 12: " in line]
    assert len(groups) == len(compare.differences(compare.rows(inputs.load([str(DOCS_RECORDS)]))).groups)
    assert "  torch: 2.14.1+cu130 -> 2.11.0+cu130 in 9 of 12: h100-cnn.json, " in out
    assert "baseline (the first ok record): cpu-bench-cnn.json; 12 other records compared with it" in out


def test_records_named_alike_at_length_still_fit_and_end_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    # A folder deeper than a line: the title names it whole, wrapped, and still fits.
    folder = tmp_path / ("a-deep-folder-" * 12)
    folder.mkdir()
    for end in ("one", "two"):
        shutil.copy(
            DOCS_RECORDS / ("h200-det-1.json" if end == "one" else "h200-det-2.json"),
            folder / f"{'a-very-long-shared-beginning-' * 4}{end}.json",
        )
    shutil.copy(DOCS_RECORDS / "h100-cnn.json", folder / "b.json")
    assert main(["compare", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 160
    assert f"in {folder}/: " in _title(lines)
    rows = [line.split()[0] for line in lines if line.startswith("a-very")]
    assert len(rows) == 4 and all("…" in r for r in rows)
    assert {r.rsplit("…", 1)[1][-8:] for r in rows} == {"one.json", "two.json"}


def test_a_folder_named_as_markup_with_runs_of_spaces_is_shown_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The title is the person's folder, literally: rich reads no markup in it (a "[/]" stopped the table with a
    traceback), and wrapping it keeps the spaces it breaks at."""
    from kitbench._cli import main

    folder = tmp_path / f"[bold red]x[/bold red] and [/] [link=https:evil] {'a' * 110}   end"
    folder.mkdir(parents=True)  # "[/" makes folders of its own
    for name in ("h200-det-1.json", "h100-cnn.json"):
        shutil.copy(DOCS_RECORDS / name, folder)
    assert main(["compare", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 160
    assert f"in {folder}/: " in _title(lines)


def _title(lines: list[str]) -> str:
    """compare's first title, its wrapped lines joined again."""
    first = next(i for i, line in enumerate(lines) if line.startswith("kitbench compare: "))
    rest = itertools.takewhile(lambda line: line.startswith("    "), lines[first + 1 :])
    return lines[first] + "".join(line.removeprefix("    ") for line in rest)


def test_a_long_difference_names_what_fits_and_counts_the_rest() -> None:
    from kitbench._ui import _difference
    from kitbench.reading.compare import Group

    paths = [f"/r/{'x' * 30}-{i}.json" for i in range(9)]
    line = _difference(Group("manifest_sha256", "a" * 64, None, paths), 12, {p: p[3:] for p in paths})
    assert len(line) <= 160 and line.startswith(f"  manifest_sha256: {'a' * 23}… -> None in 9 of 12: ")
    assert line.endswith(" more") and line.count(".json") + int(line.rsplit("+", 1)[1].split()[0]) == 9


@pytest.mark.integration
def test_one_bad_file_among_good_ones_is_a_row(runs: dict[str, Path], tmp_path: Path) -> None:
    shutil.copy(runs["a"], tmp_path / "good.json")
    (tmp_path / "cut.json").write_text(runs["a"].read_text()[:200])
    table = compare.rows(inputs.load([str(tmp_path)]))
    by_name = {Path(r.path).name: r for r in table}
    assert by_name["good.json"].status == "ok"
    assert by_name["cut.json"].status.startswith("unreadable: ")
    assert "not a complete JSON record" in by_name["cut.json"].status


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_compare_cli_formats(runs: dict[str, Path], fmt: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kitbench", "compare", str(runs["a"]), str(runs["seed"]), "--format", fmt],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if fmt == "json":
        assert [r["status"] for r in json.loads(done.stdout)] == ["ok", "ok"]
    elif fmt == "csv":
        assert done.stdout.splitlines()[0].startswith("target,status,machine")
    else:
        assert "fnn/resident" in done.stdout


@pytest.mark.integration
def test_plot_is_written(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "compare.png"
    done = subprocess.run(
        [sys.executable, "-m", "kitbench", "compare", str(runs["a"]), str(runs["b"]), "--plot", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 20_000


def test_plot_labels_name_every_record_and_never_run_into_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record made outside a target (the H100's) is named by its file, not "?"; four bars per record
    carry upright labels, which horizontal ones overlapped ("1.571.56")."""
    pytest.importorskip("matplotlib")
    from kitbench.reading import plots

    plt = plots._pyplot()
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    docs = Path(__file__).resolve().parents[2] / "docs" / "records"
    records = [docs / "h100-fnn.json", docs / "cpu-bench-fnn.json"]
    loaded = inputs.load([str(p) for p in records])
    plots.comparison(loaded, compare.rows(loaded), tmp_path / "c.png")
    (fig,) = drawn
    legends = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert legends and not any(t.startswith("?") for t in legends)
    assert any(t.startswith("h100-fnn: ") for t in legends)
    epochs = fig.axes[0]
    numbers = [t for t in epochs.texts if t.get_text()]
    assert len(numbers) >= 4 and {t.get_rotation() for t in numbers} == {90.0}
    assert "h100-fnn" in [t.get_text() for t in epochs.get_xticklabels()]


def test_a_plot_of_records_without_mnist_draws_no_empty_legend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib warns (on stderr, for a user) of a legend with nothing labelled in it."""
    pytest.importorskip("matplotlib")
    import warnings

    from kitbench.reading import plots

    plt = plots._pyplot()
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    paths = []
    for name in ("h100-fnn", "cpu-bench-fnn"):
        data = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / f"{name}.json").read_text())
        del data["checks"]["mnist"]
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    loaded = inputs.load([str(p) for p in paths])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.comparison(loaded, compare.rows(loaded), tmp_path / "c.png")
    (fig,) = drawn
    assert fig.axes[0].get_legend() is None and (tmp_path / "c.png").stat().st_size > 0


@pytest.mark.integration
def test_a_plot_of_more_records_than_it_can_hold_is_refused_before_any_output(
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    another_run: typing.Callable[[Path, Path], Path],
) -> None:
    from kitbench._cli import main
    from kitbench.reading import plots

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(plots.MAX_RECORDS + 1):
        another_run(runs["a"], folder / f"r{i}.json")
    out = tmp_path / "many.png"
    assert main(["compare", str(folder), "--plot", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err.startswith(
        "ERROR: --plot draws at most 100 records, and 101 were given\nhint: kitbench report draws any number"
    )


def test_compare_cli_errors(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kitbench", "compare", str(tmp_path / "nope*.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("ERROR: no such record, directory or match")
    assert "Traceback" not in done.stderr


def test_reference_bands_warn_below_70_percent_of_the_link() -> None:
    assert compare.link_warnings("PCIe 4 x16", 25.0, 26.0) == []
    slow = compare.link_warnings("PCIe 4 x16", 9.1, 24.0)
    assert slow == [
        "H2D pinned 9.1 GB/s is 29% of PCIe 4 x16's 31.5 GB/s peak (expected 70%-90%): "
        "check the slot's link width and NUMA placement"
    ]
    assert compare.link_warnings(None, 1.0, 1.0) == []


@pytest.mark.integration
def test_compare_cli_shows_the_link_warning(runs: dict[str, Path], tmp_path: Path) -> None:
    record = records.read(runs["a"])
    record["environment"]["gpu_links"] = ["PCIe 3 x16"]
    record["checks"]["moves"]["transfers"].append(
        {
            "direction": "h2d",
            "memory": "pinned",
            "bytes": 2**26,
            "gb_per_s": 5.0,
            "gb_per_s_q1": 4.9,
            "gb_per_s_q3": 5.1,
            "samples": 7,
        }
    )
    path = tmp_path / "gpu.json"
    records.write_atomic(path, record)
    done = subprocess.run(
        [sys.executable, "-m", "kitbench", "compare", str(path)], capture_output=True, text=True, check=False
    )
    assert "WARNING" in done.stdout
    assert "32% of PCIe 3 x16's 15.8 GB/s peak" in done.stdout


@pytest.mark.integration
def test_mps_records_name_unified_memory_and_get_no_band(runs: dict[str, Path]) -> None:
    record = records.read(runs["a"])
    record["device"] = "mps"
    table = compare.rows([inputs.Loaded(runs["a"], record)])
    assert table[0].link is not None
    assert table[0].link.startswith("Apple unified memory (no band")
    assert table[0].warnings == []
