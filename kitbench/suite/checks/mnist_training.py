"""The MNIST check's training: the data loaded for each loop, one epoch trained and timed, a model evaluated.

Two loops feed the same training step: ``tutorial`` (a DataLoader with ToTensor/Normalize, each batch
moved to the device inside the loop, as the tutorials do) and ``resident`` (the normalized dataset as one
tensor on the device, shuffled index batches); ``graphed`` is the resident loop with its step captured.
All shuffle with the same seeded permutation, so their loss curves are comparable. One-time costs
(dataset load, warm-up, capture) are measured apart from the steady-state epoch time."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import datasets, transforms

from kitbench.suite import devices, digests, models
from kitbench.suite.checks import steps
from kitbench.suite.checks.base import Context
from kitbench.suite.checks.mnist_results import MnistRun
from kitbench.suite.checks.steps import Step, StepProfile
from kitbench.suite.data import MEAN, STD
from kitbench.suite.stats import Summary
from kitbench.suite.timing import timed

CURVE_POINTS = 20  # the loss curve keeps this many means per epoch
_EVAL_BATCH = 1000
_Batch = tuple[torch.Tensor, torch.Tensor]


def resident_tensors(root: Path, train: bool, device: torch.device, limit: int | None) -> _Batch:
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


def _tutorial_batches(ds: Dataset[_Batch], batch: int, gen: torch.Generator, device: torch.device) -> Iterator[_Batch]:
    pin = devices.pinning_supported(device)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, generator=gen, num_workers=0, pin_memory=pin)
    for x, y in loader:
        yield x.to(device, non_blocking=pin), y.to(device, non_blocking=pin)


def _resident_batches(
    x: torch.Tensor, y: torch.Tensor, batch: int, gen: torch.Generator, drop_last: bool = False
) -> Iterator[_Batch]:
    # The same permutation RandomSampler draws from the same generator.
    order = torch.randperm(len(x), generator=gen).to(x.device)
    end = len(x) - len(x) % batch if drop_last and len(x) >= batch else len(x)
    for start in range(0, end, batch):
        index = order[start : start + batch]
        yield x[index], y[index]


def _epoch(
    step: Step,
    model: nn.Module,
    batches: Iterable[_Batch],
    device: torch.device,
    ctx: Context,
    max_steps: int | None = None,
) -> tuple[float, float, torch.Tensor]:
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
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(x), _EVAL_BATCH):
        logits = model(x[start : start + _EVAL_BATCH])
        target = y[start : start + _EVAL_BATCH]
        loss += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(1) == target).sum())
    return correct / len(x), loss / len(x)


def _curve(losses: torch.Tensor) -> list[float]:
    chunks = torch.tensor_split(losses, min(CURVE_POINTS, len(losses)))
    return [round(float(c.mean()), 6) for c in chunks]


def _load(root: Path, loop: str, device: torch.device, limit: int | None) -> tuple[Dataset[_Batch] | _Batch, _Batch]:
    train: Dataset[_Batch] | _Batch = (
        _tutorial_dataset(root, limit) if loop == "tutorial" else resident_tensors(root, True, device, limit)
    )
    return train, resident_tensors(root, False, device, None)


# The tight loop behind each run's floor: a few untimed steps, then the best of five blocks.
_TIGHT_WARMUP, _TIGHT_BLOCKS, _TIGHT_STEPS = 3, 5, 10


class Trainer:
    """One configuration (model, loop, device): data loaded and warmed up on
    construction, then trained one epoch per call, so that configurations can
    take turns and drift in the machine's speed hits all of them alike.

    Each trainer keeps its own random stream (init, dropout, shuffling), so
    taking turns changes no result: same seed, same numbers as alone."""

    def __init__(
        self, ctx: Context, device: torch.device, model_name: str, loop: str, batch_size: int, lr: float
    ) -> None:
        opts = ctx.options
        self.batch_size, self.lr = batch_size, lr
        assert ctx.data_root is not None
        root = ctx.data_root
        self.ctx, self.device, self.model_name, self.loop = ctx, device, model_name, loop
        (self.train_data, (self.test_x, self.test_y)), self.dataset_load_s = timed(
            lambda: _load(root, loop, device, opts.train_limit), device
        )
        data = self.train_data
        self.samples = len(data[0]) if isinstance(data, tuple) else len(data)  # type: ignore[arg-type]
        self.label = f"{model_name}/{loop} on {device}"
        warm_steps = 5 if opts.quick else 20
        ctx.progress.start(f"{self.label}: warm-up", total=warm_steps)
        throwaway = models.build(model_name).to(device)
        warm_opt = models.optimizer(model_name, list(throwaway.parameters()))
        self.warmup_s, _, _ = _epoch(
            steps.eager(throwaway, warm_opt),
            throwaway,
            self._batches(torch.Generator().manual_seed(opts.seed + 1)),
            device,
            ctx,
            max_steps=warm_steps,
        )
        del throwaway, warm_opt
        torch.manual_seed(opts.seed)
        self.model = models.build(model_name).to(device)
        self.opt = models.optimizer(model_name, list(self.model.parameters()), lr)
        self.step = steps.eager(self.model, self.opt)
        self.capture: steps.Captured | None = None
        if loop == "graphed":
            ctx.progress.start(f"{self.label}: compiling or capturing the step (a one-time cost)")
            x, y = next(iter(self._batches(torch.Generator().manual_seed(opts.seed + 1))))
            self.capture = steps.capture(self.model, self.opt, device, x, y)  # CaptureImpossible: skipped
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
        (acc, self.test_loss), eval_s = timed(lambda: evaluate(self.model, self.test_x, self.test_y), self.device)
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
            device=str(self.device),
            model=self.model_name,
            loop=self.loop,
            batch_size=self.batch_size,
            epochs=opts.epochs,
            train_samples=self.samples,
            epoch_s=epoch_s,
            epoch_s_all=self.times,
            samples_per_s=self.samples / epoch_s,
            data_s=Summary.of(self.data_times).median,
            final_loss=self.epoch_losses[-1],
            epoch_losses=self.epoch_losses,
            loss_curve=self.curve,
            test_acc=self.accuracies[-1],
            test_loss=round(self.test_loss, 6),
            epoch_test_acc=self.accuracies,
            dataset_load_s=self.dataset_load_s,
            warmup_s=self.warmup_s,
            eval_s=Summary.of(self.eval_times).median,
            compute_floor_s=floor,
            floor_fraction=floor / epoch_s,
            diverged_at_step=self.diverged_at,
            lr=self.lr,
            steps=self.epoch_steps,
            step_s=epoch_s / max(1, self.epoch_steps),
            capture=self.capture.how if self.capture else None,
            capture_s=self.capture.capture_s if self.capture else None,
            profile=self.profiled(),
            params_sha256=final.sha256,
            tensor_sha256=final.tensors,
        )
