"""The real suite on the CPU, against the real MNIST (and a tiny one for edge cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitbench.errors import DataError, Interrupted
from kitbench.records import record as records
from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Options

QUICK = Options(device="cpu", quick=True, offline=True, train_limit=2000)


@pytest.fixture(scope="module")
def quick_record(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("run") / "run.json"
    record = suite.run(Options(**{**QUICK.__dict__, "data": mnist_root}), out).record
    assert json.loads(out.read_text()) == record
    records.validate(json.loads(out.read_text()))
    return dict(record)


@pytest.mark.integration
def test_record_is_versioned_and_complete(quick_record: dict) -> None:
    assert quick_record["schema"] == "kitbench.run/3"
    assert quick_record["status"] == "ok"
    assert list(quick_record["checks"]) == ["availability", "moves", "mnist"]
    env = quick_record["environment"]
    assert env["torch"].startswith("2.") and env["cpu_count"] >= 1 and env["ram_bytes"] > 2**30
    assert env["threads"] >= 1
    assert quick_record["started_at"] <= quick_record["ended_at"]


@pytest.mark.integration
def test_availability_says_why_there_is_no_accelerator(quick_record: dict) -> None:
    avail = quick_record["checks"]["availability"]
    assert avail["selected_device"] == "cpu"
    assert avail["kernel"]["passed"] and avail["kernel"]["relative_error"] < 1e-5
    if not avail["cuda_available"]:
        assert avail["cuda_reason"]
        assert f"cuda: {avail['cuda_reason']}" in avail["summary"]


@pytest.mark.integration
def test_moves_runs_cpu_parts_and_skips_device_rows(quick_record: dict) -> None:
    moves = quick_record["checks"]["moves"]
    assert {t["direction"] for t in moves["transfers"]} == {"host_copy"}
    assert [t["bytes"] for t in moves["transfers"]] == [1024 * 4**i for i in range(8)]
    for row in moves["transfers"]:
        assert 0 < row["gb_per_s_q1"] <= row["gb_per_s"] <= row["gb_per_s_q3"]
    assert "h2d, d2h: skipped: no accelerator" in moves["skipped"]
    lesson = moves["round_trip"]
    assert lesson["size"] == 200
    assert lesson["numpy_s"] > 0
    assert lesson["device_vs_numpy"] == pytest.approx(lesson["numpy_s"] / lesson["device_s"])
    assert lesson["device_with_copies_s"] is None
    assert "round trip with copies: skipped: no accelerator" in moves["skipped"]


@pytest.mark.integration
def test_mnist_runs_both_loops_with_separate_one_time_costs(quick_record: dict) -> None:
    runs = quick_record["checks"]["mnist"]["runs"]
    assert [(r["model"], r["loop"], r["device"]) for r in runs] == [
        ("fnn", "resident", "cpu"),
        ("fnn", "tutorial", "cpu"),
    ]
    for run in runs:
        assert run["train_samples"] == 2000
        assert run["samples_per_s"] == pytest.approx(2000 / run["epoch_s"])
        assert run["dataset_load_s"] > 0 and run["warmup_s"] > 0
        # The floor: the run's full batches at its own step's best tight-loop time (no timing asserted).
        assert run["compute_floor_s"] > 0
        assert run["floor_fraction"] == pytest.approx(run["compute_floor_s"] / run["epoch_s"])
        assert run["test_acc"] > 0.2  # well above chance (0.1) after 32 SGD steps
        assert len(run["loss_curve"]) == 20
    ratio = quick_record["checks"]["mnist"]["loop_ratios"][0]
    assert ratio["resident_speedup"] == pytest.approx(runs[1]["epoch_s"] / runs[0]["epoch_s"])
    assert ratio["per_epoch"] == [round(ratio["resident_speedup"], 3)]
    # The same seeded permutation feeds both loops: nearly the same training.
    assert runs[0]["final_loss"] == pytest.approx(runs[1]["final_loss"], rel=0.05)


@pytest.mark.integration
def test_same_seed_same_result_on_cpu(runs: dict[str, Path]) -> None:
    """The session's shared runs (tests/conftest.py): twice with one seed, once with another."""
    a, b, seed = (records.read(runs[name])["checks"]["mnist"]["runs"] for name in ("a", "b", "seed"))
    assert [r["loss_curve"] for r in a] == [r["loss_curve"] for r in b]
    assert [r["test_acc"] for r in a] == [r["test_acc"] for r in b]
    assert [r["loss_curve"] for r in a] != [r["loss_curve"] for r in seed]


# Whether a full epoch on all 60,000 images reaches 95 %, both loops, is .ci/run's check of the record
# `nox -s cpu` writes (check_record): that training is made once, there.
@pytest.mark.integration
def test_tiny_idx_partial_and_oversized_batches(tiny_mnist: Path, tmp_path: Path) -> None:
    for batch, steps in ((128, 3), (1000, 1)):
        options = Options(checks=("mnist",), device="cpu", data=tiny_mnist, offline=True, batch_size=batch, quick=True)
        runs = suite.run(options, tmp_path / f"{batch}.json").record["checks"]["mnist"]["runs"]
        for run in runs:
            assert run["train_samples"] == 300
            assert len(run["loss_curve"]) == steps
            assert 0.0 <= run["test_acc"] <= 1.0


def test_tiny_idx_checksum_mismatch_is_refused(tiny_mnist: Path, tmp_path: Path) -> None:
    labels = tiny_mnist / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-1] + b"\x00")  # the last label is 9
    with pytest.raises(DataError, match="fails its SHA-256 check"):
        suite.run(Options(checks=("mnist",), device="cpu", data=tiny_mnist, offline=True), tmp_path / "r.json")


def test_missing_data_offline_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="--offline forbids a download"):
        suite.run(Options(checks=("mnist",), device="cpu", data=tmp_path / "empty", offline=True), tmp_path / "r.json")


class _StopAt:
    """A progress reporter that presses Ctrl-C when a phase with ``word`` starts."""

    def __init__(self, word: str) -> None:
        self.word = word

    def start(self, label: str, total: float | None = None) -> None:
        if self.word in label:
            raise KeyboardInterrupt

    def advance(self, amount: float = 1) -> None:
        pass

    def done(self) -> None:
        pass


@pytest.mark.integration
def test_interrupted_run_keeps_what_finished(mnist_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted):
        suite.run(Options(**{**QUICK.__dict__, "data": mnist_root}), out, progress=_StopAt("epoch"))
    record = records.read(out)
    assert record["status"] == "interrupted"
    assert list(record["checks"]) == ["availability", "moves"]
    assert record["ended_at"] is not None


def test_a_crashing_check_is_recorded_and_the_suite_goes_on(
    monkeypatch: pytest.MonkeyPatch, mnist_root: Path, tmp_path: Path
) -> None:
    from kitbench.suite.checks import moves

    def broken(ctx: object) -> None:
        raise RuntimeError("simulated failure\nsecond line")

    monkeypatch.setattr(moves, "run", broken)
    record = suite.run(Options(checks=("moves", "availability"), device="cpu", quick=True), tmp_path / "r.json").record
    assert record["status"] == "failed"
    assert record["checks"]["moves"]["summary"] == "RuntimeError: simulated failure"
    assert record["checks"]["availability"]["status"] == "ok"


@pytest.mark.accelerator
def test_accelerator_suite_measures_both_directions(mnist_root: Path, tmp_path: Path) -> None:
    import torch

    if not (torch.cuda.is_available() or torch.backends.mps.is_available()):
        pytest.skip("no CUDA or MPS device here: the accelerator rows cannot be measured")
    record = suite.run(Options(**{**QUICK.__dict__, "device": "auto", "data": mnist_root}), tmp_path / "r.json").record
    moves = record["checks"]["moves"]
    assert {"h2d", "d2h"} <= {t["direction"] for t in moves["transfers"]}
    assert moves["mismatch_error"]
    assert record["checks"]["mnist"]["speedups"]


@pytest.fixture
def session_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a nox session passes to the run it starts (noxfile._suite_env and installer.record_of)."""
    from kitbench.environments import locks

    monkeypatch.setenv("KITBENCH_TARGET", "cpu")
    monkeypatch.setenv("KITBENCH_INDEX_OVERRIDE", "https://pypi.org/simple")
    monkeypatch.setenv(locks.LOCK_WHY_VARIABLE, "no lock for cpu on this platform")


def test_without_mnist_the_other_checks_run_and_the_record_says_what_failed(
    tmp_path: Path, session_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No MNIST (KITBENCH_DATA an empty folder) and --offline: availability and moves still run, torch is
    imported and the environment recorded (its packages, the index override, whether torch is the target's
    build); the record says what failed as data, the error names the record, and it reads back under the schema."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("KITBENCH_DATA", str(tmp_path / "empty"))
    out = tmp_path / "r.json"
    with pytest.raises(DataError, match="--offline forbids a download") as caught:
        suite.run(Options(device="cpu", quick=True, offline=True), out)
    assert caught.value.hint is not None and caught.value.hint.endswith(
        f"the record {out} holds the checks that ran (availability, moves) and this machine's environment"
    )
    record = records.read(out)
    assert record["schema"] == "kitbench.run/3" and record["status"] == "failed"
    assert {name: check["status"] for name, check in record["checks"].items()} == {
        "availability": "ok",
        "moves": "ok",
        "mnist": "failed",
    }
    assert record["checks"]["mnist"]["summary"].startswith(f"not run: no MNIST at {tmp_path / 'empty'}")
    env = record["environment"]
    assert env["torch"] and env["index_override"] == "https://pypi.org/simple" and env["target"] == "cpu"
    assert isinstance(env.get("build_matches_target"), bool) and env.get("lock_why")
    assert any(p["name"] == "torch" for p in env.get("packages", []))
    assert record.get("failure") == {
        "stage": "data",
        "error": "DataError",
        "message": record["error"],
        "hint": "point --data (or KITBENCH_DATA) at a directory holding MNIST/raw, or drop --offline",
        "host": None,
        "not_run": ["mnist"],
    }


def test_an_mnist_download_that_reaches_no_host_names_it_in_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchvision's download host out of reach (its own words): the record's failure names the host, and
    `kitbench report` shows it in its Failures section."""
    import sys
    import types
    import urllib.error

    from kitbench._cli import main

    def unreachable(root: str, train: bool, download: bool) -> None:
        raise RuntimeError(
            "Error downloading train-images-idx3-ubyte.gz:\nTried https://mnist.invalid/mnist/, "
            f"got:\n{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
        )

    fake = types.ModuleType("torchvision.datasets")
    fake.MNIST = unreachable  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision.datasets", fake)
    out = tmp_path / "r.json"
    with pytest.raises(DataError, match=r"cannot reach mnist\.invalid"):
        suite.run(Options(checks=("availability", "mnist"), device="cpu", quick=True, data=tmp_path / "data"), out)
    failure = records.read(out).get("failure")
    assert failure is not None and failure["host"] == "mnist.invalid" and failure["stage"] == "data"
    assert main(["report", str(out), "--format", "markdown", "-o", str(tmp_path / "report.md")]) == 0
    page = (tmp_path / "report.md").read_text()
    assert "## Failures" in page and "mnist.invalid" in page and "failed: could not download MNIST" in page


def test_a_device_that_is_not_here_fails_the_set_up_and_the_record_keeps_the_environment(
    tmp_path: Path, session_env: None
) -> None:
    """A set-up failure after torch is imported (a GPU asked for where there is none) is kept as data too,
    with torch's part of the environment, and every asked check named as not run."""
    import torch

    from kitbench.errors import DeviceUnavailableError

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: --device cuda is usable here")
    out = tmp_path / "r.json"
    with pytest.raises(DeviceUnavailableError):
        suite.run(Options(checks=("availability", "moves"), device="cuda", quick=True), out)
    record = records.read(out)
    failure = record.get("failure")
    assert record["status"] == "failed" and record["checks"] == {}
    assert failure is not None and failure["stage"] == "setup" and failure["error"] == "DeviceUnavailableError"
    assert failure["not_run"] == ["availability", "moves"] and failure["message"] == record["error"]
    assert record["environment"]["torch"] == torch.__version__ and "threads" in record["environment"]
    assert record["environment"].get("index_override") == "https://pypi.org/simple"
