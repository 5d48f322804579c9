"""The report's document: its sections of tables, charts and notes, each built from the records that
hold its data (``report_html`` and ``report_markdown`` render it).

Every number comes from a record, through compare's rows and verify where they already say it; a
section appears only when some record holds its data. Per-record detail is capped so that thousands
of records still make a page a person can open, and the section says what it left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kitbench.environments.locks import normalize
from kitbench.errors import UsageError
from kitbench.reading import charts, svg
from kitbench.reading.compare import Row, allreduce_peaks, transfer_peaks
from kitbench.reading.verify import verify
from kitbench.records.types import RunRecord

MAX_CHARTS = 12  # records drawn per chart section
MAX_ROWS = 200  # rows per table
MAX_VARIANTS = 8  # environment combinations, one column each
IMPLAUSIBLE = 0.5  # a sweep's test accuracy below this share of its model's best in the record is marked


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str | None = None


@dataclass
class Section:
    key: str
    title: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)  # SVG, HTML only
    notes: list[str] = field(default_factory=list)


@dataclass
class Item:
    """One record as the report sees it: where it came from and what it holds."""

    name: str
    sha256: str
    record: RunRecord | None
    error: str | None

    @property
    def quick(self) -> bool:
        rec = self.record
        return rec is not None and (bool(rec["options"].get("quick")) or "--quick" in rec["argv"])

    @property
    def label(self) -> str:
        return f"{self.name} (quick)" if self.quick else self.name


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _float(value: object) -> float | None:
    """An untyped extra field of a record, as a number when it is one."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _gpu_memory(record: RunRecord) -> list[str]:
    """The GPUs' memory as torch measured it (the availability check's devices), e.g. "79 GiB GPU" (the
    machine column names the GPU), "2x 79 GiB GPU" for two alike."""
    sizes = Counter(
        f"{d['total_memory_mib'] / 1024:.0f} GiB GPU"
        for d in _devices(record)
        if isinstance(d.get("total_memory_mib"), int)
    )
    return [f"{n}x {size}" if n > 1 else size for size, n in sizes.items()]


def _mem(record: RunRecord, gpus: list[str]) -> str:
    """RAM (/proc/meminfo, every run) and ``gpus``: the GPU memory torch measured in some record of this
    machine, since only a run with the availability check measures it: one machine, one value on every row."""
    ram = dict(record["environment"]).get("ram_bytes")  # written by every run, though not typed
    parts = [f"{ram / 2**30:.0f} GiB RAM"] if isinstance(ram, int) else []
    return ", ".join(parts + gpus) or "-"


def _devices(record: RunRecord) -> list[dict[str, Any]]:
    """The availability check's devices (untyped extras of the check: read defensively)."""
    found = dict(record["checks"].get("availability") or {}).get("devices")
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _run_kind(items: Iterable[Item]) -> str:
    kinds = {i.quick for i in items}
    return "quick + full" if len(kinds) > 1 else "quick" if True in kinds else "full"


def _capped(rows: list[list[str]], what: str, notes: list[str]) -> list[list[str]]:
    if len(rows) > MAX_ROWS:
        notes.append(f"{what}: the first {MAX_ROWS} of {len(rows):,} rows are shown.")
    return rows[:MAX_ROWS]


def _chart_items(items: list[Item], has: Callable[[RunRecord], bool], what: str, notes: list[str]) -> list[Item]:
    found = [i for i in items if i.record is not None and has(i.record)]
    if len(found) > MAX_CHARTS:
        notes.append(f"{what}: charts for the first {MAX_CHARTS} of {len(found):,} records; the tables hold the rest.")
    return found[:MAX_CHARTS]


# Sections ---------------------------------------------------------------------------------------


def _machines(items: list[Item], table: list[Row]) -> Section | None:
    groups: dict[tuple[str | None, ...], list[tuple[Item, Row]]] = {}
    for item, row in zip(items, table, strict=True):
        if item.record is not None:
            key = (row.machine, row.target, row.torch, row.device, row.mnist, str(item.quick), row.status)
            groups.setdefault(key, []).append((item, row))
    if not groups:
        return None
    section = Section(
        "machines",
        "Machines",
        "One row per machine, target and configuration; the epoch columns "
        "are the first MNIST model and loop of the group's first record. Where several records share "
        "a configuration, each is verified against the first.",
    )
    measured: dict[str | None, list[str]] = {}
    for item, row in zip(items, table, strict=True):
        if item.record is not None and _gpu_memory(item.record):
            measured.setdefault(row.machine, _gpu_memory(item.record))
    rows = []
    for members in groups.values():
        item, row = members[0]
        assert item.record is not None
        rows.append(
            [
                row.machine or "-",
                _status(item.record),
                _mem(item.record, measured.get(row.machine, [])),
                row.target or "-",
                row.torch or "-",
                row.device or "-",
                row.mnist or "-",
                _secs(row.cpu_epoch_s),
                _secs(row.accel_epoch_s),
                "-" if row.speedup is None else f"{row.speedup:.2f}x",
                _run_kind(m for m, _ in members),
                str(len(members)),
                _verdicts(members),
                item.label,
            ]
        )
    header = [
        "machine",
        "status",
        "memory",
        "target",
        "torch",
        "device",
        "MNIST",
        "CPU epoch",
        "accelerator epoch",
        "speedup",
        "run",
        "records",
        "verify",
        "first record",
    ]
    section.tables.append(Table(header, _capped(rows, "machines", section.notes)))
    return section


def _status(record: RunRecord) -> str:
    """``ok``, or the status with its one-line reason: a failed run is a result too, never a row of dashes."""
    if record["status"] == "ok":
        return "ok"
    failure = record.get("failure")
    reason = (
        (failure and failure["message"])
        or record.get("error")
        or next(
            (
                f"{name}: {check.get('summary') or check['status']}"
                for name, check in record["checks"].items()
                if isinstance(check, dict) and check.get("status") != "ok"
            ),
            None,
        )
    )
    line = " ".join(str(reason or "no reason recorded").split())
    return f"{record['status']}: {line[:200]}{'...' if len(line) > 200 else ''}"


def _failures(items: list[Item]) -> Section | None:
    """What stopped each run that holds a ``failure`` (kitbench.run/3): where, why, the host out of reach, the
    fix it was told, and the checks it left unrun; its environment is in the environments section as any other."""
    rows = []
    for item in items:
        found = item.record.get("failure") if item.record is not None else None
        if found:
            rows.append(
                [
                    item.label,
                    found["stage"],
                    found["error"],
                    found["message"],
                    found["host"] or "-",
                    found["hint"] or "-",
                    ", ".join(found["not_run"]) or "-",
                ]
            )
    if not rows:
        return None
    section = Section(
        "failures",
        "Failures",
        "Runs that stopped, and why, as each record keeps it: the checks "
        "that could run without what failed ran, and are in the sections above.",
    )
    section.tables.append(
        Table(
            ["record", "stage", "error", "what failed", "host out of reach", "fix", "not run"],
            _capped(rows, "failures", section.notes),
        )
    )
    return section


def _verdicts(members: list[tuple[Item, Row]]) -> str:
    reference = members[0][0].record
    if len(members) < 2 or reference is None or not reference["checks"].get("mnist", {}).get("runs"):
        return "-"
    counts: dict[str, int] = {}
    first_failure = None
    for item, _ in members[1:]:
        assert item.record is not None
        try:
            verdict = verify(reference, item.record)
        except UsageError as error:
            counts["cannot compare"] = counts.get("cannot compare", 0) + 1
            first_failure = first_failure or f"{item.name}: {error.message}"
            continue
        counts[verdict.verdict] = counts.get(verdict.verdict, 0) + 1
        if not verdict.reproduced:
            first_failure = first_failure or f"{item.name}: {verdict.first_divergence}"
    text = ", ".join(f"{word} {n}/{len(members) - 1}" for word, n in counts.items())
    return text + (f" (first: {first_failure})" if first_failure else "")


def _availability(items: list[Item]) -> Section | None:
    rows = []
    for item in items:
        check = item.record["checks"].get("availability") if item.record else None
        if check is None or item.record is None:
            continue
        data = dict(check)
        found = [str(data.get("selected_device") or "no accelerator selected")]
        found += [
            f"{d.get('name')} (sm {d.get('capability')}, kernels in wheel: {d.get('kernels_in_wheel')})"
            for d in _devices(item.record)
        ]
        # MPS's reason is news only on a Mac; elsewhere it is always "exists only on macOS".
        relevant = ("cuda_reason", "mps_reason") if item.record["environment"]["os"] == "macos" else ("cuda_reason",)
        why = "; ".join(str(data[k]) for k in relevant if data.get(k)) or "-"
        rows.append([item.label, check["status"], "; ".join(found), why, str(data.get("fix") or "-"), check["summary"]])
    if not rows:
        return None
    section = Section(
        "availability",
        "Availability",
        "What each record found, why an accelerator is unusable, "
        "and the install command that fixes it (when the build is at fault).",
    )
    section.tables.append(
        Table(
            ["record", "status", "found", "why unusable", "fix", "summary"],
            _capped(rows, "availability", section.notes),
        )
    )
    return section


def _transfers(items: list[Item]) -> Section | None:
    def has(rec: RunRecord) -> bool:
        return bool(rec["checks"].get("moves", {}).get("transfers"))

    held = _holding(items, has)
    if not held:
        return None
    section = Section(
        "transfers",
        "Host and device transfers",
        "Median bandwidth against transfer size, both "
        "directions, pageable and pinned memory; the shaded band is the interquartile range.",
    )
    rows = []
    for item, record in held:
        for (direction, memory), (size, peak) in transfer_peaks(record).items():
            rows.append([item.label, direction, memory, f"{peak:.2f}", f"{size / 1024:,.0f} KiB"])
    section.tables.append(
        Table(["record", "direction", "memory", "peak GB/s", "at size"], _capped(rows, "transfers", section.notes))
    )
    for item in _chart_items(items, has, "transfers", section.notes):
        assert item.record is not None
        section.charts.append(
            svg.line_chart(
                f"transfers: {item.label}", charts.transfers(item.record), "size (KiB)", "GB/s", log_x=True, log_y=True
            )
        )
    return section


def _holding(items: list[Item], has: Callable[[RunRecord], bool]) -> list[tuple[Item, RunRecord]]:
    """The items whose record holds what a section shows; a section that none holds is left out."""
    return [(item, item.record) for item in items if item.record is not None and has(item.record)]


def _mnist(items: list[Item]) -> Section | None:
    def has(rec: RunRecord) -> bool:
        return bool(rec["checks"].get("mnist", {}).get("runs")) and not charts.is_sweep(rec)

    held = _holding(items, has)
    if not held:
        return None
    section = Section(
        "mnist",
        "MNIST training",
        "Epoch time (the median of the record's epochs) per loop and "
        "model; one-time costs (dataset load, warm-up, compile or capture) are kept apart from it.",
    )
    rows = []
    for item, record in held:
        for r in record["checks"]["mnist"].get("runs", []):
            rows.append(
                [
                    item.label,
                    r["model"],
                    r["loop"],
                    r["device"],
                    str(r["batch_size"]),
                    str(r["epochs"]),
                    f"{r['train_samples']:,}",
                    _secs(r["epoch_s"]),
                    _num(r["samples_per_s"]),
                    _num(r["final_loss"]),
                    f"{r['test_acc']:.4f}",
                    _secs(r["dataset_load_s"]),
                    _secs(r["warmup_s"]),
                    _secs(_float(dict(r).get("capture_s"))),
                ]
            )  # graphed runs only
    header = [
        "record",
        "model",
        "loop",
        "device",
        "batch",
        "epochs",
        "samples",
        "epoch",
        "samples/s",
        "final loss",
        "test acc",
        "dataset load",
        "warm-up",
        "compile/capture",
    ]
    section.tables.append(Table(header, _capped(rows, "MNIST runs", section.notes)))
    for item in _chart_items(items, has, "MNIST loss curves", section.notes):
        assert item.record is not None
        curves = []
        for r in item.record["checks"]["mnist"].get("runs", []):
            n = len(r["loss_curve"])
            span = r["epochs"] / n if n else 1.0
            curves.append(
                svg.Series(
                    f"{r['model']}/{r['loop']} {r['device']}",
                    [((i + 1) * span, v) for i, v in enumerate(r["loss_curve"]) if v is not None],
                    dashed=r["device"] == "cpu",
                )
            )
        section.charts.append(svg.line_chart(f"training loss: {item.label}", curves, "epoch", "loss"))
    return section


def _sweep(items: list[Item]) -> Section | None:
    held = _holding(items, charts.is_sweep)
    if not held:
        return None
    section = Section(
        "sweep",
        "Batch-size sweep",
        "Time per optimizer step against batch size; a dotted line "
        "marks the batch from which the accelerator is faster than the CPU.",
    )
    rows = []
    flagged = 0
    for item, record in held:
        runs = record["checks"]["mnist"].get("runs", [])
        best: dict[str, float] = {}
        for r in runs:
            best[r["model"]] = max(best.get(r["model"], 0.0), r["test_acc"])
        for r in runs:
            accuracy = f"{r['test_acc']:.4f}"
            if r["test_acc"] < IMPLAUSIBLE * best[r["model"]]:
                flagged += 1
                steps = dict(r).get("steps")
                accuracy += (
                    f" (low: {r['model']} reached {best[r['model']]:.2f} in this record"
                    + (f"; {steps} optimizer steps" if isinstance(steps, int) else "")
                    + ")"
                )
            rows.append(
                [
                    item.label,
                    r["model"],
                    r["loop"],
                    r["device"],
                    str(r["batch_size"]),
                    "-" if r.get("step_s") is None else f"{_num(r['step_s'] * 1e3)} ms",
                    _secs(r["epoch_s"]),
                    accuracy,
                ]
            )
    if flagged:
        section.notes.append(
            f"{flagged} test accuracies are below {IMPLAUSIBLE:.0%} of the best of their model in "
            "the same record and are marked low: a sweep trains every batch size on the same "
            "samples for the same epochs, so a large batch takes few optimizer steps (60,000 samples "
            "at batch 1024 are 59; --limit 8000 makes them 8), with a learning rate scaled to the "
            "batch: their step times stand, their accuracy is no verdict on the batch size."
        )
    section.tables.append(
        Table(
            ["record", "model", "loop", "device", "batch", "step", "epoch", "test acc"],
            _capped(rows, "sweep", section.notes),
        )
    )
    crossings = []
    for item, record in held:
        crossings += [
            [item.label, f"{c['model']}/{c['loop']}", c["text"]]
            for c in record["checks"]["mnist"].get("crossovers", [])
        ]
    if crossings:
        section.tables.append(
            Table(
                ["record", "model/loop", "crossover"],
                _capped(crossings, "crossovers", section.notes),
                "where the accelerator wins",
            )
        )
    for item in _chart_items(items, charts.is_sweep, "sweep", section.notes):
        assert item.record is not None
        markers = [
            svg.Marker(float(c["batch_size"]), f"{c['model']}/{c['loop']}")
            for c in item.record["checks"]["mnist"].get("crossovers", [])
            if c["batch_size"] is not None
        ]
        section.charts.append(
            svg.line_chart(
                f"step time: {item.label}",
                charts.step_times(item.record),
                "batch size",
                "ms per step",
                log_x=True,
                log_y=True,
                markers=markers,
            )
        )
    return section


def _ddp(items: list[Item]) -> Section | None:
    def has(rec: RunRecord) -> bool:
        return bool(rec["checks"].get("ddp", {}).get("runs"))

    held = _holding(items, has)
    if not held:
        return None
    section = Section(
        "ddp",
        "Distributed data parallel",
        "Scaling efficiency per world size (samples/s per "
        "rank against one rank), and all-reduce bus bandwidth against message size.",
    )
    rows = []
    for item, record in held:
        for run in record["checks"]["ddp"].get("runs", []):
            for s in run["scaling"]:
                rows.append(
                    [
                        item.label,
                        run["backend"],
                        run["device"],
                        str(run["nodes"]),
                        s["model"],
                        str(s["world_size"]),
                        str(s["global_batch"]),
                        _secs(s["epoch_s"]),
                        _num(s["samples_per_s"]),
                        "-" if s["efficiency"] is None else f"{s['efficiency']:.0%}",
                        "yes" if s["identical"] else "NO",
                    ]
                )
    header = [
        "record",
        "backend",
        "device",
        "nodes",
        "model",
        "world size",
        "global batch",
        "epoch",
        "samples/s",
        "efficiency",
        "replicas identical",
    ]
    section.tables.append(Table(header, _capped(rows, "DDP", section.notes)))
    for item, record in held:
        asked = str(record["options"].get("device") or "auto")
        on_cpu = [run["backend"] for run in record["checks"]["ddp"].get("runs", []) if run["device"] == "cpu"]
        said = dict(record["checks"]["ddp"]).get("skipped")
        skipped = [str(line) for line in said] if isinstance(said, list) else []
        wanted = asked not in ("auto", "cpu") or (asked == "auto" and bool(record["environment"].get("gpus")))
        if wanted and on_cpu and not any(run["device"] != "cpu" for run in record["checks"]["ddp"]["runs"]):
            section.notes.append(
                f"{item.label}: asked for --device {asked}, DDP ran {on_cpu[0]} on the CPU: "
                + ("; ".join(skipped) if skipped else "no accelerator run was recorded")
                + " (a multi-GPU run needs two or more GPUs on the node)."
            )
    peaks = []  # the all-reduce in a table too: Markdown has no charts, and charts stop at MAX_CHARTS
    for item, record in held:
        for run in record["checks"]["ddp"].get("runs", []):
            for world, (size, peak) in allreduce_peaks(run).items():
                peaks.append([item.label, run["backend"], str(world), f"{peak:.2f}", f"{size / 1024:,.0f} KiB"])
    if peaks:
        section.tables.append(
            Table(
                ["record", "backend", "world size", "peak bus GB/s", "at size"],
                _capped(peaks, "all-reduce", section.notes),
                "all-reduce bus bandwidth",
            )
        )
    for item in _chart_items(items, has, "DDP", section.notes):
        assert item.record is not None
        for run in item.record["checks"]["ddp"].get("runs", []):
            scaling: dict[str, svg.Series] = {}
            for s in run["scaling"]:
                if s["efficiency"] is not None:
                    scaling.setdefault(s["model"], svg.Series(f"{run['backend']} {s['model']}", [])).points.append(
                        (float(s["world_size"]), s["efficiency"] * 100)
                    )
            if scaling:
                section.charts.append(
                    svg.line_chart(
                        f"scaling efficiency: {item.label}",
                        list(scaling.values()),
                        "world size (ranks)",
                        "efficiency %",
                        x_ticks=[float(n) for n in run["world_sizes"]],
                    )
                )
            series = charts.allreduce(run)
            if series:
                section.charts.append(
                    svg.line_chart(
                        f"all-reduce: {item.label}",
                        series,
                        "message size (KiB)",
                        "bus GB/s",
                        log_x=True,
                        log_y=True,
                    )
                )
    return section


def _environments(items: list[Item]) -> Section | None:
    readable = [i for i in items if i.record is not None]
    if len(readable) < 2:
        return None
    # As envdiff.diff: packages only where every record lists them (kitbench.run/1 records do not).
    with_packages = all("packages" in i.record["environment"] for i in readable if i.record is not None)
    values = [_flat(i.record, with_packages) for i in readable if i.record is not None]
    keys = sorted({k for v in values for k in v})
    differing = [k for k in keys if len({v.get(k, "-") for v in values}) > 1]
    section = Section(
        "environments",
        "Environments",
        "The environment and option fields that differ between "
        "the records: one column per distinct combination, named by its first record.",
    )
    if not with_packages and any("packages" in i.record["environment"] for i in readable if i.record is not None):
        section.notes.append(
            "Packages are not compared: only some of these records list them (kitbench.run/1 records do not)."
        )
    if not differing:
        section.notes.append(f"All {len(readable):,} records share every environment and option field.")
        return section
    combos: dict[tuple[str, ...], list[Item]] = {}
    for item, flat in zip(readable, values, strict=True):
        combos.setdefault(tuple(flat.get(k, "-") for k in differing), []).append(item)
    if len(combos) > MAX_VARIANTS:
        section.notes.append(f"environments: the first {MAX_VARIANTS} of {len(combos):,} combinations are shown.")
    shown = list(combos.items())[:MAX_VARIANTS]
    # One column per combination, one row per field: the fields outnumber the combinations that fit a page.
    header = [
        "field",
        *(members[0].label + (f" and {len(members) - 1:,} more" if len(members) > 1 else "") for _, members in shown),
    ]
    rows = [[key, *(_short(combo[at]) for combo, _ in shown)] for at, key in enumerate(differing)]
    section.tables.append(Table(header, _capped(rows, "environment fields", section.notes)))
    if any(_short(combo[at]) != combo[at] for combo, _ in shown for at in range(len(differing))):
        section.notes.append(
            "Hashes (sha256, git revisions, GPU UUIDs) are shown by their first 12 characters; "
            "the records hold them whole."
        )
    return section


_HASH = re.compile(r"(sha256:|GPU-)?[0-9a-f][0-9a-f-]{19,}")


def _short(value: str) -> str:
    """A long hash as its first 12 characters: a page 1,400 px wide holds 8 environments side by side."""
    return (
        f"{value[: 12 + value.find(':') + 1 if value.startswith('sha256:') else 12]}…"
        if _HASH.fullmatch(value)
        else value
    )


def _flat(record: RunRecord, with_packages: bool) -> dict[str, str]:
    """A record's environment and options, one field per value: a package per name, a setting or an
    identity field each, because a whole dict or package list in one cell hides what differs."""
    flat: dict[str, str] = {}

    def add(key: str, value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                add(f"{key}.{k}", v)
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            for at, v in enumerate(value):
                add(f"{key}[{at}]", v)
        else:
            flat[key] = _plain(value)

    for package in record["environment"].get("packages", []) if with_packages else []:
        flat[f"package {normalize(package['name'])}"] = package["version"]
    for key, value in record["environment"].items():
        if key != "packages":
            add(key, value)
    for key, value in record["options"].items():
        add(f"option {key}", value)
    return flat


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value) or "-"
    return "-" if value is None else str(value)


def _records(items: list[Item]) -> Section:
    section = Section("records", "Records", "Every input, so each number above can be traced to its file.")
    rows = []
    for item in items:
        rec = item.record
        if rec is None:
            rows.append([item.name, item.sha256, f"unreadable: {item.error}", "-", "-", "-"])
        else:
            rows.append(
                [
                    item.name,
                    item.sha256,
                    rec["status"],
                    "quick" if item.quick else "full",
                    rec["started_at"],
                    "kitbench " + " ".join(rec["argv"]),
                ]
            )
    section.tables.append(
        Table(["file", "sha256", "status", "run", "started", "command line"], _capped(rows, "records", section.notes))
    )
    return section


def sections_of(items: list[Item], table: list[Row]) -> list[Section]:
    """The page's sections in their order, those that some record holds; ``table``: compare's rows of ``items``.
    A record that did not finish ok comes after those that did, in every section: a run that could not get
    MNIST is a result too, but never the page's first machine or first environment, a column of dashes."""

    def finished(item: Item) -> bool:
        return item.record is not None and item.record["status"] == "ok"

    order = sorted(range(len(items)), key=lambda at: not finished(items[at]))
    items, table = [items[at] for at in order], [table[at] for at in order]
    found = [
        _machines(items, table),
        _failures(items),
        _availability(items),
        _transfers(items),
        _mnist(items),
        _sweep(items),
        _ddp(items),
        _environments(items),
        _records(items),
    ]
    return [s for s in found if s is not None]
