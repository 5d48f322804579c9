"""What every check gets and gives: a context in, a typed result out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kitbench.machine.probe import Probe
from kitbench.records.types import CheckStatus

if TYPE_CHECKING:
    import torch


MODELS = ("fnn", "cnn")
LOOPS = ("tutorial", "resident", "graphed")
DEFAULT_LOOPS = ("tutorial", "resident")  # graphed compiles or captures: asked for by name
SWEEP = (16, 64, 256, 1024)  # --sweep: the batch sizes where a small model's crossover lies
# Ten balanced classes: guessing scores 0.10. A run of at least FLOOR_STEPS optimizer steps that ends
# below twice that has not learned (a rate too high, a broken build), whatever its clock says: the
# check fails. (32 SGD steps at the recipe's rate already reach 0.2; a few steps may not.)
CHANCE_FLOOR = 0.2
FLOOR_STEPS = 50


def training_problem(
    label: str, *, diverged_at_step: int | None, test_acc: float, steps: int, timed_s: float, lr: float
) -> str | None:
    """Why a training run's figures cannot be vouched for, or None: the one rule of every check that trains
    (MNIST, DDP). A diverged loss, a run that timed nothing, or one that ended at chance is never "ok"."""
    if diverged_at_step is not None:
        return f"{label} diverged: the training loss is not finite from step {diverged_at_step} (lr {lr})"
    if steps < 1 or not timed_s > 0:
        return (
            f"{label} timed nothing: {steps} optimizer step(s) in {timed_s:.3g} s "
            "(fewer training images than one batch?)"
        )
    if not test_acc >= CHANCE_FLOOR and steps >= FLOOR_STEPS:
        return f"{label} did not learn: test accuracy {test_acc:.4f} is below {CHANCE_FLOOR} (chance is 0.10)"
    return None


class Progress(Protocol):
    """Progress reporting, supplied by the caller; the library never prints."""

    def start(self, label: str, total: float | None = None) -> None: ...

    def advance(self, amount: float = 1) -> None: ...

    def done(self) -> None: ...


class NoProgress:
    def start(self, label: str, total: float | None = None) -> None:
        pass

    def advance(self, amount: float = 1) -> None:
        pass

    def done(self) -> None:
        pass


@dataclass(frozen=True)
class Options:
    """The suite's knobs, validated by ``suite.validate_options``."""

    checks: tuple[str, ...] = ("availability", "moves", "mnist")
    device: str = "auto"
    data: Path | None = None
    offline: bool = False
    quick: bool = False
    models: tuple[str, ...] = ("fnn",)
    loops: tuple[str, ...] = ("resident", "tutorial")
    epochs: int = 1
    batch_size: int = 64
    sweep: tuple[int, ...] = ()  # batch sizes to run in turn (empty: batch_size alone)
    seed: int = 0
    threads: int | None = None
    train_limit: int | None = None  # train on the first N samples (tests, --quick)
    lr: float | None = None  # None: each model's recipe rate
    nproc: int | None = None  # ddp: CPU processes (gloo); None: up to 2, as cores allow
    nnodes: int | None = None  # ddp: nodes joining over c10d rendezvous
    rdzv_endpoint: str | None = None  # ddp: host:port of that rendezvous
    ddp_timeout: float = 300.0  # ddp: seconds a collective may wait before the ranks give up
    deterministic: bool = False  # determinism.mode: deterministic kernels, no TF32, fixed threads


@dataclass
class Context:
    device: torch.device
    machine: Probe
    options: Options
    progress: Progress
    data_root: Path | None = None
    data_digests: dict[str, str] = field(default_factory=dict)


@dataclass
class CheckResult:
    status: CheckStatus
    summary: str  # one line for the table
