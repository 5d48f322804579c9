"""What ``kitbench run --deterministic`` costs on this machine: the MNIST models' training step with
and without the mode, in one process, alternating block by block (which mode goes first alternates
too), so that a shared machine's drift hits both alike; the result is the median of the per-block
ratios and their spread, and each mode's epoch (938 steps of 64) at its median step time.

    PYTHONPATH=. KITBENCH_DATA=../shared/data python envs/scripts/deterministic_cost.py --blocks 12

The resident loop's step (kitbench.suite.checks.steps.eager on device-resident batches): the tutorial loop
adds the DataLoader's time, which the mode does not touch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from kitbench.machine import cpus
from kitbench.suite import data, determinism, models
from kitbench.suite.checks.mnist_training import resident_tensors
from kitbench.suite.checks.steps import Step, eager

_EPOCH_STEPS = 938  # 60,000 images in batches of 64


def _block(step: Step, x: torch.Tensor, y: torch.Tensor, steps: int, batch: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        begin = (i * batch) % (len(x) - batch)
        step(x[begin : begin + batch], y[begin : begin + batch])
    return (time.perf_counter() - start) / steps


def measure(name: str, x: torch.Tensor, y: torch.Tensor, blocks: int, steps: int, threads: int) -> dict[str, object]:
    torch.manual_seed(0)
    model = models.build(name)
    step = eager(model, models.optimizer(name, list(model.parameters())))
    times: dict[bool, list[float]] = {False: [], True: []}
    for mode in (False, True):  # warm-up, untimed
        with determinism.mode(mode, threads):
            _block(step, x, y, 5, 64)
    torch.set_num_threads(threads)  # the same thread count in both modes
    for index in range(blocks):
        for mode in (False, True) if index % 2 == 0 else (True, False):
            with determinism.mode(mode, threads):
                times[mode].append(_block(step, x, y, steps, 64))
    ratios = [d / n for n, d in zip(times[False], times[True], strict=True)]
    return {
        "model": name,
        "threads": threads,
        "blocks": blocks,
        "steps_per_block": steps,
        "default_epoch_s": statistics.median(times[False]) * _EPOCH_STEPS,
        "deterministic_epoch_s": statistics.median(times[True]) * _EPOCH_STEPS,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_q1_q3": statistics.quantiles(ratios, n=4, method="inclusive")[::2],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--fnn-steps", type=int, default=200)
    parser.add_argument("--cnn-steps", type=int, default=20)
    args = parser.parse_args()
    root, _ = data.prepare(None, offline=True)
    x, y = resident_tensors(Path(root), True, torch.device("cpu"), 20000)
    threads = cpus.usable_cores()
    found = [
        measure("fnn", x, y, args.blocks, args.fnn_steps, threads),
        measure("cnn", x, y, args.blocks, args.cnn_steps, threads),
    ]
    print(
        json.dumps(
            {"torch": torch.__version__, "isa": torch.backends.cpu.get_cpu_capability(), "results": found}, indent=2
        )
    )


if __name__ == "__main__":
    main()
