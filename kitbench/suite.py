"""Running the suite and keeping its record, whatever happens."""

from __future__ import annotations

import dataclasses
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from kitbench import checks, data, records
from kitbench.checks.base import LOOPS, MODELS, Context, NoProgress, Options, Progress
from kitbench.devices import parse_spec
from kitbench.errors import Interrupted, KitbenchError, UsageError
from kitbench.probe import Probe
from kitbench.probe import probe as probe_machine


def validate(options: Options) -> None:
    """Refuse bad options before anything is imported, loaded or timed."""
    for name in options.checks:
        if name not in checks.CHECKS:
            raise UsageError(f"unknown check {name!r}", hint=f"choose from: {', '.join(checks.CHECKS)}")
    for name in options.models:
        if name not in MODELS:
            raise UsageError(f"unknown model {name!r}", hint=f"choose from: {', '.join(MODELS)}")
    for name in options.loops:
        if name not in LOOPS:
            raise UsageError(f"unknown loop {name!r}", hint=f"choose from: {', '.join(LOOPS)}")
    parse_spec(options.device)
    if options.lr is not None and not options.lr > 0:
        raise UsageError(f"--lr must be a positive number, not {options.lr}", hint="for example --lr 0.01")
    for label, value in (("--epochs", options.epochs), ("--batch-size", options.batch_size),
                         ("--threads", options.threads), ("--limit", options.train_limit)):
        if value is not None and value < 1:
            raise UsageError(f"{label} must be a positive whole number, not {value}",
                             hint=f"for example {label} 1")
    if options.data is not None and options.offline and not data.normalize_root(options.data).exists():
        raise UsageError(f"--data {options.data} does not exist and --offline forbids a download",
                         hint="point --data at the directory holding MNIST/raw")


def options_record(options: Options) -> dict[str, Any]:
    """The options as JSON has them (lists, strings), so a record reads back equal."""
    fields = dataclasses.asdict(options)
    fields["data"] = str(options.data) if options.data is not None else None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """``docker stop`` and nox send SIGTERM: treat it like Ctrl-C so the record is kept."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:       # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(options: Options, out: Path, progress: Progress | None = None,
        machine: Probe | None = None) -> dict[str, Any]:
    """Run the selected checks in order; return the record, also written to ``out``.

    A failing check is recorded and the suite goes on; an interruption writes
    the record as ``interrupted`` and raises ``Interrupted``.
    """
    validate(options)
    records.ensure_writable(out)
    progress = progress or NoProgress()
    machine = machine or probe_machine()
    data_root, digests = (data.prepare(options.data, options.offline)
                          if "mnist" in options.checks else (None, {}))

    import torch

    from kitbench import devices, fingerprint

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    device = devices.resolve(options.device, machine)
    device_init_s = _init_device(device)
    record: dict[str, Any] = {
        "schema": records.SCHEMA,
        "status": "interrupted",
        "started_at": records.utc_now(),
        "ended_at": None,
        "argv": sys.argv[1:],
        "options": options_record(options),
        "device": str(device),
        "device_init_s": device_init_s,
        "environment": fingerprint.collect(machine),
        "checks": {},
    }
    ctx = Context(device=device, machine=machine, options=options, progress=progress,
                  data_root=data_root, data_digests=digests)
    records.write_atomic(out, record)
    failed = False
    with _sigterm_as_interrupt():
        try:
            for name in options.checks:
                try:
                    result = dataclasses.asdict(checks.get(name)(ctx))
                except KitbenchError:
                    raise
                except Exception as exc:   # a broken check is a finding, not a crash
                    result = {"status": "failed", "summary": f"{type(exc).__name__}: {exc}".splitlines()[0],
                              "traceback": traceback.format_exc()}
                finally:
                    progress.done()
                failed |= result["status"] == "failed"
                record["checks"][name] = result
                records.write_atomic(out, record)
        except KeyboardInterrupt:
            record["ended_at"] = records.utc_now()
            records.write_atomic(out, record)
            raise Interrupted(f"interrupted; the partial record is {out}",
                              hint="the record says status: interrupted and keeps the checks that finished") from None
    record["status"] = "failed" if failed else "ok"
    record["ended_at"] = records.utc_now()
    records.write_atomic(out, record)
    return record


def _init_device(device: Any) -> float:
    """Seconds to bring the device up (CUDA context creation and the like): a one-time cost."""
    import torch

    from kitbench.timing import timed

    return timed(lambda: torch.zeros(1, device=device).add_(1).sum().item(), device)[1]
