"""What every check gets and gives: a context in, a typed result out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kitbench.probe import Probe

if TYPE_CHECKING:
    import torch


MODELS = ("fnn", "cnn")
LOOPS = ("tutorial", "resident", "graphed")
DEFAULT_LOOPS = ("tutorial", "resident")       # graphed compiles or captures: asked for by name
SWEEP = (16, 64, 256, 1024)                     # --sweep: the batch sizes where a small model's crossover lies


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
    sweep: tuple[int, ...] = ()      # batch sizes to run in turn (empty: batch_size alone)
    seed: int = 0
    threads: int | None = None
    train_limit: int | None = None   # train on the first N samples (tests, --quick)
    lr: float | None = None          # None: each model's recipe rate
    nproc: int | None = None         # ddp: CPU processes (gloo); None: up to 2, as cores allow
    nnodes: int | None = None        # ddp: nodes joining over c10d rendezvous
    rdzv_endpoint: str | None = None  # ddp: host:port of that rendezvous
    ddp_timeout: float = 300.0       # ddp: seconds a collective may wait before the ranks give up
    deterministic: bool = False      # determinism.mode: deterministic kernels, no TF32, fixed threads


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
    status: str     # ok | failed | skipped
    summary: str    # one line for the table
