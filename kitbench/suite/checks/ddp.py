"""Data-parallel training launched through torch's own launcher (torchrun), as it is used.

World sizes 1, 2, ... N run one after another, each through
``python -m torch.distributed.run`` starting ``kitbench.suite.ddp_worker``: gloo on
the CPU (``--nproc`` processes) always, NCCL on the visible GPUs where there are
two or more. Per world size: the MNIST epoch (resident loop, per-rank batch
stated), samples/s and the scaling efficiency against world size 1; the
all-reduce bus bandwidth from 1 KiB to 256 MiB (16 MiB with ``--quick``); and
whether the replicas are identical after training. Each launch runs in its own
process group under a time limit, so a crashed or hung rank takes every other
rank down with it and leaves no process behind. Across nodes (``--nnodes``,
``--rdzv-endpoint``) the launcher's c10d rendezvous joins them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kitbench import _proc
from kitbench._numbers import is_whole
from kitbench.machine import cpus
from kitbench.suite import devices
from kitbench.suite.checks import steps
from kitbench.suite.checks.base import CheckResult, Context, training_problem

_QUICK_BYTES = 16 * 2**20
_FULL_BYTES = 256 * 2**20
_TAIL = 6
_MARKER = "KITBENCH_DDP_LAUNCH"
_GRACE_S = 5.0  # for torchrun to stop its ranks on SIGTERM before they are killed
_REPEATS, _QUICK_REPEATS = 3, 2  # launches per world size, interleaved


@dataclass
class ScalingRow:
    model: str
    world_size: int
    per_rank_batch: int
    global_batch: int
    lr: float
    epoch_s: float
    samples_per_s: float
    efficiency: float | None  # samples/s at N over N x samples/s at 1 (medians of interleaved repeats)
    test_acc: float
    identical: bool
    params_sha256: list[str] = field(default_factory=list)  # each replica's (rank order): digests.parameters
    timed_steps: int = 0
    diverged_at_step: int | None = None
    samples_per_s_all: list[float] = field(default_factory=list)  # one per repeat, in launch order
    # Above 100 %: N ranks cannot beat N times one rank on the same cores; the spread between repeats did.
    efficiency_noise: bool = False


@dataclass
class BusRow:
    world_size: int
    bytes: int
    time_s: float
    algbw_gb_s: float
    busbw_gb_s: float


@dataclass
class BackendRun:
    backend: str  # gloo | nccl | xccl
    device: str  # cpu | cuda
    world_sizes: list[int]
    nodes: int
    threads_per_rank: int | None
    scaling: list[ScalingRow] = field(default_factory=list)
    allreduce: list[BusRow] = field(default_factory=list)
    reference: str | None = None  # the link's band, where one is known


@dataclass
class DdpResult(CheckResult):
    runs: list[BackendRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dataparallel: list[dict[str, Any]] = field(default_factory=list)


class LaunchFailed(Exception):
    """One torchrun launch failed; the message is the one line for the record."""


def _launch(world: int, ctx: Context, out: Path, backend: str, max_bytes: int) -> dict[str, Any]:
    opts = ctx.options
    nnodes = opts.nnodes or 1
    rendezvous = (
        [
            "--nnodes",
            str(nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            opts.rdzv_endpoint,
            "--rdzv-conf",
            f"join_timeout={int(opts.ddp_timeout)}",
        ]
        if opts.rdzv_endpoint
        else ["--standalone"]
    )
    assert ctx.data_root is not None
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *rendezvous,
        f"--nproc-per-node={world}",
        "-m",
        "kitbench.suite.ddp_worker",
        "--out",
        str(out),
        "--data",
        str(ctx.data_root),
        "--models",
        ",".join(opts.models),
        "--batch-size",
        str(opts.batch_size),
        "--seed",
        str(opts.seed),
        "--max-bytes",
        str(max_bytes),
        "--timeout",
        str(opts.ddp_timeout),
    ]
    if opts.train_limit is not None:
        command += ["--limit", str(opts.train_limit)]
    if opts.lr is not None:
        command += ["--lr", str(opts.lr)]
    if opts.deterministic:  # each rank is a process of its own: the mode must be set there too
        command.append("--deterministic")
    # The marker finds every rank later (torchrun starts each in a session of its own, out of reach of
    # the launcher's group); TMPDIR keeps torchrun's files in this launch's folder, removed with it.
    marker = f"{os.getpid()}-{secrets.token_hex(8)}"
    env = {
        **os.environ,
        "KITBENCH_DDP_BACKEND": backend,
        "OMP_NUM_THREADS": "1",
        _MARKER: marker,
        "TMPDIR": str(out.parent),
    }
    if nnodes == 1 and opts.rdzv_endpoint and _held(opts.rdzv_endpoint):
        # The one node hosts the rendezvous: torchrun, finding the port taken, would join whatever holds it
        # as a client and wait out the watchdog there.
        raise LaunchFailed(
            f"at rendezvous {opts.rdzv_endpoint}: the port is held by another program on this host, where a "
            "one-node run hosts its rendezvous; no rank was started"
        )
    ctx.progress.start(f"ddp: {backend}, {nnodes} node(s) x {world} process(es)")
    # A session of its own, output bounded (kitbench._proc); on a crash, a hang or an interruption every
    # rank is stopped with the launcher (_stop).
    limit = opts.ddp_timeout + 30
    try:
        done = _proc.run(command, limit, env=env, merge=True, stop=lambda proc: _stop(proc, marker))
    except subprocess.TimeoutExpired:
        if opts.rdzv_endpoint and _answers(opts.rdzv_endpoint):
            raise LaunchFailed(
                f"no run within {limit:.0f} s at rendezvous {opts.rdzv_endpoint}: the port answers "
                "but no rendezvous completed there: it is in use by another program, or a node never "
                "joined; every rank was killed"
            ) from None
        if opts.rdzv_endpoint:
            raise LaunchFailed(
                f"no rendezvous within {limit:.0f} s: nothing answers at {opts.rdzv_endpoint} (the "
                f"node that hosts it never started, or a firewall is between); every rank was "
                "killed"
            ) from None
        raise LaunchFailed(
            f"world size {world}: a rank hung; no result within {limit:.0f} s, every rank was killed"
        ) from None
    except OSError as exc:
        raise LaunchFailed(f"world size {world}: cannot start torchrun: {exc.strerror or exc}") from None
    _reap(marker)  # nothing of the launch may outlive it
    if done.returncode != 0 or not out.is_file():
        raise LaunchFailed(f"world size {world}: {_why(done.stdout, done.returncode)}")
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def _held(endpoint: str) -> bool:
    """Whether the endpoint is an address of this host and torch's store could not listen on its port, as another
    program holds it on some address of this host. The store listens on every address, IPv4's (0.0.0.0) or IPv6's
    ([::], IPv4 too), with SO_REUSEADDR: the port is held where neither binds so (a port in TIME_WAIT is free; a
    listener on [::1] alone leaves IPv4's free, as torch 2.14's store found; on Windows SO_REUSEADDR would take a
    held port, so it is not set there)."""
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.socket() as here:
            here.bind((host, 0))
    except OSError:
        return False  # not this host's: the rendezvous is hosted elsewhere
    in_use = False
    for family, everywhere in ((socket.AF_INET6, "::"), (socket.AF_INET, "")):
        try:
            probe = socket.socket(family)
        except OSError:
            continue  # no IPv6 on this host
        with probe:
            if os.name != "nt":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind((everywhere, int(port)))
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", 0)):
                    return False  # refused for another reason, which says nothing of a holder
                in_use = True
                continue
        return False  # it binds: the store would listen there
    return in_use


def _answers(endpoint: str) -> bool:
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], marker: str) -> None:
    """The launcher first (SIGTERM: torchrun stops its ranks itself), then anything of the launch left:
    the launcher's group, and every process carrying this launch's marker, wherever its session."""
    killpg = getattr(os, "killpg", None)
    if killpg is None:
        # Windows has no process groups to signal: taskkill /T ends the launcher's whole tree.
        if proc.poll() is None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                _proc.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)], 30)
            with contextlib.suppress(OSError):
                proc.kill()
        proc.wait()
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _reap(marker)


def _reap(marker: str) -> None:
    """Kill every process still carrying this launch's marker."""
    for _ in range(3):  # a rank may have been forking when it was listed
        left = _marked(marker)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _marked(marker: str) -> list[int]:
    """The processes whose environment holds this launch's marker (Linux /proc; elsewhere none are found)."""
    needle = f"{_MARKER}={marker}".encode()
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not is_whole(entry.name):
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    if needle in handle.read(1 << 20).split(b"\0"):
                        found.append(int(entry.name))
            except OSError:  # gone meanwhile, or another user's
                continue
    return found


def _why(output: str, code: int) -> str:
    """The launcher's failure in one line: a port in use, a dead rank, a missing backend."""
    text = output or ""
    port = re.search(
        r"(?:port|:)\s*([0-9]{2,5})\D[^\n]*(?:already in use|EADDRINUSE)|"
        r"(?:already in use|EADDRINUSE)[^\n]*?([0-9]{2,5})",
        text,
    )
    if "EADDRINUSE" in text or "already in use" in text:
        number = next((g for g in (port.groups() if port else ()) if g), None)
        return f"the rendezvous port{' ' + number if number else ''} is already in use"
    if "NCCL" in text and ("not available" in text or "not built" in text):
        return "NCCL is not available in this torch build"
    # torchrun lists the ranks it stopped first, and the one that failed first under "Root Cause".
    cause = text[text.find("Root Cause") :] if "Root Cause" in text else text
    rank = re.search(r"rank\s*:\s*([0-9]+)[^\n]*\n[^\n]*exitcode\s*:\s*(-?[0-9]+)", cause)
    if rank:
        code_text = rank.group(2)
        how = f"signal {-int(code_text)}" if code_text.startswith("-") else f"exit code {code_text}"
        return f"rank {rank.group(1)} failed ({how}); the launcher stopped every other rank"
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("*")]
    return f"torchrun exited {code}: {lines[-1].strip()[:300] if lines else 'no output'}"


def _sweep(ctx: Context, backend: str, sizes: list[int], tmp: Path, max_bytes: int) -> BackendRun:
    """Every world size launched ``repeats`` times, interleaved (1, 2, 1, 2, ...), so that a machine that
    speeds up or slows down during the sweep moves every size alike; each figure is a median of repeats."""
    repeats = (_QUICK_REPEATS if ctx.options.quick else _REPEATS) if len(sizes) > 1 else 1
    launches: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    for repeat in range(repeats):
        for n in sizes:
            # The bus bandwidth is measured by the first round only: the scaling is what needs repeats.
            launches[n].append(
                _launch(n, ctx, tmp / f"{backend}-{n}-{repeat}.json", backend, max_bytes if repeat == 0 else 0)
            )
    first = launches[sizes[0]][0]
    run = BackendRun(backend, first["device"], sizes, first["nodes"], first.get("threads_per_rank"))
    per: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for n in sizes:
        for result in launches[n]:
            for r in result["runs"]:
                per.setdefault((n, r["model"]), []).append(r)
    base = {
        model: statistics.median(r["samples_per_s"] for r in rows)
        for (n, model), rows in per.items()
        if n == 1 and first["world_size"] == 1
    }
    for (n, model), rows in per.items():
        rate = statistics.median(r["samples_per_s"] for r in rows)
        one = base.get(model)
        efficiency = rate / (n * one) if one else None
        mid = min(rows, key=lambda r: abs(r["samples_per_s"] - rate))
        run.scaling.append(
            ScalingRow(
                model,
                mid["world_size"],
                mid["per_rank_batch"],
                mid["global_batch"],
                mid["lr"],
                statistics.median(r["epoch_s"] for r in rows),
                rate,
                efficiency,
                min(r["test_acc"] for r in rows),
                all(r["identical"] for r in rows),
                mid["checksums"],
                min(r.get("timed_steps", 0) for r in rows),
                next((r["diverged_at_step"] for r in rows if r.get("diverged_at_step") is not None), None),
                [r["samples_per_s"] for r in rows],
                efficiency is not None and n > 1 and efficiency > 1.0,
            )
        )
    for n in sizes:
        run.allreduce += [BusRow(launches[n][0]["world_size"], **row) for row in launches[n][0]["allreduce"]]
    return run


def _gpu_part(ctx: Context) -> tuple[list[int] | None, str | None]:
    """The GPU world sizes, or why there is no multi-GPU part here."""
    if _xccl_gpus() > 1:
        return list(range(1, _xccl_gpus() + 1)), None
    if not torch.cuda.is_available():
        return None, "multi-GPU (NCCL): skipped: no CUDA device"
    count = torch.cuda.device_count()
    if count < 2:
        return None, f"multi-GPU (NCCL): skipped: {count} device"
    if not torch.distributed.is_nccl_available():
        return None, "multi-GPU (NCCL): skipped: NCCL is not available in this torch build"
    if os.environ.get("NCCL_P2P_DISABLE") == "1" or not torch.cuda.can_device_access_peer(0, 1):
        ctx.progress.start("ddp: peer-to-peer disabled between GPU 0 and 1; NCCL goes through host memory")
    return list(range(1, count + 1)), None


def _xccl_gpus() -> int:
    """Intel GPUs DDP can join over xccl (an XPU build that has it, and no CUDA device); else 0."""
    if torch.cuda.is_available() or not (hasattr(torch, "xpu") and torch.xpu._is_compiled()):
        return 0
    xccl = getattr(torch.distributed, "is_xccl_available", lambda: False)
    return int(torch.xpu.device_count()) if torch.xpu.is_available() and xccl() else 0


def _dataparallel(ctx: Context, count: int) -> list[dict[str, Any]]:
    """The seed's method beside today's: one process driving every GPU with nn.DataParallel."""
    from kitbench.suite import models
    from kitbench.suite.checks.mnist import scaled_lr
    from kitbench.suite.checks.mnist_training import resident_tensors

    assert ctx.data_root is not None
    rows = []
    x, y = resident_tensors(ctx.data_root, True, torch.device("cuda", 0), ctx.options.train_limit)
    for name in ctx.options.models:
        torch.manual_seed(ctx.options.seed)
        model = torch.nn.DataParallel(models.build(name).cuda(0), device_ids=list(range(count)))
        batch = ctx.options.batch_size * count
        opt = models.optimizer(name, list(model.parameters()), scaled_lr(name, batch, ctx.options.lr))
        step = steps.eager(model, opt)
        full = len(x) // batch
        devices.synchronize(torch.device("cuda", 0))
        start = time.perf_counter()
        for i in range(full):
            step(x[i * batch : (i + 1) * batch], y[i * batch : (i + 1) * batch])
        devices.synchronize(torch.device("cuda", 0))
        seconds = time.perf_counter() - start
        rows.append(
            {
                "model": name,
                "gpus": count,
                "global_batch": batch,
                "epoch_s": seconds,
                "samples_per_s": full * batch / seconds,
            }
        )
    return rows


def run(ctx: Context) -> DdpResult:
    opts = ctx.options
    max_bytes = _QUICK_BYTES if opts.quick else _FULL_BYTES
    nproc = opts.nproc or min(2, cpus.usable_cores())
    result = DdpResult("ok", "")
    with tempfile.TemporaryDirectory(prefix="kitbench-ddp-") as folder:
        tmp = Path(folder)
        # Across nodes only the whole world runs: its world size 1 would need every node again.
        cpu_sizes = [nproc] if opts.rdzv_endpoint else list(range(1, nproc + 1))
        try:
            result.runs.append(_sweep(ctx, "gloo", cpu_sizes, tmp, max_bytes))
        except LaunchFailed as failed:
            result.problems.append(f"gloo: {failed}")
        gpu_sizes, why = _gpu_part(ctx)
        if why:
            result.skipped.append(why)
        elif gpu_sizes:
            try:
                result.runs.append(_sweep(ctx, "xccl" if _xccl_gpus() else "nccl", gpu_sizes, tmp, max_bytes))
                if not _xccl_gpus():
                    result.dataparallel = _dataparallel(ctx, gpu_sizes[-1])
            except LaunchFailed as failed:
                result.problems.append(f"nccl: {failed}")
    for run in result.runs:
        if run.device == "cuda":
            link = next(iter(g.link for g in ctx.machine.gpus if g.link), None)
            run.reference = f"{link} (its band: kitbench compare)" if link else "no link band known"
        else:
            run.reference = "none: gloo between processes on one host goes through shared memory"
        for row in run.scaling:
            label = f"{run.backend}: {row.model} at world size {row.world_size}"
            why = training_problem(
                label,
                diverged_at_step=row.diverged_at_step,
                test_acc=row.test_acc,
                steps=row.timed_steps,
                timed_s=row.epoch_s,
                lr=row.lr,
            )
            if why:
                result.problems.append(why)
            elif not row.identical:
                result.problems.append(
                    f"{run.backend}: {row.model} at world size {row.world_size}: the replicas "
                    "differ after training (a rank diverged)"
                )
    result.status = "failed" if result.problems else "ok"
    result.summary = "; ".join(result.problems) if result.problems else _summary(result)
    return result


def _summary(result: DdpResult) -> str:
    parts = []
    for run in result.runs:
        last = [r for r in run.scaling if r.world_size == run.world_sizes[-1]]
        for row in last:
            eff = f", efficiency {row.efficiency:.0%}" if row.efficiency is not None else ""
            if row.efficiency_noise:
                eff = (
                    f", efficiency above 100 % ({row.efficiency:.0%}): noise between repeats, not a result"
                    if row.efficiency is not None
                    else ""
                )
            parts.append(f"{run.backend} {row.model} x{row.world_size}: {row.samples_per_s:,.0f} samples/s{eff}")
        if run.allreduce:
            peak = max(run.allreduce, key=lambda b: b.busbw_gb_s)
            parts.append(f"{run.backend} all-reduce busbw peak {peak.busbw_gb_s:.2f} GB/s at {peak.bytes // 1024} KiB")
    return "; ".join(parts) + ("; replicas identical" if result.runs else "")
