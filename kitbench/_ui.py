"""Terminal output: progress and tables. Only the CLI imports this module."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

stderr = Console(stderr=True)
# In logs and pipes rich would squeeze tables into 80 columns and cut cells.
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


class RichProgress:
    """Live bars on a terminal; one plain line per phase in logs (nox, CI, docker)."""

    def __init__(self) -> None:
        self._live = stderr.is_terminal
        self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=stderr, transient=True)
        self._task: Any = None

    def start(self, label: str, total: float | None = None) -> None:
        self.done()
        if self._live:
            self._bars.start()
            self._task = self._bars.add_task(label, total=total)
        else:
            print(f"... {label}", file=sys.stderr, flush=True)

    def advance(self, amount: float = 1) -> None:
        if self._task is not None:
            self._bars.advance(self._task, amount)

    def done(self) -> None:
        if self._task is not None:
            self._bars.remove_task(self._task)
            self._task = None
            self._bars.stop()


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def run_summary(record: dict[str, Any], path: str) -> None:
    env = record["environment"]
    stdout.print(f"[bold]kitbench run[/] on {record['device']}: torch {env['torch']} "
                 f"(CUDA {env['cuda'] or 'none'}), {env['cpu']}, {env['threads']} threads")
    table = Table("check", "status", "summary", title="checks", title_justify="left")
    for name, result in record["checks"].items():
        style = {"ok": "green", "failed": "red"}.get(result["status"], "yellow")
        table.add_row(name, f"[{style}]{result['status']}[/]", result["summary"])
    stdout.print(table)
    mnist = record["checks"].get("mnist", {})
    if mnist.get("runs"):
        runs = Table("device", "model", "loop", "batch", "epoch s", "samples/s", "data wait s", "floor %",
                     "test acc", "load s", "warm-up s", title="MNIST (epoch: steady-state median; "
                     "load and warm-up are one-time costs)", title_justify="left")
        for r in mnist["runs"]:
            runs.add_row(r["device"], r["model"], r["loop"], str(r["batch_size"]), _fmt(r["epoch_s"]),
                         _fmt(r["samples_per_s"], ",.0f"), _fmt(r["data_s"]), _fmt(100 * r["floor_fraction"], ".0f"),
                         _fmt(r["test_acc"], ".4f"), _fmt(r["dataset_load_s"]), _fmt(r["warmup_s"]))
        stdout.print(runs)
    moves = record["checks"].get("moves", {})
    if moves.get("transfers"):
        peaks: dict[tuple[str, str], dict[str, Any]] = {}
        for t in moves["transfers"]:
            key = (t["direction"], t["memory"])
            if key not in peaks or t["gb_per_s"] > peaks[key]["gb_per_s"]:
                peaks[key] = t
        table = Table("direction", "memory", "peak GB/s", "IQR GB/s", "at size", title="transfers",
                      title_justify="left")
        for (direction, memory), t in peaks.items():
            table.add_row(direction, memory, _fmt(t["gb_per_s"]),
                          f"{t['gb_per_s_q1']:.2f}-{t['gb_per_s_q3']:.2f}", f"{t['bytes'] // 1024} KiB")
        stdout.print(table)
        for line in moves.get("skipped", []):
            stdout.print(f"  {line}")
    stdout.print(f"status: [bold]{record['status']}[/]; record: {path}")


_COLUMNS = (("target", "target", None), ("status", "status", None), ("machine", "machine", None),
            ("torch", "torch", None), ("device", "device", None), ("MNIST", "mnist", None),
            ("CPU epoch s", "cpu_epoch_s", ".2f"), ("accel epoch s", "accel_epoch_s", ".2f"),
            ("speedup", "speedup", ".1f"), ("test acc", "test_acc", ".4f"),
            ("H2D pinned GB/s", "h2d_pinned_gb_s", ".1f"), ("D2H pinned GB/s", "d2h_pinned_gb_s", ".1f"),
            ("link", "link", None))


def comparison(rows: list[Any], fmt: str) -> None:
    cells = [[_fmt(getattr(r, attr), spec) if spec else str(getattr(r, attr) or "-") for _, attr, spec in _COLUMNS]
             for r in rows]
    headers = [name for name, _, _ in _COLUMNS]
    if fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow([*headers, "record", "differs"])
        for row, line in zip(rows, cells, strict=True):
            writer.writerow([*line, row.path, "; ".join(row.differs)])
        return
    if fmt == "markdown":
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for line in cells:
            print("| " + " | ".join(c.replace("|", "/") for c in line) + " |")
    else:
        table = Table(*headers, title="kitbench compare", title_justify="left")
        for line in cells:
            table.add_row(*line)
        stdout.print(table)
    for row in rows:
        if row.differs:
            print(f"{row.path} differs from the first record: " + "; ".join(row.differs))
        for warning in row.warnings:
            print(f"WARNING {row.path}: {warning}")
