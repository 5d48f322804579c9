"""Terminal output: progress and tables. Only the CLI imports this module.

rich is optional (``kitbench[suite]`` brings it): without it, or in a log,
tables are aligned plain text and progress is a plain line per phase and at
least one every ``LOG_EVERY_S`` seconds, so a long epoch shows it is alive.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, cast

from kitbench._numbers import once
from kitbench.errors import clean
from kitbench.heartbeat import Heartbeat
from kitbench.records.types import Check, RunRecord, Transfer
from kitbench.suite.checks.base import Progress

LOG_EVERY_S = 10.0


def _rich_console(stderr: bool = False) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None

    class Quiet(Console):
        def on_broken_pipe(self) -> None:
            # rich's own exits 1 at once; a reader that went away (`| head`) is main's to answer, with 141.
            self.quiet = True
            raise BrokenPipeError

    if stderr:
        return Quiet(stderr=True)
    # In logs and pipes rich would squeeze tables into 80 columns and cut cells.
    return Quiet(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def progress() -> Progress:
    """Live bars on a terminal with rich; plain, timed lines anywhere else."""
    console = _rich_console(stderr=True)
    if console is not None and console.is_terminal:
        return _RichProgress(console)
    return LogProgress()


class LogProgress:
    """A line when a phase starts, then one every ``LOG_EVERY_S`` seconds while it runs:
    from ``advance``, or, in a phase that blocks without advancing (a compile, a launch,
    CUDA's first call), from a heartbeat thread."""

    def __init__(self, clock: Any = time.monotonic, out: Any = None, heartbeat: bool = True) -> None:
        self._clock, self._out, self._heartbeat = clock, out, heartbeat
        self._label: str | None = None
        self._total: float | None = None
        self._count = 0.0
        self._started = self._last = 0.0
        self._beat: Heartbeat | None = None

    def _print(self, text: str) -> None:
        print(text, file=self._out or sys.stderr, flush=True)
        # Either kind of line, the count's or the heartbeat's, restarts both periods: one line per period.
        self._last = self._clock()
        if self._beat is not None:
            self._beat.beat()

    def _so_far(self, elapsed: float) -> str:
        if not self._count:
            return f"... {self._label}: still running after {elapsed:.0f} s"
        of = f"/{self._total:g}" if self._total else ""
        return f"... {self._label}: {self._count:g}{of} after {elapsed:.0f} s"

    def start(self, label: str, total: float | None = None) -> None:
        self.done()
        self._label, self._total, self._count = label, total, 0.0
        self._started = self._last = self._clock()
        if self._heartbeat:
            self._beat = Heartbeat(lambda s: self._print(self._so_far(s)), LOG_EVERY_S, self._clock).start()
        self._print(f"... {label}")

    def advance(self, amount: float = 1) -> None:
        self._count += amount
        now = self._clock()
        if self._label is not None and now - self._last >= LOG_EVERY_S:
            self._print(self._so_far(now - self._started))

    def done(self) -> None:
        self._label = None
        if self._beat is not None:
            self._beat.stop()
            self._beat = None


class _RichProgress:
    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars

        self._bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def start(self, label: str, total: float | None = None) -> None:
        self.done()
        self._bars.start()
        self._task = self._bars.add_task(label, total=total)

    def advance(self, amount: float = 1) -> None:
        if self._task is not None:
            self._bars.advance(self._task, amount)

    def done(self) -> None:
        if self._task is not None:
            self._bars.remove_task(self._task)
            self._task = None
            self._bars.stop()


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> None:
    """One table on stdout: rich's when installed, aligned plain text otherwise. With ``width``, the cells are cut
    (:func:`fit`) so that the table, two spaces between columns and no frame, is at most that wide."""
    rows = [[clean(cell) for cell in row] for row in rows]
    if width is not None:
        rows = fit(headers, rows, width)
    console = _rich_console()
    if console is not None:
        from rich import box
        from rich.markup import escape
        from rich.table import Table

        # Fitted, the frame goes: its bars would take the columns' room.
        shown = Table(
            title=escape(title),  # a folder's name is no markup: "[/]" in it would stop the table
            title_justify="left",
            box=box.HEAVY_HEAD if width is None else box.SIMPLE_HEAD,
            pad_edge=width is None,
            show_edge=width is None,
        )
        for header in headers:
            shown.add_column(header, no_wrap=width is not None)
        for row in rows:
            shown.add_row(*(escape(cell) for cell in row))
        console.print(shown)
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(title)
    for line in (headers, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def fit(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[list[str]]:
    """``rows`` with the widest column's cells cut (their middle left out, "…"), one character at a time, until
    the table fits in ``width`` with three spaces between columns (rich's, where the plain table has two); no
    column narrower than its header, or than 8."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    floors = [max(len(h), 8) for h in headers]
    while sum(widths) + 3 * (len(widths) - 1) > width:
        cuttable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1
    return [[cell if len(cell) <= w else _cut(cell, w) for cell, w in zip(row, widths, strict=True)] for row in rows]


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle left out: two file names that start alike still end apart."""
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _floor(fraction: float | None) -> str:
    """The floor as a share of the epoch. Above 100 % the floor is wrong (old records measured it at a 1024x1024
    matmul's rate, which a model's own GEMMs beat), so it is never shown as a result."""
    return "-" if fraction is None or fraction > 1.0 else f"{100 * fraction:.0f}"


def run_summary(record: RunRecord, path: str) -> None:
    env = record["environment"]
    print(
        clean(
            f"kitbench run on {record['device']}: torch {env['torch']} (CUDA {env.get('cuda') or 'none'}), "
            f"{env['cpu']}, {env.get('threads')} threads"
        )
    )
    if env.get("build_matches_target") is False:
        print(
            f"  build_matches_target: false: target {env.get('target')} names {_named_build(env.get('target'))}, "
            f"this torch is {env['torch']} (CUDA {env.get('cuda') or 'none'}): the numbers are not the target's"
        )
    table(
        "checks",
        ("check", "status", "summary"),
        [
            (name, result["status"], result["summary"])
            for name, result in cast("dict[str, Check]", record["checks"]).items()
        ],
    )
    runs = record["checks"].get("mnist", {}).get("runs", [])
    if runs:
        table(
            "MNIST (epoch: steady-state median; load and warm-up are one-time costs)",
            (
                "device",
                "model",
                "loop",
                "batch",
                "epoch s",
                "samples/s",
                "data wait s",
                "floor %",
                "test acc",
                "load s",
                "warm-up s",
            ),
            [
                (
                    r["device"],
                    r["model"],
                    r["loop"],
                    str(r["batch_size"]),
                    _fmt(r["epoch_s"]),
                    _fmt(r["samples_per_s"], ",.0f"),
                    _fmt(r["data_s"]),
                    _floor(r["floor_fraction"]),
                    _fmt(r["test_acc"], ".4f"),
                    _fmt(r["dataset_load_s"]),
                    _fmt(r["warmup_s"]),
                )
                for r in runs
            ],
        )
    _mnist_extras(cast("dict[str, Any]", record["checks"]).get("mnist") or {})
    moves = record["checks"].get("moves", {})
    peaks: dict[tuple[str, str], Transfer] = {}
    for t in moves.get("transfers", []):
        key = (t["direction"], t["memory"])
        if key not in peaks or t["gb_per_s"] > peaks[key]["gb_per_s"]:
            peaks[key] = t
    if peaks:
        table(
            "transfers",
            ("direction", "memory", "peak GB/s", "IQR GB/s", "at size"),
            [
                (
                    direction,
                    memory,
                    _fmt(t["gb_per_s"]),
                    f"{t['gb_per_s_q1']:.2f}-{t['gb_per_s_q3']:.2f}",
                    f"{t['bytes'] // 1024} KiB",
                )
                for (direction, memory), t in peaks.items()
            ],
        )
    for line in moves.get("skipped", []):
        print(f"  {clean(line)}")
    _ddp_summary(cast("dict[str, Any]", record["checks"]).get("ddp") or {})
    if record.get("nonfinite"):
        print(f"  non-finite numbers (written as null): {', '.join(record.get('nonfinite', [])[:5])}")
    print(f"status: {record['status']}; record: {path}")


def _named_build(target: str | None) -> str:
    from kitbench.environments import targets
    from kitbench.errors import KitbenchError

    try:
        return f"a {targets.get(target or '').compute} build"
    except KitbenchError:
        return "another build"


_COLUMNS = (
    ("target", "target", None),
    ("status", "status", None),
    ("machine", "machine", None),
    ("torch", "torch", None),
    ("device", "device", None),
    ("MNIST", "mnist", None),
    ("CPU epoch s", "cpu_epoch_s", ".2f"),
    ("accel epoch s", "accel_epoch_s", ".2f"),
    ("speedup", "speedup", ".1f"),
    ("test acc", "test_acc", ".4f"),
    ("H2D pinned GB/s", "h2d_pinned_gb_s", ".1f"),
    ("D2H pinned GB/s", "d2h_pinned_gb_s", ".1f"),
    ("link", "link", None),
    ("crossover", "crossover", None),
    ("DDP efficiency", "ddp", None),
    ("busbw GB/s", "busbw_gb_s", ".2f"),
)


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """Record text as a CSV cell no spreadsheet runs: one that starts as a formula would (``=HYPERLINK(...)``,
    ``@SUM``, ``+``, ``-``, a tab or CR) gets a leading ``'``, as OWASP's CSV injection advice says. A lone
    ``-``, the table's own "none", is no formula."""
    return "'" + text if text.startswith(_FORMULA) and text != "-" else text


def comparison(rows: list[Any], fmt: str) -> None:
    from kitbench.reading import compare
    from kitbench.reading.envdiff import line

    where, names = record_names([r.path for r in rows])
    if fmt == "csv":
        import csv

        cells = [[_cell(r, attr, spec) for _, attr, spec in _COLUMNS] for r in rows]
        writer = csv.writer(sys.stdout)
        writer.writerow([name for name, _, _ in _COLUMNS] + ["record", "differs"])
        for row, cells_of in zip(rows, cells, strict=True):
            texts = [cell if spec else csv_cell(cell) for cell, (_, _, spec) in zip(cells_of, _COLUMNS, strict=True)]
            writer.writerow(
                [*texts, csv_cell(clean(row.path)), csv_cell(clean("; ".join(line(c) for c in row.differs)))]
            )
        return
    title = f"kitbench compare: {len(rows)} record{'s' if len(rows) != 1 else ''}" + (f" in {where}" if where else "")
    if fmt == "markdown":
        from kitbench.reading.report_markdown import md_cell

        columns = [column for _, part in _TABLES for column in part]
        print("| " + " | ".join(["record", *(name for name, _, _ in columns)]) + " |")
        print("|" + "---|" * (len(columns) + 1))
        for r, name in zip(rows, names, strict=True):
            print(
                "| "
                + " | ".join(md_cell(c) for c in [name, *(_cell(r, a, s, short=True) for _, a, s in columns)])
                + " |"
            )
    else:
        for part_title, part in _TABLES:
            cells = [
                [name, *(_cell(r, a, s, short=True) for _, a, s in part)] for r, name in zip(rows, names, strict=True)
            ]
            # The folder is the person's own path, whole: wrapped, where the record names are cut, and with
            # every space it has kept (textwrap drops those it breaks at).
            title_of = _within(f"{title}: {part_title}", keep_spaces=True)
            table(title_of, ["record", *(name for name, _, _ in part)], cells, width=COMPARE_WIDTH)
    by_path = dict(zip((r.path for r in rows), names, strict=True))
    for row in rows:
        if row.crossover:
            print(_within(f"crossover, {by_path[row.path]}: {clean(row.crossover)}"))
    found = compare.differences(rows)
    if found.baseline is not None and found.groups:
        print(
            _within(
                f"baseline (the first ok record): {by_path[found.baseline]}; {found.compared} other "
                f"record{'s' if found.compared != 1 else ''} compared with it, "
                f"{len(found.groups)} difference{'s' if len(found.groups) != 1 else ''}:"
            )
        )
        for group in found.groups:
            print(_difference(group, found.compared, by_path))
    for row in rows:
        for warning in row.warnings:
            print(_within(f"WARNING {by_path[row.path]}: {clean(warning)}"))


# compare's table on a terminal: what tells the records apart, in at most this many columns (every field in full,
# the machine and crossover included: --format csv or json).
COMPARE_WIDTH = 160
# Two tables, each with the record column: what each record ran on, and what it measured.
_TABLES = (
    (
        "what ran",
        (
            ("status", "status", None),
            ("target", "target", None),
            ("machine", "machine", None),
            ("torch", "torch", None),
            ("device", "device", None),
        ),
    ),
    (
        "MNIST epoch s, pinned peak GB/s",
        (
            ("MNIST", "mnist", None),
            ("CPU s", "cpu_epoch_s", ".2f"),
            ("accel s", "accel_epoch_s", ".2f"),
            ("speedup", "speedup", ".1f"),
            ("test acc", "test_acc", ".4f"),
            ("H2D", "h2d_pinned_gb_s", ".1f"),
            ("D2H", "d2h_pinned_gb_s", ".1f"),
            ("link", "link", None),
            ("DDP efficiency", "ddp", None),
            ("busbw GB/s", "busbw_gb_s", ".2f"),
        ),
    ),
)
# Words a CPU's or GPU's marketing name repeats on every row.
_NOISE = ("(R)", "(TM)", " Processor", " CPU", "NVIDIA ")


def _cell(row: Any, attr: str, spec: str | None, short: bool = False) -> str:
    if spec:
        return _fmt(getattr(row, attr), spec)
    text = clean(getattr(row, attr) or "-")
    if attr == "machine" and short:
        for noise in _NOISE:
            text = text.replace(noise, "")
    return text


def record_names(paths: Sequence[str]) -> tuple[str, list[str]]:
    """The folder all records share (``docs/records/``; "" where none) and each record's path below it
    (``h200-suite.json``): a table's record column, which tells apart rows that read alike."""
    import os.path

    try:
        shared = (
            os.path.commonpath([os.path.dirname(p) for p in paths]) if len(paths) > 1 else os.path.dirname(paths[0])
        )
    except (ValueError, IndexError):  # absolute and relative paths mixed, or no path at all
        shared = ""
    if not shared:
        return "", [clean(p) for p in paths]
    return clean(shared + os.sep), [clean(os.path.relpath(p, shared)) for p in paths]


def _within(text: str, width: int = COMPARE_WIDTH, keep_spaces: bool = False) -> str:
    """``text`` wrapped at ``width``, its later lines indented; with ``keep_spaces``, the spaces it breaks at stay
    at the end of their line."""
    import textwrap

    return textwrap.fill(text, width, subsequent_indent="    ", break_on_hyphens=False, drop_whitespace=not keep_spaces)


def _value(value: object, width: int = 24) -> str:
    """A difference's value, long ones (a digest, a list of GPUs) cut: the records hold them in full."""
    text = clean(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _difference(group: Any, compared: int, names: dict[str, str]) -> str:
    """One grouped difference, its records named while the line has room, the rest counted."""
    head = (
        f"  {clean(group.quantity)}: {_value(group.before)} -> {_value(group.after)} in {len(group.paths)} of "
        f"{compared}: "
    )
    shown = [names[p] for p in group.paths]
    while shown:
        rest = len(group.paths) - len(shown)
        text = head + ", ".join(shown) + (f", +{rest} more" if rest else "")
        if len(text) <= COMPARE_WIDTH:
            return text
        shown.pop()
    return head + f"+{len(group.paths)} more"


def _mnist_extras(mnist: dict[str, Any]) -> None:
    if mnist.get("sweep"):
        table(
            "batch-size sweep (per-step time; the SGD rate scales with the batch: linear rule)",
            ("model", "loop", "batch", "lr", "CPU step ms", "device step ms", "speedup", "CPU acc", "device acc"),
            [
                (
                    r["model"],
                    r["loop"],
                    str(r["batch_size"]),
                    f"{r['lr']:g}",
                    _ms(r["cpu_step_s"]),
                    _ms(r["device_step_s"]),
                    _fmt(r["speedup"], ".2f"),
                    _fmt(r["cpu_test_acc"], ".4f"),
                    _fmt(r["device_test_acc"], ".4f"),
                )
                for r in mnist["sweep"]
            ],
        )
    for c in mnist.get("crossovers", []):
        print(f"  crossover {c['model']}/{c['loop']}: {c['text']}")
    for g in mnist.get("graph_ratios", []):
        print(
            f"  graphed {g['model']} on {g['device']} (batch {g['batch_size']}): {g['graphed_speedup']:.2f}x the "
            f"resident loop; {g['capture']}: {once(g['capture_s'])} once; first-epoch loss curve within "
            f"{g['curve_gap']:.1e} of the resident loop's (tolerance {g['curve_rtol']:.0%})"
        )
    for r in mnist.get("runs", []):
        p = r.get("profile")
        if p:
            kernels = (
                ""
                if p["kernels_per_step"] is None
                else (
                    f", {p['kernels_per_step']:.0f} kernels, GPU busy {_ms(p['device_busy_s_per_step'])} ms, "
                    f"host overhead {_ms(p['host_overhead_s_per_step'])} ms"
                )
            )
            print(
                f"  profile {r['model']}/{r['loop']} on {r['device']} (batch {r['batch_size']}): "
                f"{p['ops_per_step']:.0f} ops per step{kernels}, {_ms(p['wall_s_per_step'])} ms per step"
            )
    for line in mnist.get("skipped", []):
        print(f"  {clean(line)}")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def _ddp_summary(ddp: dict[str, Any]) -> None:
    for run in ddp.get("runs", []):
        table(
            f"DDP scaling: {run['backend']} on {run['device']}, {run['nodes']} node(s); threads per rank = "
            "cores / ranks, so every world size uses the same cores",
            (
                "model",
                "world",
                "per-rank batch",
                "global batch",
                "lr",
                "epoch s",
                "samples/s",
                "efficiency",
                "test acc",
                "replicas",
            ),
            [
                (
                    r["model"],
                    str(r["world_size"]),
                    str(r["per_rank_batch"]),
                    str(r["global_batch"]),
                    f"{r['lr']:g}",
                    _fmt(r["epoch_s"]),
                    _fmt(r["samples_per_s"], ",.0f"),
                    # Above 100 % is noise between repeats (the check's summary says so); the table says it too.
                    "-"
                    if r["efficiency"] is None
                    else f"{r['efficiency']:.0%}" + (" (noise)" if r.get("efficiency_noise") else ""),
                    _fmt(r["test_acc"], ".4f"),
                    "identical" if r["identical"] else "DIFFER",
                )
                for r in run["scaling"]
            ],
        )
        if run["allreduce"]:
            table(
                f"all-reduce ({run['backend']}; busbw = algbw x 2(n-1)/n; reference: {run['reference']})",
                ("world", "size", "time us", "algbw GB/s", "busbw GB/s"),
                [
                    (
                        str(b["world_size"]),
                        _size(b["bytes"]),
                        _fmt(b["time_s"] * 1e6, ".0f"),
                        _fmt(b["algbw_gb_s"]),
                        _fmt(b["busbw_gb_s"]),
                    )
                    for b in run["allreduce"]
                ],
            )
    for line in ddp.get("skipped", []):
        print(f"  {clean(line)}")


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB"


def stderr_line(text: str) -> None:
    print(clean(text), file=sys.stderr, flush=True)


def fleet_task_line(nodes: Sequence[str]) -> Any:
    """A line per change of a task's state: pending, running, then how it ended."""

    def show(task: Any) -> None:
        node = nodes[task.index] if task.index < len(nodes) else task.node
        ended = f", exit {task.exit_code}" if task.done and task.exit_code is not None else ""
        why = f" ({task.reason})" if task.reason and not task.done else ""
        stderr_line(f"task {task.index} on {node}: {task.state.lower()}{why}{ended}")

    return show


def _gpus(probe: dict[str, Any]) -> str:
    gpus = probe.get("gpus") or []
    return ", ".join(f"{g.get('name')} (sm {g.get('capability')})" for g in gpus if isinstance(g, dict)) or "none"


def fleet_results(job: str, plan: dict[str, Any], rows: list[Any], notes: list[str], as_json: bool) -> int:
    """The gathered fleet: one row per task, then (for runs) the comparison and the seeds' table.
    Exit 0 only when every task ended well and wrote an ok record."""
    import dataclasses
    import json

    ok = all(r.ok for r in rows) and bool(rows)
    if as_json:
        out = [
            {k: (str(v) if k == "record_path" and v is not None else v) for k, v in dataclasses.asdict(r).items()}
            for r in rows
        ]
        print(json.dumps({"job": job, "ok": ok, "plan": plan, "tasks": out, "notes": notes}, indent=2))
        return 0 if ok else 1
    if plan["action"] == "probe":
        table(
            f"kitbench fleet probe (job {job})",
            ("node", "state", "os/arch", "GPUs", "driver", "install"),
            [
                (
                    r.node,
                    _state(r),
                    f"{r.probe.get('os')}/{r.probe.get('arch')}" if r.probe else "-",
                    _gpus(r.probe) if r.probe else "-",
                    str(r.probe.get("driver") or "none") if r.probe else "-",
                    r.install.get("command", "-") if r.install else (r.error or "-"),
                )
                for r in rows
            ],
        )
    else:
        verify = any(r.verdict for r in rows)
        headers = ("node", "state", "record", *(("reproduced",) if verify else ()), "file")
        table(
            f"kitbench fleet run {plan.get('target')} (job {job})",
            headers,
            [
                (
                    r.node,
                    _state(r),
                    r.record["status"] if r.record else (r.error or "-"),
                    *((r.verdict or "-",) if verify else ()),
                    str(r.record_path or "-"),
                )
                for r in rows
            ],
        )
        _fleet_comparison(rows)
    for note in notes:
        print(f"differs: {clean(note)}")
    for row in rows:
        if row.stderr_tail:
            print(f"{row.node} (task {row.index}) stderr, last lines:")
            for line in row.stderr_tail:
                print(f"  {clean(line)}")
    print(f"{'ok' if ok else 'NOT ok'}: {sum(r.ok for r in rows)} of {len(rows)} task(s) ok")
    return 0 if ok else 1


def _state(row: Any) -> str:
    state = row.state.lower()
    return state if row.exit_code in (None, 0) else f"{state} (exit {row.exit_code})"


def _fleet_comparison(rows: list[Any]) -> None:
    from kitbench.reading import compare
    from kitbench.reading.inputs import Loaded

    loaded = [Loaded(r.record_path, r.record) for r in rows if r.record is not None]
    if not loaded:
        return
    compared = compare.rows(loaded)
    comparison(compared, "table")
    # The seeds' table: what a lab writes by hand when it compares its machines.
    table(
        "machines",
        ("node", "machine", "memory GiB", "CPU epoch s", "accelerator epoch s", "speedup"),
        [
            (
                r.node,
                row.machine or "-",
                _fmt(_ram_gib(r.record)),
                _fmt(row.cpu_epoch_s),
                _fmt(row.accel_epoch_s),
                _fmt(row.speedup, ".1f"),
            )
            for r, row in zip([r for r in rows if r.record is not None], compared, strict=True)
        ],
    )


def _ram_gib(record: Any) -> float | None:
    ram = record["environment"].get("ram_bytes")
    return ram / 2**30 if isinstance(ram, (int, float)) else None
