"""An MNIST training epoch, measured honestly, on the device and on the CPU.

Two loops feed the same training step: ``tutorial`` (a DataLoader with
ToTensor/Normalize, each batch moved to the device inside the loop, as the
tutorials do) and ``resident`` (the normalized dataset as one tensor on the
device, shuffled index batches). Both shuffle with the same seeded
permutation, so their loss curves are comparable. One-time costs (dataset
load, warm-up) are reported apart from the steady-state epoch time, and the
configurations take turns epoch by epoch, so ratios compare epochs measured
back to back.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import datasets, transforms

from kitbench._numbers import once
from kitbench.suite import devices, digests, models
from kitbench.suite.checks import steps
from kitbench.suite.checks.base import CheckResult, Context, training_problem
from kitbench.suite.checks.steps import Step, StepProfile
from kitbench.suite.data import MEAN, STD
from kitbench.suite.stats import Summary
from kitbench.suite.timing import measure, timed

_CURVE_POINTS = 20          # the loss curve keeps this many means per epoch
# The graphed loop's first-epoch loss curve (its 20 means) may differ from the resident loop's by this
# much (mean absolute difference over the mean loss), verify's tolerance across builds. The two start
# identical (same weights, batches and dropout masks); compiled kernels reorder float sums, and the
# 1e-7 differences compound step by step (a full epoch here: 0.14 % for the fnn, 1.7 % for the cnn,
# whose tutorial and resident loops differ by 9.5 %). A wrong capture (a stale batch, a missed
# update) is far larger.
CURVE_RTOL = 0.05
_EVAL_BATCH = 1000
_Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class MnistRun:
    device: str
    model: str
    loop: str
    batch_size: int
    epochs: int
    train_samples: int
    epoch_s: float                  # median over epochs, steady state
    epoch_s_all: list[float]
    samples_per_s: float
    data_s: float                   # host time spent waiting for batches (median epoch)
    final_loss: float               # mean training loss of the last epoch
    epoch_losses: list[float]
    loss_curve: list[float]
    test_acc: float                 # after the last epoch
    test_loss: float
    epoch_test_acc: list[float]     # after each epoch (evaluation is not part of epoch_s)
    dataset_load_s: float           # one-time: reading and preparing the data
    warmup_s: float                 # one-time: a few untimed steps on a throwaway model
    eval_s: float
    compute_floor_s: float          # the epoch's full batches at the fastest step of the same math in a tight loop
    floor_fraction: float           # compute_floor_s / epoch_s: 1.0, the loop costs nothing beyond its steps
    diverged_at_step: int | None = None     # the first training step whose loss was not finite
    lr: float = 0.0                 # the rate it trained with (scaled with the batch: see SweepRow)
    steps: int = 0                  # optimizer steps per epoch
    step_s: float = 0.0             # epoch_s / steps
    capture: str | None = None      # graphed: what captured the step
    capture_s: float | None = None  # graphed: one-time compile or capture cost, apart from warm-up
    profile: StepProfile | None = None
    params_sha256: str | None = None        # the final parameters (digests.parameters): bitwise identity
    tensor_sha256: dict[str, str] = field(default_factory=dict)    # per parameter, shortened: which one differs


@dataclass
class Speedup:
    model: str
    loop: str
    cpu_epoch_s: float
    device_epoch_s: float
    speedup: float                  # median of the epoch-by-epoch ratios
    per_epoch: list[float]


@dataclass
class LoopRatio:
    device: str
    model: str
    tutorial_epoch_s: float
    resident_epoch_s: float
    resident_speedup: float         # how many times faster the resident loop's epoch is (median of epochs)
    per_epoch: list[float]          # each epoch pair was trained back to back


@dataclass
class SweepRow:
    model: str
    loop: str
    batch_size: int
    lr: float                       # the linear scaling rule for SGD: recipe rate x batch / 64
    cpu_step_s: float | None
    device_step_s: float | None
    speedup: float | None           # cpu_step_s / device_step_s
    cpu_test_acc: float | None
    device_test_acc: float | None


@dataclass
class Crossover:
    model: str
    loop: str
    batch_size: int | None          # the smallest batch from which the accelerator wins at every larger one
    text: str


@dataclass
class GraphRatio:
    device: str
    model: str
    batch_size: int
    resident_epoch_s: float
    graphed_epoch_s: float
    graphed_speedup: float          # resident epoch / graphed epoch, median of back-to-back epoch pairs
    per_epoch: list[float]
    capture: str
    capture_s: float                # one-time, apart from every epoch
    curve_gap: float                # mean |loss curve difference| / mean loss, first epoch
    curve_rtol: float
    curve_matches: bool


@dataclass
class MnistResult(CheckResult):
    data_root: str
    sha256: dict[str, str]
    matmul_gflops: dict[str, float] = field(default_factory=dict)
    runs: list[MnistRun] = field(default_factory=list)
    speedups: list[Speedup] = field(default_factory=list)
    loop_ratios: list[LoopRatio] = field(default_factory=list)
    sweep: list[SweepRow] = field(default_factory=list)
    crossovers: list[Crossover] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    graph_ratios: list[GraphRatio] = field(default_factory=list)


def matmul_gflops(device: torch.device, size: int = 1024) -> float:
    """Single-precision 1024x1024 matmul rate on ``device`` (the fastest sample), recorded beside the runs
    as the machine's headline rate. Not a floor: a model's own, smaller GEMMs can run faster than it."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    seconds = measure(lambda: a @ b, device, repeats=9, warmup=2, inner=4)
    return 2 * size**3 / seconds.min / 1e9


def _resident_tensors(root: Path, train: bool, device: torch.device, limit: int | None) -> _Batch:
    ds = datasets.MNIST(str(root), train=train, download=False)
    images, labels = ds.data, ds.targets
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    x = ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)
    return x.to(device), labels.to(device)


def _tutorial_dataset(root: Path, limit: int | None) -> Dataset[_Batch]:
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    ds: Dataset[_Batch] = datasets.MNIST(str(root), train=True, download=False, transform=transform)
    return Subset(ds, range(limit)) if limit is not None else ds


def _tutorial_batches(ds: Dataset[_Batch], batch: int, gen: torch.Generator,
                      device: torch.device) -> Iterator[_Batch]:
    pin = devices.pinning_supported(device)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, generator=gen, num_workers=0, pin_memory=pin)
    for x, y in loader:
        yield x.to(device, non_blocking=pin), y.to(device, non_blocking=pin)


def _resident_batches(x: torch.Tensor, y: torch.Tensor, batch: int, gen: torch.Generator,
                      drop_last: bool = False) -> Iterator[_Batch]:
    # The same permutation RandomSampler draws from the same generator.
    order = torch.randperm(len(x), generator=gen).to(x.device)
    end = len(x) - len(x) % batch if drop_last and len(x) >= batch else len(x)
    for start in range(0, end, batch):
        index = order[start:start + batch]
        yield x[index], y[index]


def _epoch(step: Step, model: nn.Module, batches: Iterable[_Batch], device: torch.device,
           ctx: Context, max_steps: int | None = None) -> tuple[float, float, torch.Tensor]:
    """Train one pass; return (seconds, seconds waiting for data, per-step losses)."""
    model.train()
    losses: list[torch.Tensor] = []
    data_s = 0.0
    iterator = iter(batches)
    devices.synchronize(device)
    start = time.perf_counter()
    while max_steps is None or len(losses) < max_steps:
        fetch = time.perf_counter()
        try:
            x, y = next(iterator)
        except StopIteration:
            break
        data_s += time.perf_counter() - fetch
        losses.append(step(x, y))
        ctx.progress.advance()
    devices.synchronize(device)
    return time.perf_counter() - start, data_s, torch.stack(losses).float().cpu()


@torch.no_grad()
def _evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(x), _EVAL_BATCH):
        logits = model(x[start:start + _EVAL_BATCH])
        target = y[start:start + _EVAL_BATCH]
        loss += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(1) == target).sum())
    return correct / len(x), loss / len(x)


def _curve(losses: torch.Tensor) -> list[float]:
    chunks = torch.tensor_split(losses, min(_CURVE_POINTS, len(losses)))
    return [round(float(c.mean()), 6) for c in chunks]


def _load(root: Path, loop: str, device: torch.device,
          limit: int | None) -> tuple[Dataset[_Batch] | _Batch, _Batch]:
    train: Dataset[_Batch] | _Batch = (_tutorial_dataset(root, limit) if loop == "tutorial"
                                       else _resident_tensors(root, True, device, limit))
    return train, _resident_tensors(root, False, device, None)


# The tight loop behind each run's floor: a few untimed steps, then the best of five blocks.
_TIGHT_WARMUP, _TIGHT_BLOCKS, _TIGHT_STEPS = 3, 5, 10


class _Trainer:
    """One configuration (model, loop, device): data loaded and warmed up on
    construction, then trained one epoch per call, so that configurations can
    take turns and drift in the machine's speed hits all of them alike.

    Each trainer keeps its own random stream (init, dropout, shuffling), so
    taking turns changes no result: same seed, same numbers as alone."""

    def __init__(self, ctx: Context, device: torch.device, model_name: str, loop: str, batch_size: int,
                 lr: float) -> None:
        opts = ctx.options
        self.batch_size, self.lr = batch_size, lr
        assert ctx.data_root is not None
        root = ctx.data_root
        self.ctx, self.device, self.model_name, self.loop = ctx, device, model_name, loop
        (self.train_data, (self.test_x, self.test_y)), self.dataset_load_s = timed(
            lambda: _load(root, loop, device, opts.train_limit), device)
        data = self.train_data
        self.samples = len(data[0]) if isinstance(data, tuple) else len(data)  # type: ignore[arg-type]
        self.label = f"{model_name}/{loop} on {device}"
        warm_steps = 5 if opts.quick else 20
        ctx.progress.start(f"{self.label}: warm-up", total=warm_steps)
        throwaway = models.build(model_name).to(device)
        warm_opt = models.optimizer(model_name, list(throwaway.parameters()))
        self.warmup_s, _, _ = _epoch(steps.eager(throwaway, warm_opt), throwaway,
                                     self._batches(torch.Generator().manual_seed(opts.seed + 1)), device, ctx,
                                     max_steps=warm_steps)
        del throwaway, warm_opt
        torch.manual_seed(opts.seed)
        self.model = models.build(model_name).to(device)
        self.opt = models.optimizer(model_name, list(self.model.parameters()), lr)
        self.step = steps.eager(self.model, self.opt)
        self.capture: steps.Captured | None = None
        if loop == "graphed":
            ctx.progress.start(f"{self.label}: compiling or capturing the step (a one-time cost)")
            x, y = next(iter(self._batches(torch.Generator().manual_seed(opts.seed + 1))))
            self.capture = steps.capture(self.model, self.opt, device, x, y)     # CaptureImpossible: skipped
            self.step = self.capture.step
        self.rng = torch.random.get_rng_state()
        self.device_rng = steps.device_rng_state(device)
        self.gen = torch.Generator().manual_seed(opts.seed)
        self.times: list[float] = []
        self.data_times: list[float] = []
        self.epoch_losses: list[float] = []
        self.curve: list[float] = []
        self.accuracies: list[float] = []
        self.eval_times: list[float] = []
        self.test_loss = 0.0
        self.steps = 0
        self.diverged_at: int | None = None

    def _batches(self, gen: torch.Generator) -> Iterator[_Batch]:
        data = self.train_data
        if isinstance(data, tuple):
            # A captured step has static shapes: the graphed loop leaves out a last, partial batch.
            return _resident_batches(*data, self.batch_size, gen, drop_last=self.loop == "graphed")
        return _tutorial_batches(data, self.batch_size, gen, self.device)

    @contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Run on this trainer's own random stream (the CPU's, and its device's own on CUDA and
        MPS, where dropout masks are drawn), keeping where it got to."""
        with steps.fork_rng(self.device):
            torch.random.set_rng_state(self.rng)
            if self.device_rng is not None:
                steps.set_device_rng_state(self.device, self.device_rng)
            yield
            self.rng = torch.random.get_rng_state()
            self.device_rng = steps.device_rng_state(self.device)

    def epoch(self) -> None:
        opts = self.ctx.options
        total = -(-self.samples // self.batch_size)
        self.ctx.progress.start(f"{self.label}: epoch {len(self.times) + 1}/{opts.epochs}", total=total)
        with self._own_rng():
            seconds, data_s, losses = _epoch(self.step, self.model, self._batches(self.gen), self.device, self.ctx)
        bad = (~torch.isfinite(losses)).nonzero()
        if self.diverged_at is None and len(bad):
            self.diverged_at = self.steps + int(bad[0])
        self.steps += len(losses)
        self.epoch_steps = len(losses)
        self.times.append(seconds)
        self.data_times.append(data_s)
        self.epoch_losses.append(round(float(losses.mean()), 6))
        self.curve += _curve(losses)
        (acc, self.test_loss), eval_s = timed(lambda: _evaluate(self.model, self.test_x, self.test_y), self.device)
        self.accuracies.append(acc)
        self.eval_times.append(eval_s)

    def profiled(self) -> StepProfile | None:
        """A few more steps under the profiler, after the timed epochs. Not the tutorial loop (its time is
        the loader's), nor a torch.compile'd step: under the profiler torch.compile compiles it again
        (minutes on a small CPU), while a CUDA graph replays as it is."""
        if self.loop == "tutorial" or (self.capture is not None and self.device.type != "cuda"):
            return None
        batches = list(itertools.islice(self._batches(torch.Generator().manual_seed(0)), 10))
        self.ctx.progress.start(f"{self.label}: profiling {len(batches)} steps")
        with self._own_rng():
            return steps.profile(self.step, batches, self.device)

    def tight_step_s(self) -> float:
        """This run's own step (model, optimizer, capture), repeated on one batch already on the device with
        nothing between steps: the fastest per-step time over five blocks, each synchronized only at its ends
        as an epoch is. An epoch of the same math cannot beat it, which a floor from a 1024x1024 matmul's
        rate did not promise: the model's own GEMMs ran faster than that, and the "floor" came out above
        the epoch (251 %). Run after the digest is taken: these steps change the model."""
        x, y = next(iter(self._batches(torch.Generator().manual_seed(0))))
        blocks: list[float] = []
        with self._own_rng():
            for _ in range(_TIGHT_WARMUP):
                self.step(x, y)
            for _ in range(_TIGHT_BLOCKS):
                devices.synchronize(self.device)
                start = time.perf_counter()
                for _ in range(_TIGHT_STEPS):
                    self.step(x, y)
                devices.synchronize(self.device)
                blocks.append((time.perf_counter() - start) / _TIGHT_STEPS)
        return min(blocks)

    def result(self) -> MnistRun:
        opts = self.ctx.options
        final = digests.parameters(self.model)
        epoch_s = Summary.of(self.times).median
        # Full batches only: a last, partial batch costs something, so leaving it out keeps a lower bound.
        floor = self.tight_step_s() * min(self.epoch_steps, self.samples // self.batch_size)
        return MnistRun(
            device=str(self.device), model=self.model_name, loop=self.loop, batch_size=self.batch_size,
            epochs=opts.epochs, train_samples=self.samples, epoch_s=epoch_s, epoch_s_all=self.times,
            samples_per_s=self.samples / epoch_s, data_s=Summary.of(self.data_times).median,
            final_loss=self.epoch_losses[-1], epoch_losses=self.epoch_losses, loss_curve=self.curve,
            test_acc=self.accuracies[-1], test_loss=round(self.test_loss, 6), epoch_test_acc=self.accuracies,
            dataset_load_s=self.dataset_load_s, warmup_s=self.warmup_s, eval_s=Summary.of(self.eval_times).median,
            compute_floor_s=floor, floor_fraction=floor / epoch_s, diverged_at_step=self.diverged_at,
            lr=self.lr, steps=self.epoch_steps, step_s=epoch_s / max(1, self.epoch_steps),
            capture=self.capture.how if self.capture else None,
            capture_s=self.capture.capture_s if self.capture else None, profile=self.profiled(),
            params_sha256=final.sha256, tensor_sha256=final.tensors,
        )


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
    a, b = run_r.loss_curve[:_CURVE_POINTS], run_g.loss_curve[:_CURVE_POINTS]
    n = min(len(a), len(b))
    total = sum(abs(v) for v in a[:n])
    gap = sum(abs(p - q) for p, q in zip(a[:n], b[:n], strict=True)) / total if total else float("nan")
    median, per_epoch = _ratios(run_r, run_g)
    return GraphRatio(run_g.device, run_g.model, run_g.batch_size, run_r.epoch_s, run_g.epoch_s, median, per_epoch,
                      run_g.capture or "", run_g.capture_s or 0.0, gap, CURVE_RTOL, gap <= CURVE_RTOL)


def _crossover(model: str, loop: str, rows: list[SweepRow]) -> Crossover:
    measured = [r for r in rows if r.speedup is not None]
    wins = [r.speedup is not None and r.speedup > 1 for r in measured]
    first = next((i for i in range(len(wins)) if all(wins[i:])), None)
    if not measured:
        return Crossover(model, loop, None, "no accelerator here: nothing to cross")
    if first is None:
        return Crossover(model, loop, None, f"the accelerator never wins, up to batch {measured[-1].batch_size}")
    batch = measured[first].batch_size
    return Crossover(model, loop, batch, f"the accelerator wins from batch {batch}" +
                     ("" if first else ", the smallest measured"))


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
                        trainers.append(_Trainer(ctx, d, model_name, loop, batch, lr))
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
                    rows.append(SweepRow(m, loop, b, either.lr if either else 0.0,
                                         on_cpu.step_s if on_cpu else None, accel.step_s if accel else None,
                                         on_cpu.step_s / accel.step_s if on_cpu and accel else None,
                                         on_cpu.test_acc if on_cpu else None, accel.test_acc if accel else None))
                sweep += rows
                if rows:
                    crossovers.append(_crossover(m, loop, rows))
    problems = [p for r in runs if (p := training_problem(
        f"{r.model}/{r.loop} on {r.device}", diverged_at_step=r.diverged_at_step, test_acc=r.test_acc,
        steps=r.steps * r.epochs, timed_s=r.epoch_s, lr=r.lr))]
    problems += [f"{g.model}/graphed on {g.device}: its first-epoch loss curve differs from the resident loop's by "
                 f"{g.curve_gap:.1%} (tolerance {g.curve_rtol:.0%})" for g in graph_ratios if not g.curve_matches]
    result = MnistResult("failed" if problems else "ok", "", str(ctx.data_root), ctx.data_digests, rates, runs,
                         speedups, ratios, sweep, crossovers, skipped, graph_ratios)
    result.summary = "; ".join(problems) if problems else _summary(result)
    return result


def _summary(result: MnistResult) -> str:
    if not result.runs:
        return "; ".join(result.skipped) or "no run"
    best = min(result.runs, key=lambda r: r.epoch_s)
    summary = (f"fastest: {best.model}/{best.loop} on {best.device} (batch {best.batch_size}) {best.epoch_s:.2f} "
               f"s/epoch, test acc {best.test_acc:.4f}")
    if result.sweep:
        # A sweep repeats each model/loop once per batch size: without the batch the list cannot be read.
        summary += "; speedup vs CPU per step " + ", ".join(
            f"{r.model}/{r.loop} batch {r.batch_size} {r.speedup:.1f}x" for r in result.sweep if r.speedup)
    elif result.speedups:
        summary += "; speedup vs CPU " + ", ".join(f"{s.model}/{s.loop} {s.speedup:.1f}x" for s in result.speedups)
    if result.loop_ratios:
        summary += "; resident vs tutorial " + ", ".join(
            f"{q.model} on {q.device} {q.resident_speedup:.1f}x" for q in result.loop_ratios)
    if result.graph_ratios:
        summary += "; graphed vs resident " + ", ".join(
            f"{g.model} on {g.device} {g.graphed_speedup:.2f}x (capture {once(g.capture_s)})"
            for g in result.graph_ratios)
    if result.crossovers:
        summary += "; crossover " + ", ".join(f"{c.model}/{c.loop} {c.text}" for c in result.crossovers)
    return summary
