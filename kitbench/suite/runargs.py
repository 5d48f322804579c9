"""``kitbench run``'s options: one definition for the command line, and for everything that must
read a run's arguments the way run itself does (replay, from a record's command line; fleet, from
the arguments after ``--``), without importing the command line."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from kitbench import _numbers
from kitbench.errors import UsageError
from kitbench.suite.checks.base import SWEEP


def whole(text: str) -> int:
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    value = _numbers.whole(digits)
    if value is None:
        if len(digits) > _numbers.MAX_DIGITS:  # each knob's range is checked later
            raise argparse.ArgumentTypeError(
                f"expected a whole number of at most {_numbers.MAX_DIGITS} digits, not {text[:24]!r}..."
            )
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}")
    return -value if sign else value


def file_path(text: str) -> Path:
    """A record's file: ``dir/`` would silently become a file named ``dir``."""
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text[:200]!r} ends in a separator: give a file name, such as run.json")
    return Path(text)


def sizes(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(whole(part) for part in text.split(",")))


def positive_int(text: str) -> int:
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--check",
        dest="checks",
        action="append",
        metavar="NAME",
        help="availability, moves, mnist or ddp (repeatable; default: the first three, in that order)",
    )
    run.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA or ROCm, then XPU, then MPS, then CPU), cpu, cuda, cuda:N (also an AMD GPU "
        "on a ROCm build), xpu, xpu:N or mps (default: auto)",
    )
    run.add_argument("--data", type=Path, help="directory holding MNIST/raw (default: KITBENCH_DATA or the cache)")
    run.add_argument("--offline", action="store_true", help="never download MNIST")
    run.add_argument(
        "--out",
        type=file_path,
        help="record file (default: a new results/<target>/<UTC time>-<id>.json); "
        "never replaces anything but a kitbench record, that only with --force",
    )
    run.add_argument("--force", action="store_true", help="let --out replace an existing kitbench record")
    run.add_argument(
        "--quick", action="store_true", help="fewer sizes and repeats; MNIST on the first 6,000 training images"
    )
    run.add_argument("--json", action="store_true", help="print the record as JSON on stdout instead of tables")
    mnist = run.add_argument_group("MNIST")
    mnist.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="MODEL",
        help="fnn (784-512-256-128-64-10) or cnn (pytorch/examples); repeatable (default: fnn)",
    )
    mnist.add_argument(
        "--loop",
        dest="loops",
        action="append",
        metavar="LOOP",
        help="tutorial (DataLoader, batches moved in the loop), resident (dataset on the device) "
        "or graphed (resident, the whole step captured: CUDA graphs, torch.compile on CPU and "
        "MPS); repeatable (default: tutorial and resident)",
    )
    mnist.add_argument("--epochs", type=whole, default=1, help="timed epochs per run (default: 1)")
    mnist.add_argument(
        "--batch-size",
        type=sizes,
        metavar="N[,N...]",
        help="one batch size, or several to sweep, e.g. 16,64,256,1024 (default: 64)",
    )
    mnist.add_argument(
        "--sweep",
        action="store_true",
        help=f"sweep batch sizes {','.join(map(str, SWEEP))}: per-step time on the device and the "
        "CPU, the speedup and the crossover; the SGD rate scales with the batch (linear rule)",
    )
    mnist.add_argument("--seed", type=whole, default=0, help="same seed, same result on CPU (default: 0)")
    mnist.add_argument("--threads", type=positive_int, help="CPU threads for torch (default: torch's choice)")
    mnist.add_argument("--limit", type=whole, help="train on the first N images only")
    mnist.add_argument("--lr", type=float, help="learning rate (default: the model's recipe: fnn 0.01, cnn 1.0)")
    mnist.add_argument(
        "--deterministic",
        action="store_true",
        help="deterministic algorithms, cuBLAS workspace :4096:8, cuDNN deterministic and no "
        "autotuning, no TF32, fixed threads: same build, hardware and seed give bitwise-equal "
        "parameters (docs/verify.md)",
    )
    ddp = run.add_argument_group("DDP (--check ddp, launched through torchrun)")
    ddp.add_argument(
        "--nproc",
        type=positive_int,
        help="CPU processes for the gloo part; world sizes 1..N (default: up to 2, as cores allow)",
    )
    ddp.add_argument("--nnodes", type=positive_int, help="nodes joining the run (with --rdzv-endpoint)")
    ddp.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="the c10d rendezvous every node joins")
    ddp.add_argument(
        "--ddp-timeout",
        type=float,
        default=300.0,
        help="seconds a collective may wait before every rank is stopped (default: 300)",
    )


def refuse_combinations(args: argparse.Namespace) -> None:
    """Options that cannot act together are refused, never one of them silently dropped."""
    if args.sweep and args.batch_size is not None:
        raise UsageError(
            "--sweep and --batch-size cannot combine: --sweep sets its own batch sizes",
            hint="either --sweep, or --batch-size 16,64,256 to sweep sizes of your own",
        )
    given = [
        flag
        for flag, value in (
            ("--nproc", args.nproc),
            ("--nnodes", args.nnodes),
            ("--rdzv-endpoint", args.rdzv_endpoint),
            ("--ddp-timeout", args.ddp_timeout != 300.0),
        )
        if value
    ]
    if given and "ddp" not in (args.checks or ()):
        raise UsageError(
            f"{', '.join(given)} only act on the DDP check, which this run does not include",
            hint="add --check ddp, or drop them",
        )
    checks = set(args.checks or ("mnist",))  # the default run includes MNIST
    mnist_only = [
        flag
        for flag, value in (("--loop", args.loops), ("--sweep", args.sweep), ("--epochs", args.epochs != 1))
        if value
    ]
    if mnist_only and "mnist" not in checks:
        raise UsageError(
            f"{', '.join(mnist_only)} only act on the MNIST check, which this run does not include",
            hint="add --check mnist, or drop them",
        )
    training = [
        flag
        for flag, value in (
            ("--model", args.models),
            ("--batch-size", args.batch_size),
            ("--lr", args.lr is not None),
            ("--limit", args.limit is not None),
            ("--data", args.data),
            ("--offline", args.offline),
        )
        if value
    ]
    if training and not checks & {"mnist", "ddp"}:
        raise UsageError(
            f"{', '.join(training)} only act on the MNIST and DDP checks, which this run does not include",
            hint="add --check mnist (or ddp), or drop them",
        )


class _Quiet(argparse.ArgumentParser):
    """Neither prints nor exits: a refusal is a UsageError, and -h is no option here (nobody reads help)."""

    def error(self, message: str) -> NoReturn:
        unknown = message.removeprefix("unrecognized arguments: ")
        raise UsageError(message if unknown == message else f"unknown option {unknown!r}")


def parser() -> argparse.ArgumentParser:
    found = _Quiet(prog="kitbench run", add_help=False)
    add_arguments(found)
    return found


def parse(words: Sequence[str]) -> argparse.Namespace:
    """``words`` read as ``kitbench run`` reads them (abbreviations included), combinations checked."""
    args = parser().parse_args(list(words))
    refuse_combinations(args)
    return args
