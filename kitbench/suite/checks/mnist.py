"""The MNIST check: each configuration trained on the device and on the CPU, measured honestly, and read.

The configurations (models x loops x batch sizes x devices, trained by ``mnist_training``) take turns
epoch by epoch, so ratios compare epochs measured back to back; the runs then give the speedups, loop
ratios, sweep rows and crossovers the record keeps (``mnist_results``) and the check's one-line summary.
"""

from __future__ import annotations

import torch

from kitbench._numbers import once
from kitbench.suite import devices, models
from kitbench.suite.checks import steps
from kitbench.suite.checks.base import Context, training_problem
from kitbench.suite.checks.mnist_results import (
    Crossover,
    GraphRatio,
    LoopRatio,
    MnistResult,
    MnistRun,
    Speedup,
    SweepRow,
)
from kitbench.suite.checks.mnist_training import CURVE_POINTS, Trainer
from kitbench.suite.stats import Summary
from kitbench.suite.timing import measure

# The graphed loop's first-epoch loss curve (its 20 means) may differ from the resident loop's by this
# much (mean absolute difference over the mean loss), verify's tolerance across builds. The two start
# identical (same weights, batches and dropout masks); compiled kernels reorder float sums, and the
# 1e-7 differences compound step by step (a full epoch here: 0.14 % for the fnn, 1.7 % for the cnn,
# whose tutorial and resident loops differ by 9.5 %). A wrong capture (a stale batch, a missed
# update) is far larger.
CURVE_RTOL = 0.05


def matmul_gflops(device: torch.device, size: int = 1024) -> float:
    """Single-precision 1024x1024 matmul rate on ``device`` (the fastest sample), recorded beside the runs
    as the machine's headline rate. Not a floor: a model's own, smaller GEMMs can run faster than it."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    seconds = measure(lambda: a @ b, device, repeats=9, warmup=2, inner=4)
    return 2 * size**3 / seconds.min / 1e9


def _ratios(slow: MnistRun, fast: MnistRun) -> tuple[float, list[float]]:
    """The median of epoch-by-epoch ratios: each pair was measured back to back."""
    per_epoch = [a / b for a, b in zip(slow.epoch_s_all, fast.epoch_s_all, strict=True)]
    return Summary.of(per_epoch).median, [round(r, 3) for r in per_epoch]


def scaled_lr(model: str, batch: int, lr: float | None) -> float:
    """The linear scaling rule (Goyal et al. 2017) for SGD: the rate grows with the batch from the
    recipe's 64. The cnn's Adadelta adapts its own step sizes; its rate stays the recipe's."""
    base = lr if lr is not None else models.RECIPE_LR[model]
    return base * batch / 64 if model == "fnn" else base


def _graph_ratio(run_r: MnistRun, run_g: MnistRun) -> GraphRatio:
    """Same permutation, same start: the captured step's first-epoch loss curve against the eager step's."""
    a, b = run_r.loss_curve[:CURVE_POINTS], run_g.loss_curve[:CURVE_POINTS]
    n = min(len(a), len(b))
    total = sum(abs(v) for v in a[:n])
    gap = sum(abs(p - q) for p, q in zip(a[:n], b[:n], strict=True)) / total if total else float("nan")
    median, per_epoch = _ratios(run_r, run_g)
    return GraphRatio(
        run_g.device,
        run_g.model,
        run_g.batch_size,
        run_r.epoch_s,
        run_g.epoch_s,
        median,
        per_epoch,
        run_g.capture or "",
        run_g.capture_s or 0.0,
        gap,
        CURVE_RTOL,
        gap <= CURVE_RTOL,
    )


def _crossover(model: str, loop: str, rows: list[SweepRow]) -> Crossover:
    measured = [r for r in rows if r.speedup is not None]
    wins = [r.speedup is not None and r.speedup > 1 for r in measured]
    first = next((i for i in range(len(wins)) if all(wins[i:])), None)
    if not measured:
        return Crossover(model, loop, None, "no accelerator here: nothing to cross")
    if first is None:
        return Crossover(model, loop, None, f"the accelerator never wins, up to batch {measured[-1].batch_size}")
    batch = measured[first].batch_size
    return Crossover(
        model, loop, batch, f"the accelerator wins from batch {batch}" + ("" if first else ", the smallest measured")
    )


def run(ctx: Context) -> MnistResult:
    assert ctx.data_root is not None
    opts = ctx.options
    device = ctx.device
    cpu = torch.device("cpu")
    run_devices = [device, cpu] if devices.is_accelerator(device) else [device]
    rates = {str(d): matmul_gflops(d) for d in run_devices}
    sizes = opts.sweep or (opts.batch_size,)
    runs: list[MnistRun] = []
    skipped: list[str] = []
    for model_name in opts.models:
        for batch in sizes:
            # Without a sweep the rate is the one asked for; a sweep scales it with the batch.
            lr = scaled_lr(model_name, batch, opts.lr) if opts.sweep else (opts.lr or models.RECIPE_LR[model_name])
            trainers = []
            for loop in opts.loops:
                for d in run_devices:
                    try:
                        trainers.append(Trainer(ctx, d, model_name, loop, batch, lr))
                    except steps.CaptureImpossible as why:
                        skipped.append(f"{model_name}/{loop} on {d} (batch {batch}): skipped: {why}")
            for _ in range(opts.epochs):
                for trainer in trainers:
                    trainer.epoch()
            ctx.progress.done()
            runs += [trainer.result() for trainer in trainers]
    by_key = {(r.device, r.model, r.loop, r.batch_size): r for r in runs}
    speedups = []
    if devices.is_accelerator(device):
        for (dev, m, loop, b), fast in by_key.items():
            slow = by_key.get(("cpu", m, loop, b))
            if dev != "cpu" and slow is not None:
                median, per_epoch = _ratios(slow, fast)
                speedups.append(Speedup(m, loop, slow.epoch_s, fast.epoch_s, median, per_epoch))
    ratios, graph_ratios = [], []
    for (dev, m, loop, b), run_ in by_key.items():
        resident = by_key.get((dev, m, "resident", b))
        if loop == "tutorial" and resident is not None:
            median, per_epoch = _ratios(run_, resident)
            ratios.append(LoopRatio(dev, m, run_.epoch_s, resident.epoch_s, median, per_epoch))
        if loop == "graphed" and resident is not None:
            graph_ratios.append(_graph_ratio(resident, run_))
    sweep, crossovers = [], []
    if opts.sweep:
        for m in opts.models:
            for loop in opts.loops:
                rows = []
                for b in sizes:
                    on_cpu, on_dev = by_key.get(("cpu", m, loop, b)), by_key.get((str(device), m, loop, b))
                    if on_cpu is None and on_dev is None:
                        continue
                    accel = on_dev if devices.is_accelerator(device) else None
                    either = on_cpu or on_dev
                    rows.append(
                        SweepRow(
                            m,
                            loop,
                            b,
                            either.lr if either else 0.0,
                            on_cpu.step_s if on_cpu else None,
                            accel.step_s if accel else None,
                            on_cpu.step_s / accel.step_s if on_cpu and accel else None,
                            on_cpu.test_acc if on_cpu else None,
                            accel.test_acc if accel else None,
                        )
                    )
                sweep += rows
                if rows:
                    crossovers.append(_crossover(m, loop, rows))
    problems = [
        p
        for r in runs
        if (
            p := training_problem(
                f"{r.model}/{r.loop} on {r.device}",
                diverged_at_step=r.diverged_at_step,
                test_acc=r.test_acc,
                steps=r.steps * r.epochs,
                timed_s=r.epoch_s,
                lr=r.lr,
            )
        )
    ]
    problems += [
        f"{g.model}/graphed on {g.device}: its first-epoch loss curve differs from the resident loop's by "
        f"{g.curve_gap:.1%} (tolerance {g.curve_rtol:.0%})"
        for g in graph_ratios
        if not g.curve_matches
    ]
    result = MnistResult(
        "failed" if problems else "ok",
        "",
        str(ctx.data_root),
        ctx.data_digests,
        rates,
        runs,
        speedups,
        ratios,
        sweep,
        crossovers,
        skipped,
        graph_ratios,
    )
    result.summary = "; ".join(problems) if problems else _summary(result)
    return result


def _summary(result: MnistResult) -> str:
    if not result.runs:
        return "; ".join(result.skipped) or "no run"
    best = min(result.runs, key=lambda r: r.epoch_s)
    summary = (
        f"fastest: {best.model}/{best.loop} on {best.device} (batch {best.batch_size}) {best.epoch_s:.2f} "
        f"s/epoch, test acc {best.test_acc:.4f}"
    )
    if result.sweep:
        # A sweep repeats each model/loop once per batch size: without the batch the list cannot be read.
        summary += "; speedup vs CPU per step " + ", ".join(
            f"{r.model}/{r.loop} batch {r.batch_size} {r.speedup:.1f}x" for r in result.sweep if r.speedup
        )
    elif result.speedups:
        summary += "; speedup vs CPU " + ", ".join(f"{s.model}/{s.loop} {s.speedup:.1f}x" for s in result.speedups)
    if result.loop_ratios:
        summary += "; resident vs tutorial " + ", ".join(
            f"{q.model} on {q.device} {q.resident_speedup:.1f}x" for q in result.loop_ratios
        )
    if result.graph_ratios:
        summary += "; graphed vs resident " + ", ".join(
            f"{g.model} on {g.device} {g.graphed_speedup:.2f}x (capture {once(g.capture_s)})"
            for g in result.graph_ratios
        )
    if result.crossovers:
        summary += "; crossover " + ", ".join(f"{c.model}/{c.loop} {c.text}" for c in result.crossovers)
    return summary
