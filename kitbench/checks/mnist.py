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

from kitbench import devices, models
from kitbench.checks.base import CheckResult, Context
from kitbench.data import MEAN, STD
from kitbench.stats import Summary
from kitbench.timing import measure, timed

_CURVE_POINTS = 20          # the loss curve keeps this many means per epoch
# Ten balanced classes: guessing scores 0.10. A run that ends below twice that has not
# learned (a rate too high, a broken build), whatever its clock says: the check fails.
CHANCE_FLOOR = 0.2
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
    compute_floor_s: float          # the epoch's FLOPs at this device's measured matmul rate
    floor_fraction: float           # compute_floor_s / epoch_s: 1.0 would be matmul-bound perfection
    diverged_at_step: int | None = None     # the first training step whose loss was not finite


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
class MnistResult(CheckResult):
    data_root: str
    sha256: dict[str, str]
    matmul_gflops: dict[str, float] = field(default_factory=dict)
    runs: list[MnistRun] = field(default_factory=list)
    speedups: list[Speedup] = field(default_factory=list)
    loop_ratios: list[LoopRatio] = field(default_factory=list)


def matmul_gflops(device: torch.device, size: int = 1024) -> float:
    """Single-precision matmul rate on ``device``: the yardstick for the compute floor.

    The fastest sample, not the median: a floor is a lower bound on time, so it
    takes the best rate the machine showed (on a shared host a disturbed median
    once put the "floor" above the epoch itself)."""
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


def _resident_batches(x: torch.Tensor, y: torch.Tensor, batch: int, gen: torch.Generator) -> Iterator[_Batch]:
    # The same permutation RandomSampler draws from the same generator.
    order = torch.randperm(len(x), generator=gen).to(x.device)
    for start in range(0, len(x), batch):
        index = order[start:start + batch]
        yield x[index], y[index]


def _epoch(model: nn.Module, opt: torch.optim.Optimizer, batches: Iterable[_Batch], device: torch.device,
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
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        # Kept on the device: .item() here would synchronize every step.
        losses.append(loss.detach())
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
    train: Dataset[_Batch] | _Batch = (_resident_tensors(root, True, device, limit) if loop == "resident"
                                       else _tutorial_dataset(root, limit))
    return train, _resident_tensors(root, False, device, None)


class _Trainer:
    """One configuration (model, loop, device): data loaded and warmed up on
    construction, then trained one epoch per call, so that configurations can
    take turns and drift in the machine's speed hits all of them alike.

    Each trainer keeps its own random stream (init, dropout, shuffling), so
    taking turns changes no result: same seed, same numbers as alone."""

    def __init__(self, ctx: Context, device: torch.device, model_name: str, loop: str, gflops: float) -> None:
        opts = ctx.options
        assert ctx.data_root is not None
        root = ctx.data_root
        self.ctx, self.device, self.model_name, self.loop, self.gflops = ctx, device, model_name, loop, gflops
        (self.train_data, (self.test_x, self.test_y)), self.dataset_load_s = timed(
            lambda: _load(root, loop, device, opts.train_limit), device)
        data = self.train_data
        self.samples = len(data[0]) if isinstance(data, tuple) else len(data)  # type: ignore[arg-type]
        self.label = f"{model_name}/{loop} on {device}"
        warm_steps = 5 if opts.quick else 20
        ctx.progress.start(f"{self.label}: warm-up", total=warm_steps)
        throwaway = models.build(model_name).to(device)
        warm_opt = models.optimizer(model_name, list(throwaway.parameters()))
        self.warmup_s, _, _ = _epoch(throwaway, warm_opt, self._batches(torch.Generator().manual_seed(opts.seed + 1)),
                                     device, ctx, max_steps=warm_steps)
        del throwaway, warm_opt
        torch.manual_seed(opts.seed)
        self.model = models.build(model_name).to(device)
        self.opt = models.optimizer(model_name, list(self.model.parameters()), opts.lr)
        self.rng = torch.random.get_rng_state()
        self.cuda_rng: torch.Tensor | None = None
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
            return _resident_batches(*data, self.ctx.options.batch_size, gen)
        return _tutorial_batches(data, self.ctx.options.batch_size, gen, self.device)

    @contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Run on this trainer's own random stream (CPU, and CUDA's), keeping where it got to."""
        cuda = self.device.type == "cuda"
        with torch.random.fork_rng(devices=[self.device] if cuda else []):
            torch.random.set_rng_state(self.rng)
            if cuda and self.cuda_rng is not None:
                torch.cuda.set_rng_state(self.cuda_rng, self.device)
            yield
            self.rng = torch.random.get_rng_state()
            if cuda:
                self.cuda_rng = torch.cuda.get_rng_state(self.device)

    def epoch(self) -> None:
        opts = self.ctx.options
        steps = -(-self.samples // opts.batch_size)
        self.ctx.progress.start(f"{self.label}: epoch {len(self.times) + 1}/{opts.epochs}", total=steps)
        with self._own_rng():
            seconds, data_s, losses = _epoch(self.model, self.opt, self._batches(self.gen), self.device, self.ctx)
        bad = (~torch.isfinite(losses)).nonzero()
        if self.diverged_at is None and len(bad):
            self.diverged_at = self.steps + int(bad[0])
        self.steps += len(losses)
        self.times.append(seconds)
        self.data_times.append(data_s)
        self.epoch_losses.append(round(float(losses.mean()), 6))
        self.curve += _curve(losses)
        (acc, self.test_loss), eval_s = timed(lambda: _evaluate(self.model, self.test_x, self.test_y), self.device)
        self.accuracies.append(acc)
        self.eval_times.append(eval_s)

    def result(self) -> MnistRun:
        opts = self.ctx.options
        epoch_s = Summary.of(self.times).median
        floor = models.training_flops_per_sample(self.model_name) * self.samples / (self.gflops * 1e9)
        return MnistRun(
            device=str(self.device), model=self.model_name, loop=self.loop, batch_size=opts.batch_size,
            epochs=opts.epochs, train_samples=self.samples, epoch_s=epoch_s, epoch_s_all=self.times,
            samples_per_s=self.samples / epoch_s, data_s=Summary.of(self.data_times).median,
            final_loss=self.epoch_losses[-1], epoch_losses=self.epoch_losses, loss_curve=self.curve,
            test_acc=self.accuracies[-1], test_loss=round(self.test_loss, 6), epoch_test_acc=self.accuracies,
            dataset_load_s=self.dataset_load_s, warmup_s=self.warmup_s, eval_s=Summary.of(self.eval_times).median,
            compute_floor_s=floor, floor_fraction=floor / epoch_s, diverged_at_step=self.diverged_at,
        )


def _ratios(slow: MnistRun, fast: MnistRun) -> tuple[float, list[float]]:
    """The median of epoch-by-epoch ratios: each pair was measured back to back."""
    per_epoch = [a / b for a, b in zip(slow.epoch_s_all, fast.epoch_s_all, strict=True)]
    return Summary.of(per_epoch).median, [round(r, 3) for r in per_epoch]


def _problem(run: MnistRun, lr: float) -> str:
    label = f"{run.model}/{run.loop} on {run.device}"
    if run.diverged_at_step is not None:
        return f"{label} diverged: the training loss is not finite from step {run.diverged_at_step} (lr {lr})"
    return f"{label} did not learn: test accuracy {run.test_acc:.4f} is below {CHANCE_FLOOR} (chance is 0.10)"


def run(ctx: Context) -> MnistResult:
    assert ctx.data_root is not None
    device = ctx.device
    cpu = torch.device("cpu")
    run_devices = [device, cpu] if devices.is_accelerator(device) else [device]
    rates = {str(d): matmul_gflops(d) for d in run_devices}
    runs: list[MnistRun] = []
    for model_name in ctx.options.models:
        trainers = [_Trainer(ctx, d, model_name, loop, rates[str(d)])
                    for loop in ctx.options.loops for d in run_devices]
        for _ in range(ctx.options.epochs):
            for trainer in trainers:
                trainer.epoch()
        ctx.progress.done()
        runs += [t.result() for t in trainers]
    by_key = {(r.device, r.model, r.loop): r for r in runs}
    speedups = []
    if devices.is_accelerator(device):
        for (d, m, loop), fast in by_key.items():
            slow = by_key.get(("cpu", m, loop))
            if d != "cpu" and slow is not None:
                median, per_epoch = _ratios(slow, fast)
                speedups.append(Speedup(m, loop, slow.epoch_s, fast.epoch_s, median, per_epoch))
    ratios = []
    for (d, m, loop), tutorial in by_key.items():
        resident = by_key.get((d, m, "resident"))
        if loop == "tutorial" and resident is not None:
            median, per_epoch = _ratios(tutorial, resident)
            ratios.append(LoopRatio(d, m, tutorial.epoch_s, resident.epoch_s, median, per_epoch))
    problems = [_problem(r, ctx.options.lr or models.RECIPE_LR[r.model]) for r in runs
                if r.diverged_at_step is not None or r.test_acc < CHANCE_FLOOR]
    if problems:
        return MnistResult("failed", "; ".join(problems), str(ctx.data_root), ctx.data_digests, rates, runs,
                           speedups, ratios)
    best = min(runs, key=lambda r: r.epoch_s)
    summary = (f"fastest: {best.model}/{best.loop} on {best.device} {best.epoch_s:.2f} s/epoch, "
               f"test acc {best.test_acc:.4f}")
    if speedups:
        summary += "; speedup vs CPU " + ", ".join(f"{s.model}/{s.loop} {s.speedup:.1f}x" for s in speedups)
    if ratios:
        summary += "; resident vs tutorial " + ", ".join(
            f"{q.model} on {q.device} {q.resident_speedup:.1f}x" for q in ratios)
    return MnistResult("ok", summary, str(ctx.data_root), ctx.data_digests, rates, runs, speedups, ratios)
