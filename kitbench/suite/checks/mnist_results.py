"""What the MNIST check records: each run, and the ratios and sweep read from runs measured back to back.

Apart from the training so that a record's types can be named (compare, report, the record's schema
checks) without the training loops' imports."""

from __future__ import annotations

from dataclasses import dataclass, field

from kitbench.suite.checks.base import CheckResult
from kitbench.suite.checks.steps import StepProfile


@dataclass
class MnistRun:
    """Read back as ``records.types.MnistRun``, checked against ``$defs/mnist_run`` of run.schema.json: a field
    added here goes there too, and the schema is written from that (why two declarations:
    ``kitbench/records/types.py``)."""

    device: str
    model: str
    loop: str
    batch_size: int
    epochs: int
    train_samples: int
    epoch_s: float  # median over epochs, steady state
    epoch_s_all: list[float]
    samples_per_s: float
    data_s: float  # host time spent waiting for batches (median epoch)
    final_loss: float  # mean training loss of the last epoch
    epoch_losses: list[float]
    loss_curve: list[float]
    test_acc: float  # after the last epoch
    test_loss: float
    epoch_test_acc: list[float]  # after each epoch (evaluation is not part of epoch_s)
    dataset_load_s: float  # one-time: reading and preparing the data
    warmup_s: float  # one-time: a few untimed steps on a throwaway model
    eval_s: float
    compute_floor_s: float  # the epoch's full batches at the fastest step of the same math in a tight loop
    floor_fraction: float  # compute_floor_s / epoch_s: 1.0, the loop costs nothing beyond its steps
    diverged_at_step: int | None = None  # the first training step whose loss was not finite
    lr: float = 0.0  # the rate it trained with (scaled with the batch: see SweepRow)
    steps: int = 0  # optimizer steps per epoch
    step_s: float = 0.0  # epoch_s / steps
    capture: str | None = None  # graphed: what captured the step
    capture_s: float | None = None  # graphed: one-time compile or capture cost, apart from warm-up
    profile: StepProfile | None = None
    params_sha256: str | None = None  # the final parameters (digests.parameters): bitwise identity
    tensor_sha256: dict[str, str] = field(default_factory=dict)  # per parameter, shortened: which one differs


@dataclass
class Speedup:
    model: str
    loop: str
    cpu_epoch_s: float
    device_epoch_s: float
    speedup: float  # median of the epoch-by-epoch ratios
    per_epoch: list[float]


@dataclass
class LoopRatio:
    device: str
    model: str
    tutorial_epoch_s: float
    resident_epoch_s: float
    resident_speedup: float  # how many times faster the resident loop's epoch is (median of epochs)
    per_epoch: list[float]  # each epoch pair was trained back to back


@dataclass
class SweepRow:
    model: str
    loop: str
    batch_size: int
    lr: float  # the linear scaling rule for SGD: recipe rate x batch / 64
    cpu_step_s: float | None
    device_step_s: float | None
    speedup: float | None  # cpu_step_s / device_step_s
    cpu_test_acc: float | None
    device_test_acc: float | None


@dataclass
class Crossover:
    model: str
    loop: str
    batch_size: int | None  # the smallest batch from which the accelerator wins at every larger one
    text: str


@dataclass
class GraphRatio:
    device: str
    model: str
    batch_size: int
    resident_epoch_s: float
    graphed_epoch_s: float
    graphed_speedup: float  # resident epoch / graphed epoch, median of back-to-back epoch pairs
    per_epoch: list[float]
    capture: str
    capture_s: float  # one-time, apart from every epoch
    curve_gap: float  # mean |loss curve difference| / mean loss, first epoch
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
