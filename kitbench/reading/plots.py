"""The comparison plot: epoch times by environment, and bandwidth against size."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kitbench import _files, _installed
from kitbench.errors import MissingDependency, RecordError, UsageError
from kitbench.reading import charts
from kitbench.reading.compare import Row
from kitbench.reading.inputs import Loaded
from kitbench.reading.svg import Series


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingDependency("matplotlib", "kitbench compare --plot", _plots_hint()) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plots_hint() -> str:
    """Where to install matplotlib: into this Python. In a target's pinned environment
    (.nox/<target>), rebuilding it would not help: it holds what runs measure, no plotting."""
    import sys

    # A pinned environment is .nox/<session> itself; a Python merely somewhere below a .nox folder (a
    # venv a test made in the session's temporary folder) is any Python.
    if Path(sys.prefix).parent.name != ".nox":
        return _installed.optional_hint("matplotlib")
    return (
        f"install it into this environment: {_installed.add_command(['matplotlib'])} (`nox -R` keeps it, "
        f"a fresh `nox -s` rebuilds the environment without it); or run compare from any Python that has "
        f"kitbench and matplotlib: it needs no torch"
    )


def check_target(out: Path, force: bool = False) -> None:
    """Refuse a plot file that cannot be written, before any record is read: a bad --plot is a usage error."""
    try:
        _files.check_target(out, replace=force)
    except RecordError as refused:
        raise UsageError(f"--plot: {refused.message}", hint=refused.hint) from None
    plt = _pyplot()
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    suffix = out.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise UsageError(
            f"--plot {str(out)[:200]}: {'no' if not suffix else 'unknown'} image format "
            f"{('.' + suffix) if suffix else ''}".rstrip(),
            hint=f"end the name with one of: {', '.join('.' + f for f in sorted(formats))}",
        )
    if not _is_dir(out.parent):
        raise UsageError(f"--plot {out}: no such directory {out.parent}", hint="create it first")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # ENAMETOOLONG, ELOOP, EACCES...: not a directory kitbench can write in
        return False


# One bar group and one label per record: past this a plot is unreadable and matplotlib's
# layout takes minutes; kitbench report is made for thousands.
MAX_RECORDS = 100


def check_count(count: int) -> None:
    if count > MAX_RECORDS:
        raise UsageError(
            f"--plot draws at most {MAX_RECORDS} records, and {count:,} were given",
            hint="kitbench report draws any number of them on one page; or compare fewer",
        )


def _name(row: Row) -> str:
    """A record's name in a legend: its target, else its file's name (a record from `kitbench run` outside
    a target has none; "?" told the reader nothing)."""
    return row.target or Path(row.path).stem


def _legend(axes: Any, size: int) -> None:
    """A legend where something is labelled: matplotlib warns of an empty one (records without MNIST)."""
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=size)


def _panel(axes: Any, lines: Sequence[tuple[Row, Series]], title: str, x_label: str, y_label: str) -> None:
    """The series the report draws one chart per record of, on one panel for all records: each line named
    by its record too."""
    for row, line in lines:
        xs, ys = zip(*line.points, strict=True)
        axes.plot(xs, ys, "--" if line.dashed else "-", marker="o", markersize=3, label=f"{_name(row)}: {line.name}")
    axes.set_xscale("log", base=2)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_title(title)
    axes.grid(True, which="major", alpha=0.3)
    _legend(axes, 7)


def comparison(loaded: Sequence[Loaded], table: Sequence[Row], out: Path, force: bool = False) -> None:
    check_count(len(loaded))
    plt = _pyplot()

    good = [(item, row) for item, row in zip(loaded, table, strict=True) if item.record is not None]
    labels = [f"{row.target}\n{Path(row.path).stem}" if row.target else Path(row.path).stem for _, row in good]
    buses = [
        (row, line)
        for item, row in good
        if item.record
        for run in item.record["checks"].get("ddp", {}).get("runs", [])
        for line in charts.allreduce(run)
    ]
    swept = [
        (row, line)
        for item, row in good
        if item.record and charts.is_sweep(item.record)
        for line in charts.step_times(item.record)
    ]
    panels = 2 + bool(buses) + bool(swept)
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 5), constrained_layout=True)
    epochs, bandwidth = axes[0], axes[1]
    if swept:
        _panel(
            axes[-1],
            swept,
            "step time against batch size",
            "batch size",
            "time per training step (ms, lower is better)",
        )
        axes[-1].set_yscale("log")
    if buses:
        _panel(axes[2], buses, "DDP all-reduce", "message size (KiB)", "all-reduce busbw (GB/s; algbw x 2(n-1)/n)")
    # One bar per MNIST run (model, loop, device) and environment.
    configs = sorted(
        {
            (r["model"], r["loop"], r["device"])
            for item, _ in good
            if item.record
            for r in item.record["checks"].get("mnist", {}).get("runs", [])
        }
    )
    width = 0.8 / max(1, len(configs))
    upright = len(configs) > 1
    for n, (model, loop, device) in enumerate(configs):
        values = []
        for item, _ in good:
            assert item.record is not None
            runs = item.record["checks"].get("mnist", {}).get("runs", [])
            values.append(
                next((r["epoch_s"] for r in runs if (r["model"], r["loop"], r["device"]) == (model, loop, device)), 0.0)
            )
        offset = (n - (len(configs) - 1) / 2) * width
        bars = epochs.bar([i + offset for i in range(len(good))], values, width, label=f"{model}/{loop} on {device}")
        # Side by side, horizontal labels of neighbouring bars run into each other ("1.571.56"): upright then.
        epochs.bar_label(
            bars,
            labels=[f"{v:.2f}" if v else "" for v in values],
            fontsize=7 if upright else 8,
            rotation=90 if upright else 0,
            padding=2,
        )
    epochs.set_xticks(range(len(good)), labels, fontsize=8)
    epochs.set_ylabel("steady-state epoch time (s, lower is better)")
    epochs.set_title("MNIST epoch by environment")
    _legend(epochs, 8)
    moves = [(row, line) for item, row in good if item.record for line in charts.transfers(item.record)]
    _panel(bandwidth, moves, "tensor moves", "transfer size (KiB)", "bandwidth (GB/s, median)")
    image = io.BytesIO()
    try:
        fig.savefig(image, dpi=110, format=out.suffix.lower().lstrip("."))
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot draw the plot {out}: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        plt.close(fig)
    _files.write(out, image.getvalue(), replace=force, what="the plot")
