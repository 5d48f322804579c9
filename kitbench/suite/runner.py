"""Running the suite and keeping its record, whatever happens."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast

from kitbench._installed import optional_hint
from kitbench._signals import sigterm_raises
from kitbench.errors import DataError, Interrupted, KitbenchError, MissingDependency, Terminated, UsageError
from kitbench.machine import cpus
from kitbench.machine.probe import Probe
from kitbench.machine.probe import probe as probe_machine
from kitbench.records import record as records
from kitbench.records.types import Failure, RunOptions, RunRecord
from kitbench.suite import checks, data, determinism, fingerprint
from kitbench.suite.checks.base import LOOPS, MODELS, Context, NoProgress, Options, Progress
from kitbench.suite.devices import parse_spec

MAX_THREADS_PER_CPU = 4  # beyond this torch's pool only thrashes (100,000 crashed it)
# A gloo rank is a Python with torch imported: about 0.4 GiB of its own (measured on
# torch 2.14.1, Linux x86_64, PSS after import), the model and its MNIST copy on top.
RANK_BYTES = 512 * 2**20
MAX_SEED = 2**63 - 2  # torch seeds are 64-bit; the warm-up uses seed + 1
MAX_EPOCHS = 1000
MAX_BATCH = 2**20
# records.SCHEMA as the Literal that RunRecord's "schema" takes (tests/records/test_types.py keeps the two equal).
SCHEMA: Final = "kitbench.run/3"
DATA_CHECKS = ("mnist", "ddp")  # the checks that train on MNIST: the others run without it


def validate(options: Options) -> None:
    """Refuse bad options before anything is imported, loaded or timed."""
    for name in options.checks:
        if name not in checks.CHECKS:
            raise UsageError(f"unknown check {name[:80]!r}", hint=f"choose from: {', '.join(checks.CHECKS)}")
    for name in options.models:
        if name not in MODELS:
            raise UsageError(f"unknown model {name[:80]!r}", hint=f"choose from: {', '.join(MODELS)}")
    for name in options.loops:
        if name not in LOOPS:
            raise UsageError(f"unknown loop {name[:80]!r}", hint=f"choose from: {', '.join(LOOPS)}")
    parse_spec(options.device)
    if options.lr is not None and not (math.isfinite(options.lr) and options.lr > 0):
        raise UsageError(f"--lr must be a positive finite number, not {options.lr}", hint="for example --lr 0.01")
    max_threads = MAX_THREADS_PER_CPU * cpus.usable_cores()
    for label, value, most in (
        ("--epochs", options.epochs, MAX_EPOCHS),
        ("--batch-size", options.batch_size, MAX_BATCH),
        ("--threads", options.threads, max_threads),
        ("--limit", options.train_limit, None),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{label} must be a positive whole number, not {value}", hint=f"for example {label} 1")
        if value is not None and most is not None and value > most:
            raise UsageError(
                f"{label} {value} is more than this kit allows ({most})",
                hint=f"{label} at most {most}"
                + (f" ({MAX_THREADS_PER_CPU} per CPU here)" if label == "--threads" else ""),
            )
    for size in options.sweep:
        if not 1 <= size <= MAX_BATCH:
            raise UsageError(
                f"--batch-size {size} must be between 1 and {MAX_BATCH}", hint="e.g. --batch-size 16,64,256"
            )
    if not 0 <= options.seed <= MAX_SEED:
        raise UsageError(f"--seed must be between 0 and {MAX_SEED}, not {options.seed}", hint="for example --seed 0")
    if options.data is not None and options.offline and not data.normalize_root(options.data).exists():
        raise UsageError(
            f"--data {options.data} does not exist and --offline forbids a download",
            hint="point --data (or KITBENCH_DATA) at the directory holding MNIST/raw",
        )
    if options.nproc is not None:
        _bound_world(options.nproc)
    if options.nnodes is not None and not 1 <= options.nnodes <= 1024:
        raise UsageError(f"--nnodes must be between 1 and 1024, not {options.nnodes}")
    if (options.nnodes or 1) > 1 and not options.rdzv_endpoint:
        raise UsageError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT", hint="the rendezvous every node joins")
    if options.rdzv_endpoint is not None and not re.fullmatch(r"[\w.-]{1,253}:[0-9]{1,5}", options.rdzv_endpoint):
        raise UsageError(
            f"--rdzv-endpoint {options.rdzv_endpoint[:80]!r} is not HOST:PORT",
            hint="for example --rdzv-endpoint 127.0.0.1:29511",
        )
    if options.rdzv_endpoint is not None and not 1 <= int(options.rdzv_endpoint.rpartition(":")[2]) <= 65535:
        raise UsageError(
            f"--rdzv-endpoint {options.rdzv_endpoint[:80]!r}: a port is between 1 and 65535",
            hint="for example --rdzv-endpoint 127.0.0.1:29511",
        )
    if options.rdzv_endpoint is not None:
        _resolves(options.rdzv_endpoint)
    if not 1 <= options.ddp_timeout <= 86400:
        raise UsageError(f"--ddp-timeout must be between 1 and 86400 seconds, not {options.ddp_timeout}")
    if importlib.util.find_spec("torch") is None:
        raise MissingDependency("torch", "kitbench run", optional_hint("torch"))


def _resolves(endpoint: str) -> None:
    """A rendezvous host that does not resolve is said now, not after the launch times out
    as if a rank had hung."""
    import socket

    host = endpoint.rpartition(":")[0]
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError) as exc:
        raise UsageError(
            f"--rdzv-endpoint {endpoint[:80]!r}: the host {host[:80]!r} does not resolve "
            f"({getattr(exc, 'strerror', None) or exc})",
            hint="name the first node as every node resolves it (its address, or its name in /etc/hosts or DNS)",
        ) from None


def _bound_world(nproc: int) -> None:
    """A world that cannot fit is refused before any rank starts: more ranks than the cores
    can take turns on measure only the scheduler, and more than memory holds end in the OOM
    killer's SIGKILL, which reads as a hung or crashed rank."""
    cores = cpus.usable_cores()
    most = min(64, MAX_THREADS_PER_CPU * cores)
    if not 1 <= nproc <= most:
        raise UsageError(
            f"--nproc must be between 1 and {most} here ({MAX_THREADS_PER_CPU} per usable core, "
            f"{cores} here, 64 at most), not {nproc}",
            hint=f"for example --nproc {min(2, most)}",
        )
    free = cpus.memory_available()
    if free is not None and nproc * RANK_BYTES > free:
        raise UsageError(
            f"--nproc {nproc} needs about {nproc * RANK_BYTES / 2**30:.1f} GiB for its ranks "
            f"({RANK_BYTES / 2**30:.1f} GiB each), and {free / 2**30:.1f} GiB is available",
            hint=f"at most --nproc {max(1, free // RANK_BYTES)} on this machine now",
        )


def options_record(options: Options) -> RunOptions:
    """The options as JSON has them (lists, strings), so a record reads back equal; field by field in
    the dataclass's order, so that mypy checks each against the reader's type (tests/records/test_types.py
    checks that none is left out)."""
    return {
        "checks": list(options.checks),
        "device": options.device,
        "data": str(options.data) if options.data is not None else None,
        "offline": options.offline,
        "quick": options.quick,
        "models": list(options.models),
        "loops": list(options.loops),
        "epochs": options.epochs,
        "batch_size": options.batch_size,
        "sweep": list(options.sweep),
        "seed": options.seed,
        "threads": options.threads,
        "train_limit": options.train_limit,
        "lr": options.lr,
        "nproc": options.nproc,
        "nnodes": options.nnodes,
        "rdzv_endpoint": options.rdzv_endpoint,
        "ddp_timeout": options.ddp_timeout,
        "deterministic": options.deterministic,
    }


@dataclass(frozen=True)
class Finished:
    path: Path
    record: RunRecord


def run(
    options: Options,
    out: Path | None = None,
    progress: Progress | None = None,
    machine: Probe | None = None,
    force: bool = False,
) -> Finished:
    """Run the selected checks in order; return the record, also written to its file.

    The record's file is claimed (``records.claim``) and written before torch is
    imported. A failing check is recorded and the suite goes on; MNIST missing (not
    there, and not to be downloaded) fails the checks that train on it, after the
    others have run; an error in the set-up writes the record as ``failed`` with the
    error, as a sentence (``error``) and as data (``failure``), and raises it; an
    interruption writes it as ``interrupted`` and raises ``Interrupted``.
    """
    validate(options)
    progress = progress or NoProgress()
    with sigterm_raises():
        machine = machine or probe_machine()
        path = records.claim(out, force)
        try:
            record: RunRecord = {
                "schema": SCHEMA,
                "status": "interrupted",
                "run_id": records.new_run_id(),
                "started_at": records.utc_now(),
                "ended_at": None,
                "argv": sys.argv[1:],
                "options": options_record(options),
                "device": None,
                "device_init_s": None,
                "environment": fingerprint.host(machine),
                "checks": {},
            }
            try:
                records.write_atomic(path, record)
                _run_checks(options, machine, progress, path, record)
            except KeyboardInterrupt as stop:
                record["ended_at"] = records.utc_now()
                records.write_atomic(path, record)
                code = Terminated.exit_code if isinstance(stop, Terminated) else 130
                raise Interrupted(
                    f"{'terminated' if code == 143 else 'interrupted'}; the partial record is {path}",
                    hint="the record says status: interrupted and keeps the checks that finished",
                    exit_code=code,
                ) from None
            except KitbenchError as error:
                record["status"], record["ended_at"], record["error"] = "failed", records.utc_now(), error.message
                record.setdefault(
                    "failure", failure("setup", error, [c for c in options.checks if c not in record["checks"]])
                )
                records.write_atomic(path, record)
                raise
            finally:
                progress.done()  # a phase cut short must not leave its heartbeat running
        finally:
            records.release(path)  # the claim on --out: another run may write it now
    return Finished(path, record)


def failure(stage: Literal["data", "setup"], error: KitbenchError, not_run: list[str]) -> Failure:
    """What stopped a run, as the record keeps it: where, kitbench's kind of error, its words, and the host that
    could not be reached where that was the cause."""
    return {
        "stage": stage,
        "error": type(error).__name__,
        "message": error.message,
        "hint": error.hint,
        "host": error.host,
        "not_run": not_run,
    }


def _run_checks(options: Options, machine: Probe, progress: Progress, path: Path, record: RunRecord) -> None:
    data_root: Path | None = None
    digests: dict[str, str] = {}
    missing: DataError | None = None
    if set(DATA_CHECKS) & set(options.checks):
        try:
            data_root, digests = data.prepare(options.data, options.offline)
        except DataError as error:  # the checks that need no MNIST still run, and the record says why
            missing = error
    # Before torch, so that CUDA cannot initialise before cuBLAS's workspace is set.
    with determinism.mode(options.deterministic, options.threads or cpus.usable_cores()):
        _run_checks_torch(options, machine, progress, path, record, data_root, digests, missing)
    if missing is not None:
        not_run = [c for c in options.checks if c in DATA_CHECKS]
        record["failure"] = failure("data", missing, not_run)
        ran = [c for c in options.checks if c not in DATA_CHECKS]
        told = DataError(
            missing.message,
            hint=f"{missing.hint}; the record {path} holds "
            + (
                f"the checks that ran ({', '.join(ran)}) and this machine's environment"
                if ran
                else "this machine's environment"
            ),
        )
        told.host = missing.host
        raise told


def _run_checks_torch(
    options: Options,
    machine: Probe,
    progress: Progress,
    path: Path,
    record: RunRecord,
    data_root: Path | None,
    digests: dict[str, str],
    missing: DataError | None,
) -> None:
    progress.start("importing torch")
    import torch

    from kitbench.suite import devices

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    progress.start(f"initialising the device ({options.device})")  # CUDA's first call can take minutes
    try:
        device = devices.resolve(options.device, machine)
        init_s = _init_device(device)
    except KitbenchError:
        # The record says what was here all the same.
        record["environment"] = fingerprint.collect(machine, record["environment"])
        raise
    record["device"], record["device_init_s"] = str(device), init_s
    record["environment"] = fingerprint.collect(machine, record["environment"])
    progress.done()
    ctx = Context(
        device=device, machine=machine, options=options, progress=progress, data_root=data_root, data_digests=digests
    )
    records.write_atomic(path, record)
    # A check's result is its dataclass through asdict (or a failure's summary), filed under a name known
    # only at run time: mypy cannot hold that to ``Checks``, so tests/records/test_types.py holds every result
    # dataclass to its reader type, field by field.
    written = cast("dict[str, dict[str, Any]]", record["checks"])
    for name in options.checks:
        if missing is not None and name in DATA_CHECKS:
            written[name] = {"status": "failed", "summary": f"not run: {missing.message}"}
            records.write_atomic(path, record)
            continue
        try:
            result = dataclasses.asdict(checks.get(name)(ctx))
        except KitbenchError as error:  # e.g. a device that fails mid-check: this check's finding
            result = {"status": "failed", "summary": error.message + (f" ({error.hint})" if error.hint else "")}
        except Exception as exc:  # a broken check is a finding, not a crash
            result = {
                "status": "failed",
                "summary": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                "traceback": traceback.format_exc(),
            }
            op = determinism.nondeterministic_op(exc)
            if op is not None:
                result.update(
                    summary=f"{op} has no deterministic implementation on {device} (--deterministic "
                    "refuses to fall back to a nondeterministic one)",
                    nondeterministic_op=op,
                )
        finally:
            progress.done()
        written[name] = result
        records.write_atomic(path, record)
    results = written.values()
    diverged = any(r.get("diverged_at_step") is not None for c in results for r in c.get("runs", []))
    failed = any(c["status"] == "failed" for c in results)
    record["status"] = "diverged" if diverged else "failed" if failed else "ok"
    record["ended_at"] = records.utc_now()
    records.write_atomic(path, record)


def _init_device(device: Any) -> float:
    """Seconds to bring the device up (CUDA context creation and the like): a one-time cost."""
    import torch

    from kitbench.suite.timing import timed

    return timed(lambda: torch.zeros(1, device=device).add_(1).sum().item(), device)[1]
