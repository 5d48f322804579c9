"""One rank of the DDP check, as torch's own launcher starts it:

    python -m torch.distributed.run --standalone --nproc-per-node=2 -m kitbench.suite.ddp_worker --out r.json ...

Every rank trains the same model on its shard of one seeded permutation of
MNIST (the resident loop, per-rank batch B, global batch B x world size), and
all ranks take part in every measurement, so every rank knows every result;
the first rank of each node writes them to ``--out``. Nothing here prints but
errors: the check that launched it reads the file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from kitbench import _files
from kitbench.machine import cpus
from kitbench.suite import determinism, devices, digests, models
from kitbench.suite.checks.mnist import scaled_lr
from kitbench.suite.checks.mnist_training import evaluate, resident_tensors
from kitbench.suite.checks.steps import eager

_KIB = 1024


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kitbench.suite.ddp_worker")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--models", default="fnn")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--max-bytes", type=int, default=256 * 2**20)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--deterministic", action="store_true", help="kitbench run --deterministic's mode")
    return parser.parse_args()


def _time_max(seconds: float, device: torch.device) -> float:
    """The slowest rank's time: a collective step is as fast as its slowest member."""
    value = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def _checksums(model: torch.nn.Module, device: torch.device) -> list[str]:
    """Every rank's parameter digest (``digests.parameters``), gathered: equal digests are identical replicas."""
    mine = torch.tensor(list(bytes.fromhex(digests.parameters(model).sha256)), dtype=torch.int64, device=device)
    gathered = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return [bytes(int(b) for b in t.tolist()).hex() for t in gathered]


def _train(name: str, args: argparse.Namespace, device: torch.device, rank: int, world: int) -> dict[str, Any]:
    x, y = resident_tensors(args.data, True, device, args.limit)
    test_x, test_y = resident_tensors(args.data, False, device, None)
    # One permutation for all ranks (same seed), each rank its strided shard: DistributedSampler's split.
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed))[rank::world].to(device)
    torch.manual_seed(args.seed)  # identical initial weights (DDP also broadcasts rank 0's)
    model = models.build(name).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type in ("cuda", "xpu") else None)
    # The linear scaling rule for SGD, as the batch-size sweep applies it: the global batch grew world-fold.
    lr = scaled_lr(name, args.batch_size * world, args.lr)
    opt = models.optimizer(name, list(ddp.parameters()), lr)
    step = eager(ddp, opt)
    # Full batches of the smallest shard: every rank must take the same number of steps, or DDP waits forever.
    steps = max(1, (len(x) // world) // args.batch_size)
    batches = [order[i * args.batch_size : (i + 1) * args.batch_size] for i in range(steps)]
    losses = []
    # One untimed step first: DDP's bucket set-up and the first kernels are one-time costs.
    warm = step(x[batches[0]], y[batches[0]])
    devices.synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for index in batches[1:]:
        losses.append(step(x[index], y[index]))
    devices.synchronize(device)
    epoch_s = _time_max(time.perf_counter() - start, device)
    trained = (steps - 1) * args.batch_size * world
    acc, _ = evaluate(model, test_x, test_y)
    curve = torch.stack([warm, *losses]).float().cpu()
    digests = _checksums(model, device)
    return {
        "model": name,
        "world_size": world,
        "per_rank_batch": args.batch_size,
        "global_batch": args.batch_size * world,
        "lr": lr,
        "steps": steps,
        "samples": trained,
        "epoch_s": epoch_s,
        "samples_per_s": trained / epoch_s if epoch_s > 0 else 0.0,
        "test_acc": acc,
        "final_loss": float(curve[-max(1, len(curve) // 10) :].mean()),
        "finite": bool(torch.isfinite(curve).all()),
        "checksums": digests,
        "timed_steps": steps - 1,
        "diverged_at_step": next((i for i, ok in enumerate(torch.isfinite(curve).tolist()) if not ok), None),
        "identical": len(set(digests)) == 1,
    }


def _allreduce(device: torch.device, world: int, max_bytes: int) -> list[dict[str, Any]]:
    """all-reduce (sum) over message sizes from 1 KiB by 4x, nccl-tests' way: algbw = bytes / time,
    busbw = algbw x 2(n-1)/n, the time of the slowest rank, the median of the samples."""
    rows = []
    size = _KIB
    while size <= max_bytes:
        tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
        inner = max(1, min(20, (8 * 2**20) // size))
        for _ in range(2):
            dist.all_reduce(tensor)
        samples = []
        for _ in range(5):
            devices.synchronize(device)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(inner):
                dist.all_reduce(tensor)
            devices.synchronize(device)
            samples.append(_time_max((time.perf_counter() - start) / inner, device))
        seconds = statistics.median(samples)
        algbw = size / seconds / 1e9
        rows.append(
            {"bytes": size, "time_s": seconds, "algbw_gb_s": algbw, "busbw_gb_s": algbw * 2 * (world - 1) / world}
        )
        size *= 4
    return rows


def main() -> None:
    args = _args()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    # Entered before CUDA initialises (set_device below): cuBLAS reads its workspace setting once.
    with determinism.mode(args.deterministic, max(1, cpus.usable_cores() // local_world)):
        _main(args)


def _main(args: argparse.Namespace) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    wanted = os.environ.get("KITBENCH_DDP_BACKEND", "")
    cuda = torch.cuda.is_available() and wanted not in ("gloo", "xccl")
    xpu = wanted == "xccl"  # Intel GPUs: the XPU build's collective library
    device = torch.device("cuda" if cuda else "xpu", local_rank) if cuda or xpu else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    elif xpu:
        torch.xpu.set_device(device)
    # The node's cores shared between its ranks: more threads than cores only measures contention.
    threads = max(1, cpus.usable_cores() // local_world)
    torch.set_num_threads(threads)
    backend = "nccl" if cuda else "xccl" if xpu else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
    try:
        result: dict[str, Any] = {
            "backend": backend,
            "device": device.type,
            "world_size": world,
            "nodes": world // local_world,
            "threads_per_rank": threads,
            "torch": torch.__version__,
            "runs": [_train(name, args, device, rank, world) for name in args.models.split(",")],
            "allreduce": _allreduce(device, world, args.max_bytes) if world > 1 else [],
        }
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if local_rank == 0:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        _files.write(args.out, json.dumps(result))


if __name__ == "__main__":
    main()
