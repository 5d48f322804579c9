"""The MNIST check's batch-size sweep, crossover and graphed loop, on the real MNIST and the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Options
from kitbench.suite.checks.mnist import _crossover, _summary, scaled_lr
from kitbench.suite.checks.mnist_results import Crossover, MnistResult, MnistRun, SweepRow

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def swept(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    options = Options(
        checks=("mnist",),
        device="cpu",
        data=mnist_root,
        offline=True,
        quick=True,
        train_limit=4000,
        loops=("resident", "graphed"),
        sweep=(16, 64),
    )
    return dict(suite.run(options, tmp_path_factory.mktemp("sweep") / "r.json").record)


@pytest.mark.integration
def test_every_size_runs_with_the_linear_scaling_rule(swept: dict) -> None:
    mnist = swept["checks"]["mnist"]
    assert mnist["status"] == "ok", mnist["summary"]
    by = {(r["loop"], r["batch_size"]): r for r in mnist["runs"]}
    assert set(by) == {("resident", 16), ("resident", 64), ("graphed", 16), ("graphed", 64)}
    assert by[("resident", 16)]["lr"] == pytest.approx(0.01 * 16 / 64) and by[("resident", 64)]["lr"] == 0.01
    assert by[("resident", 64)]["steps"] == 63 and by[("graphed", 64)]["steps"] == 62  # graphed: no partial batch
    assert by[("resident", 16)]["steps"] == by[("graphed", 16)]["steps"] == 250
    for run in mnist["runs"]:
        assert run["step_s"] == pytest.approx(run["epoch_s"] / run["steps"])
    rows = [(r["loop"], r["batch_size"], r["cpu_step_s"] is not None, r["speedup"]) for r in mnist["sweep"]]
    assert rows == [
        ("resident", 16, True, None),
        ("resident", 64, True, None),
        ("graphed", 16, True, None),
        ("graphed", 64, True, None),
    ]
    assert {c["text"] for c in mnist["crossovers"]} == {"no accelerator here: nothing to cross"}


@pytest.mark.integration
def test_the_graphed_loop_matches_the_resident_loop(swept: dict) -> None:
    ratios = swept["checks"]["mnist"]["graph_ratios"]
    assert [g["batch_size"] for g in ratios] == [16, 64]
    for g in ratios:
        assert g["curve_matches"] and g["curve_gap"] <= g["curve_rtol"] == 0.05
        assert g["capture"] == "torch.compile (inductor)" and g["capture_s"] > 0
        assert g["graphed_speedup"] == pytest.approx(g["resident_epoch_s"] / g["graphed_epoch_s"], rel=1e-6)
    resident = [r for r in swept["checks"]["mnist"]["runs"] if r["loop"] == "resident"]
    assert all(r["profile"]["ops_per_step"] > 0 for r in resident)


def _rows(speedups: list[float | None]) -> list[SweepRow]:
    return [
        SweepRow("fnn", "resident", b, 0.01, 1.0, None if s is None else 1.0 / s, s, 0.9, 0.9)
        for b, s in zip((16, 64, 256, 1024), speedups, strict=True)
    ]


@pytest.mark.parametrize(
    ("speedups", "batch", "text"),
    [
        ([0.4, 0.9, 1.3, 2.5], 256, "the accelerator wins from batch 256"),
        ([0.4, 1.2, 0.9, 2.5], 1024, "the accelerator wins from batch 1024"),
        ([1.1, 1.2, 1.3, 2.5], 16, "the accelerator wins from batch 16, the smallest measured"),
        ([0.4, 0.5, 0.6, 0.9], None, "the accelerator never wins, up to batch 1024"),
    ],
)
def test_the_crossover_is_where_the_accelerator_starts_to_win(
    speedups: list[float], batch: int | None, text: str
) -> None:
    assert _crossover("fnn", "resident", _rows(speedups)) == Crossover("fnn", "resident", batch, text)


def test_only_sgd_rates_scale() -> None:
    assert scaled_lr("fnn", 1024, None) == pytest.approx(0.16)
    assert scaled_lr("cnn", 1024, None) == 1.0  # Adadelta adapts its own steps


def test_a_sweeps_summary_names_the_batch_of_each_speedup() -> None:
    # An H200's sweep said "speedup vs CPU fnn/resident 0.7x, fnn/resident 1.2x, ...": four numbers, no batch.
    run = MnistRun(
        "cuda:0",
        "fnn",
        "resident",
        1024,
        1,
        8000,
        0.02,
        [0.02],
        4e5,
        0.0,
        1.9,
        [1.9],
        [1.9],
        0.25,
        1.9,
        [0.25],
        0.1,
        0.0,
        0.1,
        0.01,
        0.5,
    )
    rows = [SweepRow("fnn", "resident", b, 0.01, 2.0, 2.0 / s, s, 0.9, 0.9) for b, s in ((16, 0.73), (1024, 2.18))]
    summary = _summary(MnistResult("ok", "", "", {}, runs=[run], sweep=rows))
    assert "speedup vs CPU per step fnn/resident batch 16 0.7x, fnn/resident batch 1024 2.2x" in summary
